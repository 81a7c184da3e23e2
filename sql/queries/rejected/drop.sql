-- expect-error: DP222 NotSupportedError
-- why: drops a protected table
DROP TABLE adult;
