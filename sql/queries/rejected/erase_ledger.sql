-- expect-error: DP222 NotSupportedError
-- why: erasing the ledger
DELETE FROM dpgate.ledger;
