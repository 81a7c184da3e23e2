-- expect: class=subgraph rows=1 columns=triangles,two_stars
-- subgraph counts of a protected graph (edge-level DP, ladder functions): ε split between the two
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1)
    TRIANGLE_COUNT(src, dst) AS triangles, KSTAR_COUNT(src, dst, 2) AS two_stars
FROM karate;
