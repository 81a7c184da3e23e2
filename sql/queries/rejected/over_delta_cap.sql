-- expect-error: DP304 PolicyError
-- why: the demo analyst may spend at most 1e-6 delta per query
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (delta = 1e-3) fnlwgt, COUNT(*) FROM adult GROUP BY fnlwgt;
