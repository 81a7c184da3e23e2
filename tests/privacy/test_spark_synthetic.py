"""Tabular synthetic releases over a Spark table: the same codes, the same release, the neighbour harness.

A release over a Spark table reads its codes from Spark (``coding_spark``): each distinct coded row
of the charged subjects' bounded rows and its count. Three things make that the same release as
over DuckDB:

* every value gets the same code on both engines (checked value by value here: bin edges and the
  values next to them, bounds, values outside them, ±inf, NaN, NULL, each type's extremes, values
  outside a declared domain);
* the synthesizers read weighted rows as the rows repeated (``tests/mechanisms/test_mst.py``);
* so with no subject over its bound (nothing sampled) and the same seed, the released tables are
  equal row for row.

Then the neighbour harness on Spark: one subject removed or added moves the coded rows and every
1- and 2-way marginal by at most ``max_rows`` (the sampled case included).
"""

from __future__ import annotations

import os
from decimal import Decimal

import duckdb
import harness
import numpy as np
import pytest
from conftest import duckdb_and_spark, spark_neighbours

import dpgate
from dpgate.backends.spark.source import session_for
from dpgate.catalog.tables import Column
from dpgate.queries.synthetic.coding import ColumnCoding, coding_for, encode_query
from dpgate.queries.synthetic.coding_spark import spark_codes


def _near(values, kind=np.float64):
    """Each value and the next representable one on either side."""
    out = []
    for v in values:
        x = kind(v)
        out += [float(np.nextafter(x, kind(-np.inf))), float(x), float(np.nextafter(x, kind(np.inf)))]
    return out


def _cases() -> list[tuple[ColumnCoding, str, list]]:
    """(coding, DuckDB type, values): every coding kind and the values where engines could differ."""
    cases = []
    real = coding_for(Column("x", "DOUBLE", 0, 300), bins=16)
    cases.append((real, "DOUBLE", _near(real.bin_edges) + [-1.0, 301.0, 1e308, -1e308, 5e-324, -0.0,
                                                           float("inf"), float("-inf"), float("nan"), None]))
    f32 = coding_for(Column("x", "FLOAT", -1, 1), bins=7)
    cases.append((f32, "FLOAT", _near(f32.bin_edges, np.float32) + [3.0e38, -3.0e38, float("inf"), float("nan"), None]))
    dec = coding_for(Column("x", "DECIMAL(10,2)", 0, 10), bins=16)
    step = Decimal("0.01")
    cases.append((dec, "DECIMAL(10,2)", [str(e + d) for e in dec.bin_edges for d in (-step, 0, step)]
                  + ["-99999999.99", "99999999.99", None]))
    wide = coding_for(Column("x", "DECIMAL(38,10)", -1e9, 1e9), bins=32)
    unit = Decimal("1e-10")
    cases.append((wide, "DECIMAL(38,10)", [str(e + d) for e in wide.bin_edges for d in (-unit, 0, unit)]
                  + ["-9999999999999999999999999999.9999999999", "9999999999999999999999999999.9999999999", None]))
    big = coding_for(Column("x", "BIGINT", -(2**63), 2**63 - 1, not_null=True), bins=16)
    near_edges = {min(max(e + d, -(2**63)), 2**63 - 1) for e in big.bin_edges for d in (-1, 0, 1)}
    cases.append((big, "BIGINT", sorted(near_edges)))
    ints = coding_for(Column("x", "INTEGER", 17, 90), bins=16)
    cases.append((ints, "INTEGER", [e + d for e in ints.bin_edges for d in (-1, 0, 1)]
                  + [-(2**31), 2**31 - 1, None]))
    tiny = coding_for(Column("x", "TINYINT", -5, 5), bins=16)
    cases.append((tiny, "TINYINT", list(range(-128, 128, 7)) + [127, None]))
    days = coding_for(Column("x", "DATE", 18262, 18628), bins=16)  # 2020-01-01 .. 2021-01-01 as days
    cases.append((days, "DATE", [f"epoch:{e + d}" for e in days.bin_edges for d in (-1, 0, 1)]
                  + ["1600-01-01", "9999-12-31", "infinity", "-infinity", None]))  # DuckDB's ±infinity: NULL
    few = coding_for(Column("x", "DATE", 18262, 18270), bins=16)
    cases.append((few, "DATE", [f"epoch:{18262 + d}" for d in range(-2, 11)] + [None]))
    cases.append((coding_for(Column("x", "VARCHAR", domain=("a", "b", None, "ü")), bins=16), "VARCHAR",
                  ["a", "b", "c", "", "ü", "A", None]))
    cases.append((coding_for(Column("x", "VARCHAR", domain=(1, "x")), bins=16), "VARCHAR", ["1", "x", "1.0", None]))
    # Spark substitutes ${...} in a statement's text, string literals included, unless told not to
    cases.append((coding_for(Column("x", "VARCHAR", domain=("${env:HOME}", "${spark.app.name}", "a")), bins=16),
                  "VARCHAR", ["${env:HOME}", "${spark.app.name}", os.environ.get("HOME", "/"), "dpgate-tests", "a", None]))
    cases.append((coding_for(Column("x", "INTEGER", domain=(1, 5, 7)), bins=16), "INTEGER", [1, 5, 7, 8, -1, None]))
    # declared values are read as DuckDB reads their text (Spark's cast reads '1.5' as 1, '1e1' as NULL)
    cases.append((coding_for(Column("x", "INTEGER", domain=("1e1", 1.5, "0x10", 4)), bins=16), "INTEGER",
                  [10, 2, 1, 16, 4, None]))
    cases.append((coding_for(Column("x", "BIGINT", domain=(1e16, 7)), bins=16), "BIGINT", [10**16, 7, 1, None]))
    cases.append((coding_for(Column("x", "DATE", domain=("2020-01-01", "infinity", "2021-1-2")), bins=16), "DATE",
                  ["2020-01-01", "infinity", "-infinity", "2021-01-02", None]))
    cases.append((coding_for(Column("x", "BOOLEAN"), bins=16), "BOOLEAN", [True, False, None]))
    cases.append((coding_for(Column("x", "DECIMAL(6,2)", domain=(Decimal("1.5"), 2)), bins=16), "DECIMAL(6,2)",
                  ["1.50", "2.00", "1.49", None]))
    cases.append((coding_for(Column("x", "DOUBLE", domain=(0.1, 0.2, "nan")), bins=16), "DOUBLE",
                  [0.1, 0.2, 0.30000000000000004, float("nan"), None]))
    return cases


def _value_sql(value, sql_type: str) -> str:
    if value is None:
        return f"CAST(NULL AS {sql_type})"
    if isinstance(value, str) and value.startswith("epoch:"):
        return f"(DATE '1970-01-01' + {int(value[6:])})"
    if isinstance(value, float):
        return f"CAST('{value!r}' AS {sql_type})"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f"CAST('{value}' AS {sql_type})"
    return f"CAST({value} AS {sql_type})"


@pytest.mark.parametrize("case", range(len(_cases())))
def test_spark_codes_equal_duckdb_value_by_value(spark, tmp_path, case):
    coding, sql_type, values = _cases()[case]
    rows = ", ".join(f"({i}, {_value_sql(v, sql_type)})" for i, v in enumerate(values))
    path = tmp_path / "values.parquet"
    con = duckdb.connect()
    con.execute(f"CREATE TABLE v AS SELECT * FROM (VALUES {rows}) t(id, x)")
    con.execute(f"COPY v TO '{path}' (FORMAT parquet)")
    ident = ColumnCoding("id", "INTEGER", "integer", lower=0, upper=len(values) - 1)
    duck = sorted(con.execute(encode_query("SELECT * FROM v", [ident, coding])).fetchall())
    own = session_for(spark)  # dpgate's settings: ANSI mode off, UTC
    own.read.parquet(str(path)).createOrReplaceTempView("__values")
    inner, outer = spark_codes([ident, coding])
    sql = (f"SELECT {', '.join(f'{o} AS __c{i}' for i, o in enumerate(outer))} FROM "
           f"(SELECT {', '.join(f'{s} AS {a}' for s, a in inner)} FROM __values __r) __e")  # fmt: skip
    on_spark = sorted(tuple(r) for r in own.sql(sql).collect())
    assert [r[0] for r in duck] == list(range(len(values)))
    assert on_spark == duck, [(values[a[0]], a[1], b[1]) for a, b in zip(duck, on_spark) if a != b]
    assert len({r[1] for r in duck}) > 2  # the values reach several codes (and the test could fail)


ROWS = """
CREATE TABLE t AS SELECT
  i // 2 AS pid,
  ['sales', 'ops', 'it', 'hr'][i % 4 + 1] AS dept,
  CAST((i * 13) % 50 AS INTEGER) AS age,
  CASE WHEN i % 23 = 0 THEN NULL WHEN i % 29 = 0 THEN 'NaN'::DOUBLE ELSE (i * 37 % 1000) / 3.0 - 20 END AS income,
  CAST((i % 11) AS DECIMAL(10, 2)) AS amount,
  DATE '2020-01-01' + CAST(i % 400 AS INTEGER) AS day,
  i % 5 = 0 AS flag
FROM range(1200) r(i)
"""
PROTECT = {
    "t": {
        "unit": "pid", "max_rows": 2, "epsilon": 1e6, "domains": {"dept": ["sales", "ops", "it"]},
        "bounds": {"income": (0, 300), "age": (0, 49), "amount": (0, 10), "day": ("2020-01-01", "2021-01-01")},
    }
}  # fmt: skip
ANALYSTS = {harness.ANALYST: {"epsilon": 1e6, "delta": 1.0, "epsilon_per_query": 100.0, "delta_per_query": 0.5}}
COLUMNS = "dept, age, income, amount, day, flag"


def _release(path, spark, sql: str, name: str):
    with dpgate.connect(str(path), analyst=harness.ANALYST, test_seed=harness.SEED, spark=spark) as con:
        cur = con.cursor()
        cur.execute(sql)
        charged = cur.release.epsilon, cur.release.subjects_charged
        cur.execute(f"SELECT * FROM {name} ORDER BY ALL")
        return cur.fetchall(), charged


@pytest.fixture(scope="module")
def world(spark, tmp_path_factory):
    return duckdb_and_spark(spark, tmp_path_factory.mktemp("syn") / "syn.duckdb", ROWS, PROTECT, analysts=ANALYSTS)


@pytest.mark.parametrize("mechanism", ["mst", "privbayes", "independent"])
def test_spark_release_equals_duckdb_without_sampling(world, spark, mechanism):
    """Two rows per subject and max_rows = 2: nothing is sampled, so the same seed gives the same
    released table, ε and charged subjects on both engines."""
    duck, on_spark = world
    sql = f"CREATE SYNTHETIC TABLE s_{mechanism} FROM t USING {mechanism} WITH (epsilon = 5, columns = '{COLUMNS}')"
    a, b = _release(duck, spark, sql, f"s_{mechanism}"), _release(on_spark, spark, sql, f"s_{mechanism}")
    assert len(a[0]) > 500 and len({r[0] for r in a[0]}) > 2
    assert a == b


def test_spark_release_with_sampling_reads_max_rows_per_subject(world, spark):
    """max_rows_contributed = 1 keeps one of each subject's two rows (each engine's keyed hash picks
    which): as many coded rows on both, different rows."""
    duck, on_spark = world
    sql = "CREATE SYNTHETIC TABLE s FROM t WITH (epsilon = 5, max_rows_contributed = 1, columns = 'age, flag')"
    with harness.gateways(duck, on_spark) as (gd, gs):
        a, b = harness.statistics_of(gd, sql), harness.statistics_of(gs, sql)
    # every row has a code (no column drops one), so both keep one row per subject: 600
    assert sum(a.stats["rows"].values.values()) == sum(b.stats["rows"].values.values()) == 600
    assert a.stats["rows"].values != b.stats["rows"].values  # the engines' hashes differ


@pytest.fixture(scope="module")
def neighbours(spark, tmp_path_factory):
    """Spark twins of D and of two neighbours: subject 7 removed, and a subject 9999 with six rows of
    extreme values (over its bound of two) added."""
    return [twin for _, twin in spark_neighbours(spark, tmp_path_factory, ROWS, {
        "base": "",
        "removed": "DELETE FROM t WHERE pid = 7",
        "added": "INSERT INTO t SELECT 9999, CASE WHEN i < 3 THEN 'hr' ELSE 'it' END, 1000 * i, 'inf'::DOUBLE, "
                 "NULL, DATE '1900-01-01', NULL FROM range(6) r(i)",
    }, PROTECT, analysts=ANALYSTS)]  # fmt: skip


NEIGHBOUR_SQL = [
    f"CREATE SYNTHETIC TABLE s FROM t WITH (epsilon = 2, columns = '{COLUMNS}')",
    "CREATE SYNTHETIC TABLE s FROM t USING independent WITH (epsilon = 2, max_rows_contributed = 1, "
    "columns = 'dept, income, flag')",
]


def test_neighbour_harness_on_spark_synthetic(neighbours):
    base, *others = neighbours
    with harness.gateways(base, *others) as (gd, *gns):
        for sql in NEIGHBOUR_SQL:
            before = harness.statistics_of(gd, sql)
            assert len(before.stats) >= 7 and sum(before.stats["rows"].values.values()) > 400
            for name, gn in zip(("removed", "added"), gns):
                harness.check_statement(gd, gn, sql, context=f"spark synthetic, {name}: {sql}", before=before)


def test_neighbour_harness_on_spark_synthetic_can_fail(neighbours):
    base, _, added = neighbours
    with harness.gateways(base, added) as (gd, gn):
        with pytest.raises(harness.NeighbourViolation):
            harness.check_statement(gd, gn, NEIGHBOUR_SQL[0], scale=0.4)


def test_the_owners_quality_report_codes_a_spark_source_in_spark(world, spark):
    """The owner's report reads the source's rows where they are: the same numbers as on DuckDB for
    the same release (an empty stub would give no source rows). 900 rows have a code: 'hr' is outside
    the declared departments."""
    from dpgate.catalog.owner import Owner

    duck, on_spark = world
    sql = f"CREATE SYNTHETIC TABLE q FROM t WITH (epsilon = 5, columns = '{COLUMNS}')"
    reports = []
    for path in (duck, on_spark):
        _release(path, spark, sql, "q")
        with Owner(path, spark=spark) as owner:
            reports.append(owner.quality("q"))
    a, b = reports
    assert a["rows_source"] == b["rows_source"] == 900 and a["rows_release"] == b["rows_release"]
    assert all(b[k] == pytest.approx(a[k], abs=1e-12) and 0 < a[k] < 1 for k in ("tvd_1way", "tvd_2way", "tvd_3way"))


def test_a_key_on_a_spark_stub_proves_nothing(world, tmp_path):
    """A PRIMARY KEY the owner adds to a Spark table's empty DuckDB stub holds for no row of the
    source (two rows per subject here): each subject's rows are still cut to max_rows."""
    _, on_spark = world
    twin = harness.copy_db(on_spark, tmp_path / "keyed.duckdb")
    harness.mutate(twin, "ALTER TABLE t ADD PRIMARY KEY (pid)")
    sql = "CREATE SYNTHETIC TABLE s FROM t WITH (epsilon = 5, max_rows_contributed = 1, columns = 'age, flag')"
    with harness.gateways(twin) as (g,):
        st = harness.statistics_of(g, sql)
    assert not st.plan.table.unique_unit and not st.plan.table.unique_keys
    assert sum(st.stats["rows"].values.values()) == 600  # 600 subjects, one row each (1,200 without the cut)
