-- expect-error: DP225 ProgrammingError
-- why: DROP SYNTHETIC TABLE drops releases only, and there is no release of that name
DROP SYNTHETIC TABLE no_such_release;
