-- expect-error: DP204 ProgrammingError
-- why: δ plays no part in PrivBayes; unknown options are never ignored
CREATE SYNTHETIC TABLE s FROM adult USING privbayes WITH (epsilon = 1, delta = 1e-6);
