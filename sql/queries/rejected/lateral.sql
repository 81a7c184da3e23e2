-- expect-error: DP250 UnsupportedQueryError
-- why: a lateral subquery
SELECT COUNT(*) FROM adult, LATERAL (SELECT 1);
