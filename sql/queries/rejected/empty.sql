-- expect-error: DP202 ParseError
-- why: no statement at all

