-- expect-error: DP255 UnsupportedQueryError
-- why: lpad takes a constant length
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1) COUNT(*) FROM adult WHERE lpad(education, capital_gain, 'x') <> '';
