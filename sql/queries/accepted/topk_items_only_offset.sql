-- expect: class=top_k rows=3 columns=item
-- items ranked 3 to 5, no counts (the whole ε goes to selecting the top 5), with the TPS mechanism
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, topk_method = 'tps_pfm') item
FROM baskets GROUP BY item ORDER BY COUNT(*) DESC LIMIT 3 OFFSET 2;
