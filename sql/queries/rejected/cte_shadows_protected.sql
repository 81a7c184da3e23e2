-- expect-error: DP216 UnsupportedQueryError
-- why: a CTE named like the protected table
WITH adult AS (SELECT * FROM adult WHERE age > 30) SELECT * FROM adult;
