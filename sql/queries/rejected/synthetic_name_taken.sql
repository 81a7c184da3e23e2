-- expect-error: DP226 ProgrammingError
-- why: a release never overwrites an existing table
CREATE SYNTHETIC TABLE country_regions FROM adult USING privbayes WITH (epsilon = 1);
