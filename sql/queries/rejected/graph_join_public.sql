-- expect-error: DP215 UnsupportedQueryError
-- why: a protected graph is queried alone
SELECT TRIANGLE_COUNT(src, dst) FROM wormnet w JOIN wormnet_genes g ON w.src = g.gene;
