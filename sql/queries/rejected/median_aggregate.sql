-- expect-error: DP254 UnsupportedQueryError
-- why: a list of quantile levels (write one aggregate per level)
SELECT QUANTILE_CONT(age, [0.25, 0.75]) FROM adult;
