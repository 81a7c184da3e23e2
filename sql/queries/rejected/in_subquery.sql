-- expect-error: DP215 UnsupportedQueryError
-- why: a semi-join on the protected table itself
SELECT COUNT(*) FROM adult WHERE person_id IN (SELECT person_id FROM adult WHERE age > 50);
