-- expect-error: DP252 UnsupportedQueryError
-- why: a window function
SELECT COUNT(*) OVER () FROM adult;
