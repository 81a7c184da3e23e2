-- expect-error: DP274 UnsupportedQueryError
-- why: top-k selection runs on one set of subjects; the partition rule would need several
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (personalization = 'partition') item, COUNT(*) AS n
FROM baskets GROUP BY item ORDER BY n DESC LIMIT 5;
