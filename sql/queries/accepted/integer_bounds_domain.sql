-- expect: class=count rows=99 columns=hours_per_week,n
-- hours_per_week has declared bounds 1..99: an integer column with bounds is its own public domain
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5) hours_per_week, COUNT(*) AS n
FROM adult GROUP BY hours_per_week;
