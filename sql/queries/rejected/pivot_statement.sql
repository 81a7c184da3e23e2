-- expect-error: DP221 NotSupportedError
-- why: PIVOT is not a DP aggregate
PIVOT adult ON sex USING COUNT(*);
