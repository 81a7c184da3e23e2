-- expect-error: DP252 UnsupportedQueryError
-- why: struct constructors and field access are not allowed over protected data
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1) COUNT(*) FROM adult WHERE {'a': age}.a = 1;
