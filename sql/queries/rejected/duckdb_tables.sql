-- expect-error: DP220 NotSupportedError
-- why: catalog functions
SELECT * FROM duckdb_tables();
