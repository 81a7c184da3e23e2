-- expect: class=count rows=3 columns=occupation,n
-- HAVING / ORDER BY / LIMIT are post-processing on the noisy counts
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5) occupation, COUNT(*) AS n
FROM adult GROUP BY occupation HAVING COUNT(*) > 100 ORDER BY n DESC LIMIT 3;
