-- expect-error: DP277 UnsupportedQueryError
-- why: top 130 of a declared catalogue of 122 items
SELECT item, COUNT(*) AS n FROM baskets GROUP BY item ORDER BY n DESC LIMIT 130;
