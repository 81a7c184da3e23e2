-- expect-error: DP255 UnsupportedQueryError
-- why: string_split builds a list whose length depends on the row
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1) COUNT(*) FROM adult WHERE len(string_split(education, '-')) > 1;
