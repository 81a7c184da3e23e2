-- expect-error: DP250 UnsupportedQueryError
-- why: USING SAMPLE
SELECT COUNT(*) FROM adult USING SAMPLE 10%;
