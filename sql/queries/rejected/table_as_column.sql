-- expect-error: DP218 ProgrammingError
-- why: DuckDB would turn the table name into a struct of the row
SELECT COUNT(DISTINCT adult) FROM adult;
