-- expect-error: DP252 UnsupportedQueryError
-- why: list constructors and element access are not allowed over protected data
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1) COUNT(*) FROM adult WHERE [age, 1][1] = 1;
