-- expect: class=count rows=5 columns=region,n
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.3) r.region, COUNT(*) AS n
FROM adult a JOIN country_regions r ON a.native_country = r.native_country GROUP BY r.region;
