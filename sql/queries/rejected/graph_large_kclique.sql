-- expect-error: DP319 PolicyError
-- why: 4-cliques on a graph of more than 200 nodes need the owner's allow_kclique (a public rule on N)
SELECT KCLIQUE_COUNT(src, dst, 4) FROM wormnet;
