-- expect: class=subgraph rows=1 columns=three_stars
-- the k-star sum over degrees is recognised (the summand equals C(deg, 3)): KSTAR_COUNT(src, dst, 3)
WITH d AS (SELECT x, COUNT(*) AS deg FROM (SELECT src AS x FROM karate UNION ALL SELECT dst FROM karate) GROUP BY x)
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5) SUM(deg * (deg - 1) * (deg - 2) / 6) AS three_stars FROM d;
