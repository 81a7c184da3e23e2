-- expect-error: DP213 PolicyError
-- why: bounds too far from 0 for an exact integer sum
SELECT SUM(age + 1e12) FROM adult;
