-- expect-error: DP252 UnsupportedQueryError
-- why: GROUP BY ROLLUP
SELECT education, COUNT(*) FROM adult GROUP BY ROLLUP (education);
