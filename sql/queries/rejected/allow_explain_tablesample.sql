-- expect-error: DP250 UnsupportedQueryError
-- why: EXPLAIN PRIVACY checks the statement it explains
EXPLAIN PRIVACY SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1) COUNT(*) FROM adult TABLESAMPLE 10%;
