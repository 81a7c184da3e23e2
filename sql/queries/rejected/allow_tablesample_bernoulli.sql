-- expect-error: DP250 UnsupportedQueryError
-- why: TABLESAMPLE on the protected table: the sample depends on the storage position of the rows
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1) COUNT(*) FROM adult TABLESAMPLE BERNOULLI(50%) REPEATABLE (42);
