-- expect-error: DP212 UnsupportedQueryError
-- why: a protected graph answers subgraph counts, not ordinary aggregates
SELECT COUNT(*) FROM karate;
