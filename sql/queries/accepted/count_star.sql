-- expect: class=count rows=1 columns=n
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5) COUNT(*) AS n FROM adult;
