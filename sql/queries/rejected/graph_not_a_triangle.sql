-- expect-error: DP271 UnsupportedQueryError
-- why: a path of three edges is not a triangle; only the triangle self-join is recognised
SELECT COUNT(*) FROM karate a JOIN karate b ON a.dst = b.src JOIN karate c ON c.src = b.dst;
