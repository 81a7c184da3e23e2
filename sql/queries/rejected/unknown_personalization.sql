-- expect-error: DP205 ProgrammingError
-- why: an unknown personalization rule
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (personalization = 'magic') COUNT(*) FROM adult;
