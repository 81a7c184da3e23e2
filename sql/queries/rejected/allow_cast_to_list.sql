-- expect-error: DP256 UnsupportedQueryError
-- why: casts go to scalar types only
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1) COUNT(*) FROM adult WHERE CAST(age AS INT[]) IS NOT NULL;
