"""The bounded statistics of a counting plan, built once as sqlglot trees and written per engine.

Every data plane computes the same per-cell integer statistics from a subject's bounded rows:
each aggregate input clamped to its declared bounds and put on the plan's grid, then counted or
summed. Those expressions decide the sensitivity the noise is calibrated to, so they are built
here once, from the plan (``AggSpec``), and each engine's differences are transforms of the tree
(``for_engine``), not a second hand-written statement:

- Spark's ``CAST(DOUBLE AS BIGINT)`` truncates where DuckDB's rounds half to even: Spark gets
  ``bround`` first, which rounds half to even too, so both put a value on the same grid point;
- Spark's sums are of ``DECIMAL(38, 0)`` (DuckDB sums BIGINTs into an exact HUGEINT);
- a quantile's cell values are ``list(s) FILTER (WHERE v IS NOT NULL)`` on DuckDB and
  ``collect_list(s)`` on Spark (which skips NULLs itself), sorted here (``_values``);
- a row's or group's rank is a keyed hash: DuckDB's ``hash(xor(hash(...), salt))``, Spark's
  ``xxhash64(xxhash64(...) ^ salt)``. The salt is the same; the hash functions differ, so a sampled
  answer on Spark is not DuckDB's for the same salt (without sampling the statistics are equal).

The module also reads the charged (unit, part) relation for a plane that is not the database file
(``read_charged``) and turns a plane's rows into an ``ExactAnswer`` (``answer``), so that every
plane returns the same thing to the counting class.
"""

from __future__ import annotations

import itertools
import math
import os
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Sequence
from typing import Any

import numpy as np
from sqlglot import exp

from dpgate import errors
from dpgate.backends import Charged
from dpgate.mechanisms.base import (
    AVG,
    COUNT_DISTINCT,
    COUNT_ROWS,
    COUNT_SUBJECTS,
    COUNT_VALUES,
    QUANTILE,
    SUM,
    VARIANCE_KINDS,
    AggSpec,
    ExactAnswer,
)
from dpgate.plans import CountPlan

#: The engines the trees are written for (sqlglot dialect names).
ENGINES = ("duckdb", "spark")


def _col(v: str | exp.Expr) -> exp.Expr:
    if isinstance(v, exp.Expr):
        return v.copy()
    return exp.column(v) if v.isidentifier() else exp.maybe_parse(v, dialect="duckdb")


def _num(value: int | float | str) -> exp.Expr:
    """A number literal written as given (``repr`` of a float, so both engines read the same value)."""
    return exp.Literal.number(value)


def _cast(x: exp.Expr, to: str, *, try_: bool = False) -> exp.Expr:
    if try_:  # safe: sqlglot writes TRY_CAST for Spark too
        return exp.TryCast(this=x, to=exp.DataType.build(to, dialect="duckdb"), safe=True)
    return exp.Cast(this=x, to=exp.DataType.build(to, dialect="duckdb"))


def scaled_tree(agg: AggSpec, v: str | exp.Expr, *, clamp: bool = True) -> exp.Expr:
    """An aggregate input clamped to its bounds and put on its grid, as a BIGINT (NULL stays NULL).

    ``clamp=False``: the clamp's ELSE branch alone, for an input that ``catalog.within_bounds`` found
    within the bounds in the same snapshot, where the clamp returns exactly that branch [elide].
    The grid's cast rounds half to even (DuckDB's cast; Spark gets ``bround`` in ``for_engine``).
    """
    # Clamp, then put on the grid. The planner checked that |bound / grid| < 2^53, so no value can
    # overflow the cast [grid-cast]. The clamp is a CASE, not least(greatest(...)): the same value for
    # every non-NULL input (NaN compares above everything, so it clamps to the upper bound) at about a
    # quarter of the cost per row [clamp-case]. Integer inputs are compared as DOUBLE: exact against
    # the bounds (|bound| < 2^53) whatever the input type, where comparing a UHUGEINT with a negative
    # bound made DuckDB cast the value to BIGINT, which failed for values ≥ 2^63 — a failure after the
    # debit that one subject's value decided. Only values inside the bounds reach the ELSE branch,
    # whose cast cannot fail.
    # A NULL input (or a row a FILTER excludes) stays NULL: both comparisons are NULL, so the CASE takes
    # its ELSE branch, a cast of NULL. Were it summed as a bound while COUNT(v) skips it, AVG's centred
    # sum would move by |lower| per row instead of its declared (upper - lower) / 2 [null-input].
    def clamped(x: exp.Expr, lo: exp.Expr, hi: exp.Expr, inside: exp.Expr) -> exp.Expr:
        return exp.Paren(this=exp.Case(
            ifs=[exp.If(this=exp.LT(this=x.copy(), expression=lo.copy()), true=lo.copy()),
                 exp.If(this=exp.GT(this=x.copy(), expression=hi.copy()), true=hi.copy())],
            default=inside,
        ))  # fmt: skip

    if agg.grid == 1.0 and agg.integer:
        inside = _cast(_col(v), "BIGINT", try_=True)
        if not clamp:
            return inside
        return clamped(_cast(_col(v), "DOUBLE"), _num(int(agg.lower)), _num(int(agg.upper)), inside)
    x = _cast(_col(v), "DOUBLE")
    value = clamped(x, _num(repr(float(agg.lower))), _num(repr(float(agg.upper))), x.copy()) if clamp else x
    if agg.grid <= 1.0:
        scaled = exp.Mul(this=value, expression=_num(int(round(1 / agg.grid))))
    else:
        scaled = exp.Div(this=value, expression=_num(int(agg.grid)))
    out = _cast(scaled, "BIGINT")
    out.meta["dp_grid_cast"] = True  # rounds half to even: Spark needs bround first (for_engine)
    return out


def stat_trees(agg: AggSpec, *, clamp: bool = True) -> list[tuple[str, exp.Expr]]:
    """(component label, aggregate tree) for each integer statistic of one aggregate."""
    v = exp.column(f"__v{agg.index}")
    if agg.kind == COUNT_ROWS:
        return [("count", exp.Count(this=exp.Star()))]
    if agg.kind == COUNT_VALUES:
        return [("count", exp.Count(this=v))]
    if agg.kind == COUNT_DISTINCT:
        return [("count", exp.Count(this=exp.Distinct(expressions=[v])))]
    if agg.kind == COUNT_SUBJECTS:
        subject = v if agg.expr is not None else exp.column("__unit")
        return [("subjects", exp.Count(this=exp.Distinct(expressions=[subject])))]
    s = scaled_tree(agg, v, clamp=clamp)

    def total(x: exp.Expr) -> exp.Expr:
        summed = exp.Sum(this=x)
        summed.meta["dp_exact_sum"] = True  # Spark sums it as DECIMAL(38, 0) (for_engine)
        return exp.Coalesce(this=summed, expressions=[_num(0)])

    if agg.kind == SUM:
        return [("sum", total(s))]
    if agg.kind == AVG:
        return [("centered sum", total(s)), ("count", exp.Count(this=v.copy()))]
    if agg.kind in VARIANCE_KINDS:
        # Centred, so squares stay below 2^40 and their sum is exact [variance].
        mid = (round(agg.lower / agg.grid) + round(agg.upper / agg.grid)) // 2

        def y() -> exp.Expr:
            centred = exp.Paren(this=exp.Sub(this=s.copy(), expression=_num(mid)))
            centred.meta["dp_centred"] = True
            return centred

        return [
            ("centered sum", total(y())),
            ("centered squares", total(exp.Mul(this=y(), expression=y()))),
            ("count", exp.Count(this=v.copy())),
        ]
    if agg.kind == QUANTILE:
        # The cell's clamped grid values: the quantile mechanism's input [quantile]. Gathered in any
        # order and sorted by ``_values``: DuckDB's ordered aggregate sorts each group's list and
        # hands it over element by element, four times the time of a plain list and a numpy sort.
        not_null = exp.Not(this=exp.Is(this=v.copy(), expression=exp.Null()))
        return [("quantile", exp.Filter(this=exp.ArrayAgg(this=s.copy()), expression=exp.Where(this=not_null)))]
    raise errors.InternalError(f"unknown aggregate kind {agg.kind}")


def rank_tree(columns: Sequence[str | exp.Expr], salt: exp.Expr) -> exp.Expr:
    """A keyed hash of ``columns``: re-hashed after mixing in the salt, because DuckDB's multi-argument
    hash combines a constant salt's hash almost linearly (it would rank rows nearly the same way for
    every salt). It reads the given columns only, so a row's rank depends on that row alone."""
    inner = exp.Anonymous(this="hash", expressions=[_col(c) for c in columns])
    out = exp.Anonymous(this="hash", expressions=[exp.BitwiseXor(this=inner, expression=salt)])
    out.meta["dp_rank"] = True
    return out


def for_engine(tree: exp.Expr, engine: str) -> exp.Expr:
    """``tree`` (from this module) rewritten for ``engine``; the same values on every engine."""
    if engine == "duckdb":
        return tree
    if engine != "spark":
        raise errors.InternalError(f"no dialect transform for {engine}")

    def spark(n: exp.Expr) -> exp.Expr:
        if isinstance(n, exp.Cast) and n.meta.get("dp_grid_cast"):
            # Spark's CAST(DOUBLE AS BIGINT) truncates; bround rounds half to even as DuckDB's cast does
            return exp.Cast(this=exp.Anonymous(this="bround", expressions=[n.this]), to=n.to)
        if isinstance(n, exp.Paren) and n.meta.get("dp_centred"):
            return _cast(n.this, "DECIMAL(38, 0)")
        if isinstance(n, exp.Sum) and n.meta.get("dp_exact_sum") and not isinstance(n.this, exp.Mul):
            if isinstance(n.this, exp.Cast) and n.this.to.is_type(exp.DataType.Type.DECIMAL):
                return n  # a centred value is DECIMAL(38, 0) already
            return exp.Sum(this=_cast(n.this, "DECIMAL(38, 0)"))
        if isinstance(n, exp.Filter) and isinstance(n.this, exp.ArrayAgg):
            # collect_list skips NULLs (DuckDB's FILTER's job); the values are sorted on arrival
            return exp.Anonymous(this="collect_list", expressions=[n.this.this])
        if isinstance(n, exp.Anonymous) and n.meta.get("dp_rank"):
            (mixed,) = n.expressions
            # Spark's multi-argument hash skips NULL arguments without marking where they were, so
            # (NULL, 5) and (5, NULL) would tie for every salt and the sort's order would choose;
            # hashing each column alone first keeps its position (xxhash64(NULL) is the seed).
            each = [exp.Anonymous(this="xxhash64", expressions=[c]) for c in mixed.this.expressions]
            inner = exp.Anonymous(this="xxhash64", expressions=each)
            return exp.Anonymous(this="xxhash64", expressions=[exp.BitwiseXor(this=inner, expression=mixed.expression)])
        return n

    return _bottom_up(tree.copy(), spark)


def _bottom_up(n: exp.Expr, fun) -> exp.Expr:
    """``fun`` applied to every node, children first (a rewritten node's children are rewritten too)."""
    for key, value in list(n.args.items()):
        if isinstance(value, exp.Expr):
            n.set(key, _bottom_up(value, fun))
        elif isinstance(value, list):
            n.set(key, [_bottom_up(v, fun) if isinstance(v, exp.Expr) else v for v in value])
    return fun(n)


def sql(tree: exp.Expr, engine: str) -> str:
    """``tree`` written for ``engine``."""
    return for_engine(tree, engine).sql(dialect=engine)


def scaled_input(agg: AggSpec, v: str, *, clamp: bool = True, engine: str = "duckdb") -> str:
    """SQL for an aggregate input clamped to its bounds and put on its grid (``scaled_tree``)."""
    return sql(scaled_tree(agg, v, clamp=clamp), engine)


def agg_sql(agg: AggSpec, engine: str = "duckdb", clamp: bool = True) -> list[tuple[str, str]]:
    """(component label, SQL) for each integer statistic of one aggregate, for ``engine``."""
    return [(label, sql(tree, engine)) for label, tree in stat_trees(agg, clamp=clamp)]


def labels(plan: CountPlan) -> list[tuple[int, str]]:
    """(aggregate index, component label) of every statistic, in the order the rows carry them."""
    return [(agg.index, label) for agg in plan.aggs for label, _ in stat_trees(agg)]


# -- the charged relation, for a plane that is not the database file ------------------------------
def read_charged(con: Any, charged: str, n_parts: int) -> Charged:
    """The charged units (and, with several parts, the (unit, part) pairs) as Arrow, with a
    fingerprint of the units: their count and two independent 64-bit hash sums."""

    def arrow(query: str):
        rel = con.execute(query)
        return rel.to_arrow_table() if hasattr(rel, "to_arrow_table") else rel.fetch_arrow_table()  # DuckDB 1.4

    units_sql = f"SELECT unit, CAST(max(part) AS INTEGER) AS __seen FROM {charged} GROUP BY unit"
    key = con.execute(
        f"SELECT count(*), sum(hash(unit, __seen)::HUGEINT), sum(hash(unit, 'dpgate', __seen)::HUGEINT) FROM ({units_sql})"
    ).fetchone()
    pairs = arrow(f"SELECT unit, CAST(part AS INTEGER) AS part FROM {charged}") if n_parts > 1 else None
    return Charged(lambda: arrow(units_sql), pairs, tuple(key), int(key[0]))


# -- rows to an ExactAnswer -----------------------------------------------------------------------
def answer(plan: CountPlan, rows: list[tuple], positioned: list[bool], labels, heavy: int, unused: int | None,
           n_parts: int) -> ExactAnswer:
    """Rows of the aggregate (keys as positions where ``positioned``, else as text) as an ExactAnswer."""
    nk = len(plan.keys)
    if plan.key_selection is None:
        return _sorted(_align_to_domains(plan, rows, nk, labels, heavy, unused, n_parts))
    if n_parts != 1:
        raise errors.InternalError("DP key selection runs on one partition of subjects")
    # Keys with a public domain come back as their 1-based position: map them to their values.
    key_rows = [
        tuple(plan.keys[j].domain[int(r[j]) - 1] if positioned[j] else r[j] for j in range(nk))
        for r in rows
    ]
    comps = {}
    for i, lab in enumerate(labels):
        col = np.empty((1, len(rows)), dtype=object)
        col[0, :] = [_int(r[nk + i]) for r in rows] if lab[1] != "quantile" else [_values(r[nk + i]) for r in rows]
        comps[lab] = col
    subjects = np.array([int(r[-1]) for r in rows], dtype=np.int64)
    return _sorted(ExactAnswer(key_rows, comps, subjects, heavy, unused))


def _int(v: Any) -> int:
    return 0 if v is None else int(v)


def _values(v: Any) -> np.ndarray:
    """A cell's grid values (empty when the cell has none), a copy that ``_sorted`` sorts in place."""
    return np.array(v if v is not None else [], dtype=np.int64)


def _sorted(exact: ExactAnswer) -> ExactAnswer:
    """Sort every quantile cell's values (the engines gather them in no order), on as many threads as
    there are cores: numpy's sort lets go of the interpreter lock, and a million values take ~60 ms."""
    cells = [a for (_, kind), col in exact.components.items() if kind == "quantile" for a in col.flat if a.size > 1]
    if len(cells) > 1 and sum(a.size for a in cells) > 100_000:
        with ThreadPoolExecutor(max_workers=max(1, min(len(cells), os.cpu_count() or 1))) as pool:
            list(pool.map(np.ndarray.sort, cells))
    else:
        for a in cells:
            a.sort()
    return exact


def _align_to_domains(
    plan: CountPlan, rows: list[tuple], nk: int, labels, heavy: int, unused: int | None, n_parts: int = 1
) -> ExactAnswer:
    """Every cell of the public domain gets a value; cells with no rows are exact zeros.

    With public domains, the aggregate returns each key's 1-based position in its domain
    (after the partition, when there are several).
    """
    domains = [k.domain for k in plan.keys]
    n_cells = math.prod(len(d) for d in domains) if domains else 1
    comps = {lab: np.zeros((n_parts, n_cells), dtype=object) for lab in labels}
    for lab in labels:
        if lab[1] == "quantile":
            for idx in np.ndindex(n_parts, n_cells):
                comps[lab][idx] = _values(None)
    strides = [math.prod(len(d) for d in domains[j + 1 :]) for j in range(nk)]
    lead = 1 if n_parts > 1 else 0
    for r in rows:
        part = int(r[0]) if lead else 0
        flat = sum((int(r[lead + j]) - 1) * strides[j] for j in range(nk))
        for i, lab in enumerate(labels):
            v = r[lead + nk + i]
            comps[lab][part, flat] = _values(v) if lab[1] == "quantile" else _int(v)
    keys = list(itertools.product(*domains)) if nk else [()]
    return ExactAnswer(keys, comps, None, heavy, unused)
