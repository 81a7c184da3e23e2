-- expect-error: DP222 NotSupportedError
-- why: copies a protected table
CREATE TABLE copy AS SELECT * FROM adult;
