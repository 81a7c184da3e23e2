-- expect-error: DP301 PolicyError
-- why: the privacy unit is the owner's declaration
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (privacy_unit_column = age) COUNT(*) FROM adult;
