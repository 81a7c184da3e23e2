-- expect: class=subgraph rows=1 columns=n
-- the triangle self-join is recognised and answered like TRIANGLE_COUNT over the simple graph
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5) COUNT(*) AS n
FROM wormnet a JOIN wormnet b ON a.dst = b.src JOIN wormnet c ON c.src = a.src AND c.dst = b.dst;
