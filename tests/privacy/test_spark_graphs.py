"""Subgraph counts over an edge table in Spark: the same graph, the same answers, the neighbour harness.

A graph protected with ``spark = ...`` keeps its edges in Spark; Spark applies the WHERE and returns
the distinct edges (``nodes = N``) or the distinct endpoint pairs, which the node table maps to
node indices in the database file. The ladder runs in dpgate's process on that simple graph, so
for the same test seed the answers equal DuckDB's: duplicates, reversed edges, self-loops, NULL
endpoints and endpoints outside the universe are merged or dropped alike on both engines.
"""

from __future__ import annotations

import duckdb
import harness
import pytest

import dpgate
from dpgate.catalog.owner import Owner

#: A random graph on 60 nodes with what the simple graph merges or drops: each edge twice in some
#: rows, reversed in others, self-loops, endpoints outside 0..59 and NULLs; a weight to filter on.
EDGES = """
CREATE TABLE g AS
SELECT (i * 37) % 64 AS src, (i * i * 11 + 5 + i // 64) % 64 AS dst,
       CAST(i * 17 % 100 AS DOUBLE) / 10 AS w, 'k' || CAST(i % 3 AS VARCHAR) AS kind
FROM range(400) r(i)
UNION ALL SELECT (i * i * 11 + 5 + i // 64) % 64, (i * 37) % 64, 1.0, 'k0' FROM range(100) r(i)
UNION ALL SELECT i, i, 1.0, 'k1' FROM range(5) r(i)
UNION ALL SELECT NULL, 3, 1.0, 'k2' UNION ALL SELECT 4, NULL, 1.0, 'k2' UNION ALL SELECT -1, 2, 1.0, 'k2';
CREATE TABLE people AS SELECT 'p' || CAST(i AS VARCHAR) AS id FROM range(60) r(i);
CREATE TABLE named AS SELECT 'p' || CAST(src AS VARCHAR) AS a, 'p' || CAST(dst AS VARCHAR) AS b, w FROM g
"""
GRAPHS = {
    "g": dict(src="src", dst="dst", nodes=60, epsilon=1e6, allow_kclique=True),
    "named": dict(src="a", dst="b", nodes="people", epsilon=1e6),
}
ANALYSTS = {harness.ANALYST: {"epsilon": 1e6, "delta": 1.0, "epsilon_per_query": 100.0, "delta_per_query": 0.5}}


def _q(rest: str) -> str:
    return f"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 2) {rest}"


STATEMENTS = [
    _q("TRIANGLE_COUNT(src, dst) AS t FROM g"),
    _q("KSTAR_COUNT(src, dst, 2) AS s, KTRIANGLE_COUNT(src, dst, 2) AS kt FROM g WHERE w > 2.5 AND kind <> 'k1'"),
    _q("KCLIQUE_COUNT(src, dst, 4) AS c FROM g WHERE w BETWEEN 1 AND 9"),
    _q("COUNT(*) AS t FROM g a JOIN g b ON a.dst = b.src JOIN g c ON c.src = a.src AND c.dst = b.dst"),
    _q("TRIANGLE_COUNT(a, b) AS t, KSTAR_COUNT(a, b, 3) AS s FROM named WHERE w < 8"),
]


def _build(spark, path, edges_sql: str, changes: str = "") -> tuple:
    """A DuckDB file with the graphs protected, and its twin whose edge tables live in Spark."""
    raw = duckdb.connect(str(path))
    raw.execute(edges_sql + (f"; {changes}" if changes else ""))
    for table in GRAPHS:
        raw.execute(f"COPY {table} TO '{path.with_name(path.stem + '_' + table)}.parquet' (FORMAT parquet)")
    raw.close()
    twin = path.with_name(path.stem + "_spark.duckdb")
    duckdb.connect(str(twin)).execute("CREATE TABLE people AS SELECT 'p' || CAST(i AS VARCHAR) AS id FROM range(60) r(i)").close()
    for db, spark_of in ((path, lambda t: None), (twin, lambda t: f"parquet:{path.with_name(path.stem + '_' + t)}.parquet")):
        with Owner(db, spark=spark) as owner:
            if db == twin:
                owner.set_spark("local[2]")  # the harness's gateways find the running local Spark through it
            for table, spec in GRAPHS.items():
                owner.protect_graph(table, **spec, spark=spark_of(table))
            for name, spec in ANALYSTS.items():
                owner.add_analyst(name, **spec)
                owner.allow_test_seed(name)
    return path, twin


@pytest.fixture(scope="module")
def world(spark, tmp_path_factory):
    return _build(spark, tmp_path_factory.mktemp("graph") / "graph.duckdb", EDGES)


def _answer(path, spark, sql: str):
    with dpgate.connect(str(path), analyst=harness.ANALYST, test_seed=harness.SEED, spark=spark) as con:
        cur = con.cursor()
        cur.execute(sql)
        return cur.fetchall(), cur.release.epsilon


def test_spark_graph_answers_equal_duckdb(world, spark):
    duck, on_spark = world
    for sql in STATEMENTS:
        a, b = _answer(duck, spark, sql), _answer(on_spark, spark, sql)
        assert a[0] and a == b, sql


def test_spark_graph_statistics_equal_duckdb(world):
    duck, on_spark = world
    with harness.gateways(duck, on_spark) as (gd, gs):
        for sql in STATEMENTS:
            a, b = harness.statistics_of(gd, sql), harness.statistics_of(gs, sql)
            assert a.hints["edges"] == b.hints["edges"] > 100 and a.values() == b.values(), sql


@pytest.mark.parametrize(
    ("sql", "code"),
    [
        (_q("TRIANGLE_COUNT(src, dst) AS t FROM g WHERE lower(kind) = 'k0'"), "DP261"),  # case mapping differs
        (_q("TRIANGLE_COUNT(src, dst) AS t FROM g WHERE kind = '${env:HOME}'"), "DP261"),  # Spark's variables
        (_q("TRIANGLE_COUNT(src, dst) AS t FROM g WHERE nope > 1"), "DP218"),
    ],
)
def test_spark_graph_refusals_are_free(world, spark, sql, code):
    _, on_spark = world
    with dpgate.connect(str(on_spark), analyst=harness.ANALYST, spark=spark) as con:
        cur = con.cursor()
        budget = cur.execute("SHOW BUDGET").fetchall()
        with pytest.raises(dpgate.Error) as info:
            cur.execute(sql)
        assert info.value.code == code, info.value
        assert cur.execute("SHOW BUDGET").fetchall() == budget


@pytest.fixture(scope="module")
def neighbours(spark, tmp_path_factory):
    """Spark twins of D and of D′ with one edge removed (every row of it, both directions) and one
    edge added (a new pair, in a heavy row with the largest weight)."""
    out = []
    for name, change in (("base", ""), ("removed", "DELETE FROM g WHERE (src, dst) IN ((SELECT src, dst FROM g "
                         "WHERE src BETWEEN 0 AND 59 AND dst BETWEEN 0 AND 59 AND src <> dst LIMIT 1)) OR (dst, src) IN "
                         "((SELECT src, dst FROM g WHERE src BETWEEN 0 AND 59 AND dst BETWEEN 0 AND 59 AND src <> dst "
                         "LIMIT 1))"),
                         ("added", "INSERT INTO g SELECT 58, 59, 9.9, 'k0' WHERE NOT EXISTS (SELECT 1 FROM g WHERE "
                          "(src = 58 AND dst = 59) OR (src = 59 AND dst = 58))")):  # fmt: skip
        out.append(_build(spark, tmp_path_factory.mktemp(name) / f"{name}.duckdb", EDGES, change)[1])
    return out


def test_neighbour_harness_on_spark_graphs(neighbours):
    base, *others = neighbours
    with harness.gateways(base, *others) as (gd, *gns):
        for sql in STATEMENTS[:3]:
            before = harness.statistics_of(gd, sql)
            for name, gn in zip(("removed", "added"), gns):
                after = harness.check_statement(gd, gn, sql, context=f"spark graph, {name}: {sql}", before=before)[1]
                assert abs(after.hints["edges"] - before.hints["edges"]) <= 1


def test_a_policy_file_declares_a_graph_in_spark(world, spark, tmp_path):
    """[graphs.x] spark = ... : the edges stay in Spark; the roster is the graph's one shared budget
    (no units are read from the edges)."""
    duck, _ = world
    parquet = duck.with_name(duck.stem + "_g.parquet")
    policy = tmp_path / "policy.toml"
    policy.write_text(
        '[backends.spark]\nmaster = "local[2]"\n\n'
        f'[graphs.g]\nsrc = "src"\ndst = "dst"\nnodes = 60\nepsilon = 5.0\nspark = "parquet:{parquet}"\n\n'
        f'[analysts.{harness.ANALYST}]\nepsilon = 5.0\nallow_test_seed = true\n'
    )
    path = tmp_path / "policy.duckdb"
    with Owner(path) as owner:
        assert "protected graph g (src - dst)" in owner.apply_policy(policy)
    roster = duckdb.connect(str(path), read_only=True)
    try:
        (n,) = roster.execute("SELECT count(*) FROM dpgate.\"roster_g\"").fetchone()
    finally:
        roster.close()
    assert n == 1
    sql = STATEMENTS[0]
    assert _answer(path, None, sql) == _answer(duck, spark, sql)  # the same seed, the same graph


def _pair(spark, tmp_path, name: str, rows) -> tuple:
    """A graph (nodes = 10) of the Arrow table ``rows`` in a DuckDB file and in Spark (a Parquet file
    written by pyarrow: dictionary pages and statistics)."""
    import pyarrow.parquet as pq

    parquet = tmp_path / f"{name}.parquet"
    pq.write_table(rows, parquet)
    duck, twin = tmp_path / f"{name}.duckdb", tmp_path / f"{name}_spark.duckdb"
    duckdb.connect(str(duck)).execute(f"CREATE TABLE g AS SELECT * FROM '{parquet}'").close()
    for db, source in ((duck, None), (twin, f"parquet:{parquet}")):
        with Owner(db, spark=spark) as owner:
            owner.set_spark("local[2]")
            owner.protect_graph("g", src="src", dst="dst", nodes=10, epsilon=1e6, spark=source)
            for analyst, spec in ANALYSTS.items():
                owner.add_analyst(analyst, **spec)
                owner.allow_test_seed(analyst)
    return duck, twin


def test_one_edge_row_never_decides_another_on_spark(spark, tmp_path):
    """A graph's WHERE is not under a guard, so Spark could push it into the Parquet reader, whose
    row-group dictionaries and statistics compare DOUBLEs as Java does: a row holding -0.0 failed
    w = 0 unless another row of its row group held 0.0, and a NaN failed w > 5 unless another row
    exceeded 5 (the group was skipped). Adding one edge then added two to the filtered graph."""
    import pyarrow as pa

    base = [(0, 1, -0.0), (1, 2, 1.0), (2, 3, 2.0), (3, 4, float("nan")), (4, 5, 3.0)]
    for where, added in (("w = 0", (5, 6, 0.0)), ("w > 5", (5, 6, 7.0))):
        sql = _q(f"KSTAR_COUNT(src, dst, 2) AS s FROM g WHERE {where}")
        found = []
        for name, rows in (("base", base), ("added", [*base, added])):
            s, d, w = zip(*rows)
            table = pa.table({"src": pa.array(s, pa.int64()), "dst": pa.array(d, pa.int64()), "w": pa.array(w, pa.float64())})
            with harness.gateways(*_pair(spark, tmp_path, f"{name}_{where[2]}", table)) as (gd, gs):
                found.append((harness.statistics_of(gd, sql).hints["edges"], harness.statistics_of(gs, sql).hints["edges"]))
        assert found == [(1, 1), (2, 2)], (where, found)


def test_a_reader_that_pushes_filters_still_sees_every_edge_row(spark, tmp_path):
    """The WHERE is guarded by a data column of another relation, so Spark cannot push it into a
    source's reader: with Parquet's pushdown turned back on (as another format's reader would push),
    one edge row still decides nothing about another."""
    import pyarrow as pa

    base = [(0, 1, -0.0), (1, 2, 1.0), (2, 3, 2.0), (3, 4, float("nan")), (4, 5, 3.0)]
    sql = _q("KSTAR_COUNT(src, dst, 2) AS s FROM g WHERE w = 0")
    found = []
    for name, rows in (("base", base), ("added", [*base, (5, 6, 0.0)])):
        s, d, w = zip(*rows)
        table = pa.table({"src": pa.array(s, pa.int64()), "dst": pa.array(d, pa.int64()), "w": pa.array(w, pa.float64())})
        with harness.gateways(*_pair(spark, tmp_path, f"pushed_{name}", table)) as (gd, gs):
            plane = gs._plane("spark")
            plane.spark.conf.set("spark.sql.parquet.filterPushdown", "true")
            try:
                found.append(harness.statistics_of(gs, sql).hints["edges"])
            finally:
                plane.spark.conf.set("spark.sql.parquet.filterPushdown", "false")
    assert found == [1, 2], found


def test_date_shifts_keep_duckdbs_infinities_on_spark(spark, tmp_path):
    """DuckDB's DATE 'infinity' + n is 'infinity' (and '-infinity' - n '-infinity'); Spark reads them as
    days ±(2^31 - 1), where try_add overflowed 'infinity' + 1 to NULL. A shift past DuckDB's finite dates
    is NULL on both."""
    rows = duckdb.sql(
        "SELECT CAST(i AS BIGINT) AS src, CAST(i + 1 AS BIGINT) AS dst, [DATE 'infinity', DATE '-infinity', "
        "DATE '2020-01-01', DATE '5881580-07-09', DATE '-5877641-06-26', NULL][i + 1] AS day FROM range(6) t(i)"
    ).to_arrow_table()  # fmt: skip
    with harness.gateways(*_pair(spark, tmp_path, "days", rows)) as (gd, gs):
        for where in ("day + 1 > DATE '2000-01-01'", "3 + day > DATE '2000-01-01'", "day - 1 < DATE '2000-01-01'",
                      "day + 2 > DATE '2000-01-01'", "day - 2 < DATE '2000-01-01'", "day + 0 = day", "(day + 1) - 1 = day"):  # fmt: skip
            sql = _q(f"TRIANGLE_COUNT(src, dst) AS t FROM g WHERE {where}")
            assert harness.statistics_of(gd, sql).hints["edges"] == harness.statistics_of(gs, sql).hints["edges"], where
