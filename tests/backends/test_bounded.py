"""The bounded statistics built once (``dpgate.backends.bounded``) and written for each engine.

Each aggregate kind's tree, written for DuckDB and for Spark, gives the same statistics on the same
rows: clamps, grid points (ties included), NULL inputs and NaN alike. The backends stay below the
query classes (no backend imports ``dpgate.queries``) and every module stays short.
"""

from __future__ import annotations

import ast
import math
from decimal import Decimal
from pathlib import Path

import duckdb
import numpy as np
import pytest
import sqlglot
from sqlglot import exp

from dpgate.backends import bounded
from dpgate.mechanisms.base import (
    AVG,
    COUNT_DISTINCT,
    COUNT_ROWS,
    COUNT_SUBJECTS,
    COUNT_VALUES,
    QUANTILE,
    STDDEV_SAMP,
    SUM,
    VAR_POP,
    AggSpec,
)

BACKENDS = Path(__file__).resolve().parents[2] / "dpgate" / "backends"

#: (kind, column, lower, upper, grid, integer): a BIGINT input on the unit grid, a DOUBLE on a fine
#: grid (ties at 1/8), and a DOUBLE on a coarse grid of 4 (every x ≡ 2 (mod 4) a tie).
CASES = [
    (kind, col, lo, hi, grid, integer)
    for kind in (SUM, AVG, VAR_POP, STDDEV_SAMP, QUANTILE)
    for col, lo, hi, grid, integer in ((1, -3, 7, 1.0, True), (0, -5.5, 5.5, 2.0**-2, False),
                                       (0, -100.0, 100.0, 4.0, False))  # fmt: skip
] + [(kind, 0, None, None, 1.0, True) for kind in (COUNT_ROWS, COUNT_VALUES, COUNT_DISTINCT, COUNT_SUBJECTS)]

#: (unit, DOUBLE input, BIGINT input): values inside, outside and on the bounds, grid ties, NULLs, NaN.
ROWS = [
    (1, 0.125, 3), (1, 0.375, -4), (1, 6.0, 8), (1, None, None), (2, -7.25, 7), (2, 2.0, 0), (2, 10.0, -3),
    (3, 6.0, None), (3, -2.0, 5), (3, float("nan"), 2), (4, 0.625, 1), (4, 101.0, 1), (4, -98.0, 6), (5, 14.0, -9),
]


def _spec(kind, col, lo, hi, grid, integer) -> AggSpec:
    expr = None if kind == COUNT_ROWS or (kind == COUNT_SUBJECTS and col == 0) else exp.column("x")
    lo_hi = {} if lo is None else {"lower": lo, "upper": hi}
    return AggSpec(col, kind, kind, expr, (), grid=grid, integer=integer, **lo_hi)


def _plain(x):
    if isinstance(x, Decimal):
        return int(x)
    if isinstance(x, (list, np.ndarray)):
        return [int(v) for v in x]
    return x if x is None else int(x)


def _duckdb_values(sqls: list[str]) -> list:
    con = duckdb.connect()
    con.execute("CREATE TABLE t (__unit BIGINT, __v0 DOUBLE, __v1 BIGINT)")
    con.executemany("INSERT INTO t VALUES (?, ?, ?)", ROWS)
    return [_plain(v) for v in con.execute(f"SELECT {', '.join(sqls)} FROM t").fetchone()]


def test_each_kind_written_for_duckdb_computes_the_grid_statistics():
    """DuckDB's statements against a direct computation: clamp, then the grid point (ties to even)."""
    for case in CASES:
        agg = _spec(*case)
        kind, col, lo, hi, grid, _ = case
        got = _duckdb_values([s for _, s in bounded.agg_sql(agg, "duckdb")])
        values = [r[1 + col] for r in ROWS if r[1 + col] is not None]
        if lo is not None:
            clamped = [hi if (isinstance(v, float) and math.isnan(v)) or v > hi else lo if v < lo else v for v in values]
            scaled = [round(v / grid) for v in clamped]  # Python's round: half to even, as DuckDB's cast
        if kind == SUM:
            assert got == [sum(scaled)], case
        elif kind == AVG:
            assert got == [sum(scaled), len(values)], case
        elif kind in (VAR_POP, STDDEV_SAMP):
            mid = (round(lo / grid) + round(hi / grid)) // 2
            assert got == [sum(s - mid for s in scaled), sum((s - mid) ** 2 for s in scaled), len(values)], case
        elif kind == QUANTILE:  # gathered in any order; sorted on arrival (``bounded._sorted``)
            assert [sorted(got[0])] == [sorted(scaled)], case


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-grid{c[4]:g}")
def test_the_spark_tree_differs_by_the_dialect_transforms_only(case):
    agg = _spec(*case)
    for (label, duck), (label2, spark) in zip(bounded.agg_sql(agg, "duckdb"), bounded.agg_sql(agg, "spark")):
        assert label == label2
        assert "BROUND" not in duck and "XXHASH64" not in duck
        if agg.kind in (SUM, AVG, VAR_POP, STDDEV_SAMP) and label != "count":
            assert "DECIMAL(38, 0)" in spark and "DECIMAL" not in duck
        if agg.kind == QUANTILE:
            assert spark.startswith("COLLECT_LIST(") and "FILTER" in duck and "ORDER" not in duck
        if not agg.integer and label != "count":
            assert "BROUND(" in spark  # Spark's cast truncates: round half to even first, as DuckDB's cast
        if agg.kind in (COUNT_ROWS, COUNT_VALUES, COUNT_DISTINCT, COUNT_SUBJECTS):
            assert duck == spark


def test_rank_hashes_per_engine():
    salt = exp.Literal.number(7)
    assert bounded.sql(bounded.rank_tree(["__unit", "__k0"], salt), "duckdb") == "HASH(XOR(HASH(__unit, __k0), 7))"
    assert bounded.sql(bounded.rank_tree(["__unit", "__k0"], salt), "spark") == (
        "XXHASH64(XXHASH64(XXHASH64(__unit), XXHASH64(__k0)) ^ 7)"
    )


def test_a_null_keeps_its_position_in_the_spark_rank(spark):
    """Rows (NULL, 5) and (5, NULL) of one subject must rank differently, and which comes first must
    change with the salt: Spark's hash skips NULL arguments, and a tie would let the sort's order
    (not the salt) choose the row a subject keeps."""
    from dpgate.backends.spark.source import session_for

    own = session_for(spark)
    first = set()
    for salt in range(12):
        rank = bounded.sql(bounded.rank_tree(["__unit", "a", "b"], exp.Literal.number(salt)), "spark")
        (r1, r2) = own.sql(f"SELECT {rank} FROM VALUES (1, NULL, 5), (1, 5, NULL) AS t(__unit, a, b)").collect()
        assert r1[0] != r2[0], salt
        first.add(r1[0] < r2[0])
    assert first == {True, False}  # P(the same order 12 times) = 2 * 2^-12 for a keyed hash


def test_each_kind_answers_alike_on_both_engines(spark):
    from dpgate.backends.spark.source import session_for

    own = session_for(spark)
    own.createDataFrame(ROWS, schema="__unit bigint, __v0 double, __v1 bigint").createOrReplaceTempView("__bounded_t")
    try:
        for case in CASES:
            agg = _spec(*case)
            duck = _duckdb_values([s for _, s in bounded.agg_sql(agg, "duckdb")])
            row = own.sql(f"SELECT {', '.join(s for _, s in bounded.agg_sql(agg, 'spark'))} FROM __bounded_t").collect()[0]
            assert [_plain(v) for v in row] == duck, case
    finally:
        own.catalog.dropTempView("__bounded_t")


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def test_no_backend_imports_a_query_package():
    for path in BACKENDS.rglob("*.py"):
        assert not {m for m in _imports(path) if m.startswith("dpgate.queries")}, path


def test_backend_modules_are_at_most_800_lines():
    for path in BACKENDS.rglob("*.py"):
        assert len(path.read_text().splitlines()) <= 800, path


def test_the_sampling_skeleton_is_one_tree_written_per_engine():
    """The bounded statement after the source rows is built once (``backends.statement``): Spark's
    text differs only where its SQL does (no QUALIFY; NULLs ordered last explicitly, DuckDB's
    default, so a hash tie between a NULL group and another breaks the same way on both)."""
    from types import SimpleNamespace

    from dpgate.backends import statement
    from dpgate.mechanisms.base import COUNT_ROWS, AggSpec

    count = AggSpec(index=0, kind=COUNT_ROWS, label="count(*)", expr=None, components=())
    plan = SimpleNamespace(keys=[SimpleNamespace(domain=None)], aggs=[count], bound_groups=True, max_groups=2,
                           max_rows=3, key_selection=None)  # fmt: skip
    texts = {}
    for engine, salt in (("duckdb", exp.Var(this="$salt")), ("spark", exp.Literal.number(7))):
        sk = statement.Skeleton(plan, engine, salt, [None], statement.stats(plan))
        texts[engine] = sk.aggregate(sk.sampled("SELECT __unit, __k0 FROM t"), filtered=True)
        sqlglot.parse_one(texts[engine], read=engine)  # dpgate's own SQL parses in the engine's dialect
    assert "QUALIFY" in texts["duckdb"] and "QUALIFY" not in texts["spark"].upper()
    assert "NULLS LAST" in texts["spark"] and "NULLS FIRST" not in texts["spark"]
    assert texts["duckdb"].count("__gr") == texts["spark"].count("__gr")


@pytest.mark.parametrize("per_cell", [3, 60_000])  # alone, and on a pool of threads (over 100,000 values)
def test_quantile_cells_arrive_sorted_whatever_order_the_engine_gathered(per_cell):
    from dpgate.mechanisms.base import ExactAnswer

    rng = np.random.default_rng(5)
    col = np.empty((1, 4), dtype=object)
    col[0, :] = [bounded._values(list(rng.integers(-50, 50, per_cell))), bounded._values(None), bounded._values([4]),
                 bounded._values(rng.integers(0, 10**9, per_cell))]  # fmt: skip
    exact = bounded._sorted(ExactAnswer([("a",), ("b",), ("c",), ("d",)], {(0, "quantile"): col}, None, 0, None))
    cells = exact.components[(0, "quantile")][0]
    for i in (0, 3):
        assert cells[i].size == per_cell and bool((np.diff(cells[i]) >= 0).all())
    assert cells[1].size == 0 and cells[2].tolist() == [4]
