-- expect-error: DP253 UnsupportedQueryError
-- why: STDDEV is not supported yet
SELECT STDDEV(age) FROM adult;
