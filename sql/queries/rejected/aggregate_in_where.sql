-- expect-error: DP279 UnsupportedQueryError
-- why: an aggregate in WHERE
SELECT COUNT(*) FROM adult WHERE COUNT(*) > 5;
