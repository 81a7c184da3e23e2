-- expect-error: DP250 UnsupportedQueryError
-- why: UNPIVOT on the protected table forges the privacy unit column from other columns
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1) COUNT(DISTINCT person_id) FROM adult
UNPIVOT (person_id FOR k IN (age, hours_per_week)) AS adult;
