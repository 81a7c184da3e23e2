-- expect-error: DP287 ProgrammingError
-- why: the experimental supermodular release's random frequency threshold alone leaks with probability of
-- order max|a⁺|/(θ0(1−θ0)|D|); at the session δ of 1e-6 no table of Adult's size covers it (the hint says
-- which δ would)
CREATE SYNTHETIC TABLE adult_gen FROM adult USING supermodular WITH (epsilon = 1, columns = 'age, education, sex, income');
