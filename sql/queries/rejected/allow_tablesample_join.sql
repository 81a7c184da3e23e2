-- expect-error: DP250 UnsupportedQueryError
-- why: TABLESAMPLE on a joined table
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1) COUNT(*) FROM adult a
JOIN country_regions r TABLESAMPLE 50% ON a.native_country = r.native_country;
