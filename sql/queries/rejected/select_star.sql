-- expect-error: DP252 UnsupportedQueryError
-- why: rows of a protected table
SELECT * FROM adult;
