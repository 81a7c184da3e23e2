-- A small, made-up company database used by examples/policy.toml and the documentation (docs/owners/declarations.md).
-- Customers (one row each), their purchases (many rows each) and a public store list.

CREATE TABLE customers AS
SELECT i AS customer_id,
       ['north', 'south', 'east', 'west'][1 + (i * 7) % 4] AS region,
       18 + (i * 37) % 70 AS age,
       CASE WHEN i % 10 = 0 THEN 0.5 ELSE 2.0 END AS privacy_budget
FROM range(1, 5001) r(i);

CREATE TABLE stores AS
SELECT s AS store_id, ['Leeds', 'York', 'Hull', 'Bath', 'Ely'][1 + s % 5] AS city
FROM range(1, 21) r(s);

CREATE TABLE purchases AS
SELECT 1 + (p * 7919) % 5000 AS customer_id,
       1 + (p * 31) % 20 AS store_id,
       round(5 + ((p * 53) % 9500) / 100.0, 2) AS amount,
       ['food', 'books', 'garden', 'tools'][1 + (p * 13) % 4] AS category,
       DATE '2024-01-01' + ((p * 97) % 366)::INTEGER AS purchased_on
FROM range(1, 40001) r(p);
