-- expect-error: DP225 ProgrammingError
-- why: a table that does not exist
SELECT COUNT(*) FROM nosuchtable;
