"""Spark data plane: charged statements that must not fail, and answers that must not depend on
what earlier statements left in the plane (``dpgate.backends.spark``)."""

from __future__ import annotations

import pytest

import dpgate
from dpgate import errors
from dpgate.backends.spark import plane as spark_plane
from dpgate.backends.spark import rows as spark_rows
from dpgate.backends.spark.translate import MAX_SPARK_SQL
from conftest import duckdb_and_spark

#: t and v share one subject space under different unit names; a, b, c are other subject spaces.
ROWS = """
CREATE TABLE t AS SELECT i // 2 AS pid, CAST(i % 7 AS INTEGER) AS x, 'c' || (i % 5) AS city FROM range(200) r(i);
CREATE TABLE v AS SELECT i // 3 AS person, CAST(i % 5 AS INTEGER) AS y FROM range(300) r(i);
CREATE TABLE w AS SELECT i // 2 AS pid, CAST(i % 3 AS INTEGER) AS z FROM range(200) r(i);
CREATE TABLE a AS SELECT i + 1000 AS pid FROM range(50) r(i);
CREATE TABLE b AS SELECT i + 2000 AS pid FROM range(50) r(i);
CREATE TABLE c AS SELECT i + 3000 AS pid FROM range(50) r(i);
"""
PROTECT = {
    "t": {"unit": "pid", "max_rows": 2, "epsilon": 1e6, "subjects": "people", "bounds": {"x": (0, 10)}},
    "v": {"unit": "person", "max_rows": 3, "epsilon": 1e6, "subjects": "people", "bounds": {"y": (0, 10)}},
    "w": {"unit": "pid", "max_rows": 2, "epsilon": 1e6, "subjects": "people", "bounds": {"z": (0, 10)}},
    "a": {"unit": "pid", "max_rows": 1, "epsilon": 1e6},
    "b": {"unit": "pid", "max_rows": 1, "epsilon": 1e6},
    "c": {"unit": "pid", "max_rows": 1, "epsilon": 1e6},
}
ANALYSTS = {"alice": {"epsilon": 1e6, "delta": 1.0, "epsilon_per_query": 100.0, "delta_per_query": 0.5}}


@pytest.fixture(scope="module")
def twin(spark, tmp_path_factory):
    path = tmp_path_factory.mktemp("audit") / "audit.duckdb"
    return duckdb_and_spark(spark, path, ROWS, PROTECT, analysts=ANALYSTS)[1]


def test_join_after_the_charged_sets_cache_filled(spark, twin):
    """A join whose first table's charged units are the oldest kept set: keeping the second table's
    units must not drop the first's while the statement uses them (a charged statement failing
    after the debit, DP404, because of what earlier statements left in the plane)."""
    with dpgate.connect(str(twin), analyst="alice", spark=spark, test_seed=1) as con:
        cur = con.cursor()
        for table in ("t", "a", "b", "c"):  # four charged sets kept, t's the oldest
            cur.execute(f"SELECT COUNT(*) FROM {table}").fetchall()
        cur.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (max_rows_contributed = 6) COUNT(*) "
                    "FROM t JOIN v ON t.pid = v.person")  # fmt: skip
        assert cur.fetchall()


def test_size_cap_of_a_join_is_decided_before_the_debit(spark, twin):
    """The cap on a join's Spark SQL is decided on the text the check before the debit sees: the
    salt (up to 19 digits where the check writes 0) and the views' names must not push a statement
    over it after the debit, a refusal (DP261, "nothing was charged") after the ε was spent."""
    lengths: list[int] = []
    real = spark_rows.source

    def measured(*args, **kwargs):
        out = real(*args, **kwargs)
        lengths.append(len(out))
        return out

    def sql(pad: int) -> str:  # 33 conditions, the last literal padded by ``pad`` characters
        terms = [f"t.city <> '{'z' * 3000}'"] * 32 + [f"t.city <> '{'z' * pad}'"]
        return ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (max_rows_contributed = 6) COUNT(*) "
                f"FROM t JOIN v ON t.pid = v.person WHERE {' AND '.join(terms)}")  # fmt: skip

    with pytest.MonkeyPatch.context() as mp, dpgate.connect(str(twin), analyst="alice", spark=spark,
                                                            test_seed=1) as con:  # fmt: skip
        mp.setattr(spark_rows, "source", measured)
        cur = con.cursor()
        cur.execute(sql(1)).fetchall()
        checked = lengths[0]  # the check before the debit: salt 0
        lengths.clear()
        left = _remaining(con)
        try:
            cur.execute(sql(1 + MAX_SPARK_SQL - checked - 8)).fetchall()  # 8 characters under the cap when checked
        except errors.Error as e:
            assert _remaining(con) == left, f"{e.code} after the debit: {e.message}"


def _remaining(con) -> float:
    return next(r for r in con.cursor().execute("SHOW BUDGET").fetchall() if r[0] == "analyst alice")[1]


BUDGETS = """
CREATE TABLE p AS SELECT i // 2 AS pid, CAST(i % 7 AS INTEGER) AS x, (i // 2) % 3 * 2 + 0.3 AS eps FROM range(300) r(i)
"""


@pytest.mark.parametrize("sql", [
    "SELECT COUNT(*), AVG(n) FROM (SELECT pid, COUNT(*) AS n FROM p GROUP BY pid) s",
    "SELECT AVG(m) FROM (SELECT pid, MAX(x) AS m FROM p WHERE x > 1 GROUP BY pid) s WHERE m > 2",
])  # fmt: skip
def test_per_subject_under_personalized_budgets(spark, tmp_path_factory, sql):
    """Subjects with three different budgets, asked at an ε above the smallest: the sample rule runs
    the per-subject statement over several parts of subjects after the debit, where the check
    before it wrote one part; the statement answers."""
    spec = {"p": {"unit": "pid", "max_rows": 2, "budget_column": "eps", "bounds": {"x": (0, 10)}}}
    twin = duckdb_and_spark(spark, tmp_path_factory.mktemp("budgets") / "b.duckdb", BUDGETS, spec, analysts=ANALYSTS)[1]
    parts: list[int] = []
    real = spark_plane.statement

    def counted(*args, **kwargs):
        parts.append(args[5])
        return real(*args, **kwargs)

    with pytest.MonkeyPatch.context() as mp, dpgate.connect(str(twin), analyst="alice", spark=spark,
                                                            test_seed=1) as con:  # fmt: skip
        mp.setattr(spark_plane, "statement", counted)
        cur = con.cursor()
        cur.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, personalization = 'sample') "
                    + sql.removeprefix("SELECT "))  # fmt: skip
        assert cur.fetchall()
    assert parts[0] == 1 and parts[-1] > 1, parts  # checked with one part, run with several


def test_three_tables_with_a_condition_in_the_first_join(spark, twin):
    """A condition beside the units' equality in the first of two joins is guarded by the tables
    joined so far: the guard over all three named the third table before its join, and Spark could
    not bind the statement (refused, DP230, where DuckDB answers)."""
    with dpgate.connect(str(twin), analyst="alice", spark=spark, test_seed=1) as con:
        cur = con.cursor()
        cur.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (max_rows_contributed = 12) COUNT(*) "
                    "FROM t JOIN v ON t.pid = v.person AND t.x > v.y JOIN w ON w.pid = t.pid")  # fmt: skip
        assert cur.fetchall()
