-- expect: class=count rows=20 columns=race,sex,income,n
-- a 3-way contingency table over declared domains: every cell noised, then made non-negative
-- with the noisy total (Norm-Sub post-processing)
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5, consistent = true) race, sex, income, COUNT(*) AS n
FROM adult GROUP BY race, sex, income;
