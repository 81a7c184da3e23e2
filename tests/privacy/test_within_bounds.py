"""[elide] Leaving out a clamp that changes nothing gives exactly the clamped statistics.

``catalog.within_bounds`` asks DuckDB, in the exact pass's snapshot, whether any value of a column
is outside an aggregate's bounds; when none is, ``backends.duckdb`` sums the values unclamped. Here:

- the check is sound for every column type it accepts (when it says "within", the clamp returns
  every value unchanged, so the clamped and unclamped sums are equal), complete for values exactly
  within the bounds, and never raises, at the types' extremes, NaN and infinities included;
- the exact pass's statistics are those of the full (clamped, fact-free) pass, in and out of bounds;
- neighbours where one side is within the bounds and the other is not stay within the sensitivity;
- a computed column of a subquery never borrows its base column's check.
"""

from __future__ import annotations

import decimal
import math

import duckdb
import harness
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpgate.backends import bounded
from dpgate.backends import duckdb as exact_mod
from dpgate.catalog import unit_stats, within_bounds
from dpgate.mechanisms.base import SUM, AggSpec

DP = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) "

TYPES = {
    "TINYINT": [-128, 127, 0, 5],
    "SMALLINT": [-32768, 32767, 3],
    "INTEGER": [-(2**31), 2**31 - 1, 7],
    "BIGINT": [-(2**63), 2**63 - 1, 9],
    "UTINYINT": [0, 255, 4],
    "USMALLINT": [0, 65535],
    "UINTEGER": [0, 2**32 - 1],
    "UBIGINT": [0, 2**64 - 1, 12],
    "FLOAT": ["nan", "inf", "-inf", "3.4e38", "-3.4e38", "0.1", "-0.0", "5.5"],
    "REAL": ["1.5", "0.30000001"],
    "DOUBLE": ["nan", "inf", "-inf", "1.7e308", "-1.7e308", "0.1", "-0.0", "5.5", "4.9e-324"],
    "DECIMAL(5,2)": ["-999.99", "999.99", "0.01", "5.50"],
    "DECIMAL(18,4)": ["-99999999999999.9999", "0.0001", "12.3456"],
    "DECIMAL(38,10)": ["-9999999999999999999999999999.9999999999", "0.1", "7.0000000001"],
}
BOUNDS = [(0.0, 10.0), (-5.5, 5.5), (0.1, 0.2), (-1e30, 1e30), (1e30, 2e30), (-2e30, -1e30), (-1.0, -0.5),
          (5.5, 5.5), (300.0, 400.0), (-(2.0**63), 2.0**64), (1.5, 2.5)]


def _clamped_and_plain(con, col: str, sql_type: str, lo: float, hi: float) -> tuple:
    """The scaled sums with and without the clamp, as ``exact`` writes them (DOUBLE grid and integer)."""
    out = []
    for integer, grid in ((False, 2.0**-10), (True, 1.0)):
        if integer and (lo != math.floor(lo) or hi != math.floor(hi) or abs(lo) > 2**52 or abs(hi) > 2**52):
            continue
        if not integer and max(abs(lo), abs(hi)) / grid >= 2**53:
            continue
        agg = AggSpec(0, SUM, "s", None, (), lower=lo, upper=hi, grid=grid, integer=integer)
        c = bounded.scaled_input(agg, col)
        p = bounded.scaled_input(agg, col, clamp=False)
        out.append(con.execute(f"SELECT sum(TRY({c})), sum(TRY({p})), count(TRY({c})), count(TRY({p})) FROM t").fetchone())
    return out


def _exact_within(values, sql_type: str, lo: float, hi: float) -> bool:
    """Whether every non-NULL value lies in [lo, hi], compared exactly (NaN is out)."""
    for v in values:
        if v is None:
            continue
        x = decimal.Decimal(str(v)) if isinstance(v, str) and not any(s in v for s in ("nan", "inf")) else v
        if isinstance(x, str):
            if "nan" in x or x in ("inf",) and hi != math.inf or x == "-inf" and lo != -math.inf:
                return False
            continue
        if sql_type in ("FLOAT", "REAL"):
            x = decimal.Decimal(float(np.float32(float(x))))
        if not (decimal.Decimal(lo) <= decimal.Decimal(x) <= decimal.Decimal(hi)):
            return False
    return True


@pytest.mark.parametrize("sql_type", sorted(TYPES))
def test_the_check_is_sound_complete_and_total_for_every_type(sql_type):
    values = TYPES[sql_type]
    con = duckdb.connect()
    for lo, hi in BOUNDS:
        for subset in (values, values[-1:], [None]):
            con.execute(f"CREATE OR REPLACE TABLE t (v {sql_type})")
            con.executemany(f"INSERT INTO t VALUES (CAST(? AS {sql_type}))", [[v] for v in subset])
            (inside,) = within_bounds.within(con, "t", [("v", sql_type, lo, hi)])  # never raises
            assert inside == _exact_within(subset, sql_type, lo, hi), (sql_type, lo, hi, subset)
            if inside:  # sound: the clamp leaves every value as it is
                for clamped_sum, plain_sum, n1, n2 in _clamped_and_plain(con, "v", sql_type, lo, hi):
                    assert (clamped_sum, n1) == (plain_sum, n2), (sql_type, lo, hi, subset)
    con.close()


@settings(max_examples=40, deadline=None)
@given(
    values=st.lists(st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True)), min_size=1, max_size=30),
    lo=st.floats(-1e6, 1e6), width=st.floats(0, 1e6),
)
def test_double_columns_at_random(values, lo, width):
    hi = lo + width
    con = duckdb.connect()
    con.execute("CREATE TABLE t (v DOUBLE)")
    con.executemany("INSERT INTO t VALUES (?)", [[v] for v in values])
    (inside,) = within_bounds.within(con, "t", [("v", "DOUBLE", lo, hi)])
    expected = all(v is None or (not math.isnan(v) and lo <= v <= hi) for v in values)
    assert inside == expected
    if inside:
        for clamped_sum, plain_sum, _, _ in _clamped_and_plain(con, "v", "DOUBLE", lo, hi):
            assert clamped_sum == plain_sum
    con.close()


def test_an_uncommitted_change_in_the_same_transaction_is_seen():
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT (i % 10)::DOUBLE AS v FROM range(300000) r(i)")
    assert within_bounds.within(con, "t", [("v", "DOUBLE", 0.0, 9.0)]) == [True]
    con.execute("BEGIN")
    con.execute("INSERT INTO t VALUES (9.5)")
    assert within_bounds.within(con, "t", [("v", "DOUBLE", 0.0, 9.0)]) == [False]
    con.execute("ROLLBACK")
    con.execute("UPDATE t SET v = 'nan' WHERE v = 3")
    assert within_bounds.within(con, "t", [("v", "DOUBLE", 0.0, 9.0)]) == [False]
    con.execute("DELETE FROM t WHERE isnan(v)")  # row-group statistics stay wide: the rows are read
    assert within_bounds.within(con, "t", [("v", "DOUBLE", 0.0, 9.0)]) == [True]


# -- the exact pass ------------------------------------------------------------------------------
SETUP = """
CREATE TABLE t AS SELECT i % 300 AS uid, ['a', 'b', 'c'][1 + i % 3] AS g, (i * 7) % 11 AS x,
  ((i * 13) % 101) / 10.0 AS y, CAST((i % 17) AS DECIMAL(6, 2)) AS d, CAST(i % 9 AS FLOAT) AS f
FROM range(1200) r(i);
"""
STATEMENTS = [
    DP + "g, COUNT(*), SUM(x), AVG(y) FROM t GROUP BY g",
    DP + "SUM(d), AVG(f), VARIANCE(y) FROM t WHERE x > 2",
    DP + "g, MEDIAN(y), SUM(x) FROM t AS tt GROUP BY g",
    DP + "SUM(x + 1), SUM(x) FILTER (WHERE g = 'a') FROM t",
]


@pytest.fixture
def world(make_db, monkeypatch):
    monkeypatch.setattr(within_bounds, "MIN_ROWS", 0)

    def build(max_rows=4, extra_sql=None):
        path = make_db(SETUP, protect={"t": {
            "unit": "uid", "max_rows": max_rows, "max_groups": 2, "epsilon": 1e6, "domains": {"g": ["a", "b", "c"]},
            "bounds": {"x": (0, 10), "y": (0, 10.1), "d": (0, 16), "f": (0, 8)}}})  # fmt: skip
        harness.add_harness_analyst(path)
        harness.sample_per_query(path)  # compared paths share the per-query hash
        if extra_sql:
            harness.mutate(path, extra_sql)
        return path

    return build


def _run(gw, sql, use_stats):
    _, plan = harness.plan_statement(gw, sql)
    ex = exact_mod.run(gw._con, plan, harness.roster_charged(plan), harness.SALT, use_stats=use_stats)
    return {k: [v.tolist() if hasattr(v, "tolist") else v for v in arr.ravel()] for k, arr in ex.components.items()}


def _elided(gw, sql) -> frozenset:
    _, plan = harness.plan_statement(gw, sql)
    with gw._con.cursor() as cur:
        return exact_mod._unclamped(cur, plan, unit_stats.current(cur, plan.table))


@pytest.mark.parametrize("max_rows", [4, 2])
@pytest.mark.parametrize("extra", [None, "INSERT INTO t VALUES (7, 'a', 50, -3.5, 99, 'nan')"])
def test_the_exact_pass_equals_the_clamped_pass(world, max_rows, extra):
    path = world(max_rows, extra)
    unit_stats.clear()
    with harness.gateways(path) as (gw,):
        for sql in STATEMENTS:
            assert _run(gw, sql, True) == _run(gw, sql, False), sql
        elided = _elided(gw, STATEMENTS[0])
        assert elided == (frozenset() if extra else frozenset({1, 2}))  # SUM(x), AVG(y); COUNT(*) has no clamp
        assert _elided(gw, STATEMENTS[1]) == (frozenset() if extra else frozenset({0, 1, 2}))
        assert _elided(gw, STATEMENTS[3]) == frozenset()  # an expression, a FILTER: always clamped


def test_a_computed_column_of_a_subquery_keeps_its_clamp(world):
    path = world()
    with harness.gateways(path) as (gw,):
        sql = DP + "SUM(x) FROM (SELECT uid, x * 100 AS x FROM t) AS t"
        try:
            _, plan = harness.plan_statement(gw, sql)
        except harness.errors.Error:
            return  # refused: nothing to elide
        with gw._con.cursor() as cur:
            assert exact_mod._unclamped(cur, plan, unit_stats.current(cur, plan.table)) == frozenset()


def test_small_tables_keep_the_clamp(world, monkeypatch):
    path = world()
    monkeypatch.setattr(within_bounds, "MIN_ROWS", 1201)
    with harness.gateways(path) as (gw,):
        assert _elided(gw, STATEMENTS[0]) == frozenset()


@pytest.mark.parametrize("change", [
    "UPDATE t SET x = -40, y = 'inf', d = -5, f = 'nan' WHERE uid = 5",  # the subject's rows out of bounds
    "INSERT INTO t SELECT 5, 'b', 1000, 1e300, 9999, 1e30 FROM range(6)",  # and more rows than max_rows
])  # fmt: skip
def test_neighbours_across_the_bounds_stay_within_the_sensitivity(world, tmp_path, change):
    """D′ has subject 5 with values out of bounds (clamped); D is D′ without subject 5's rows, within
    every bound (the clamp is left out)."""
    n = world(max_rows=4, extra_sql=change)
    d = harness.mutate(harness.copy_db(n, tmp_path / "d.duckdb"), "DELETE FROM t WHERE uid = 5")
    unit_stats.clear()
    with harness.gateways(d, n) as (gw_d, gw_n):
        assert _elided(gw_d, STATEMENTS[0]) and not _elided(gw_n, STATEMENTS[0])
        for sql in STATEMENTS[:3]:
            harness.check_statement(gw_d, gw_n, sql, context=change)


# -- columns that change between the check and the aggregate ----------------------------------------
def test_a_column_computed_at_each_read_keeps_its_clamp(make_db, monkeypatch):
    """A generated column (or a protected view's column) is computed anew at each read, random()
    included: what the check read is not what the sum reads. Only stored columns of base tables."""
    monkeypatch.setattr(within_bounds, "MIN_ROWS", 0)
    setup = """CREATE TABLE t (uid INTEGER, y DOUBLE,
      x DOUBLE GENERATED ALWAYS AS (CASE WHEN random() < 0.5 THEN 1e6 ELSE 1.0 END));
    INSERT INTO t (uid, y) SELECT i, 1.0 FROM range(20) r(i);
    CREATE VIEW v AS SELECT uid, CASE WHEN random() < 0.5 THEN 1e6 ELSE 1.0 END AS x FROM range(20) r(uid);"""
    path = make_db(setup, protect={"t": {"unit": "uid", "max_rows": 1, "epsilon": 1e6, "bounds": {"x": (0, 10), "y": (0, 10)}},
                                   "v": {"unit": "uid", "max_rows": 1, "epsilon": 1e6, "bounds": {"x": (0, 10)}}})  # fmt: skip
    harness.add_harness_analyst(path)
    with harness.gateways(path) as (gw,):
        assert _elided(gw, DP + "SUM(y) FROM t") == frozenset()  # the table has a generated column
        assert _elided(gw, DP + "SUM(x) FROM v") == frozenset()
        _, plan = harness.plan_statement(gw, DP + "SUM(x) FROM t")
        for _ in range(20):
            (total,) = _run(gw, DP + "SUM(x) FROM t", True).values()
            assert total[0] * plan.aggs[0].grid <= 20 * 10  # never a 1e6 that skipped the clamp


def test_a_type_changed_after_planning_keeps_the_clamp(make_db, monkeypatch):
    """Bounds wider than a TINYINT need no upper check; the owner widens the type after the plan."""
    monkeypatch.setattr(within_bounds, "MIN_ROWS", 0)
    path = make_db("CREATE TABLE t AS SELECT i::INTEGER AS uid, (i % 100)::TINYINT AS x FROM range(50) r(i)",
                   protect={"t": {"unit": "uid", "max_rows": 1, "epsilon": 1e6, "bounds": {"x": (0, 200)}}})  # fmt: skip
    harness.add_harness_analyst(path)
    with harness.gateways(path) as (gw,):
        _, plan = harness.plan_statement(gw, DP + "SUM(x) FROM t")
        with gw._con.cursor() as owner:
            owner.execute("ALTER TABLE t ALTER x TYPE INTEGER")
            owner.execute("UPDATE t SET x = 1000000 WHERE uid = 7")
        unit_stats.clear()
        ex = exact_mod.run(gw._con, plan, harness.roster_charged(plan), harness.SALT)
        full = exact_mod.run(gw._con, plan, harness.roster_charged(plan), harness.SALT, use_stats=False)
    assert int(ex.components[(0, "sum")][0][0]) == int(full.components[(0, "sum")][0][0]) == 1218 + 200
