-- expect-error: DP252 UnsupportedQueryError
-- why: main.adult is the protected table too
SELECT * FROM main.adult;
