-- expect-error: DP272 UnsupportedQueryError
-- why: topk_method on a query that is not ORDER BY COUNT(*) DESC LIMIT k
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (topk_method = 'em') item, COUNT(*) AS n FROM baskets GROUP BY item;
