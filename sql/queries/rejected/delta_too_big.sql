-- expect-error: DP205 ProgrammingError
-- why: delta must be below 1
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (delta = 1.5) COUNT(*) FROM adult;
