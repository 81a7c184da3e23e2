-- expect-error: DP253 UnsupportedQueryError
-- why: MODE is not on the list (it would release a row value)
SELECT MODE(age) FROM adult;
