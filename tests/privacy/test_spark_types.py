"""FLOAT, wide DECIMALs, the simple CASE, NaN domains and CHAR(n) on Spark: equal to DuckDB, or refused.

Each of these statements was once answered differently by the two engines on the
same rows (none a privacy break; docs/spark.md promises equal statistics without sampling, or a free
refusal, DP261): DuckDB compares and divides a FLOAT in FLOAT, Spark (as dpgate wrote it) in DOUBLE;
``CASE s WHEN 10`` compared text with a number unchecked; DuckDB makes a DOUBLE of an 18-digit
DECIMAL with two roundings, Spark with one; DuckDB keeps 18 digits for DECIMAL arithmetic and gives
NULL past them, Spark widens; a NaN domain value reached DuckDB as NULL; Spark compares CHAR(n)
padded. A negative literal in IN was refused though nothing could overflow, and a DECIMAL key's
domain failed Spark's bind.
"""

from __future__ import annotations

import pytest

import harness
from conftest import duckdb_and_spark
from dpgate import errors
from dpgate.catalog.owner import Owner

ANALYSTS = {harness.ANALYST: {"epsilon": 1e6, "delta": 1.0, "epsilon_per_query": 100.0, "delta_per_query": 0.5}}

#: One row per subject (nothing sampled): a FLOAT column, text that DuckDB reads as numbers or dates,
#: 18-digit DECIMALs (one that DuckDB and Spark make different DOUBLEs of), NaN and a narrow DECIMAL.
MIXED_TYPES = """
CREATE TABLE r AS SELECT * FROM (VALUES
  (1, '1e1', 0.1::FLOAT, -9485287166563617.63::DECIMAL(18, 2), -27277205.8840884416::DECIMAL(18, 10), 'NaN'::DOUBLE, 1.25::DECIMAL(10, 2)),
  (2, '12.7', 0.7::FLOAT, 1.00::DECIMAL(18, 2), 1.0::DECIMAL(18, 10), 0.0::DOUBLE, 0.5::DECIMAL(10, 2)),
  (3, ' 7', 2.5::FLOAT, 2.00::DECIMAL(18, 2), 2.0::DECIMAL(18, 10), -0.0::DOUBLE, 0.5::DECIMAL(10, 2)),
  (4, '2020', 3.0::FLOAT, 3.00::DECIMAL(18, 2), 3.0::DECIMAL(18, 10), 2.5::DOUBLE, 1.25::DECIMAL(10, 2)),
  (5, 'abc', 1.1::FLOAT, 4.00::DECIMAL(18, 2), 4.0::DECIMAL(18, 10), 'NaN'::DOUBLE, 1.25::DECIMAL(10, 2)),
  (6, NULL, NULL, NULL, NULL, NULL, NULL)
) v(pid, s, f, dw, dx, x, dc)
"""
MIXED_TYPES_PROTECT = {"r": {"unit": "pid", "max_rows": 1, "epsilon": 1e6, "bounds": {"f": (-10, 10)},
                      "domains": {"f": [0.1, 0.7, 2.5, 3.0, 1.1], "x": [0.0, 2.5, float("nan")],
                                  "dc": [0.5, 1.25]}}}



@pytest.fixture(scope="module")
def engines(spark, tmp_path_factory):
    path = tmp_path_factory.mktemp("mixed_types") / "mixed_types.duckdb"
    return duckdb_and_spark(spark, path, MIXED_TYPES, MIXED_TYPES_PROTECT, analysts=ANALYSTS)


@pytest.mark.parametrize("sql", [
    # DuckDB compares FLOAT with a DECIMAL literal, and divides a FLOAT, in FLOAT; Spark in DOUBLE
    "SELECT COUNT(*) FROM r WHERE f = 0.7",
    "SELECT COUNT(*) FROM r WHERE f > 0.1",
    "SELECT COUNT(*) FROM r WHERE f / 3 > 0.0333333333",
    "SELECT SUM(f / 3) FROM r",
    "SELECT f + 0.5, COUNT(*) FROM r GROUP BY 1",  # a domain image computed in FLOAT
    # the simple CASE compares text with a number / a date, unchecked
    "SELECT COUNT(*) FROM r WHERE CASE s WHEN 10 THEN true ELSE false END",
    "SELECT SUM(CASE s WHEN 13 THEN 1 ELSE 0 END) FROM r",
    "SELECT SUM(CASE s WHEN DATE '2020-01-01' THEN 1 ELSE 0 END) FROM r",
    # DECIMAL -> DOUBLE / FLOAT: DuckDB double-rounds (int64 -> double, then / 10^s), Spark rounds once
    "SELECT COUNT(*) FROM r WHERE CAST(dw AS DOUBLE) < -9485287166563617",
    "SELECT COUNT(*) FROM r WHERE dw / 1 < -9485287166563617",
    # ... also in a CASE or COALESCE nested in a CASE's ELSE
    "SELECT COUNT(*) FROM r WHERE CASE WHEN pid > 100 THEN 0.0 ELSE CASE WHEN pid > 0 THEN dw ELSE x END END < -9485287166563617",
    "SELECT COUNT(*) FROM r WHERE CASE WHEN pid > 100 THEN 0.0 ELSE COALESCE(dw, x) END < -9485287166563617",
    "SELECT COUNT(*) FROM r WHERE CASE WHEN pid > 100 THEN 0.0 ELSE IF(pid > 0, dw, x) END < -9485287166563617",
    "SELECT COUNT(*) FROM r WHERE CAST(dx AS FLOAT) < -27277205",
    # DuckDB keeps DECIMAL(18, s) for + - * of operands of at most 18 digits (overflow: NULL); Spark widens
    "SELECT COUNT(*) FROM r WHERE dw * 1.5 < 0",
    "SELECT COUNT(*) FROM r WHERE dw + dw < 0",
    "SELECT COUNT(dw * dw) FROM r",
    # a declared NaN domain value: DuckDB's list parameter turns it into NULL (NaN rows fall outside the
    # domain), Spark's literal keeps it (DuckDB {0: 2, 1: 1, 2: 0}, Spark {0: 2, 1: 1, 2: 2})
    "SELECT x, COUNT(*) FROM r GROUP BY x",
    "SELECT x / 0, COUNT(*) FROM r GROUP BY 1",  # an image domain holding NaN
    # refused (DP230, though DuckDB answers): a DECIMAL key's image domain is typed as DuckDB's DECIMAL(18, 2),
    # Spark's key is DECIMAL(21, 2): array_position refuses the mix at Spark's bind
    "SELECT dc * 2, COUNT(*) FROM r GROUP BY 1",
])
def test_spark_equals_duckdb_or_refuses(engines, sql):
    """The promise of docs/spark.md: without sampling, Spark's statistics equal DuckDB's, or the statement is refused (DP261)."""
    duck, spark = engines
    with harness.gateways(duck, spark) as (gd, gs):
        a = harness.statistics_of(gd, sql).values()
        try:
            b = harness.statistics_of(gs, sql).values()
        except harness.errors.Error as e:
            assert e.code == "DP261", (sql, e)
            return
    assert a == b, sql


@pytest.mark.parametrize("sql", [
    "SELECT COUNT(*) FROM r WHERE CAST(f AS DOUBLE) > 0.1",  # FLOAT made a DOUBLE first: exact on both
    "SELECT SUM(f), AVG(f) FROM r",
    "SELECT x, COUNT(*) FROM r GROUP BY x",  # a NaN domain value counts its rows on both engines
    "SELECT x / 0, COUNT(*) FROM r GROUP BY 1",
    "SELECT COUNT(*) FROM r WHERE dc * 2 > 1",  # at most 18 digits: exact on both
    "SELECT dc * 2, COUNT(*) FROM r GROUP BY 1",  # a DECIMAL key's domain (failed Spark's bind)
    "SELECT COUNT(*) FROM r WHERE CAST(dc AS DOUBLE) > 0.6",  # a DECIMAL of 10 digits converts alike
    "SELECT COUNT(*) FROM r WHERE dw > 2",  # an 18-digit DECIMAL compared with an integer: exact
    "SELECT COUNT(*) FROM r WHERE CASE pid WHEN 2 THEN true ELSE false END",
    "SELECT COUNT(*) FROM r WHERE pid IN (-1, 2) OR pid BETWEEN -3 AND 3",
])
def test_what_both_engines_compute_alike_is_answered(engines, sql):
    duck, spark = engines
    with harness.gateways(duck, spark) as (gd, gs):
        assert harness.statistics_of(gd, sql).values() == harness.statistics_of(gs, sql).values(), sql


def test_a_negative_literal_in_an_in_list_is_answered(engines):
    """A negative literal in IN (...) was refused on Spark though nothing can overflow."""
    duck, spark = engines
    sql = "SELECT COUNT(*) FROM r WHERE pid IN (-1, 2)"
    with harness.gateways(duck, spark) as (gd, gs):
        assert harness.statistics_of(gd, sql).values() == harness.statistics_of(gs, sql).values()


def test_a_char_column_is_refused(spark, tmp_path):
    """A CHAR(n) column of a catalog table was declared VARCHAR (its stub), but Spark compares it with
    pad semantics: c = 'ab' held for the stored 'ab   ' on Spark (10 rows), not on DuckDB (0). Refused
    at protect (DP342), with the way out in the hint."""
    spark.sql(f"CREATE TABLE char_ct (pid BIGINT, c CHAR(5)) USING parquet LOCATION '{tmp_path / 'ct'}'")
    try:
        spark.sql("INSERT INTO char_ct SELECT id, CASE WHEN id % 2 = 0 THEN 'ab' ELSE 'cd' END FROM range(20)")
        twin = tmp_path / "ct_spark.duckdb"
        with Owner(twin, spark=spark) as owner:
            owner.set_spark("local[2]")
            with pytest.raises(errors.PolicyError) as e:
                owner.protect("char_ct", unit="pid", max_rows=1, public_roster=True, epsilon=1e6,
                              spark="default.char_ct")  # fmt: skip
        assert e.value.code == "DP342" and "char(5)" in e.value.message and "STRING" in e.value.hint
    finally:
        spark.sql("DROP TABLE IF EXISTS char_ct")


def test_declared_values_spark_would_read_otherwise_count_alike(spark, tmp_path):
    """A GROUP BY key's declared values are what DuckDB reads them as (1e16 as the BIGINT 10^16, '1e1'
    and '0x10' as the INTEGERs 10 and 16, 1.5 as 2), written for Spark exactly: Spark's own cast of
    their text read 10^16 and '1e1' as NULL, 1.5 as 1, so those cells counted nothing on Spark."""
    rows = ("CREATE TABLE k AS SELECT i AS pid, CAST([10000000000000000, 7][i % 2 + 1] AS BIGINT) AS n, "
            "CAST([10, 16, 2, 5][i % 4 + 1] AS INTEGER) AS m FROM range(200) r(i)")  # fmt: skip
    protect = {"k": {"unit": "pid", "max_rows": 1, "epsilon": 1e6,
                     "domains": {"n": [1e16, 7], "m": ["1e1", "0x10", 1.5, 5]}}}  # fmt: skip
    duck, on_spark = duckdb_and_spark(spark, tmp_path / "k.duckdb", rows, protect, analysts=ANALYSTS)
    with harness.gateways(duck, on_spark) as (gd, gs):
        for sql in ("SELECT n, COUNT(*) FROM k GROUP BY n", "SELECT m, COUNT(*) FROM k GROUP BY m"):
            a, b = harness.statistics_of(gd, sql), harness.statistics_of(gs, sql)
            counts = next(s for name, s in a.stats.items() if "COUNT" in name).values
            assert all(v > 0 for v in counts.values()), (sql, counts)  # every declared value holds rows
            assert a.values() == b.values(), sql
