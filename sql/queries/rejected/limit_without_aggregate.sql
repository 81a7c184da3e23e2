-- expect-error: DP211 UnsupportedQueryError
-- why: LIMIT does not make raw rows private
SELECT age, sex FROM adult LIMIT 10;
