-- expect-error: DP218 UnsupportedQueryError
-- why: POSITIONAL JOIN pairs rows by storage order
SELECT COUNT(*) FROM adult POSITIONAL JOIN country_regions;
