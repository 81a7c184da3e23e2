-- expect-error: DP253 UnsupportedQueryError
-- why: MEDIAN is not supported yet
SELECT MEDIAN(age) FROM adult;
