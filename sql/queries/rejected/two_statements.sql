-- expect-error: DP203 ParseError
-- why: a second statement smuggled after the first
SELECT COUNT(*) FROM adult; DROP TABLE adult;
