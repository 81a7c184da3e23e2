-- expect-error: DP211 PolicyError
-- why: the privacy unit identifies subjects and is never synthesized
CREATE SYNTHETIC TABLE s FROM adult USING privbayes WITH (epsilon = 1, columns = 'person_id, age');
