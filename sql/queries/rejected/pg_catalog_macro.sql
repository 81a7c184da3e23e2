-- expect-error: DP220 NotSupportedError
-- why: catalog macros
SELECT pg_get_viewdef('country_regions');
