-- expect-error: DP255 UnsupportedQueryError
-- why: range(n) with n from a row: memory use (and running out of it) depends on one value
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1) COUNT(*) FROM adult WHERE len(range(age * 1000)) > 0;
