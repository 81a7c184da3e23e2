-- expect: class=count rows=49 columns=n,baskets
-- per-subject values first (rows cut to max_rows = 48 per basket), then a histogram over baskets
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.3) n, COUNT(*) AS baskets
FROM (SELECT basket_id, COUNT(*) AS n FROM baskets GROUP BY basket_id) GROUP BY n;
