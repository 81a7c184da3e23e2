-- expect-error: DP215 UnsupportedQueryError
-- why: a VARCHAR compared with a number is converted row by row
SELECT COUNT(*) FROM adult a JOIN country_regions c ON a.age = c.native_country;
