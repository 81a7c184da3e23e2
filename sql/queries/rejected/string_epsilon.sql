-- expect-error: DP205 ProgrammingError
-- why: epsilon must be a number
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 'high') COUNT(*) FROM adult;
