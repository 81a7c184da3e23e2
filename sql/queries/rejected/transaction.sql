-- expect-error: DP222 NotSupportedError
-- why: analysts cannot open transactions
BEGIN TRANSACTION;
