-- expect-error: DP205 ProgrammingError
-- why: epsilon must be positive
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = -1) COUNT(*) FROM adult;
