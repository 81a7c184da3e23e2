-- expect: class=synthetic columns=
-- a DiffPart release of the baskets (one record per basket), charged once; public afterwards
CREATE SYNTHETIC TABLE baskets_dp FROM baskets USING diffpart WITH (epsilon = 1);
