-- expect-error: DP250 UnsupportedQueryError
-- why: a star over a join with a generator
SELECT * FROM generate_series(1, 3) g, adult;
