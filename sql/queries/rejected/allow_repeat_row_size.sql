-- expect-error: DP255 UnsupportedQueryError
-- why: repeat(s, n) with n from a row: the output size depends on one value
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1) COUNT(*) FILTER (WHERE repeat('x', capital_gain) <> '') FROM adult;
