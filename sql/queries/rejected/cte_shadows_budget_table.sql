-- expect-error: DP216 UnsupportedQueryError
-- why: inside its own body a CTE's name is the real table
WITH subject_budgets AS (SELECT * FROM subject_budgets) SELECT * FROM subject_budgets;
