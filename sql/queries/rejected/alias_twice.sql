-- expect-error: DP218 ProgrammingError
-- why: one alias for two tables
SELECT COUNT(*) FROM adult t1, country_regions t1;
