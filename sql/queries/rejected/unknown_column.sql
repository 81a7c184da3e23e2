-- expect-error: DP218 ProgrammingError
-- why: a column that does not exist
SELECT COUNT(nosuchcol) FROM adult;
