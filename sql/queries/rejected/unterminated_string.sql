-- expect-error: DP201 ParseError
-- why: a string that never ends
SELECT COUNT(*) FROM adult WHERE sex = 'Male;
