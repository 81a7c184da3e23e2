-- expect-error: DP221 NotSupportedError
-- why: INSTALL downloads extensions
INSTALL httpfs;
