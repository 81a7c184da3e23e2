-- expect-error: DP212 UnsupportedQueryError
-- why: list() collects raw values
SELECT list(age) FROM adult;
