"""Joins on the unit and the per-subject subquery on Spark (``dpgate.backends.spark.rows``): the same
statistics as DuckDB without sampling, the neighbour harness on Spark, analyst expressions on
charged rows only, and the shapes refused free.

``t`` (people) and ``v`` (their visits) share one subject space: a subject's rows in both are one
person's. In 'within' no subject has more rows than its table's ``max_rows``, so the per-table cut
keeps every row on either engine; what the joined relation's own bound then samples is compared
by its total only (the engines' keyed hashes differ).
"""

from __future__ import annotations

import dataclasses

import pyarrow as pa
import pytest
from sqlglot import exp

import harness
from dpgate import backends
from conftest import expressions_may_fail, fails_on, spark_neighbours, spark_worlds

ROWS = """
CREATE TABLE t AS SELECT
  i // 2 AS pid,
  ['sales', 'ops', 'it'][i % 3 + 1] AS dept,
  CASE WHEN i % 17 = 0 THEN NULL ELSE 'c' || (i % 5) END AS city,
  CASE WHEN i % 23 = 0 THEN NULL ELSE (i * 37 % 1000) / 4.0 END AS income,
  CAST((i * 13) % 70 + 18 AS INTEGER) AS age
FROM range(1200) r(i);
CREATE TABLE v AS SELECT
  i // 3 AS pid,
  ['a', 'b'][i % 2 + 1] AS kind,
  CAST(i % 50 AS INTEGER) AS amount
FROM range(1800) r(i)
"""
#: Subjects 0..29 get three more rows in each table: over max_rows, cut and sampled.
HEAVY = "; INSERT INTO t SELECT * REPLACE (age + 1 AS age) FROM t WHERE pid < 30; " \
        "INSERT INTO v SELECT * REPLACE (amount + 1 AS amount) FROM v WHERE pid < 30"
PROTECT = {
    "t": {"unit": "pid", "max_rows": 2, "epsilon": 1e6, "subjects": "people",
          "domains": {"dept": ["sales", "ops", "it"]}, "bounds": {"income": (0, 250), "age": (18, 90)}},
    "v": {"unit": "pid", "max_rows": 3, "epsilon": 1e6, "subjects": "people",
          "domains": {"kind": ["a", "b"]}, "bounds": {"amount": (0, 50)}},
}  # fmt: skip
ANALYSTS = {harness.ANALYST: {"epsilon": 1e6, "delta": 1.0, "epsilon_per_query": 100.0, "delta_per_query": 0.5}}

#: A subject's joined rows are at most the product of its tables' cuts (2 x 3 here): a bound that
#: large samples nothing, so both engines' statistics must be equal.
WIDE = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (max_rows_contributed = 12)"
JOINS = [
    f"{WIDE} t.dept, COUNT(*), SUM(v.amount) FROM t JOIN v ON t.pid = v.pid GROUP BY t.dept",
    f"{WIDE} v.kind, COUNT(*), AVG(t.age) FROM t JOIN v ON t.pid = v.pid AND t.age > v.amount WHERE t.age > 30 "
    "GROUP BY v.kind",
    f"{WIDE} COUNT(DISTINCT x.pid), COUNT(*) FROM t AS x JOIN v AS y ON x.pid = y.pid WHERE x.city LIKE 'c1%' "
    "AND y.kind = 'a'",
    # the joined relation's own bound (max_rows 3 of 6 joined rows) samples, by the engine's hash
    "SELECT COUNT(*) FROM t JOIN v ON t.pid = v.pid",
]
PER_SUBJECT = [
    "SELECT AVG(n) FROM (SELECT pid, COUNT(*) AS n FROM t GROUP BY pid) s",
    "SELECT COUNT(*), SUM(s) FROM (SELECT pid, SUM(income) AS s FROM t WHERE age > 20 GROUP BY pid) p WHERE s > 100",
    "SELECT AVG(m), AVG(c) FROM (SELECT pid, MAX(age) AS m, COUNT(DISTINCT city) AS c, MIN(income) AS lo FROM t GROUP BY pid) p",
    "SELECT COUNT(*), AVG(a) FROM (SELECT pid, AVG(amount) AS a FROM v GROUP BY pid) p WHERE a >= 10",
]



@pytest.fixture(scope="module")
def worlds(spark, tmp_path_factory):
    return spark_worlds(spark, tmp_path_factory, ROWS, HEAVY, PROTECT, analysts=ANALYSTS)


@pytest.mark.parametrize("sql", JOINS + PER_SUBJECT)
def test_statistics_equal_duckdb_without_sampling(worlds, sql):
    duck, spark = worlds["within"]
    with harness.gateways(duck, spark) as (gd, gs):
        a, b = harness.statistics_of(gd, sql), harness.statistics_of(gs, sql)
    assert any(any(v for v in s.values.values()) for s in a.stats.values()), sql  # not all zero
    assert a.values() == b.values(), sql



@pytest.fixture(scope="module")
def neighbours(spark, tmp_path_factory, worlds):
    """Spark twins of D (heavy) and two neighbours: heavy subject 7 removed from both tables, and a
    new subject 9999 added with extreme rows in both (out-of-bounds values, many visits)."""
    base = worlds["heavy"][1]
    return base, spark_neighbours(spark, tmp_path_factory, ROWS + HEAVY, {
        "removed": "DELETE FROM t WHERE pid = 7; DELETE FROM v WHERE pid = 7",
        "added": "INSERT INTO t SELECT 9999, 'it', 'c1', 1e9, 200 + i FROM range(6) r(i); "
                 "INSERT INTO v SELECT 9999, 'a', 10000 + i FROM range(9) r(i)",
    }, PROTECT, analysts=ANALYSTS)


def test_neighbour_harness_on_spark(neighbours):
    base, pairs = neighbours
    with harness.gateways(base, *(path for _, path in pairs)) as (gd, *gns):
        for sql in JOINS + PER_SUBJECT:
            before = harness.statistics_of(gd, sql)
            for (name, _), gn in zip(pairs, gns):
                harness.check_statement(gd, gn, sql, context=f"spark, {name}: {sql}", before=before)


def test_neighbour_harness_on_spark_can_fail(neighbours):
    """The harness sees the added subject through a join on Spark: with every bound at 1%, some
    statistic moves past it."""
    base, pairs = neighbours
    with harness.gateways(base, pairs[1][1]) as (gd, gn):
        sql = JOINS[0]
        assert harness.compare(harness.statistics_of(gd, sql), harness.statistics_of(gn, sql), scale=0.01)


def _charged(units: list[int]) -> backends.Charged:
    table = pa.table({"unit": pa.array(units, pa.int64()), "__seen": pa.array([0] * len(units), pa.int32())})
    return backends.Charged(lambda: table, None, ("test", tuple(units)), len(units))


@pytest.mark.parametrize("sql", [JOINS[1], PER_SUBJECT[1]])
def test_analyst_expressions_see_charged_rows_only(spark, worlds, sql):
    """A join's WHERE and ON, and a per-subject subquery's WHERE and aggregate input, that fail on
    subject 5's rows run clean when 5 is not charged, and fail when it is [charged-only]. The
    expressions are put into the plan past the analyst's checks (the one way to see on which rows
    Spark evaluates them), and fail only under ANSI mode, switched on in the plane's session here."""
    _, twin = worlds["within"]
    with harness.gateways(twin) as (gw,):
        plan = harness.plan_statement(gw, sql)[1]
        source = plan.source.copy()
        if plan.prebound:
            inner = source.args["from_"].this.this
            inner.set("where", exp.Where(this=fails_on("t.pid")))
            value = inner.expressions[1].unalias()  # SUM(LEAST(GREATEST(TRY(income), lo), hi))
            value.this.this.set("this", exp.Case(ifs=[exp.If(this=fails_on("t.pid"), true=exp.column("income", "t"))]))
        else:
            source.set("where", exp.Where(this=fails_on("v.pid")))
            on = source.args["joins"][0].args["on"]
            source.args["joins"][0].set("on", exp.and_(on, fails_on("t.pid")))
        poisoned = dataclasses.replace(plan, source=source)
        plane = gw._plane("spark")
        with expressions_may_fail(plane):
            others = [u for u in range(600) if u != 5]
            rows = plane.bounded_rows(poisoned, _charged(others), 1, 1)
            assert rows  # every other subject's rows were read
            with pytest.raises(Exception, match="CAST_INVALID_INPUT"):  # the test can fail: 5 charged
                plane.bounded_rows(poisoned, _charged([5, 6]), 1, 1)


@pytest.mark.parametrize("sql", [
    "SELECT COUNT(*) FROM t LEFT JOIN v ON t.pid = v.pid",
    "SELECT COUNT(*) FROM t JOIN v USING (pid)",
])  # fmt: skip
def test_shapes_spark_does_not_write_are_refused_free(worlds, sql):
    from dpgate import errors

    _, twin = worlds["within"]
    with harness.gateways(twin) as (gw,):
        with pytest.raises(errors.Error) as e:
            harness.plan_statement(gw, sql)
    assert e.value.code in ("DP261", "DP250", "DP251", "DP252"), e.value


@pytest.mark.parametrize("sql", [JOINS[0], PER_SUBJECT[1]])
def test_keys_inputs_and_outer_conditions_see_charged_rows_only(spark, worlds, sql):
    """As above for the parts that test leaves alone: a join's GROUP BY key and aggregate input, and
    the per-subject subquery's outer WHERE and COUNT input, each failing on subject 5's rows under
    ANSI mode: clean when 5 is not charged, failing when it is [charged-only]."""
    _, twin = worlds["within"]
    with harness.gateways(twin) as (gw,):
        plan = harness.plan_statement(gw, sql)[1]
        source = plan.source.copy()
        if plan.prebound:
            source.set("where", exp.Where(this=exp.and_(source.args["where"].this, fails_on("p.pid"))))
            inner = source.args["from_"].this.this
            inner.set("expressions", [*inner.expressions, exp.alias_(exp.Count(this=exp.Case(
                ifs=[exp.If(this=fails_on("t.pid"), true=exp.column("age", "t"))])), "poison")])
        else:
            poisoned_columns = [e for e in source.expressions if e.alias != "__unit"]  # the keys and inputs
            assert len(poisoned_columns) >= 2
            for e in poisoned_columns:
                e.set("this", exp.Case(ifs=[exp.If(this=fails_on("t.pid"), true=e.this.copy())]))
        poisoned = dataclasses.replace(plan, source=source)
        plane = gw._plane("spark")
        with expressions_may_fail(plane):
            others = [u for u in range(600) if u != 5]
            assert plane.bounded_rows(poisoned, _charged(others), 1, 1)
            with pytest.raises(Exception, match="CAST_INVALID_INPUT"):  # the test can fail: 5 charged
                plane.bounded_rows(poisoned, _charged([5, 6]), 1, 1)
