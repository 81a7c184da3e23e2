-- expect-error: DP215 UnsupportedQueryError
-- why: a second read of adult in a subquery
SELECT COUNT(*) FROM adult WHERE age > (SELECT AVG(age) FROM adult);
