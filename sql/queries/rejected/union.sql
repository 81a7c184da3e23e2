-- expect-error: DP216 UnsupportedQueryError
-- why: a set operation around the protected table
SELECT COUNT(*) FROM adult UNION ALL SELECT 1;
