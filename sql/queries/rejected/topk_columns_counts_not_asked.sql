-- expect-error: DP230 ProgrammingError
-- why: the count column exists only with counts => true; caught before the debit
SELECT column_name, count FROM dp_top_k_columns('basket_flags', k => 3);
