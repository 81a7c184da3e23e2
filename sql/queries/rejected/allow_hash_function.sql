-- expect-error: DP253 UnsupportedQueryError
-- why: hash() is not on the list of functions allowed over protected data
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1) COUNT(*) FROM adult WHERE hash(person_id) % 2 = 0;
