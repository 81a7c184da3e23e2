-- expect-error: DP213 PolicyError
-- why: division by a column has no bound
SELECT SUM(capital_gain / age) FROM adult;
