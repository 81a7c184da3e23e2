-- expect-error: DP212 UnsupportedQueryError
-- why: COUNT() needs an argument
SELECT count() FROM adult;
