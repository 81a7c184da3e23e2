-- expect-error: DP211 UnsupportedQueryError
-- why: a qualified star
SELECT adult.* FROM adult;
