-- expect-error: DP252 UnsupportedQueryError
-- why: the list of IN holds constants only
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1) COUNT(*) FROM adult WHERE age IN (1, person_id);
