-- expect-error: DP214 PolicyError
-- why: GROUP BY over a column with no domain needs delta
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (delta = 0) fnlwgt, COUNT(*) FROM adult GROUP BY fnlwgt;
