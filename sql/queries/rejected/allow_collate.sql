-- expect-error: DP252 UnsupportedQueryError
-- why: COLLATE is not on the list
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1) COUNT(*) FROM adult WHERE sex COLLATE nocase = 'male';
