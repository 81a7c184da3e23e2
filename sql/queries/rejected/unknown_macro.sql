-- expect-error: DP220 NotSupportedError
-- why: a function that is not a DuckDB built-in
SELECT my_macro(age) FROM country_regions;
