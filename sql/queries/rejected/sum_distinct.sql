-- expect-error: DP252 UnsupportedQueryError
-- why: SUM(DISTINCT)
SELECT SUM(DISTINCT age) FROM adult;
