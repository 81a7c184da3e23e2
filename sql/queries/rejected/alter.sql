-- expect-error: DP222 NotSupportedError
-- why: changes a protected table
ALTER TABLE adult ADD COLUMN x INTEGER;
