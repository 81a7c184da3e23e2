-- expect-error: DP270 UnsupportedQueryError
-- why: a protected graph answers subgraph counts only
CREATE SYNTHETIC TABLE k FROM karate USING privbayes WITH (epsilon = 1);
