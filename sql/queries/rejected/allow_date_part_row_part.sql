-- expect-error: DP254 UnsupportedQueryError
-- why: the date part must be a constant from the verified list
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1) COUNT(*) FROM adult WHERE date_part(education, TIMESTAMP '2000-01-01') = 1;
