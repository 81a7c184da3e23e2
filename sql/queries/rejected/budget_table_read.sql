-- expect-error: DP223 NotSupportedError
-- why: the owner's budget table
SELECT * FROM subject_budgets;
