-- expect: class=synthetic columns=
-- a private Markov model of the school-to-work careers, with synthetic sequences sampled from it
CREATE SYNTHETIC TABLE careers_syn FROM careers USING privtree_markov WITH (epsilon = 1);
