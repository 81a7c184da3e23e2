-- expect-error: DP222 NotSupportedError
-- why: writes to a protected table
UPDATE adult SET age = 0;
