-- expect-error: DP254 UnsupportedQueryError
-- why: substring takes constant positions
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1) COUNT(*) FROM adult WHERE substring(education, age) = 'x';
