-- expect: class=count columns=cg,n
-- capital_gain spans 0..100000: too many values for a public domain, so keys are selected privately
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5, delta = 1e-6) capital_gain AS cg, COUNT(*) AS n
FROM adult GROUP BY capital_gain;
