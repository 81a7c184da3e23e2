-- expect-error: DP203 ParseError
-- why: a raw read smuggled after a DP query
SELECT COUNT(*) FROM adult; SELECT * FROM adult;
