-- expect-error: DP252 UnsupportedQueryError
-- why: DISTINCT lists raw values
SELECT DISTINCT education FROM adult;
