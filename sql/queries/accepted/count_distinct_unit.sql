-- expect: class=count rows=2 columns=income,people
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.3) income, COUNT(DISTINCT person_id) AS people
FROM adult GROUP BY income;
