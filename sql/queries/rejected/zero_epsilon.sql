-- expect-error: DP205 ProgrammingError
-- why: epsilon = 0 means infinite noise
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0) COUNT(*) FROM adult;
