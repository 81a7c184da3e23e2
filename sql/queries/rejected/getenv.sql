-- expect-error: DP220 NotSupportedError
-- why: the environment
SELECT getenv('HOME');
