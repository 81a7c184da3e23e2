-- expect-error: DP253 UnsupportedQueryError
-- why: list() collects raw values
SELECT list(age) FROM adult;
