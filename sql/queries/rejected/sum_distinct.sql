-- expect-error: DP212 UnsupportedQueryError
-- why: SUM(DISTINCT)
SELECT SUM(DISTINCT age) FROM adult;
