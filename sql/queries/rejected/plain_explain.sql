-- expect-error: DP201 ParseError
-- why: EXPLAIN without PRIVACY (DuckDB's EXPLAIN ANALYZE runs the query)
EXPLAIN ANALYZE SELECT * FROM adult;
