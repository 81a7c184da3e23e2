-- expect-error: DP217 UnsupportedQueryError
-- why: USING SAMPLE
SELECT COUNT(*) FROM adult USING SAMPLE 10%;
