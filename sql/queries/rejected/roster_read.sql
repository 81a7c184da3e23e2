-- expect-error: DP223 NotSupportedError
-- why: the individual budgets
SELECT * FROM dpgate.roster_adult;
