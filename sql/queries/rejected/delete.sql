-- expect-error: DP222 NotSupportedError
-- why: writes to a protected table
DELETE FROM adult;
