-- expect: class=explain columns=item,mechanism,epsilon,delta,sensitivity,ci_half_width,detail
EXPLAIN PRIVACY SELECT education, COUNT(*) FROM adult GROUP BY education;
