-- expect-error: DP222 NotSupportedError
-- why: writes to a protected table
INSERT INTO adult SELECT * FROM adult;
