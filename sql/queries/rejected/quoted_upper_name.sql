-- expect-error: DP252 UnsupportedQueryError
-- why: identifiers are case-insensitive
SELECT * FROM "ADULT";
