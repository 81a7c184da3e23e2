-- expect-error: DP211 UnsupportedQueryError
-- why: identifiers are case-insensitive
SELECT * FROM "ADULT";
