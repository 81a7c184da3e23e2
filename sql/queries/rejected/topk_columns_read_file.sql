-- expect-error: DP285 ProgrammingError
-- why: the table argument must be a string literal naming a protected table, not an expression
SELECT * FROM dp_top_k_columns(read_text('/etc/passwd'), k => 3);
