-- expect-error: DP213 PolicyError
-- why: person_id has no declared bounds
SELECT AVG(person_id) FROM adult;
