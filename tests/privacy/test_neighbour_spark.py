"""The Spark data plane: the same exact statistics as DuckDB, and the neighbour harness on Spark.

Two database files plan every statement alike: one holds the rows in DuckDB, its twin reads the
same rows from Parquet through a local Spark (``conftest.spark_twin``). Without sampling (no subject
over its bound) every statistic the mechanisms perturb is equal on both engines. With sampling the
engines' keyed hashes differ, so only what sampling cannot change (the row counts) is compared;
the neighbour harness then checks, on Spark, that the statistics of D and of D′ (one subject's rows
changed, or removed) differ by at most the declared sensitivities, with a fixed salt as for DuckDB.
"""

from __future__ import annotations

import shutil

import pytest

import harness
from conftest import duckdb_and_spark, spark_neighbours, spark_worlds

ROWS = """
CREATE TABLE t AS SELECT
  i // 3 AS pid,
  ['sales', 'ops', 'it', 'hr'][i % 4 + 1] AS dept,
  CASE WHEN i % 17 = 0 THEN NULL ELSE 'c' || (i % 7) END AS city,
  CASE WHEN i % 23 = 0 THEN NULL WHEN i % 29 = 0 THEN 'NaN'::DOUBLE ELSE (i * 37 % 1000) / 3.0 - 20 END AS income,
  CAST((i * 13) % 90 + 5 AS INTEGER) AS age,
  DATE '2024-01-01' + CAST(i % 30 AS INTEGER) AS d,
  i % 5 = 0 AS flag,
  CAST((i % 1000) / 7.0 AS DECIMAL(10, 2)) AS amount
FROM range(1500) r(i)
"""
#: Subjects 0..39 get six more rows each: they are over max_rows = 3 and sampled.
HEAVY = "; INSERT INTO t SELECT * REPLACE (age + 1 AS age, income + 1 AS income) FROM t WHERE pid < 40; " \
        "INSERT INTO t SELECT * REPLACE (age + 2 AS age, dept || '' AS dept) FROM t WHERE pid < 40"
PROTECT = {
    "t": {
        "unit": "pid", "max_rows": 3, "epsilon": 1e6,
        "domains": {"dept": ["sales", "ops", "it"], "flag": [True, False]},
        "bounds": {"income": (0, 300), "age": (10, 90), "amount": (0, 150), "d": ("2024-01-01", "2024-01-30")},
    }
}  # fmt: skip
ANALYSTS = {harness.ANALYST: {"epsilon": 1e6, "delta": 1.0, "epsilon_per_query": 100.0, "delta_per_query": 0.5}}

STATEMENTS = [
    "SELECT dept, COUNT(*) FROM t GROUP BY dept",
    "SELECT dept, SUM(income), AVG(income) FROM t GROUP BY dept",
    "SELECT dept, VARIANCE(age), STDDEV(income) FROM t WHERE flag GROUP BY dept",
    "SELECT MEDIAN(age) FROM t",
    "SELECT COUNT(DISTINCT pid) FROM t WHERE age * 2 + 1 > 50",
    "SELECT dept, COUNT(income) FROM t WHERE CAST(age AS VARCHAR) LIKE '3%' GROUP BY dept",
    "SELECT city, COUNT(*) FROM t GROUP BY city",
    "SELECT SUM(amount) FROM t WHERE d BETWEEN DATE '2024-01-05' AND DATE '2024-01-20'",
    "SELECT age, COUNT(*) FROM t GROUP BY age",
    "SELECT dept, SUM(age / 2), COUNT(age / 0), COUNT(*) FROM t GROUP BY dept",
    "SELECT flag, AVG(amount) FROM t WHERE income IS NULL OR dept IN ('sales', 'it') GROUP BY flag",
    # division by zero as IEEE 754: NaN (income holds NaN) and -0.0 divisors (income * 0 for income < 0)
    "SELECT dept, COUNT(*) FROM t WHERE income / 0 <> 1 / 0 OR 1 / (income * 0) < 0 GROUP BY dept",
    # alone: the other disjunct above already counts the rows whose income * 0 is -0.0
    "SELECT dept, COUNT(*) FROM t WHERE 1 / (income * 0) < 0 GROUP BY dept",
    "SELECT dept, COUNT(*) FROM t WHERE income / (income * 0) > 0 GROUP BY dept",
    # runs of '%' are one '%' (written so for Spark, whose regular expression would backtrack per run)
    "SELECT dept, COUNT(*) FROM t WHERE city LIKE '%%c3%%' AND city NOT LIKE '%%9' GROUP BY dept",
    "SELECT dept, SUM(CASE WHEN age > 40 THEN income ELSE -income END) FROM t GROUP BY dept",
    # DuckDB's LIKE has no escape character: a backslash is itself (Spark's default escape would
    # make '\2' malformed, a failure Spark can raise on the first row it evaluates)
    r"SELECT dept, COUNT(*) FROM t WHERE (city || '\2') LIKE 'c%\2' AND city NOT LIKE '%!%' GROUP BY dept",
    # dates: DuckDB's DATE - DATE is days (Spark's an interval), DATE - n a date; an alias; DECIMAL casts
    "SELECT q.dept, AVG(q.d - DATE '2024-01-01'), COUNT(*) FROM t AS q WHERE q.d - 3 > DATE '2024-01-10' GROUP BY q.dept",
    "SELECT SUM(CAST(amount AS DECIMAL(10, 1))), SUM(CAST(city = 'c3' AS INTEGER)) FROM t",
    # casts to integers round as DuckDB does (Spark truncates): a DOUBLE half to even (income / 2
    # holds halves), a DECIMAL half away from zero (amount + 0.36 holds halves); text of an integer
    "SELECT dept, SUM(CAST(income / 2 AS INTEGER)), COUNT(*) FROM t WHERE CAST(income AS BIGINT) > 100 GROUP BY dept",
    "SELECT flag, SUM(CAST(amount + 0.36 AS INTEGER)), COUNT(*) FROM t WHERE CAST(' 7 ' AS INTEGER) = 7 GROUP BY flag",
    # a wide integer range puts VARIANCE's inputs on a grid of 4: age * 100001 / 4 has halves,
    # which both engines round to even (DuckDB's CAST(DOUBLE AS BIGINT); bround on Spark)
    "SELECT dept, VARIANCE(age * 100001) FROM t GROUP BY dept",
]


#: Statements checked against the added subject too (their inputs are the extreme values it brings).
ADDED = [sql for sql in STATEMENTS if any(f in sql for f in ("SUM(", "AVG(", "VARIANCE(", "MEDIAN(", "city,"))]



@pytest.fixture(scope="module")
def worlds(spark, tmp_path_factory):
    """(DuckDB, Spark) file pairs: 'within' (no subject over its bound) and 'heavy' (40 sampled)."""
    return spark_worlds(spark, tmp_path_factory, ROWS, HEAVY, PROTECT, analysts=ANALYSTS)


def test_spark_statistics_equal_duckdb_without_sampling(worlds):
    duck, spark = worlds["within"]
    with harness.gateways(duck, spark) as (gd, gs):
        for sql in STATEMENTS:
            a, b = harness.statistics_of(gd, sql), harness.statistics_of(gs, sql)
            assert any(any(v for v in s.values.values()) for s in a.stats.values()), sql  # not all zero
            if a.plan.bound_groups:
                # Each subject keeps max_groups of its groups, chosen by the engine's keyed hash: only the
                # total number of (subject, group) pairs is the same on both engines.
                totals = [sum(x.stats["key selection subjects"].values.values()) for x in (a, b)]
                assert totals[0] == totals[1] == 500, sql
                continue
            assert a.values() == b.values(), sql


def test_spark_personalization_parts_equal_duckdb(worlds):
    """Two partitions of subjects (personalization 'partition'): per-part statistics agree."""
    duck, spark = worlds["within"]
    sql = "SELECT dept, COUNT(*), SUM(income) FROM t GROUP BY dept"
    with harness.gateways(duck, spark) as (gd, gs):
        got = []
        for gw in (gd, gs):
            plan = harness.plan_statement(gw, sql)[1]
            charged = f"(SELECT unit, CAST(unit % 2 AS INTEGER) AS part FROM {plan.table.roster_table_sql})"
            with harness.backends.planes(gw._plane):
                got.append(harness.exact_statistics(gw._con, plan, charged=charged, n_parts=2).values())
    assert got[0] == got[1]
    assert any(" part 1" in name for name in got[0])


def test_spark_row_counts_equal_duckdb_with_sampling(worlds):
    """Sampling keeps min(rows, max_rows) rows of every subject on either engine."""
    duck, spark = worlds["heavy"]
    with harness.gateways(duck, spark) as (gd, gs):
        for sql in ("SELECT COUNT(*) FROM t", "SELECT dept, COUNT(*) FROM t WHERE dept <> 'ops' GROUP BY dept"):
            a, b = harness.statistics_of(gd, sql), harness.statistics_of(gs, sql)
            if "GROUP BY" not in sql:
                assert a.values() == b.values() == {"agg 0 COUNT(*) [count]": {0: 1500}}
            else:  # per cell the sample may differ; the total kept rows may not
                assert sum(next(iter(a.values().values())).values()) == sum(next(iter(b.values().values())).values())


@pytest.fixture(scope="module")
def neighbours(spark, tmp_path_factory, worlds):
    """Spark twins of D (heavy) and of two neighbours (add / remove one subject with all their rows):
    heavy subject 7 (nine rows, sampled down to three) removed, and a new subject 9999 with eight
    extreme rows (huge and NaN incomes, out-of-bounds ages, a department outside the domain) added."""
    base = worlds["heavy"][1]
    return base, spark_neighbours(spark, tmp_path_factory, ROWS + HEAVY, {
        "removed": "DELETE FROM t WHERE pid = 7",
        "added": "INSERT INTO t SELECT 9999 AS pid, CASE WHEN i % 2 = 0 THEN 'it' ELSE 'hr' END, 'c99', "
                 "CASE WHEN i = 3 THEN 'NaN'::DOUBLE ELSE 1e9 END, 200 + i, DATE '2024-01-07', i % 2 = 0, "
                 "149.99 FROM range(8) r(i)",
    }, PROTECT, analysts=ANALYSTS)


def test_neighbour_harness_on_spark(neighbours):
    base, pairs = neighbours
    with harness.gateways(base, *(path for _, path in pairs)) as (gd, *gns):
        for sql in STATEMENTS:
            before = harness.statistics_of(gd, sql)  # D once, against each neighbour
            for (name, _), gn in zip(pairs, gns):
                if name == "added" and sql not in ADDED:
                    continue  # the added subject's extreme values matter for the value statements
                harness.check_statement(gd, gn, sql, context=f"spark, {name}: {sql}", before=before)


def test_neighbour_harness_on_spark_per_query(neighbours, tmp_path):
    """The same worlds sampling per query (``sample_order = 'per_query'``): the statement's salt, not
    the tables' kept key, ranks the rows (the harness above runs on the kept key, coupled)."""
    base, pairs = neighbours
    copies = []
    for path in (base, *(p for _, p in pairs)):
        copy = tmp_path / path.name
        shutil.copy(path, copy)
        harness.sample_per_query(copy)
        copies.append(copy)
    with harness.gateways(*copies) as (gd, *gns):
        for sql in STATEMENTS[:4]:
            before = harness.statistics_of(gd, sql)
            for (name, _), gn in zip(pairs, gns):
                harness.check_statement(gd, gn, sql, context=f"spark per query, {name}: {sql}", before=before)


def test_neighbour_harness_on_spark_can_fail(neighbours):
    """The harness sees the neighbour on Spark: with every bound at 1% some statistic exceeds it."""
    base, pairs = neighbours
    with harness.gateways(base, pairs[0][1]) as (gd, gn):
        sql = "SELECT dept, SUM(income), COUNT(*) FROM t GROUP BY dept"
        before, after = harness.statistics_of(gd, sql), harness.statistics_of(gn, sql)
    assert harness.compare(before, after, scale=0.01)


#: Rows at the edges of their types: the minimum INTEGER and BIGINT,
#: NaN, ±Infinity, -0.0, halves. One row per subject: nothing is sampled.
EDGES = """
CREATE TABLE e AS SELECT * FROM (VALUES
  (1, -2147483648, -9223372036854775808, 'NaN'::DOUBLE, 2.5::DECIMAL(10, 2)),
  (2, 2147483647, 9223372036854775807, 'Infinity'::DOUBLE, -2.5::DECIMAL(10, 2)),
  (3, 0, 0, '-Infinity'::DOUBLE, 0.5::DECIMAL(10, 2)),
  (4, -7, -7, -0.0::DOUBLE, 1.5::DECIMAL(10, 2)),
  (5, 7, 7, 2.5::DOUBLE, 3.5::DECIMAL(10, 2)),
  (6, NULL, NULL, NULL, NULL)
) v(pid, i, b, x, dc)
"""
EDGE_PROTECT = {"e": {"unit": "pid", "max_rows": 1, "epsilon": 1e6, "bounds": {"x": (-10, 10), "i": (-10, 10), "dc": (-10, 10)}}}
EDGE_STATEMENTS = [
    "SELECT COUNT(ABS(b)), COUNT(ABS(i)), COUNT(*) FROM e WHERE ABS(i) >= 0",
    "SELECT COUNT(*) FROM e WHERE x / 0 <> 1 / 0 OR 1 / (x * 0) < 0",
    "SELECT COUNT(CAST(x AS INTEGER)), SUM(CAST(x AS INTEGER)), SUM(CAST(dc AS INTEGER)) FROM e",
    "SELECT COUNT(CAST(CAST(b AS DOUBLE) AS BIGINT)), COUNT(*) FROM e",
]


@pytest.fixture(scope="module")
def edges(spark, tmp_path_factory):
    return duckdb_and_spark(spark, tmp_path_factory.mktemp("edges") / "edges.duckdb", EDGES, EDGE_PROTECT,
                            analysts=ANALYSTS)  # fmt: skip


@pytest.mark.parametrize("sql", EDGE_STATEMENTS)
def test_spark_statistics_equal_duckdb_at_the_edges_of_types(edges, sql):
    duck, spark = edges
    with harness.gateways(duck, spark) as (gd, gs):
        assert harness.statistics_of(gd, sql).values() == harness.statistics_of(gs, sql).values(), sql
