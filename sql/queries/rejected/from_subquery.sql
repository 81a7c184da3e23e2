-- expect-error: DP216 UnsupportedQueryError
-- why: the protected table inside a FROM subquery
SELECT COUNT(*) FROM (SELECT * FROM adult);
