-- expect-error: DP217 UnsupportedQueryError
-- why: a window function
SELECT COUNT(*) OVER () FROM adult;
