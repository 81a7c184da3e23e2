-- expect-error: DP216 UnsupportedQueryError
-- why: the protected table inside a CTE
WITH a AS (SELECT * FROM adult) SELECT COUNT(*) FROM a;
