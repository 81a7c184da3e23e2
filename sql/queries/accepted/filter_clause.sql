-- expect: class=count rows=1 columns=old,young
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.3)
  COUNT(*) FILTER (WHERE age >= 65) AS old, COUNT(*) FILTER (WHERE age < 25) AS young
FROM adult;
