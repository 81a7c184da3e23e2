-- expect: class=count rows=2 columns=sex,sd,median_age
-- VAR / STDDEV from three noisy sums; MEDIAN by the exponential mechanism on ranks
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.3) sex, STDDEV_POP(age) AS sd, MEDIAN(age) AS median_age
FROM adult GROUP BY sex;
