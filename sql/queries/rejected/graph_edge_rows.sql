-- expect-error: DP211 UnsupportedQueryError
-- why: the rows of a protected graph are its edges; only subgraph counts leave
SELECT src, TRIANGLE_COUNT(src, dst) FROM karate;
