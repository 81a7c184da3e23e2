-- expect-error: DP251 UnsupportedQueryError
-- why: a constant in ON is converted row by row
SELECT COUNT(*) FROM adult a JOIN country_regions c ON a.native_country = c.native_country AND a.income = 1;
