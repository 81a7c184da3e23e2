-- expect: class=count rows=1 columns=n,items
-- two protected tables of one subject space (baskets), joined on the unit
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.3) COUNT(*) AS n, COUNT(DISTINCT b.item) AS items
FROM baskets b JOIN basket_flags f USING (basket_id) WHERE f.baby_needs = 1;
