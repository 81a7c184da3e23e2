-- expect-error: DP220 NotSupportedError
-- why: query() runs arbitrary SQL inside DuckDB
SELECT * FROM query('SELECT * FROM adult');
