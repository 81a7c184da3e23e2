-- expect-error: DP251 UnsupportedQueryError
-- why: POSITIONAL JOIN pairs rows by storage order
SELECT COUNT(*) FROM adult POSITIONAL JOIN country_regions;
