-- expect-error: DP211 UnsupportedQueryError
-- why: rows of a protected table
SELECT * FROM adult;
