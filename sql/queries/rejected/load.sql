-- expect-error: DP221 NotSupportedError
-- why: LOAD runs extensions
LOAD httpfs;
