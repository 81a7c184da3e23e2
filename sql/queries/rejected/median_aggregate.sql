-- expect-error: DP212 UnsupportedQueryError
-- why: MEDIAN is not supported yet
SELECT MEDIAN(age) FROM adult;
