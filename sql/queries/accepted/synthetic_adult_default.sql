-- expect: class=synthetic columns=
-- the default synthesizer (MST: noisy 1-way marginals and a private tree of 2-way marginals)
CREATE SYNTHETIC TABLE adult_tree FROM adult WITH (epsilon = 1, columns = 'age, workclass, education, sex, income');
