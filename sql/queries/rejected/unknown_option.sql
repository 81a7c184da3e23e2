-- expect-error: DP204 ProgrammingError
-- why: a misspelt option is never ignored
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilonn = 0.5) COUNT(*) FROM adult;
