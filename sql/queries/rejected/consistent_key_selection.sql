-- expect-error: DP273 UnsupportedQueryError
-- why: consistency needs every cell of the table, and capital_gain has no small public domain
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (consistent = true, delta = 1e-6) capital_gain, COUNT(*) FROM adult GROUP BY capital_gain;
