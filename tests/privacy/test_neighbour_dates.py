"""The neighbour harness on DATE / TIMESTAMP tables and joins of protected tables (issue: dates, joins)."""

from __future__ import annotations

import harness

DP = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) "

SETUP = """
CREATE TABLE visits AS SELECT i % 2000 AS pid,
  DATE '2020-01-01' + ((i * 37) % 1800)::INTEGER AS visit_date,
  DATE '2020-01-01' + ((i * 37) % 1800 + i % 30)::INTEGER AS discharge,
  TIMESTAMP '2020-01-01 00:00:00' + to_seconds(i * 7919 % 50000000) AS ts
FROM range(10000) r(i);
"""
BOUNDS = {
    "visit_date": ("2020-01-01", "2024-12-31"),
    "discharge": ("2020-01-01", "2025-03-31"),
    "ts": ("2020-01-01 00:00:00", "2021-12-31 23:59:59"),
}


def test_date_queries_move_within_their_sensitivity(make_db, tmp_path):
    """Subject 7 (5 rows) removed."""
    visits = make_db(SETUP, protect={"visits": {"unit": "pid", "max_rows": 5, "epsilon": 1e6, "bounds": BOUNDS}})
    base = harness.copy_db(visits, tmp_path / "d.duckdb")
    harness.add_harness_analyst(base)
    neighbour = harness.mutate(harness.copy_db(base, tmp_path / "n.duckdb"), "DELETE FROM visits WHERE pid = 7")
    with harness.gateways(base, neighbour) as (gd, gn):
        for sql in [
            DP + "year(visit_date) AS y, month(ts) AS m, COUNT(*) FROM visits GROUP BY 1, 2",
            DP + "date_trunc('quarter', visit_date) AS q, AVG(discharge - visit_date), "
            "SUM(date_diff('minute', TIMESTAMP '2020-01-01 00:00:00', ts)) FROM visits GROUP BY 1",
        ]:
            before, after = harness.check_statement(gd, gn, sql)
            assert before is not None and harness.compare(before, after, scale=0.0), "nothing moved"
