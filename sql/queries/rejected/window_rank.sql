-- expect-error: DP252 UnsupportedQueryError
-- why: a window over aggregates
SELECT education, COUNT(*), ROW_NUMBER() OVER (ORDER BY COUNT(*)) FROM adult GROUP BY education;
