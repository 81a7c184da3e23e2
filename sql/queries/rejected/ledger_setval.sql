-- expect-error: DP220 NotSupportedError
-- why: moving dpgate's ledger sequence
SELECT setval('dpgate.ledger_seq', 1, false);
