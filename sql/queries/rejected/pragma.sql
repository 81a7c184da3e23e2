-- expect-error: DP221 NotSupportedError
-- why: PRAGMA reaches the catalog
PRAGMA table_info('adult');
