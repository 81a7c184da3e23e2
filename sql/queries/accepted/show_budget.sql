-- expect: class=show_budget columns=scope,epsilon_remaining,delta_remaining,subjects,detail
SHOW BUDGET;
