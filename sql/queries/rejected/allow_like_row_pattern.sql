-- expect-error: DP254 UnsupportedQueryError
-- why: the pattern of LIKE must be a constant
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1) COUNT(*) FROM adult WHERE education LIKE occupation;
