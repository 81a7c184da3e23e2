-- expect-error: DP221 NotSupportedError
-- why: CALL runs table functions
CALL pragma_version();
