-- expect-error: DP221 NotSupportedError
-- why: SUMMARIZE prints min, max and distinct counts
SUMMARIZE adult;
