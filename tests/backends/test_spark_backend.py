"""The Spark data plane end to end: declaring Spark sources, answering, charging, refusing.

The statistics themselves are compared with DuckDB's, and checked on neighbours, in
``tests/privacy/test_neighbour_spark.py``; here: the owner's side (stubs, rosters, policy files),
the analyst's side (answers, budgets, free refusals with their codes), and the properties the
privacy argument of ``dpgate.backends.spark`` rests on, on the installed Spark: only charged
subjects' rows reach the analyst's expressions, and the per-subject sample is uniform, keyed by
the salt and decided by the subject's own rows.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
import warnings

import duckdb
import pyarrow as pa
import pytest
import sqlglot
from sqlglot import exp

import dpgate
from dpgate import backends
from dpgate.backends.spark import plane as spark_plane
from dpgate.backends.spark import translate as spark_translate
from dpgate.catalog.owner import Owner
from conftest import TEST_SEED, expressions_may_fail, fails_on

ROWS = """
SELECT i // 4 AS pid, ['north', 'south', 'east'][i % 3 + 1] AS region, (i * 37) % 500 AS income,
       CAST(i % 4 + 1 AS INTEGER) AS v, CASE WHEN i // 4 % 2 = 0 THEN 'distinct' ELSE 'dup' END AS kind
FROM range(12000) r(i)
"""


def _parquet(tmp_path, sql: str, name: str = "t") -> str:
    out = tmp_path / f"{name}.parquet"
    con = duckdb.connect()
    con.execute(f"COPY ({sql}) TO '{out}' (FORMAT parquet)")
    con.close()
    return f"parquet:{out}"


def _protect(path, spark, source, **extra):
    with Owner(path, spark=spark) as owner:
        spec = {"unit": "pid", "max_rows": 2, "public_roster": True, "spark": source,
                "domains": {"region": ["north", "south", "east"]}, "bounds": {"income": (0, 500)}}  # fmt: skip
        spec.update(extra)
        owner.protect("t", **spec)
        owner.add_analyst("alice", epsilon=10.0, delta=1e-3)
        owner.allow_test_seed("alice")
    return path


@pytest.fixture
def spark_db(spark, tmp_path):
    return _protect(tmp_path / "db.duckdb", spark, _parquet(tmp_path, ROWS))


def _spent(con) -> float:
    """The analyst's ε spent: the quota (10, see ``_protect``) minus what SHOW BUDGET leaves."""
    rows = con.cursor().execute("SHOW BUDGET").fetchall()
    return 10.0 - [r for r in rows if r[0] == "analyst alice"][0][1]


# -- the owner's side ----------------------------------------------------------------------------
def test_stub_and_roster_come_from_spark(spark_db):
    raw = duckdb.connect(str(spark_db), read_only=True)
    try:
        assert raw.execute("SELECT count(*) FROM main.t").fetchone() == (0,)  # the stub holds no row
        cols = raw.execute("SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = 't'").fetchall()
        assert cols == [("pid", "BIGINT"), ("region", "VARCHAR"), ("income", "BIGINT"), ("v", "INTEGER"),
                        ("kind", "VARCHAR")]  # fmt: skip
        assert raw.execute("SELECT count(*) FROM dpgate.roster_t").fetchone() == (3000,)  # units read from Spark
    finally:
        raw.close()


def test_budget_column_is_read_from_spark(spark, tmp_path):
    source = _parquet(tmp_path, "SELECT i // 2 AS pid, 'north' AS region, i AS income, (i // 2) % 3 + 0.5 AS eps "
                                "FROM range(100) r(i)")  # fmt: skip
    path = _protect(tmp_path / "b.duckdb", spark, source, budget_column="eps")
    raw = duckdb.connect(str(path), read_only=True)
    try:
        budgets = dict(raw.execute("SELECT unit, epsilon_budget FROM dpgate.roster_t").fetchall())
    finally:
        raw.close()
    assert len(budgets) == 50 and budgets[7] == 7 % 3 + 0.5


def test_policy_file_with_a_master_url(spark, tmp_path):
    """[backends.spark] master = ... lets the owner and analysts connect without passing a session."""
    source = _parquet(tmp_path, ROWS)
    path = tmp_path / "p.duckdb"
    policy = tmp_path / "policy.toml"
    policy.write_text(
        '[backends.spark]\nmaster = "local[2]"\nconf = { "spark.sql.shuffle.partitions" = "4" }\n\n'
        f'[tables.t]\nunit = "pid"\nmax_rows = 2\npublic_roster = true\nspark = "{source}"\n'
        '[tables.t.columns.region]\ndomain = ["north", "south", "east"]\n\n'
        '[analysts.alice]\nepsilon = 5.0\nallow_test_seed = true\n'
    )
    with Owner(path) as owner:  # no session given: the policy's master (the running local Spark)
        done = owner.apply_policy(policy)
    assert done[0] == "Spark backend at local[2]"
    with dpgate.connect(str(path), analyst="alice", test_seed=TEST_SEED) as con:
        cur = con.cursor()
        cur.execute("SELECT region, COUNT(*) FROM t GROUP BY region")
        rows = dict(cur.fetchall())
    assert set(rows) == {"north", "south", "east"}
    # 3,000 subjects keep exactly 2 of their 4 rows: 6,000 in all, plus three noise draws of scale
    # 2/ε = 20 at the session's default ε = 0.1 (standard deviation √2·20 each)
    assert abs(sum(rows.values()) - 6000) <= 4.5 * math.sqrt(3 * 2) * 20


@pytest.mark.parametrize(
    "source, code",
    [("no such name!", "DP340"), ("parquet:/nonexistent/t.parquet", "DP341"), ("missing_db.missing_table", "DP341")],
)
def test_bad_sources_are_refused(spark, tmp_path, source, code):
    with Owner(tmp_path / "x.duckdb", spark=spark) as owner:
        with pytest.raises(dpgate.PolicyError) as e:
            owner.protect("t", unit="pid", spark=source, public_roster=True)
    assert e.value.code == code


def test_unservable_columns_and_taken_names_are_refused(spark, tmp_path):
    arrays = _parquet(tmp_path, "SELECT 1 AS pid, [1, 2] AS xs", "arr")
    with Owner(tmp_path / "y.duckdb", spark=spark) as owner:
        with pytest.raises(dpgate.PolicyError) as e:
            owner.protect("t", unit="pid", spark=arrays, public_roster=True)
        assert e.value.code == "DP342" and "xs (array<int>)" in e.value.message
        owner.con.execute("CREATE TABLE t AS SELECT 1 AS pid")  # a DuckDB table with rows keeps its name
        with pytest.raises(dpgate.PolicyError) as e:
            owner.protect("t", unit="pid", spark=_parquet(tmp_path, ROWS), public_roster=True)
        assert e.value.code == "DP340"
        with pytest.raises(dpgate.PolicyError) as e:
            owner.protect("t", unit="pid", options={"spark": "x.y"}, public_roster=True)
        assert e.value.code == "DP312"


def test_global_temp_view_source(spark, tmp_path):
    """A table of the session catalog (here a global temporary view, visible to every session)."""
    spark.range(400).selectExpr("id DIV 2 AS pid", "CASE WHEN id % 2 = 0 THEN 'north' ELSE 'east' END AS region",
                                "id AS income").createOrReplaceGlobalTempView("dpgate_people")  # fmt: skip
    path = _protect(tmp_path / "g.duckdb", spark, "global_temp.dpgate_people")
    with dpgate.connect(str(path), analyst="alice", spark=spark, test_seed=TEST_SEED) as con:
        cur = con.cursor()
        cur.execute("SET dp_epsilon = 1")
        cur.execute("SELECT COUNT(*) FROM t")
        (n,) = cur.fetchone()
    # 200 subjects, 2 rows each (max_rows = 2): exactly 400, plus discrete Laplace noise of scale 2/ε = 2
    assert abs(n - 400) <= 4.5 * math.sqrt(2) * 2


# -- the analyst's side --------------------------------------------------------------------------
def test_answers_and_charges_like_duckdb(spark, spark_db):
    with dpgate.connect(str(spark_db), analyst="alice", spark=spark, test_seed=TEST_SEED) as con:
        cur = con.cursor()
        cur.execute("SET dp_epsilon = 1")
        cur.execute("SELECT region, COUNT(*) AS n, AVG(income) AS mean FROM t WHERE income > 10 GROUP BY region ORDER BY region")
        rows = cur.fetchall()
        assert [r[0] for r in rows] == ["east", "north", "south"]
        # 1,956 rows expected per region (2 of each subject's 4, 97.8% with income > 10); the sample's
        # standard deviation is about 30 per region (measured over 20 salts: 18–28), the noise's 2/0.5·√2
        assert all(abs(r[1] - 1956) <= 4.5 * (30 + 4 * math.sqrt(2)) and 150 < r[2] < 350 for r in rows)
        assert cur.release.epsilon == 1.0 and cur.release.subjects_charged == 3000
        assert math.isclose(_spent(con), 1.0)
        cur.execute("EXPLAIN PRIVACY SELECT region, SUM(income) FROM t GROUP BY region")
        assert cur.fetchall()[0][1] == "laplace"


def test_topk_is_answered_and_charged(spark, spark_db):
    """Top-k over the Spark table, by a GROUP BY and by the wide-table form (the engines' answers are
    compared in ``tests/privacy/test_neighbour_spark_topk.py``)."""
    with dpgate.connect(str(spark_db), analyst="alice", spark=spark, test_seed=TEST_SEED) as con:
        cur = con.cursor()
        cur.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.4, topk_method = 'tps_pfm') "
                    "kind, COUNT(*) AS n FROM t GROUP BY kind ORDER BY n DESC LIMIT 1")  # key selection
        (row,) = cur.fetchall()
        # 1,500 subjects per kind: key selection's threshold (tens) passes both; one of the two wins
        assert row[0] in ("distinct", "dup") and cur.release.mechanism == "top_k/tps_pfm"
        cur.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.4) * "
                    "FROM dp_top_k_columns('t', k => 2, counts => true)")
        rows = cur.fetchall()
        # every subject has a non-zero income (income is 0 in one row of 500) and v >= 1: 3,000 per
        # column, with discrete Laplace noise of sensitivity 2 at ε = 0.2 (scale 10: 99.99% within ±92)
        assert sorted(r[1] for r in rows) == ["income", "v"] and all(abs(r[2] - 3000) <= 92 for r in rows)
        assert math.isclose(_spent(con), 0.8)


@pytest.mark.parametrize(
    "sql, code",
    [
        # top-k: what Spark does not run, refused before the debit as for counting
        ("SELECT region, COUNT(*) AS n FROM t WHERE sqrt(income) > 3 GROUP BY region ORDER BY n DESC LIMIT 2", "DP261"),
        ("SELECT kind, COUNT(*) AS n FROM t WHERE kind <> '${env:HOME}' GROUP BY kind ORDER BY n DESC LIMIT 1", "DP261"),
        ("SELECT region, COUNT(*) AS n FROM t JOIN regions r ON t.region = r.name GROUP BY region "
         "ORDER BY n DESC LIMIT 1", "DP261"),
        # key selection's keys travel back as text, the same on both engines only for text and integers
        ("SELECT CAST(v AS DOUBLE) AS x, COUNT(*) AS n FROM t GROUP BY x ORDER BY n DESC LIMIT 1", "DP261"),
        ("SELECT kind, COUNT(*) AS n FROM t GROUP BY kind, no_such_column ORDER BY n DESC LIMIT 1", "DP218"),
        ("SELECT COUNT(*) FROM t WHERE income % 7 = 0", "DP261"),
        ("SELECT COUNT(*) FROM t WHERE sqrt(income) > 3", "DP261"),
        ("SELECT region, COUNT(*) FROM t WHERE CAST(income AS TIMESTAMP) IS NULL GROUP BY region", "DP261"),
        ("SELECT COUNT(*) FROM t JOIN regions r ON t.region = r.name", "DP261"),
        ("SELECT COUNT(*) FROM t WHERE no_such_column > 1", "DP218"),
        ("SELECT COUNT(*) FROM t WHERE region LIKE 'n!%' ESCAPE '!'", "DP261"),
        ("SELECT COUNT(*) FROM t AS __c WHERE __c.income > 1", "DP261"),  # dpgate's own alias for the units
        # Spark substitutes ${...} inside string literals ('${env:HOME}' = '/root'
        # held, and an analysis error printed ${env:SECRET} for free)
        ("SELECT COUNT(*) FROM t WHERE '${env:HOME}' = '/root'", "DP261"),
        ("SELECT COUNT(*) FROM t WHERE CASE WHEN income > 1 THEN '${system:user.name}' ELSE income > 2 END", "DP261"),
        ("SELECT region, COUNT(*) FROM t WHERE region = '${spark.master}' GROUP BY region", "DP261"),
        # casts the engines compute differently (DuckDB reads '1e1' and '12.7' as integers, Spark gives
        # NULL and 12; Spark reads '2020' as a date; a DOUBLE's text differs: '10000000.0' / '1.0E7')
        ("SELECT COUNT(*) FROM t WHERE CAST('1e1' AS INTEGER) = 10", "DP261"),
        ("SELECT COUNT(*) FROM t WHERE CAST(kind AS INTEGER) IS NULL", "DP261"),
        ("SELECT COUNT(*) FROM t WHERE CAST('2020' AS DATE) IS NULL", "DP261"),
        ("SELECT COUNT(*) FROM t WHERE CAST(income / 3 AS VARCHAR) LIKE '1%'", "DP261"),
        ("SELECT COUNT(*) FROM t WHERE CAST(income / 3 AS DECIMAL(10, 2)) > 5", "DP261"),
        ("SELECT COUNT(*) FROM t WHERE CAST(kind || '1' AS DOUBLE) > 5", "DP261"),
        # what else the engines compute differently
        ("SELECT COUNT(*) FROM t WHERE income + 1 IS NULL", "DP261"),  # DuckDB's TRY nulls the whole expression
        ("SELECT COUNT(*) FROM t WHERE COALESCE(v * 1000000000, 0) = 0", "DP261"),
        ("SELECT COUNT(*) FROM t WHERE v * 2 > 3 OR region = 'north'", "DP261"),
        ("SELECT COUNT(*) FROM t WHERE kind = 10", "DP261"),  # DuckDB reads '1e1' as 10 here
        ("SELECT COUNT(*) FROM t WHERE v IN ('1', '2')", "DP261"),
        ("SELECT COUNT(*) FROM t WHERE ('' || (income / 3)) LIKE '%E%'", "DP261"),  # a DOUBLE's text
        ("SELECT COUNT(*) FROM t WHERE lower(region) = 'north'", "DP261"),  # non-ASCII case mapping
        ("SELECT COUNT(*) FROM t WHERE region ILIKE 'n%'", "DP261"),
        ("SELECT COUNT(*) FROM t WHERE CAST(income / 3 AS FLOAT) > 1", "DP261"),  # DuckDB NULL, Spark ±inf
        ("SELECT COUNT(*) FROM t WHERE CAST('true ' AS BOOLEAN)", "DP261"),
        ("SELECT COUNT(*) FROM t WHERE CAST('\x1c7' AS INTEGER) = 7", "DP261"),
        ("SELECT COUNT(*) FROM t WHERE CAST('2024-02-30' AS DATE) IS NULL", "DP261"),
        ("SELECT COUNT(*) FROM t WHERE CASE WHEN v > 1 THEN 'a' ELSE 1 END = 1", "DP261"),
        ("SELECT COUNT(*) FROM t WHERE income < 99999999999999999999999999999", "DP261"),  # DuckDB: a HUGEINT
        ("SELECT COUNT(*) FROM t WHERE CAST(income AS DECIMAL(38, 2)) > 5", "DP261"),  # past 18 digits
        ("SELECT COUNT(*) FROM t WHERE DATE '2024-01-01' + v > DATE '2024-01-02'", "DP261"),  # days not a literal
        ("SELECT COUNT(*) FROM t WHERE DATE '2024-01-01' + 2147483647 < DATE '2000-01-01'", "DP261"),
        # each division is written with its operands several times: nesting grows the SQL exponentially
        ("SELECT COUNT(*) FROM t WHERE income / (v + 1) / (v + 1) / (v + 1) / (v + 1) / (v + 1) > 0", "DP261"),
        ("SELECT COUNT(*) FROM t WHERE CAST(CAST(CAST(CAST(CAST(income / 3 AS BIGINT) AS DOUBLE) AS BIGINT) "
         "AS DOUBLE) AS BIGINT) > 0", "DP261"),
    ],
)
def test_refusals_are_free(spark, spark_db, sql, code):
    raw = duckdb.connect(str(spark_db))
    raw.execute("CREATE TABLE regions AS SELECT * FROM (VALUES ('north'), ('east')) v(name)")
    raw.close()
    with dpgate.connect(str(spark_db), analyst="alice", spark=spark) as con:
        with pytest.raises(dpgate.Error) as e:
            con.cursor().execute(sql)
        assert _spent(con) == 0.0
    assert e.value.code == code, e.value


def test_joins_with_a_spark_table_are_refused_free(spark, spark_db):
    """A DuckDB table of the same subject space joined with the Spark table, either way round: the
    DuckDB plane would read the Spark table's empty stub, so neither order is answered."""
    raw = duckdb.connect(str(spark_db))
    raw.execute("CREATE TABLE d AS SELECT i AS pid, i % 2 AS x FROM range(3000) r(i)")
    raw.close()
    with Owner(spark_db, spark=spark) as owner:
        owner.protect("d", unit="pid", subjects="t", public_roster=True)
    with dpgate.connect(str(spark_db), analyst="alice", spark=spark) as con:
        for sql in ("SELECT COUNT(*) FROM d JOIN t ON d.pid = t.pid",
                    "SELECT COUNT(*) FROM t JOIN d ON d.pid = t.pid",
                    "SELECT COUNT(*) FROM d LEFT JOIN t ON d.pid = t.pid WHERE t.region IS NULL"):  # fmt: skip
            with pytest.raises(dpgate.Error) as e:
                con.cursor().execute(sql)
            assert e.value.code == "DP261", (sql, e.value)
        assert _spent(con) == 0.0
        cur = con.cursor()
        cur.execute("SELECT COUNT(*) FROM d WHERE x = 1")  # the DuckDB table alone is answered as ever
        assert cur.release.query_class == "count"


def test_partition_columns_are_strings(spark, tmp_path):
    """A Parquet source partitioned by a column: its type is not inferred from the directory names
    (one subject's value could change it, and refuse every query, DP262), so it is a string."""
    where = tmp_path / "parts"
    con = duckdb.connect()
    con.execute(f"COPY (SELECT i // 2 AS pid, 'north' AS region, i AS income, 10000 + i % 5 AS zip FROM range(200) r(i)) "
                f"TO '{where}' (FORMAT parquet, PARTITION_BY (zip))")  # fmt: skip
    path = _protect(tmp_path / "z.duckdb", spark, f"parquet:{where}")
    raw = duckdb.connect(str(path), read_only=True)
    assert raw.execute("SELECT data_type FROM duckdb_columns() WHERE table_name = 't' AND column_name = 'zip'"
                       ).fetchone() == ("VARCHAR",)  # fmt: skip
    raw.close()
    con.execute(f"COPY (SELECT 500 AS pid, 'north' AS region, 1 AS income, 'AB123' AS zip) TO '{where}' "
                "(FORMAT parquet, PARTITION_BY (zip), APPEND)")  # a subject with a zip that is not a number
    con.close()
    with dpgate.connect(str(path), analyst="alice", spark=spark) as c:
        c.cursor().execute("SELECT COUNT(*) FROM t WHERE zip = '10001'")  # still the declared schema: answered


def test_no_session_is_refused_free(spark_db):
    with dpgate.connect(str(spark_db), analyst="alice") as con:  # no spark=, no [backends.spark]
        with pytest.raises(dpgate.InterfaceError) as e:
            con.cursor().execute("SELECT COUNT(*) FROM t")
        assert e.value.code == "DP263" and _spent(con) == 0.0


def test_drifted_source_is_refused_free(spark, spark_db, tmp_path):
    raw = duckdb.connect(str(spark_db), read_only=True)
    (source,) = raw.execute("SELECT options FROM dpgate.protected_tables WHERE table_name = 't'").fetchone()
    raw.close()
    path = __import__("json").loads(source)["spark"].removeprefix("parquet:")
    con = duckdb.connect()
    con.execute(f"COPY (SELECT pid, region, CAST(income AS VARCHAR) AS income, v, kind FROM ({ROWS})) TO '{path}' "
                "(FORMAT parquet)")  # fmt: skip
    con.close()
    with dpgate.connect(str(spark_db), analyst="alice", spark=spark) as con:
        with pytest.raises(dpgate.PolicyError) as e:
            con.cursor().execute("SELECT COUNT(*) FROM t")
        assert e.value.code == "DP262" and _spent(con) == 0.0


# -- what the privacy argument rests on, on the installed Spark -----------------------------------
def _plan_and_plane(con, sql):
    gw = con.gateway
    cat = gw.catalog()
    from dpgate.frontend.classify import classify
    from dpgate.frontend.dialect import parse_one

    _, plan = gw._plan(classify(parse_one(sql), cat), cat)
    return gw, plan, gw._plane("spark")


def _charged(units, part=0) -> backends.Charged:
    table = pa.table({"unit": pa.array(units, pa.int64()), "__seen": pa.array([part] * len(units), pa.int32())})
    return backends.Charged(lambda: table, None, ("test", tuple(units)), len(units))


def test_analyst_expressions_see_charged_rows_only(spark, spark_db):
    """A WHERE, a key and an aggregate input that fail on subject 5's rows run clean when 5 is not
    charged [charged-only].

    The expressions are deterministic (as every allowlisted one is: the optimizer moves only
    those) and fail only under ANSI mode, which is switched on for this test in the plane's own
    session: ``int('x')`` raises there. They are put into the plan past the analyst's checks, the
    one way to observe on which rows Spark evaluates an expression.
    """
    # int(...) as an opaque call: parsed as a CAST, dpgate would make it a TRY_CAST, which never fails
    fails_on_5 = fails_on("t.pid")
    with dpgate.connect(str(spark_db), analyst="alice", spark=spark) as con:
        gw, plan, plane = _plan_and_plane(con, "SELECT region, COUNT(*), SUM(income) FROM t WHERE income >= 0 GROUP BY region")
        source = plan.source.copy()
        source.set("where", exp.Where(this=fails_on_5.copy()))
        key, value = source.expressions[1], source.expressions[2]
        assert key.alias == "__k0" and value.alias == "__v1"
        key.set("this", exp.Case(ifs=[exp.If(this=fails_on_5.copy(), true=exp.column("region", "t"))]))
        value.set("this", exp.Case(ifs=[exp.If(this=fails_on_5.copy(), true=exp.column("income", "t"))]))
        poisoned = dataclasses.replace(plan, source=source)
        with expressions_may_fail(plane):
            others = [u for u in range(3000) if u != 5]
            rows = plane.bounded_rows(poisoned, _charged(others), 1, 1)
            assert sum(r[1] for r in rows) == 2 * len(others)  # every other subject's rows were read
            with pytest.raises(Exception, match="CAST_INVALID_INPUT"):  # the test can fail: 5 charged
                plane.bounded_rows(poisoned, _charged([5, 6]), 1, 1)


def test_topk_statements_see_charged_rows_only(spark, spark_db):
    """Top-k's statements (key selection's per-key counts, the pairs, the frequencies with record
    lengths, the sampled counts) with a WHERE and a key that fail on subject 5's rows run clean
    when 5 is not charged, and fail when it is (the test can fail) [charged-only]."""
    from dpgate.backends.spark import topk as spark_topk

    fails_on_5 = fails_on("t.pid")
    with dpgate.connect(str(spark_db), analyst="alice", spark=spark) as con:
        sql = "SELECT kind, COUNT(*) AS n FROM t WHERE income >= 0 GROUP BY kind ORDER BY n DESC LIMIT 1"
        _, plan, plane = _plan_and_plane(con, sql)
        assert plan.key_selection is not None
        source = plan.source.copy()
        source.set("where", exp.Where(this=fails_on_5.copy()))
        key = source.expressions[1]
        assert key.alias == "__k0"
        key.set("this", exp.Case(ifs=[exp.If(this=fails_on_5.copy(), true=exp.column("kind", "t"))]))
        poisoned = dataclasses.replace(plan, source=source)

        def run_all(units):
            with spark_topk.SparkTopK(plane, poisoned, _charged(units)) as exact:
                rows = exact.key_subjects(1)
                pairs = exact.pairs([("distinct",), ("dup",)])
                return rows, pairs.frequencies(2, True), pairs.sampled_frequencies([0, 1], 1, 1)

        with expressions_may_fail(plane):
            others = [u for u in range(3000) if u != 5]
            rows, (_, _, n), sampled = run_all(others)
            assert sum(r[1] for r in rows) == len(others) == n.sum() == sum(sampled.values())
            with pytest.raises(Exception, match="CAST_INVALID_INPUT"):
                run_all([5, 6])


#: The sampling tests' rows: four per subject, the 'dup' subjects' first three equal.
DUP_ROWS = f"SELECT pid, region, income, CASE WHEN kind = 'dup' AND v < 4 THEN 1 ELSE v END AS v, kind FROM ({ROWS})"


def _assert_uniform(counts) -> None:
    """max_rows = 1 of four rows: each row kept with probability 1/4 (3/4 for a value held three
    times). Cells (distinct, 1..4), (dup, 1..4); 1,500 subjects of each kind; 4.5σ of a Binomial(1500, p)."""
    for cell, p in zip(range(8), [0.25] * 4 + [0.75, 0, 0, 0.25]):
        tol = 4.5 * math.sqrt(1500 * p * (1 - p))
        assert abs(counts[cell] - 1500 * p) <= tol, (cell, counts[cell])


def test_sample_is_uniform_keyed_and_local(spark, spark_db, tmp_path):
    """Per query: each row kept with its share, a fresh salt draws afresh, the same salt repeats,
    and a subject's draw does not move when other subjects' rows change."""
    sql = "SELECT kind, v, COUNT(*) FROM t GROUP BY kind, v"
    rows = DUP_ROWS
    path = _protect(tmp_path / "u.duckdb", spark, _parquet(tmp_path, rows, "u"), sample_order="per_query",
                    max_rows=1, domains={"v": [1, 2, 3, 4], "kind": ["distinct", "dup"]})  # fmt: skip
    with dpgate.connect(str(path), analyst="alice", spark=spark) as con:
        gw, plan, plane = _plan_and_plane(con, sql)
        charged = f"(SELECT unit, 0 AS part FROM {plan.table.roster_table_sql})"
        draws = [plane.exact(gw._con, plan, charged, salt).components[(0, "count")][0]
                 for salt in (11, 12, 11)]  # fmt: skip
    assert list(draws[0]) == list(draws[2]) and list(draws[0]) != list(draws[1])
    for counts in draws[:2]:
        _assert_uniform(counts)
    # locality: subject 16's draw, alone, with the others' rows changed and more subjects added
    other = _protect(tmp_path / "o.duckdb", spark,
                     _parquet(tmp_path, f"SELECT * FROM ({rows}) WHERE pid = 16 UNION ALL SELECT pid + 100000, region, "
                                        f"income + 1, v % 4 + 1, kind FROM ({rows}) WHERE pid <> 16", "o"),
                     max_rows=1, domains={"v": [1, 2, 3, 4], "kind": ["distinct", "dup"]}, sample_order="per_query")  # fmt: skip
    one = "SELECT kind, v, COUNT(*) FROM t WHERE pid = 16 GROUP BY kind, v"
    got = []
    for p in (path, other):
        with dpgate.connect(str(p), analyst="alice", spark=spark) as con:
            gw, plan, plane = _plan_and_plane(con, one)
            charged = f"(SELECT unit, 0 AS part FROM {plan.table.roster_table_sql})"
            got.append([list(plane.exact(gw._con, plan, charged, s).components[(0, "count")][0])
                        for s in range(1, 6)])  # fmt: skip
    assert got[0] == got[1]
    assert len({tuple(g) for g in got[0]}) > 1  # the salts do move subject 16's draw (fixed salts; 4 rows: P(all 5 equal) < 0.004)


def _set_key(path, key: int) -> None:
    con = duckdb.connect(str(path))
    con.execute("UPDATE dpgate.sample_keys SET sample_key = ?", [key])
    con.close()


def test_kept_key_samples_the_same_rows_uniformly_and_locally(spark, tmp_path):
    """A Spark table's stored sample order (the default) is a kept key: every salt keeps the same
    rows, a WHERE keeps the kept rows it passes, a redrawn key (refresh_roster) draws afresh, each
    draw is uniform over the subjects, and a subject's kept rows do not move when other subjects'
    rows change (the same key)."""
    domains = {"v": [1, 2, 3, 4], "kind": ["distinct", "dup"]}
    path = _protect(tmp_path / "k.duckdb", spark, _parquet(tmp_path, DUP_ROWS, "k"), max_rows=1, domains=domains)
    sql = "SELECT kind, v, COUNT(*) FROM t GROUP BY kind, v"
    fewer = "SELECT kind, v, COUNT(*) FROM t WHERE v <> 4 GROUP BY kind, v"

    def counts(p, query, salts):
        with dpgate.connect(str(p), analyst="alice", spark=spark) as con:
            gw, plan, plane = _plan_and_plane(con, query)
            charged = f"(SELECT unit, 0 AS part FROM {plan.table.roster_table_sql})"
            return [list(plane.exact(gw._con, plan, charged, s).components[(0, "count")][0]) for s in salts]

    first = counts(path, sql, (11, 12, 13))
    assert first[0] == first[1] == first[2]  # the salt does not choose the rows
    _assert_uniform(first[0])
    # every subject whose kept row passes v <> 4 keeps it; those whose kept row had v = 4 keep another
    (selected,) = counts(path, fewer, (14,))
    for cell in (0, 1, 2, 4, 5, 6):
        assert selected[cell] >= first[0][cell], (cell, selected, first[0])
    assert sum(selected) == 3000 and selected[3] == selected[7] == 0
    with Owner(path, spark=spark) as owner:
        owner.refresh_roster("t")
    (redrawn,) = counts(path, sql, (11,))
    assert redrawn != first[0]  # a new key (62 bits): P(the same 8 counts) is negligible
    _assert_uniform(redrawn)
    # locality under one key: subject 16 alone, beside other subjects' changed and added rows
    other = _protect(tmp_path / "ko.duckdb", spark,
                     _parquet(tmp_path, f"SELECT * FROM ({DUP_ROWS}) WHERE pid = 16 UNION ALL SELECT pid + 100000, "
                                        f"region, income + 1, v % 4 + 1, kind FROM ({DUP_ROWS}) WHERE pid <> 16", "ko"),
                     max_rows=1, domains=domains)  # fmt: skip
    one = "SELECT kind, v, COUNT(*) FROM t WHERE pid = 16 GROUP BY kind, v"
    got = []
    for key in range(1, 6):
        for p in (path, other):
            _set_key(p, key)
        got.append([counts(p, one, (key + 40,))[0] for p in (path, other)])
    assert all(a == b for a, b in got)
    assert len({tuple(a) for a, _ in got}) > 1  # the keys do move subject 16's draw (fixed keys; P(all 5 equal) < 0.004)


def test_kept_key_tells_apart_rows_that_differ_in_where_their_nulls_are(spark, tmp_path):
    """(NULL, 5) and (5, NULL) get hashes of their own (Spark's multi-argument hash skips NULLs), so a
    WHERE that passes a subject's kept row keeps it, subject by subject (``g`` names the subject)."""
    n = 300
    rows = f"SELECT pid, pid AS g, a, b FROM range({n}) r(pid), (VALUES (NULL::INT, 5::INT), (5, NULL), (7, 7)) v(a, b)"
    path = _protect(tmp_path / "n.duckdb", spark, _parquet(tmp_path, rows, "n"), max_rows=1,
                    domains={"g": list(range(n))}, bounds={})  # fmt: skip

    def kept(where=""):
        """Each subject's kept row: r1 (NULL, 5), r2 (5, NULL) or r3 (7, 7), by its COUNT(a), COUNT(b)."""
        with dpgate.connect(str(path), analyst="alice", spark=spark) as con:
            gw, plan, plane = _plan_and_plane(con, f"SELECT g, COUNT(a), COUNT(b) FROM t {where} GROUP BY g")
            got = plane.exact(gw._con, plan, f"(SELECT unit, 0 AS part FROM {plan.table.roster_table_sql})", 3)
        pairs = zip(got.components[(0, "count")][0], got.components[(1, "count")][0])
        return [{(0, 1): "r1", (1, 0): "r2", (1, 1): "r3"}[(int(x), int(y))] for x, y in pairs]

    every = kept()
    assert min(every.count(r) for r in ("r1", "r2", "r3")) > 0  # each row kept by some subjects
    for where, passing in (("WHERE b IS NOT NULL", ("r1", "r3")), ("WHERE a IS NOT NULL", ("r2", "r3"))):
        selected = kept(where)
        moved = [g for g in range(n) if every[g] in passing and selected[g] != every[g]]
        assert moved == [], (where, moved[:5])


def test_sources_that_could_fail_on_a_value(spark, tmp_path):
    """A view's expressions and a text format's parser run below the join with the charged subjects,
    on every row. A source whose plan casts or adds in ANSI mode (a view kept so, a view over one, a
    global temporary view made so), raises an error, or reads a CSV file in FAILFAST mode (however
    the format is spelled) is refused (DP342); try_cast is fine. A view made with ANSI off, and a CSV
    table (its nullValue may be the word 'failfast'), sample per query
    (a kept key reads every column: stored is refused, DP312); a Parquet table keeps a key, until it
    becomes a view: then its statements sample per query."""
    raw = tmp_path / "raw.parquet"
    rows = "SELECT i // 2 AS pid, CASE WHEN i = 15 THEN 'n/a' ELSE CAST(i % 50 AS VARCHAR) END AS amount_text FROM range(400) r(i)"
    con = duckdb.connect()
    con.execute(f"COPY ({rows}) TO '{raw}' (FORMAT parquet)")
    con.execute(f"COPY ({rows}) TO '{tmp_path / 'f.csv'}' (FORMAT csv, HEADER false)")
    con.close()
    maker = spark.newSession()
    maker.conf.set("spark.sql.ansi.enabled", "true")  # Spark 4's default, kept with the view
    maker.sql(f"CREATE TABLE raw_keyed USING parquet LOCATION '{raw}'")
    maker.sql("CREATE OR REPLACE VIEW v_ansi AS SELECT pid, CAST(amount_text AS INT) AS amount FROM raw_keyed")
    maker.sql(f"CREATE TABLE csv_fast (pid BIGINT, amount_text STRING) USING csv OPTIONS (mode 'FAILFAST') "
              f"LOCATION '{tmp_path / 'f.csv'}'")  # fmt: skip
    maker.sql(f"CREATE TABLE csv_keyed (pid BIGINT, amount_text STRING) USING csv OPTIONS (nullValue 'failfast') "
              f"LOCATION '{tmp_path / 'f.csv'}'")  # fmt: skip
    maker.sql(f"CREATE TABLE csv_class (pid BIGINT, amount_text STRING) USING "
              f"org.apache.spark.sql.execution.datasources.csv.CSVFileFormat OPTIONS (MODE 'FailFast') "
              f"LOCATION '{tmp_path / 'f.csv'}'")  # fmt: skip
    maker.table("raw_keyed").selectExpr("pid", "CAST(amount_text AS INT) AS amount").createOrReplaceGlobalTempView("gv_ansi")
    maker.sql("CREATE OR REPLACE VIEW v_try AS SELECT pid, try_cast(amount_text AS INT) AS amount FROM raw_keyed")
    maker.conf.set("spark.sql.ansi.enabled", "false")
    maker.sql("CREATE OR REPLACE VIEW v_keyed AS SELECT pid, CAST(amount_text AS INT) AS amount FROM raw_keyed")
    maker.sql("CREATE OR REPLACE VIEW v_nested AS SELECT pid, amount FROM v_ansi")
    maker.sql("CREATE OR REPLACE VIEW v_over_csv AS SELECT pid, amount_text FROM csv_fast")
    maker.sql("CREATE OR REPLACE VIEW v_raise AS SELECT pid, CASE WHEN pid = 7 THEN raise_error('x') END AS r FROM raw_keyed")
    path = tmp_path / "v.duckdb"
    try:
        with Owner(path, spark=spark) as owner:
            for source in ("v_ansi", "csv_fast", "v_nested", "global_temp.gv_ansi", "v_over_csv", "csv_class", "v_raise"):
                with pytest.raises(dpgate.PolicyError) as e:
                    owner.protect("t", unit="pid", spark=source, public_roster=True)
                assert e.value.code == "DP342", source
            owner.protect("t", unit="pid", spark="v_try", public_roster=True)  # try_cast gives NULL, whatever the mode
            for source in ("v_keyed", "csv_keyed"):
                with pytest.raises(dpgate.PolicyError) as e:
                    owner.protect("t", unit="pid", spark=source, public_roster=True, sample_order="stored")
                assert e.value.code == "DP312" and "view" in e.value.message
            owner.protect("k", unit="pid", spark="raw_keyed", public_roster=True, max_rows=1)
            owner.protect("t", unit="pid", spark="v_keyed", public_roster=True, max_rows=1, bounds={"amount": (0, 50)})
            options = dict(owner.con.execute("SELECT table_name, options FROM dpgate.protected_tables").fetchall())
            owner.add_analyst("alice", epsilon=10.0, delta=1e-3)
        assert '"sample_order": "stored"' in options["k"] and '"sample_order": "per_query"' in options["t"]
        with dpgate.connect(str(path), analyst="alice", spark=spark) as con:
            for sql in ("SELECT COUNT(*) FROM t", "SELECT SUM(amount) FROM t", "SELECT COUNT(*) FROM k"):
                assert con.cursor().execute(sql).fetchall()  # answered: the malformed value is NULL in v_keyed
            _, plan, plane = _plan_and_plane(con, "SELECT COUNT(*) FROM k")
            assert plane.sample_key(con.gateway._con, plan) is not None
            maker.sql("DROP TABLE raw_keyed")  # the Parquet table becomes a view of the same columns
            maker.sql(f"CREATE TABLE raw_file USING parquet LOCATION '{raw}'")
            maker.sql("CREATE VIEW raw_keyed AS SELECT pid, amount_text FROM raw_file")
            assert plane.sample_key(con.gateway._con, plan) is None
            assert con.cursor().execute("SELECT COUNT(*) FROM k").fetchall()
    finally:
        for view in ("v_nested", "v_ansi", "v_keyed", "raw_keyed", "v_over_csv", "v_try", "v_raise"):
            maker.sql(f"DROP VIEW IF EXISTS {view}")
        maker.sql("DROP VIEW IF EXISTS global_temp.gv_ansi")


def test_work_bound_is_a_minute_per_spark_core(spark, tmp_path):
    """A statement over Spark tables only may do a minute of work per core Spark gives dpgate's
    session (2 here): accepted there, refused free over the same table in the database file, and
    refused on Spark too at twice the rows."""
    sql = f"SELECT COUNT(*) FROM t WHERE contains(lpad(region, 4096, 'x'), '{'ab' * 50}')"
    duck = tmp_path / "wd.duckdb"
    raw = duckdb.connect(str(duck))
    raw.execute(f"CREATE TABLE t AS {ROWS}")
    raw.close()
    with Owner(duck) as owner:
        owner.protect("t", unit="pid", max_rows=1000, public_roster=True)
        owner.add_analyst("alice", epsilon=10.0, delta=1e-3)
    with dpgate.connect(str(duck), analyst="alice") as con, pytest.raises(dpgate.errors.UnsupportedQueryError) as e:
        con.gateway.cost(sql)  # 3,000 subjects x 1,000 rows x 68,810 steps: over one core's minute
    assert e.value.code == "DP258"
    source = _parquet(tmp_path, ROWS, "w")
    with dpgate.connect(str(_protect(tmp_path / "ws.duckdb", spark, source, max_rows=1000)), analyst="alice",
                        spark=spark) as con:  # fmt: skip
        assert con.gateway.cost(sql) is not None
    with dpgate.connect(str(_protect(tmp_path / "ws2.duckdb", spark, source, max_rows=2000)), analyst="alice",
                        spark=spark) as con, pytest.raises(dpgate.errors.UnsupportedQueryError) as e:  # fmt: skip
        con.gateway.cost(sql)
    assert e.value.code == "DP258" and "2 Spark cores" in e.value.message


def test_statement_is_valid_spark_sql_from_the_ast(spark, spark_db):
    """The analyst's parts are generated from the AST with try_* operators; no TRY() reaches Spark."""
    with dpgate.connect(str(spark_db), analyst="alice", spark=spark) as con:
        _, plan, _ = _plan_and_plane(con, "SELECT region, SUM(income * 2 + 1) FROM t WHERE income / 3 > 1 GROUP BY region")
    sql = spark_plane.statement(plan, "src", "units", "charged", 42, 1)
    assert "TRY_MULTIPLY" in sql and "TRY_ADD" in sql and "TRY_DIVIDE" in sql and "TRY(" not in sql
    assert "xxhash64" in sql.lower() and "rand(" not in sql.lower()
    assert backends.engine_of(plan.table) == "spark"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sqlglot.parse_one(sql, read="spark")


def test_charged_sets_are_kept_by_fingerprint(spark, spark_db):
    """The charged units are sent to Spark once per charged set: a second query over the same set
    reuses them, a different set (one subject fewer) is sent anew and answers for its own subjects."""
    with dpgate.connect(str(spark_db), analyst="alice", spark=spark) as con:
        gw, plan, plane = _plan_and_plane(con, "SELECT COUNT(*) FROM t")
        roster = plan.table.roster_table_sql
        everyone, but_5 = f"(SELECT unit, 0 AS part FROM {roster})", f"(SELECT unit, 0 AS part FROM {roster} WHERE unit <> 5)"
        counts = []
        for charged in (everyone, but_5, everyone, but_5):
            counts.append(plane.exact(gw._con, plan, charged, 7).components[(0, "count")][0, 0])
            kept = len(plane._units)
        assert counts == [6000, 5998, 6000, 5998]  # 2 rows of each subject (max_rows = 2)
        assert kept == 2


def test_like_patterns_are_well_formed_in_interpreted_mode(spark, spark_db):
    """LIKE patterns with backslashes, letters of both cases and most symbols run clean when
    Spark evaluates them row by row (no generated code: where a malformed pattern would fail on the
    first row that reaches it); a pattern holding every candidate escape character is refused free."""
    symbols = spark_translate._ESCAPES
    with dpgate.connect(str(spark_db), analyst="alice", spark=spark) as con:
        for pattern in ("n\\o%", "%" + symbols[:-1] + "ABC\\%", "\\", "%\u212a%"):
            for op in ("LIKE",):  # ILIKE is refused on Spark (Java's case mapping is not DuckDB's)
                sql = f"SELECT COUNT(*) FROM t WHERE region {op} '{pattern}' OR region = 'north'"
                gw, plan, plane = _plan_and_plane(con, sql)
                plane.spark.conf.set("spark.sql.codegen.factoryMode", "NO_CODEGEN")
                plane.spark.conf.set("spark.sql.codegen.wholeStage", "false")
                try:
                    rows = plane.bounded_rows(plan, _charged(list(range(3000))), 3, 1)
                finally:
                    plane.spark.conf.unset("spark.sql.codegen.factoryMode")
                    plane.spark.conf.unset("spark.sql.codegen.wholeStage")
                # WHERE comes before the bound: every subject has at most 2 north rows (of 4,000), none match a pattern
                assert rows[0][0] == 4000, (op, pattern)
        with pytest.raises(dpgate.UnsupportedQueryError) as e:
            con.cursor().execute(f"SELECT COUNT(*) FROM t WHERE region LIKE '{symbols}'")
        assert e.value.code == "DP261" and _spent(con) == 0.0


def test_unreadable_source_is_refused_without_sparks_text(spark, tmp_path):
    """Spark's reason can name a file under a partition directory (a value): analysts get none of it."""
    source = _parquet(tmp_path, ROWS, "gone")
    path = _protect(tmp_path / "gone.duckdb", spark, source)
    (tmp_path / "gone.parquet").rename(tmp_path / "moved.parquet")
    with dpgate.connect(str(path), analyst="alice", spark=spark) as con:
        with pytest.raises(dpgate.PolicyError) as e:
            con.cursor().execute("SELECT COUNT(*) FROM t")
        assert e.value.code == "DP341" and _spent(con) == 0.0
    assert "PATH_NOT_FOUND" not in str(e.value) and "does not exist" not in str(e.value)


def test_dates_are_read_as_stored_whatever_the_clusters_rebase_mode(spark, tmp_path):
    """dpgate's session reads a Parquet date before 1582-10-15 as DuckDB does, even when the caller's
    cluster rebases such dates (LEGACY shifts them by days; EXCEPTION fails on one row's date)."""
    from dpgate.backends.spark.source import session_for

    where = tmp_path / "dates.parquet"
    duckdb.execute(f"COPY (SELECT i AS pid, CASE WHEN i = 3 THEN DATE '1500-01-01' ELSE DATE '2000-01-01' END AS d "
                   f"FROM range(10) t(i)) TO '{where}' (FORMAT parquet)")  # fmt: skip
    conf = spark.sparkContext._conf  # the live SparkConf a new session's settings start from
    key = "spark.sql.parquet.datetimeRebaseModeInRead"
    before = conf.get(key)
    try:
        for mode in ("LEGACY", "EXCEPTION"):
            conf.set(key, mode)
            own = session_for(spark)
            assert own.read.parquet(str(where)).selectExpr("min(d)").collect()[0][0] == datetime.date(1500, 1, 1), mode
    finally:
        if before is None:
            conf._jconf.remove(key)
        else:
            conf.set(key, before)


def test_a_refused_spark_declaration_leaves_the_declared_tables_as_they_were(spark, tmp_path):
    """A declaration with spark = ... writes the stub before its checks (they read its columns); a
    refused one left the stub of a source nothing declared, and the graph or table already declared
    under the name was refused at every query until the owner declared it again."""
    pq = pytest.importorskip("pyarrow.parquet")
    sources = {
        "a": pa.table({"src": pa.array([0, 1, 2], pa.int64()), "dst": pa.array([1, 2, 0], pa.int64())}),
        "b": pa.table({"a": pa.array([0, 1], pa.int64()), "b": pa.array([1, 2], pa.int64()), "w": [1.0, 2.0]}),
        "t": pa.table({"pid": pa.array([0, 1, 2], pa.int64()), "x": pa.array([1, 2, 3], pa.int64())}),
    }
    for name, rows in sources.items():
        pq.write_table(rows, tmp_path / f"{name}.parquet")
    db = tmp_path / "declared.duckdb"
    with Owner(db, spark=spark) as owner:
        owner.protect_graph("g", src="src", dst="dst", nodes=10, epsilon=100, spark=f"parquet:{tmp_path / 'a.parquet'}")
        owner.protect("t", unit="pid", public_roster=True, spark=f"parquet:{tmp_path / 't.parquet'}")
        owner.add_analyst("alice", epsilon=100, delta=1e-3)
        other = f"parquet:{tmp_path / 'b.parquet'}"
        for refused in (lambda: owner.protect_graph("g", src="a", dst="b", nodes=1, spark=other),  # too few nodes
                        lambda: owner.protect_graph("t", src="a", dst="b", nodes=10, spark=other),  # an ordinary table
                        lambda: owner.protect("g", unit="a", spark=other),  # a graph
                        lambda: owner.protect("t", unit="nope", spark=other)):  # no such column  # fmt: skip
            with pytest.raises(dpgate.Error):
                refused()
    with dpgate.connect(str(db), analyst="alice", spark=spark) as con:
        cur = con.cursor()
        cur.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) TRIANGLE_COUNT(src, dst) FROM g")
        cur.execute("SELECT COUNT(*) FROM t")


def test_a_roster_warning_raised_as_an_error_keeps_the_committed_spark_declaration(spark, tmp_path):
    """The RosterWarning comes after the declaration is committed; under a warnings filter "error" it
    was taken for a refusal and the stub was dropped, so the declared table failed every query
    (DP230: no table t) until the owner declared it again."""
    pq = pytest.importorskip("pyarrow.parquet")
    pq.write_table(pa.table({"pid": pa.array([0, 1, 2], pa.int64()), "x": pa.array([1, 2, 3], pa.int64())}),
                   tmp_path / "t.parquet")  # fmt: skip
    db = tmp_path / "warned.duckdb"
    with Owner(db, spark=spark) as owner:
        owner.add_analyst("alice", epsilon=100, delta=1e-3)
        with warnings.catch_warnings():
            warnings.simplefilter("error", dpgate.RosterWarning)
            with pytest.raises(dpgate.RosterWarning):
                owner.protect("t", unit="pid", spark=f"parquet:{tmp_path / 't.parquet'}")
    with dpgate.connect(str(db), analyst="alice", spark=spark) as con:
        con.cursor().execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) COUNT(*) FROM t")
