-- expect-error: DP215 UnsupportedQueryError
-- why: protected-to-protected join
SELECT COUNT(*) FROM adult a JOIN adult b ON a.person_id = b.person_id;
