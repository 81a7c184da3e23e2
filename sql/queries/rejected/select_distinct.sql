-- expect-error: DP211 UnsupportedQueryError
-- why: DISTINCT lists raw values
SELECT DISTINCT education FROM adult;
