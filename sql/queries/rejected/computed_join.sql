-- expect-error: DP251 UnsupportedQueryError
-- why: a join condition that computes
SELECT COUNT(*) FROM adult a JOIN country_regions r ON upper(a.native_country) = r.native_country;
