-- expect-error: DP201 ParseError
-- why: option without =
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon 1) COUNT(*) FROM adult;
