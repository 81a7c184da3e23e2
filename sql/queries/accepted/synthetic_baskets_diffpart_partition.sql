-- expect: class=synthetic columns=
-- a DiffPart release of the baskets forced onto the partition path (the route would take the marginals path)
CREATE SYNTHETIC TABLE baskets_parts FROM baskets USING diffpart WITH (epsilon = 1, method = 'partition');
