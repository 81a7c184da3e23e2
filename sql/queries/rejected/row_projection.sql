-- expect-error: DP211 UnsupportedQueryError
-- why: a row-level projection
SELECT age FROM adult;
