-- expect-error: DP225 ProgrammingError
-- why: a file path used as a table name
SELECT * FROM 'examples/data/adult.parquet';
