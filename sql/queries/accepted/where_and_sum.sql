-- expect: class=count rows=2 columns=sex,hours
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.4) sex, SUM(hours_per_week) AS hours
FROM adult WHERE age BETWEEN 30 AND 50 AND income = '>50K' GROUP BY sex;
