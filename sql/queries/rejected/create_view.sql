-- expect-error: DP222 NotSupportedError
-- why: a view that would expose rows
CREATE VIEW v AS SELECT * FROM adult;
