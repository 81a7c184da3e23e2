-- expect-error: DP254 UnsupportedQueryError
-- why: the pattern of a regular expression must be a constant
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1) COUNT(*) FROM adult WHERE regexp_matches(education, occupation);
