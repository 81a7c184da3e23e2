"""Exact, bounded aggregates in DuckDB for a counting-class plan.

The SQL is generated from the plan with sqlglot (never by pasting the analyst's text):

the source (``plan.source``)
    The analyst's FROM / JOIN / WHERE with the privacy unit, the GROUP BY keys and the
    aggregate inputs as columns; rows without a unit are dropped, and keys outside their
    public domain never use up a subject's contribution. Every row-level expression is
    wrapped in ``TRY()``: no runtime error can depend on a row.

contribution bounding (DESIGN.md 1.7)
    Only subjects the ledger charged are used. A subject keeps at most ``max_rows`` rows
    and, when the plan needs it, at most ``max_groups`` groups: a uniformly random choice,
    ranked by a keyed hash whose 62-bit key comes from the OS for each query (a data order
    never decides). The ranking of one subject's rows depends only on that subject's rows,
    so the bound holds whatever other subjects hold.

The bounded relation is computed in two passes for speed: a first pass finds the subjects
that exceed a bound or were not charged (usually none); only their rows go through the
window functions, everyone else's rows are aggregated directly. The result is the same
as bounding every subject. (Timing therefore depends on how many subjects need sampling;
like every peer system, dpgate does not defend against timing side channels.)

``ExactAnswer`` never leaves this module and ``gateway``: the mechanism turns it into
noisy values.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import duckdb
import numpy as np
from dpgate import errors
from dpgate.dialect import to_duckdb
from dpgate.plans import AVG, COUNT_DISTINCT, COUNT_ROWS, COUNT_SUBJECTS, COUNT_VALUES, SUM, AggSpec, CountPlan

_ids = itertools.count(1)


@dataclass
class ExactAnswer:
    """Exact bounded statistics, one array per noise component, aligned with ``keys``."""

    keys: list[tuple[Any, ...]]
    components: dict[tuple[int, str], np.ndarray]
    subjects: np.ndarray | None  # per key, for DP key selection
    heavy_subjects: int  # subjects whose rows were sampled down
    unused_units: int | None  # units with rows that were not charged (None: not counted)


def _agg_sql(agg: AggSpec) -> list[tuple[str, str]]:
    """(component label, SQL) for each integer statistic of one aggregate."""
    v = f"__v{agg.index}"
    if agg.kind == COUNT_ROWS:
        return [("count", "count(*)")]
    if agg.kind == COUNT_VALUES:
        return [("count", f"count({v})")]
    if agg.kind == COUNT_DISTINCT:
        return [("count", f"count(DISTINCT {v})")]
    if agg.kind == COUNT_SUBJECTS:
        return [("subjects", f"count(DISTINCT {v if agg.expr is not None else '__unit'})")]
    clamped = f"least(greatest({v}, {agg.lower!r}), {agg.upper!r})"
    # CAST(DOUBLE AS BIGINT) rounds to the nearest integer: each value lands on the grid.
    if agg.grid == 1.0:
        scaled = f"CAST({clamped} AS BIGINT)"
    elif agg.grid < 1.0:
        scaled = f"CAST({clamped} * {int(round(1 / agg.grid))} AS BIGINT)"
    else:
        scaled = f"CAST({clamped} / {int(agg.grid)} AS BIGINT)"
    if agg.kind == SUM:
        return [("sum", f"coalesce(sum({scaled}), 0)")]
    if agg.kind == AVG:
        return [("centered sum", f"coalesce(sum({scaled}), 0)"), ("count", f"count({v})")]
    raise errors.InternalError(f"unknown aggregate kind {agg.kind}")


def _domain_condition(plan: CountPlan, params: dict[str, Any]) -> str | None:
    """SQL condition: every key with a public domain takes one of its values."""
    conds = []
    for j, key in enumerate(plan.keys):
        if key.domain is None:
            continue
        values = [v for v in key.domain if v is not None]
        params[f"dom{j}"] = values
        cond = f"__k{j} IN (SELECT unnest(CAST($dom{j} AS {key.sql_type}[])))"
        if len(values) < len(key.domain):
            cond = f"({cond} OR __k{j} IS NULL)"
        conds.append(cond)
    return " AND ".join(conds) if conds else None


def run(con: duckdb.DuckDBPyConnection, plan: CountPlan, charged: str, salt: int) -> ExactAnswer:
    """Compute the exact bounded statistics of ``plan`` over the subjects in table ``charged``.

    Rows outside the keys' public domains never count towards a subject's bounds: the
    subjects that need sampling see the domain filter before their rows are ranked; for
    everyone else (all of whose rows are kept anyway) the filter is applied to the groups
    after aggregation, which is the same and cheaper.
    """
    params: dict[str, Any] = {}
    src = to_duckdb(plan.source)
    in_domain = _domain_condition(plan, params)
    keys = [f"__k{j}" for j in range(len(plan.keys))]
    values = sorted({f"__v{a.index}" for a in plan.aggs if a.expr is not None})
    columns = ["__unit", *keys, *values]
    cols = ", ".join(columns)
    special = f"__dp_special_{next(_ids)}"
    key_tuple = f"({', '.join(keys)})" if len(keys) > 1 else (keys[0] if keys else "NULL")
    group_check = f" OR __p.__g > {plan.max_groups}" if plan.bound_groups else ""
    group_count = f", count(DISTINCT {key_tuple}) AS __g" if plan.bound_groups else ""
    # Subjects that need work: not charged (their rows are dropped) or over a bound (sampled).
    # Counting all their rows, in or out of the domains, only ever flags more subjects.
    per_unit = (
        f"(SELECT __unit, count(*) AS __n{group_count} FROM ({src}) GROUP BY __unit) __p "
        f"LEFT JOIN {charged} __c ON __p.__unit = __c.unit"
    )
    over = f"__p.__n > {plan.max_rows}{group_check}"
    special_sql = (
        f"SELECT __p.__unit, (__c.unit IS NOT NULL) AS __eligible FROM {per_unit} WHERE __c.unit IS NULL OR {over}"
    )
    # A unique constraint on the unit (a schema fact) means one row per subject: nothing to bound.
    one_row_each = plan.table.unique_unit and not plan.source.args.get("joins")
    heavy: int = 0
    unused: int | None = None
    made_special = False
    try:
        parts = []
        to_sample = None
        if one_row_each:
            parts.append(f"SELECT {cols} FROM ({src}) WHERE __unit IN (SELECT unit FROM {charged})")
        else:
            heavy, unused, units = con.execute(
                f"SELECT count(*) FILTER (WHERE __c.unit IS NOT NULL AND ({over})), "
                f"count(*) FILTER (WHERE __c.unit IS NULL), count(*) FROM {per_unit}"
            ).fetchone()
            if heavy + unused == 0:
                parts.append(f"SELECT {cols} FROM ({src})")
            elif unused == 0 and 2 * heavy >= units:
                # Most subjects need sampling: rank everyone's rows (a subject within its bounds
                # keeps them all), and skip splitting the rows in two.
                to_sample = f"SELECT {cols} FROM ({src})"
            else:
                con.execute(f"CREATE TEMP TABLE {special} AS {special_sql}")
                made_special = True
                parts.append(f"SELECT {cols} FROM ({src}) WHERE __unit NOT IN (SELECT __unit FROM {special})")
                if heavy:
                    to_sample = (
                        f"SELECT {cols} FROM ({src}) WHERE __unit IN (SELECT __unit FROM {special} WHERE __eligible)"
                    )
        if to_sample is not None:
            params["salt"] = salt
            inner = to_sample
            if in_domain:
                inner = f"SELECT * FROM ({inner}) WHERE {in_domain}"
            if plan.bound_groups:
                group_hash = f"hash(__unit, {', '.join(keys)}, $salt)"
                inner = (
                    f"SELECT {cols} FROM (SELECT *, dense_rank() OVER (PARTITION BY __unit ORDER BY {group_hash}, "
                    f"{', '.join(keys)}) AS __gr FROM ({inner})) WHERE __gr <= {plan.max_groups}"
                )
            # Rows equal in every column used get distinct duplicate numbers, so that each row,
            # not each distinct value, has its own pseudo-random rank.
            inner = f"SELECT *, row_number() OVER (PARTITION BY {cols}) AS __dup FROM ({inner})"
            row_hash = f"hash({cols}, __dup, $salt)"
            parts.append(
                f"SELECT {cols} FROM ({inner}) "
                f"QUALIFY row_number() OVER (PARTITION BY __unit ORDER BY {row_hash}, __dup) <= {plan.max_rows}"
            )
        bounded = " UNION ALL ".join(f"({p})" for p in parts) if len(parts) > 1 else parts[0]
        selects = list(keys)
        labels: list[tuple[int, str]] = []
        for agg in plan.aggs:
            for label, sql in _agg_sql(agg):
                selects.append(sql)
                labels.append((agg.index, label))
        if plan.key_selection is not None:
            selects.append("count(DISTINCT __unit)")
        group = f" GROUP BY {', '.join(keys)}" if keys else ""
        having = f" HAVING {in_domain}" if in_domain else ""
        sql = f"SELECT {', '.join(selects)} FROM ({bounded}){group}{having}"
        rows = con.execute(sql, params).fetchall()
    finally:
        if made_special:
            con.execute(f"DROP TABLE IF EXISTS {special}")

    nk = len(keys)
    if plan.key_selection is None:
        return _align_to_domains(plan, rows, nk, labels, int(heavy), unused)
    key_rows = [tuple(r[:nk]) for r in rows]
    comps = {lab: np.array([_int(r[nk + i]) for r in rows], dtype=object) for i, lab in enumerate(labels)}
    subjects = np.array([int(r[-1]) for r in rows], dtype=np.int64)
    return ExactAnswer(key_rows, comps, subjects, int(heavy), unused)


def _int(v: Any) -> int:
    return 0 if v is None else int(v)


def _align_to_domains(plan: CountPlan, rows: list[tuple], nk: int, labels, heavy: int, unused: int | None) -> ExactAnswer:
    """Every cell of the public domain gets a value; cells with no rows are exact zeros."""
    domains = [k.domain for k in plan.keys]
    n_cells = math.prod(len(d) for d in domains) if domains else 1
    comps = {lab: np.zeros(n_cells, dtype=object) for lab in labels}
    if nk == 0:
        for i, lab in enumerate(labels):
            comps[lab][0] = _int(rows[0][i]) if rows else 0
        return ExactAnswer([()], comps, None, heavy, unused)
    index = [{_norm(v): i for i, v in enumerate(d)} for d in domains]
    strides = [math.prod(len(d) for d in domains[j + 1 :]) for j in range(nk)]
    for r in rows:
        flat = 0
        for j in range(nk):
            pos = index[j].get(_norm(r[j]))
            if pos is None:  # cannot happen: __base keeps domain values only
                raise errors.InternalError(f"key {r[j]!r} outside its declared domain")
            flat += pos * strides[j]
        for i, lab in enumerate(labels):
            comps[lab][flat] = _int(r[nk + i])
    keys = list(itertools.product(*domains))
    return ExactAnswer(keys, comps, None, heavy, unused)


def _norm(v: Any) -> Any:
    """Domain values come from JSON (str / int / float); DuckDB returns typed values."""
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, (int, float, Decimal)):
        return float(v)
    return str(v)



