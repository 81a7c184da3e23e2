-- expect-error: DP220 NotSupportedError
-- why: the system catalog
SELECT * FROM information_schema.tables;
