-- expect-error: DP223 NotSupportedError
-- why: dpgate's schema
DESCRIBE dpgate.ledger;
