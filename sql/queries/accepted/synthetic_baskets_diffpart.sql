-- expect: class=synthetic columns=
-- a set-valued release of the baskets (one record per basket), charged once; public afterwards (public facts
-- route it to the marginals path: noisy item and pair supports, and records fitted to them)
CREATE SYNTHETIC TABLE baskets_dp FROM baskets USING diffpart WITH (epsilon = 1);
