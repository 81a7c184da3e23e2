"""Spark data plane: charged statements that must not fail, and answers that must not depend on
what earlier statements left in the plane (``dpgate.backends.spark``)."""

from __future__ import annotations

import pytest

import dpgate
from dpgate import errors
from conftest import duckdb_and_spark

#: t and v share one subject space under different unit names; a, b, c are other subject spaces.
ROWS = """
CREATE TABLE t AS SELECT i // 2 AS pid, CAST(i % 7 AS INTEGER) AS x FROM range(200) r(i);
CREATE TABLE v AS SELECT i // 3 AS person, CAST(i % 5 AS INTEGER) AS y FROM range(300) r(i);
CREATE TABLE a AS SELECT i + 1000 AS pid FROM range(50) r(i);
CREATE TABLE b AS SELECT i + 2000 AS pid FROM range(50) r(i);
CREATE TABLE c AS SELECT i + 3000 AS pid FROM range(50) r(i);
"""
PROTECT = {
    "t": {"unit": "pid", "max_rows": 2, "epsilon": 1e6, "subjects": "people", "bounds": {"x": (0, 10)}},
    "v": {"unit": "person", "max_rows": 3, "epsilon": 1e6, "subjects": "people", "bounds": {"y": (0, 10)}},
    "a": {"unit": "pid", "max_rows": 1, "epsilon": 1e6},
    "b": {"unit": "pid", "max_rows": 1, "epsilon": 1e6},
    "c": {"unit": "pid", "max_rows": 1, "epsilon": 1e6},
}
ANALYSTS = {"alice": {"epsilon": 1e6, "delta": 1.0, "epsilon_per_query": 100.0, "delta_per_query": 0.5}}


@pytest.fixture(scope="module")
def twin(spark, tmp_path_factory):
    return duckdb_and_spark(spark, tmp_path_factory.mktemp("audit") / "audit.duckdb", ROWS, PROTECT, analysts=ANALYSTS)[1]


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
