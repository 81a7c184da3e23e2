-- expect: class=count rows=1 columns=rich,share
-- bounds of a CASE expression are derived: [0, 1]
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.3)
  SUM(CASE WHEN income = '>50K' THEN 1 ELSE 0 END) AS rich,
  ROUND(AVG(CASE WHEN income = '>50K' THEN 1.0 ELSE 0.0 END), 3) AS share
FROM adult;
