-- expect: class=synthetic columns=
-- the experimental generalized release (the demo owner enabled experimental mechanisms for adult)
CREATE SYNTHETIC TABLE adult_gen FROM adult USING supermodular WITH (epsilon = 1, columns = 'age, education, marital_status, sex, income');
