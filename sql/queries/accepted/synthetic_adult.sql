-- expect: class=synthetic columns=
-- a PrivBayes release of Adult, charged once; adult_syn is public afterwards
CREATE SYNTHETIC TABLE adult_syn FROM adult USING privbayes WITH (epsilon = 1, bins = 16);
