-- expect-error: DP225 ProgrammingError
-- why: dp_top_k_columns ranks the columns of a protected table, not a public one
SELECT * FROM dp_top_k_columns('country_regions', k => 2);
