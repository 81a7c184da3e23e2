-- expect-error: DP201 ParseError
-- why: an unclosed parenthesis
SELECT COUNT(* FROM adult;
