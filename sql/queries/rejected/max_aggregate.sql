-- expect-error: DP253 UnsupportedQueryError
-- why: MAX would reveal one person's value
SELECT MAX(age) FROM adult;
