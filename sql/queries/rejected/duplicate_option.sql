-- expect-error: DP205 ProgrammingError
-- why: an option given twice
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5, epsilon = 0.2) COUNT(*) FROM adult;
