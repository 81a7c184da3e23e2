-- expect-error: DP205 ProgrammingError
-- why: a subject must be allowed at least one row
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (max_rows_contributed = 0) COUNT(*) FROM adult;
