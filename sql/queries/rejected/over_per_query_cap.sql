-- expect-error: DP303 PolicyError
-- why: the demo analyst may spend at most 2 per query
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 5) COUNT(*) FROM adult;
