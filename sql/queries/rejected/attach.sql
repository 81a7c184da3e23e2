-- expect-error: DP221 NotSupportedError
-- why: ATTACH opens files
ATTACH '/tmp/other.duckdb' AS other;
