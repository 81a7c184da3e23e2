-- expect-error: DP254 UnsupportedQueryError
-- why: 'week' is not on the verified list (plan-time errors from the statistics of DATE columns)
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1) COUNT(*) FROM adult WHERE date_part('week', TIMESTAMP '2000-01-01') = age;
