-- expect-error: DP251 UnsupportedQueryError
-- why: NATURAL joins hide their columns
SELECT COUNT(*) FROM adult NATURAL JOIN country_regions;
