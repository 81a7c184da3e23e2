"""Findings of the neighbour harness: failing tests that pin privacy bugs (the lead fixes the code).

# FIXED (backends.bounded [null-input]): a NULL aggregate input was clamped to the lower bound and summed (counting class,
# once ``counting/exact.py::_agg_sql``, now ``backends/bounded.py``). The clamp is
# ``least(greatest(v, lo), hi)``, and DuckDB's GREATEST/LEAST skip NULLs, so a row whose
# input is NULL — a NULL value, or any row a FILTER (WHERE ...) excludes, since the filter
# becomes ``CASE WHEN cond THEN v END`` — adds ``lo`` to the sum, while ``count(v)`` does
# not count it. For AVG the noisy statistic is the centred sum ``sum - count * mid``
# (``mechanisms/laplace.py::_avg``) with declared sensitivity ``max_rows * (hi - lo) / 2``,
# but such a row moves it by ``|lo|``, which is larger whenever ``|lo| > (hi - lo) / 2``
# (e.g. bounds [1000, 1001]: 2000 times the declared sensitivity). The release then tells
# neighbours apart with certainty at ε = 0.1 (``test_avg_release_distinguishes_...`` below).
# SUM stays within its sensitivity (``|lo| <= max(|lo|, |hi|)``) but is wrong: every
# filtered-out or NULL row adds ``lo`` (``SUM(y) FILTER (WHERE g = 'a')`` with y in [-5, 5]
# returns -445 instead of 10 on the table below).
# Fix direction (for the lead): clamp with ``CASE WHEN v IS NULL THEN NULL ELSE ... END``
# (or sum only non-NULL values) so NULL inputs contribute nothing to sums.
"""

from __future__ import annotations

import pytest

import dpgate

import harness

#: 1,000 subjects, one row each, x in [0, 1); subject 7 alone has secret = 1.
SECRET_SETUP = ("CREATE TABLE t AS SELECT i AS uid, (i % 7) / 7.0 AS x, CASE WHEN i = 7 THEN 1 ELSE 0 END AS secret "
                "FROM range(1000) r(i)")  # fmt: skip
SECRET_SPEC = {"t": {"unit": "uid", "max_rows": 1, "epsilon": 100.0, "bounds": {"x": (0, 1)}, "public_roster": True}}
#: AVG's input is bounded by [1000, 1001]; subject 7's row is filtered out (its input is NULL).
SECRET_AVG = ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1) AVG(x + 1000) FILTER (WHERE secret = 0) AS a "
              "FROM t")  # fmt: skip


@pytest.fixture
def secret_pair(make_db):
    d = make_db(SECRET_SETUP, protect=SECRET_SPEC,
                analysts={harness.ANALYST: {"epsilon": 1000.0, "epsilon_per_query": 10.0}})  # fmt: skip
    n = harness.mutate(harness.copy_db(d, d.with_name("without_7.duckdb")), "DELETE FROM t WHERE uid = 7")
    return d, n


def test_avg_centred_sum_stays_within_its_sensitivity_when_a_row_is_filtered_out(secret_pair):
    # FINDING (fixed): failed before the fix. Observed: the centred sum of AVG(x + 1000) FILTER (WHERE secret = 0)
    # moves by 1000 * 2^32 = 4.29e12 grid units when subject 7 (filtered out) is removed;
    # declared sensitivity max_rows * half = 2^31 = 2.15e9 (2000 times less).
    d, n = secret_pair
    with harness.gateways(d, n) as (gd, gn):
        harness.check_statement(gd, gn, SECRET_AVG, context="subject 7 removed")


def test_avg_centred_sum_stays_within_its_sensitivity_with_null_inputs(make_db):
    # FINDING: the same with a NULL value instead of a FILTER. AVG(y - 10) over y in [-5, 5]:
    # bounds [-15, -5], mid -10, half 5; subject 1's three NULL rows move the centred sum by
    # 3 * 15 = 45 grid units, declared 3 * 5 = 15.
    d = make_db("CREATE TABLE t AS SELECT i % 10 AS uid, 1 AS y FROM range(40) r(i) WHERE i % 10 <> 1; "
                "INSERT INTO t SELECT 1, NULL FROM range(3)",
                protect={"t": {"unit": "uid", "max_rows": 3, "epsilon": 100.0, "bounds": {"y": (-5, 5)},
                               "public_roster": True}},
                analysts={harness.ANALYST: {"epsilon": 100.0}})  # fmt: skip
    n = harness.mutate(harness.copy_db(d, d.with_name("without_1.duckdb")), "DELETE FROM t WHERE uid = 1")
    with harness.gateways(d, n) as (gd, gn):
        sql = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) AVG(y - 10) AS a FROM t"
        harness.check_statement(gd, gn, sql, context="subject 1 (three NULL rows) removed")


def test_avg_on_the_demo_stays_within_its_sensitivity(demo_template, tmp_path_factory):
    # FINDING: on the demo database. AVG(hours_per_week - 100) FILTER (WHERE sex = 'Female'):
    # input bounds [-99, -1] (integers: grid 1), mid -50, half 49; every man's row is filtered out
    # and adds lo = -99 to the centred sum: removing one man (persons 1247, 223, 28) moves it by
    # 99, declared 49 (max_rows = 1).
    world = harness.demo_world(demo_template, tmp_path_factory.mktemp("neighbour_world"))
    sql = ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5) AVG(hours_per_week - 100) "
           "FILTER (WHERE sex = 'Female') AS h FROM adult")  # fmt: skip
    found = []
    with harness.gateways(world.base, *(n.path for n in world.neighbours)) as (d, *ns):
        before = harness.statistics_of(d, sql)
        for gn, nb in zip(ns, world.neighbours):
            found += [f"{nb.changed['adult']}: {v}" for v in
                      harness.compare(before, harness.exact_statistics(gn._con, harness.plan_statement(gn, sql)[1]))]
    assert not found, "\n".join(found)


def test_avg_release_distinguishes_neighbours_with_certainty(secret_pair):
    # FINDING: end to end through dpgate.connect at ε = 0.1. With subject 7 present (its row
    # filtered out) every release is exactly 1001.0 (the clamp at the upper bound); without it,
    # every release is about 1000.43. An ε = 0.1 mechanism must give each output set
    # probabilities within a factor e^0.1 = 1.105 on D and D′.
    d, n = secret_pair
    released = {}
    for name, path in (("D", d), ("D′", n)):
        values = []
        for seed in range(5):
            with dpgate.connect(str(path), analyst=harness.ANALYST, test_seed=seed) as con:
                values.append(con.execute(SECRET_AVG).fetchall()[0][0])
        released[name] = values
    at_bound = {k: sum(v == 1001.0 for v in vs) for k, vs in released.items()}
    assert not (at_bound["D"] == 5 and at_bound["D′"] == 0), f"releases: {released}"


def test_sum_ignores_filtered_out_and_null_rows(make_db):
    # FINDING (correctness, same root cause; within SUM's sensitivity): rows a FILTER excludes and
    # NULL inputs each add the lower bound -5. Exact SUM(y) FILTER (WHERE g = 'a') is -445 (10 rows
    # of y = 1 match, 90 others and one NULL add -5 each); it must be 10. SUM(y) is 95, not 100.
    d = make_db("CREATE TABLE t AS SELECT i AS uid, CASE WHEN i < 10 THEN 'a' ELSE 'b' END AS g, 1.0 AS y "
                "FROM range(100) r(i); INSERT INTO t VALUES (100, 'a', NULL)",
                protect={"t": {"unit": "uid", "max_rows": 1, "epsilon": 100.0, "bounds": {"y": (-5, 5)},
                               "domains": {"g": ["a", "b"]}, "public_roster": True}},
                analysts={harness.ANALYST: {"epsilon": 100.0}})  # fmt: skip
    sql = ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) SUM(y) FILTER (WHERE g = 'a') AS s, SUM(y) AS s2 "
           "FROM t")
    with harness.gateways(d) as (gd,):
        e = harness.statistics_of(gd, sql)
        grid = e.plan.aggs[0].grid
        got = [e.stats[f"agg {i} {e.plan.aggs[i].label} [sum]"].values[0] * grid for i in (0, 1)]
    assert got == [10.0, 100.0]


def test_a_failing_cast_inside_between_ends_the_same_way_on_neighbours(make_db):
    """Regression (passes): DuckDB's common-subexpression pass used to lift ``CAST(...)`` out of
    ``TRY(... BETWEEN ...)``, so one subject's value (y = 7: 7e9 overflows INTEGER) made the exact
    pass fail after the debit (DP404) on D only. Seen once by the grammar while the gateway did not
    yet disable that optimizer (``allowlist.REQUIRED_SETTINGS``)."""
    d = make_db("CREATE TABLE t AS SELECT i % 20 AS uid, (i % 5) * 0.5 AS y FROM range(200) r(i); "
                "INSERT INTO t VALUES (7, 7.0)",
                protect={"t": {"unit": "uid", "max_rows": 3, "epsilon": 100.0, "bounds": {"y": (-5, 5)},
                               "public_roster": True}},
                analysts={harness.ANALYST: {"epsilon": 100.0}})  # fmt: skip
    n = harness.mutate(harness.copy_db(d, d.with_name("without_7.duckdb")), "DELETE FROM t WHERE uid = 7")
    for sql in (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) COUNT(*) FILTER (WHERE CAST(y * 1e9 AS INTEGER) "
        "BETWEEN 0 AND 5) AS n FROM t",
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) SUM(CASE WHEN CAST(y * 1e9 AS INTEGER) BETWEEN 0 AND 5 "
        "THEN 1 ELSE 0 END) AS n FROM t",
    ):
        assert harness.gateway_outcome(d, sql) == harness.gateway_outcome(n, sql) == ("ok", "count"), sql
        with harness.gateways(d, n) as (gd, gn):
            harness.check_statement(gd, gn, sql)
