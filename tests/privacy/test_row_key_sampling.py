"""Per-query sampling keyed by a unique row key (``backends.duckdb`` [key]).

On a table with a PRIMARY KEY (or UNIQUE over NOT NULL columns), a subject's rows are ranked by a
salted hash of their key, which tells them apart: no duplicate numbering (one window instead of
two). Checked here: the path is taken; each subject keeps at most ``max_rows`` rows; identical
rows (equal in every column a query uses) are still sampled as rows, uniformly; neighbouring
databases give exact statistics within the declared sensitivities on the same salt.
"""

from __future__ import annotations

import harness
import pytest

from dpgate.catalog import unit_stats
from dpgate.backends import duckdb as exact_mod

DP = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1{opts}) "
SETUP = """
CREATE TABLE t (id INTEGER PRIMARY KEY, uid INTEGER, g VARCHAR, x INTEGER);
INSERT INTO t SELECT i, i % 40, ['a', 'b', 'c'][1 + (i * 7) % 3], (i * 13) % 11 FROM range(400) r(i);
INSERT INTO t SELECT 1000 + i, 3, 'a', 4 FROM range(9) r(i);
"""
STATEMENTS = [
    DP + "g, COUNT(*), SUM(x), AVG(x) FROM t GROUP BY g",
    DP + "COUNT(*), SUM(x) FROM t WHERE x > 3",
    DP + "g, COUNT(*) FROM t GROUP BY g",
    DP + "g, MEDIAN(x) FROM t GROUP BY g",
]


def _world(make_db, setup=SETUP, max_rows=4):
    path = make_db(setup, protect={"t": {"unit": "uid", "max_rows": max_rows, "max_groups": 2, "epsilon": 1e6,
                                         "domains": {"g": ["a", "b", "c"]}, "bounds": {"x": (0, 10)}}})  # fmt: skip
    harness.add_harness_analyst(path)
    harness.sample_per_query(path)  # compared paths share the per-query hash
    return path


def _sqls():
    for sql in STATEMENTS:
        yield sql.format(opts="")
    yield STATEMENTS[2].format(opts=", max_groups_contributed = 1")


def test_the_keyed_path_is_taken_and_bounds_every_subject(make_db):
    path = _world(make_db)
    with harness.gateways(path) as (gw,):
        _, plan = harness.plan_statement(gw, STATEMENTS[2].format(opts=""))
        assert exact_mod._row_key(plan) == ("id",)
        q = exact_mod._build(plan, harness.roster_charged(plan))
        sampled = q.sampled(f"SELECT {q.sample_cols} FROM ({q.src})")
        assert "__dup" not in sampled
        for salt in range(20):
            (most,) = gw._con.execute(
                f"SELECT max(n) FROM (SELECT __unit, count(*) AS n FROM ({sampled}) GROUP BY __unit)",
                exact_mod._params(sampled, dict(q.params, salt=salt)),
            ).fetchone()
            assert most == 4  # subject 3 has 19 rows, everyone else 10


def test_identical_rows_are_sampled_as_rows(make_db):
    """40 subjects with rows x = 1, 1, 1, 2 (three identical in every column used), max_rows 1: the
    kept row is x = 1 with probability 3/4. Over 50 salts: Binomial(2000, 3/4) at 4.5 sigma."""
    path = _world(make_db, "CREATE TABLE t (id INTEGER PRIMARY KEY, uid INTEGER, g VARCHAR, x INTEGER);"
                           "INSERT INTO t SELECT i, i // 4, 'a', CASE WHEN i % 4 = 3 THEN 2 ELSE 1 END "
                           "FROM range(160) r(i)", max_rows=1)  # fmt: skip
    ones = 0
    with harness.gateways(path) as (gw,):
        _, plan = harness.plan_statement(gw, DP.format(opts="") + "COUNT(*), SUM(x) FROM t")
        assert exact_mod._row_key(plan) == ("id",)
        unit = plan.aggs[1].grid_int(1)
        for salt in range(50):
            ex = exact_mod.run(gw._con, plan, harness.roster_charged(plan), salt)
            assert int(ex.components[(0, "count")][0][0]) == 40  # one row each
            ones += 80 - int(ex.components[(1, "sum")][0][0]) // unit  # sum = 40 + (subjects keeping x = 2)
    n, p = 50 * 40, 0.75
    assert abs(ones - n * p) <= 4.5 * (n * p * (1 - p)) ** 0.5, ones


@pytest.mark.parametrize("change", ["removed", "added"])
def test_neighbours_on_the_same_salt(make_db, tmp_path, change):
    path = _world(make_db)
    other = harness.copy_db(path, tmp_path / "neighbour.duckdb")
    if change == "removed":
        harness.mutate(other, "DELETE FROM t WHERE uid = 3")
    else:
        harness.mutate(other, "INSERT INTO t SELECT 5000 + i, 77, 'c', 10 FROM range(12) r(i)")
        from dpgate.catalog.owner import Owner

        with Owner(other, create=False) as owner:
            owner.refresh_roster("t")
    unit_stats.clear()
    with harness.gateways(path, other) as (gw_d, gw_n):
        for sql in _sqls():
            _, plan = harness.plan_statement(gw_n, sql)
            assert exact_mod._row_key(plan) == ("id",)
            harness.check_statement(gw_d, gw_n, sql, context=f"{change}: {sql}")
