-- expect-error: DP201 ParseError
-- why: EXPORT DATABASE writes every table to files
EXPORT DATABASE '/tmp/dump';
