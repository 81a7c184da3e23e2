-- expect: class=top_k rows=10 columns=rank,column_name,count
-- the 10 most frequent BOOLEAN columns of a wide table, with noisy counts
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1)
    * FROM dp_top_k_columns('basket_flags', k => 10, counts => true);
