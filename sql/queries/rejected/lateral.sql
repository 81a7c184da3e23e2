-- expect-error: DP216 UnsupportedQueryError
-- why: a lateral subquery
SELECT COUNT(*) FROM adult, LATERAL (SELECT 1);
