-- expect: class=count rows=16 columns=education,n,mean_age
-- every declared education level appears, zero-count levels included
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5) education, COUNT(*) AS n, AVG(age) AS mean_age
FROM adult GROUP BY education;
