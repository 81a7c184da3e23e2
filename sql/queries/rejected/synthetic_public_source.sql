-- expect-error: DP207 UnsupportedQueryError
-- why: a public table needs no synthetic copy
CREATE SYNTHETIC TABLE regions_syn FROM country_regions USING privbayes WITH (epsilon = 1);
