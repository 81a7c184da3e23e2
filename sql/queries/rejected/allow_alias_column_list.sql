-- expect-error: DP250 UnsupportedQueryError
-- why: a column alias list relabels the columns: age becomes the privacy unit
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1) COUNT(DISTINCT person_id) FROM adult AS adult(age, person_id);
