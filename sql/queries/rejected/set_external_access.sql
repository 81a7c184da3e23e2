-- expect-error: DP221 NotSupportedError
-- why: re-enabling file access
SET enable_external_access = true;
