-- expect-error: DP201 ParseError
-- why: a typo in SELECT
SELEC COUNT(*) FROM adult;
