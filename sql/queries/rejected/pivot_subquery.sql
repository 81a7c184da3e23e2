-- expect-error: DP216 UnsupportedQueryError
-- why: PIVOT inside a subquery
SELECT * FROM (PIVOT adult ON sex USING COUNT(*));
