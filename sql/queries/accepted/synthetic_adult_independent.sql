-- expect: class=synthetic columns=
-- every column sampled from its own noisy 1-way marginal (no correlations kept): a baseline
CREATE SYNTHETIC TABLE adult_ind FROM adult USING independent WITH (epsilon = 0.5, bins = 8);
