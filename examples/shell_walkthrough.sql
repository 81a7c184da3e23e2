-- A walkthrough of the dpgate shell, runnable without a terminal:
--   dpgate demo --db demo.duckdb --no-tour
--   dpgate shell demo.duckdb --analyst demo < examples/shell_walkthrough.sql
-- Interactively, type the same lines at the demo> prompt (Tab completes, Ctrl-R searches history).

-- What can I query, and what is declared about it?
.tables
.schema adult

-- What does a question cost? EXPLAIN PRIVACY spends nothing.
EXPLAIN PRIVACY SELECT education, COUNT(*) FROM adult GROUP BY education;

-- Ask it: every declared education level appears, each with its 95% interval.
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.4) education, COUNT(*) AS n
FROM adult GROUP BY education ORDER BY n DESC LIMIT 5;

-- Session defaults apply to plain SQL over protected tables.
SET dp_epsilon = 0.2;
SELECT sex, AVG(hours_per_week) AS hours FROM adult GROUP BY sex;

-- Results as CSV, e.g. for another program.
.mode csv
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1) income, COUNT(*) AS n FROM adult GROUP BY income;
.mode table

-- Raw rows never leave: refused, with a code and a hint, and nothing is charged.
SELECT age FROM adult LIMIT 3;

-- What is left.
.budget
