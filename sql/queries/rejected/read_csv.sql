-- expect-error: DP220 NotSupportedError
-- why: a file reader
SELECT * FROM read_csv('/etc/passwd');
