-- expect-error: DP252 UnsupportedQueryError
-- why: a qualified star
SELECT adult.* FROM adult;
