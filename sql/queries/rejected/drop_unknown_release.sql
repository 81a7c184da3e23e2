-- expect-error: DP225 ProgrammingError
-- why: DROP SYNTHETIC TABLE drops releases only
DROP SYNTHETIC TABLE adult;
