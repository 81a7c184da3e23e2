-- expect: class=top_k rows=5 columns=item,baskets
-- GROUP BY ... ORDER BY COUNT(*) DESC LIMIT k goes to the top-k mechanism: 5 items, counts paid separately
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) item, COUNT(*) AS baskets
FROM baskets GROUP BY item ORDER BY baskets DESC LIMIT 5;
