-- expect-error: DP250 UnsupportedQueryError
-- why: PIVOT on the protected table relabels and regroups its rows
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1) COUNT(*) FROM adult PIVOT (COUNT(*) FOR sex IN ('Male', 'Female')) AS adult;
