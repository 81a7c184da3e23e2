-- expect-error: DP220 NotSupportedError
-- why: query_table() reads any table
SELECT * FROM query_table('adult');
