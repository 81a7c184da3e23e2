-- expect-error: DP254 UnsupportedQueryError
-- why: an interval must be a constant
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1) COUNT(*) FROM adult
WHERE TIMESTAMP '2000-01-01' + INTERVAL (age) DAY > TIMESTAMP '2000-02-01';
