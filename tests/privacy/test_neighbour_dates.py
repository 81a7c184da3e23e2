"""The neighbour harness on DATE / TIMESTAMP tables and joins of protected tables (issue: dates, joins)."""

from __future__ import annotations

import harness
from conftest import VISITS_BOUNDS, VISITS_SQL

DP = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) "

SETUP, BOUNDS = VISITS_SQL, VISITS_BOUNDS


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
