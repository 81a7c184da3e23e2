-- expect: class=count rows=9 columns=decade,n
-- the domain of age // 10 is derived from the declared bounds of age (17..90)
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.3) age // 10 AS decade, COUNT(*) AS n
FROM adult GROUP BY age // 10;
