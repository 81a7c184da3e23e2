-- expect-error: DP220 NotSupportedError
-- why: reading dpgate's ledger sequence
SELECT nextval('dpgate.ledger_seq');
