-- expect: class=public rows=5 columns=region,countries
SELECT region, COUNT(*) AS countries FROM country_regions GROUP BY region ORDER BY region;
