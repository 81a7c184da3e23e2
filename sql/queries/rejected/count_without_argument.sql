-- expect-error: DP252 UnsupportedQueryError
-- why: COUNT() needs an argument
SELECT count() FROM adult;
