-- expect-error: DP211 UnsupportedQueryError
-- why: a column neither grouped nor aggregated
SELECT education, age, COUNT(*) FROM adult GROUP BY education;
