-- expect-error: DP254 UnsupportedQueryError
-- why: a row value picks the date part: 'timezone' raises an error TRY does not catch, for one person only (a 1-bit oracle)
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1) COUNT(*) FROM adult
WHERE date_trunc(CASE WHEN person_id = 1 AND age > 38 THEN 'timezone' ELSE 'day' END, TIMESTAMP '2000-01-01') IS NOT NULL;
