-- expect-error: DP221 NotSupportedError
-- why: engine settings
SET threads = 1;
