-- expect-error: DP216 UnsupportedQueryError
-- why: a CTE named like a system view reads the catalog
WITH pg_class AS (FROM pg_class) SELECT relname, reltuples FROM pg_class;
