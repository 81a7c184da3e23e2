-- expect-error: DP223 NotSupportedError
-- why: dpgate's ledger
SELECT * FROM dpgate.ledger;
