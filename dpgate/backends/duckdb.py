"""The database file as a data plane: exact, bounded aggregates of a counting plan in DuckDB.

The SQL is generated from the plan with sqlglot (never by pasting the analyst's text):

the source (``plan.source``)
    The analyst's FROM / JOIN / WHERE with the privacy unit, the GROUP BY keys and the
    aggregate inputs as columns; rows without a unit are dropped, and keys outside their
    public domain never use up a subject's contribution. Every row-level expression is
    wrapped in ``TRY()``: no runtime error can depend on a row.

contribution bounding (docs/privacy-model.md)
    Only subjects the ledger charged are used. A subject keeps at most ``max_rows`` rows
    and, when the plan needs it, at most ``max_groups`` groups: a uniformly random choice,
    ranked by a keyed hash whose 62-bit key comes from the OS for each query (a data order
    never decides). The ranking of one subject's rows depends only on that subject's rows,
    so the bound holds whatever other subjects hold.

[stats] Facts of the whole table (``dpgate.catalog.unit_stats``: the most rows any subject has,
NULL and off-roster units), cached under a fingerprint of the unit column and roster and read in
the same transaction as the rows, let the common cases skip work: when no subject of the table
has more rows than the bound, the rows are aggregated directly (no per-subject count); when every
row's subject is charged, the restriction to charged rows (a semi-join) is left out. Both give
exactly the statistics of the full path (``tests/privacy/test_unit_stats_paths.py``). A protected
view takes neither: it is computed anew by every statement (and may compute other units each time),
so its subjects' rows are ranked and bounded inside the aggregate's own statement.

The bounded relation is otherwise computed in two passes for speed: a first pass finds the subjects
that exceed a bound or were not charged (usually none); only their rows go through the
window functions, everyone else's rows are aggregated directly. The result is the same
as bounding every subject. (Timing therefore depends on how many subjects need sampling: a
passive effect of the data's shape that docs/privacy-model.md states; what an analyst's expressions can make
one row cost is bounded before the debit, ``dpgate.frontend.cost``.)

[transport] With DP key selection, the groups' keys come back to Python as text (and are cast
back in SQL when released): the groups key selection drops — a single person's, say — never
meet Python's value conversions, which fail for some values (an INTERVAL beyond 999,999,999
days, a TIMESTAMPTZ without pytz) and would so turn one row into an error.

The per-aggregate statistics and the rank hashes come from ``dpgate.backends.bounded`` (shared with
the other planes); this module decides which rows reach them. ``ExactAnswer`` goes back to the
counting class only, whose mechanism turns it into noisy values.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import duckdb
import numpy as np
from sqlglot import exp

from dpgate import database, errors
from dpgate.backends import bounded, statement
from dpgate.backends.charged import bind, mark_plan_bound, plan_bound, restrict_to_charged, table_nodes
from dpgate.catalog import sample_order, unit_stats, within_bounds
from dpgate.catalog.tables import quote_ident
from dpgate.frontend.dialect import to_duckdb
from dpgate.mechanisms.base import AVG, QUANTILE, SUM, VARIANCE_KINDS, ExactAnswer
from dpgate.plans import CountPlan

_ids = itertools.count(1)


def _positions(plan: CountPlan, params: dict[str, Any]) -> list[str | None]:
    """For each key: SQL for its 1-based position in its public domain (NULL when outside it).

    Cells are identified by position in SQL, never by comparing values in Python (NaN keys,
    huge integers and differently typed equal values all stay exact).
    """
    out: list[str | None] = []
    for j, key in enumerate(plan.keys):
        if key.domain is None:
            out.append(None)
            continue
        domain_sql, params[f"dom{j}"] = database.typed_list(f"dom{j}", list(key.domain), key.sql_type)  # NULLs never match
        null_pos = key.domain.index(None) + 1 if None in key.domain else "NULL"
        # The list as a scalar subquery: DuckDB evaluates it once. As a plain CAST of the parameter it
        # was cast again for every row once the optimizer pushed this filter below the GROUP BY into
        # the scan (a third of the aggregation's time at 1M rows).
        out.append(
            f"CASE WHEN __k{j} IS NULL THEN {null_pos} "
            f"ELSE list_position((SELECT {domain_sql}), __k{j}) END"
        )
    return out


@dataclass
class _SQL:
    """The statements of one execution, built once and used for binding and for running."""

    per_unit: str  # one row per unit: its row count (and group count), joined with the charged units
    over: str  # condition on per_unit: the subject exceeds a bound
    src: str
    params: dict[str, Any]
    bounded: statement.Skeleton  # sampling and aggregation, shared with the other engines

    @property
    def cols(self) -> str:
        return ", ".join(self.bounded.cols)

    @property
    def sample_cols(self) -> str:
        return ", ".join(self.bounded.sample_cols)

    @property
    def positions(self) -> list[str | None]:
        return self.bounded.positions

    def sampled(self, rows: str) -> str:
        return self.bounded.sampled(rows)

    def aggregate(self, rows: str, check: bool = False, key_text: bool = False) -> str:
        return self.bounded.aggregate(rows, check=check, key_text=key_text)


def _build(
    plan: CountPlan, charged: str, n_parts: int = 1, salt: int = 0, restrict: bool = True, ordered: bool = False,
    unclamped: frozenset[int] = frozenset(),
) -> _SQL:
    params: dict[str, Any] = {}
    if plan.source.find(exp.TableSample) is not None:  # the allowlist refuses it; never read a sample of the rows
        raise errors.InternalError("a table sample reached the exact pass")
    row_key = () if ordered else _row_key(plan)
    source = _with_row_key(plan, row_key) if row_key else plan.source
    if ordered:  # the table beside its stored sample order [order]
        src = restrict_to_charged(plan.source, plan.table, charged if restrict else None, order=True)
    elif restrict:
        src = restrict_to_charged(source, plan.table, charged, plan.joined, salt, plan.prebound)
    else:  # every row's subject is charged [stats]: the restriction would keep every row
        src = to_duckdb(source)
    skeleton = statement.Skeleton(
        plan, "duckdb", exp.Var(this="$salt"), _positions(plan, params), statement.stats(plan, unclamped),
        charged, n_parts, ordered, row_key,
    )  # fmt: skip
    keys = skeleton.keys
    # NULL is a group too: count groups as structs, which are never NULL themselves.
    key_struct = f"struct_pack({', '.join(f'k{j} := {k}' for j, k in enumerate(keys))})" if keys else "NULL"
    group_check = f" OR __p.__g > {plan.max_groups}" if plan.bound_groups else ""
    group_count = f", count(DISTINCT {key_struct}) AS __g" if plan.bound_groups else ""
    per_unit = (
        f"(SELECT __unit, count(*) AS __n{group_count} FROM ({src}) GROUP BY __unit) __p "
        f"LEFT JOIN (SELECT DISTINCT unit FROM {charged}) __c ON __p.__unit = __c.unit"
    )
    over = f"__p.__n > {plan.max_rows}{group_check}"
    return _SQL(per_unit, over, src, params, skeleton)


def _row_key(plan: CountPlan) -> tuple[str, ...]:
    """[key] A single-table plan over a table with a unique, non-NULL column set (a PRIMARY KEY, or
    UNIQUE over NOT NULL columns: the catalog's ``unique_keys``, enforced by DuckDB's index):
    its columns, which tell a subject's rows apart, so that the per-query sample needs no
    duplicate numbers. Empty otherwise."""
    t = plan.table
    if t.unique_unit or not t.unique_keys or plan.joined or plan.prebound or plan.source.args.get("joins"):
        return ()
    return tuple(sorted(min(t.unique_keys, key=lambda k: (len(k), sorted(k)))))


def _with_row_key(plan: CountPlan, row_key: tuple[str, ...]):
    """The plan's source with the row key's columns as ``__pk0, __pk1, ...``."""
    q = plan.source.copy()
    alias = next((node.alias or node.name for node in table_nodes(q, plan.table)), None)
    if alias is None:
        return plan.source
    for i, col in enumerate(row_key):
        q.select(exp.alias_(exp.column(exp.to_identifier(col, quoted=True), table=exp.to_identifier(alias, quoted=True)),
                            f"__pk{i}"), copy=False)  # fmt: skip
    return q


def bind_check(
    con: duckdb.DuckDBPyConnection, plan: CountPlan, charged: str, unit_type: str, n_parts: int = 1, *,
    ordered: bool | None = None,
) -> None:
    """Bind (DESCRIBE, no execution) every statement ``run`` may send, before anything is charged.

    A statement DuckDB cannot bind fails the same way whatever the data, so it must fail
    here, where a refusal costs nothing. With a stored sample order, the statements that read it
    are bound too (when the order exists now; ``run`` uses it only when it lines up). ``ordered``:
    whether the caller has just found an order registered (None: look).
    """
    q = _build(plan, charged, n_parts)
    for j, key in enumerate(plan.keys):  # the declared domains cast to the keys' types now, or refuse free
        if f"dom{j}" in q.params:
            domain_sql, value = database.typed_list(f"dom{j}", list(key.domain), key.sql_type)
            bind(con, f"SELECT {domain_sql}", {f"dom{j}": value}, public=True)
    bind(con, f"SELECT count(*) FILTER (WHERE {q.over}) FROM {q.per_unit}")
    variants = [q]
    if ordered is None:
        ordered = orderable(plan) and sample_order.registered(con, plan.table.name) is not None
    if ordered and orderable(plan):
        variants.append(_build(plan, charged, n_parts, ordered=True))
    special = f"(SELECT CAST(NULL AS {unit_type}) AS __unit, true AS __eligible WHERE false)"
    for v in variants:
        parts = [
            f"SELECT {v.cols} FROM ({v.src}) WHERE __unit NOT IN (SELECT __unit FROM {special})",
            v.sampled(f"SELECT {v.sample_cols} FROM ({v.src}) WHERE __unit IN "
                            f"(SELECT __unit FROM {special} WHERE __eligible)"),
        ]  # fmt: skip
        statements = [v.aggregate(" UNION ALL ".join(f"({p})" for p in parts), key_text=plan.key_selection is not None)]
        if v.bounded.ordered:
            statements.append(v.aggregate(f"SELECT {v.cols} FROM ({v.src}) WHERE __rank <= {plan.max_rows}", check=True))
        for sql in statements:
            bind(con, sql, _params(sql, dict(v.params, salt=0)))


def _params(sql: str, params: dict[str, Any]) -> dict[str, Any]:
    """The named parameters ``sql`` uses (DuckDB refuses unused ones)."""
    return {k: v for k, v in params.items() if f"${k}" in sql}


def orderable(plan: CountPlan) -> bool:
    """A single-table plan over a table with a stored sample order [order]."""
    return (
        sample_order.wanted(plan.table) and not plan.joined and not plan.prebound
        and not plan.source.args.get("joins") and sample_order.RANK not in plan.table.columns
    )  # fmt: skip


def run(
    con: duckdb.DuckDBPyConnection, plan: CountPlan, charged: str, salt: int, n_parts: int = 1, *,
    use_stats: bool = True, roster_generation: int | None = None,
) -> ExactAnswer:
    """``_run`` in one read transaction: the table facts and the rows come from one snapshot (the
    statement's own, when the gateway opened one)."""
    with database.transaction(con):
        return _run(con, plan, charged, salt, n_parts, use_stats, roster_generation)


def _charged_is_roster(con: duckdb.DuckDBPyConnection, plan: CountPlan, charged: str) -> bool:
    """Every unit on the roster is in ``charged``. (After a uniform debit, which charges the roster up
    to a generation, ``unit_stats.read`` answers instead: no unit was added after it.)"""
    (missing,) = con.execute(
        f"SELECT count(*) FROM {plan.table.roster_table_sql} r WHERE NOT EXISTS (SELECT 1 FROM {charged} c WHERE c.unit = r.unit)"
    ).fetchone()
    return missing == 0


def _run(
    con, plan: CountPlan, charged: str, salt: int, n_parts: int, use_stats: bool, generation: int | None
) -> ExactAnswer:
    """Compute the exact bounded statistics of ``plan`` over the subjects in ``charged``.

    ``charged`` is a relation with columns ``unit`` and ``part``; statistics are computed per
    part (``n_parts`` of them), as arrays of shape (parts, cells).

    Rows outside the keys' public domains never count towards a subject's bounds: the
    subjects that need sampling see the domain filter before their rows are ranked; for
    everyone else (all of whose rows are kept anyway) the filter is applied to the groups
    after aggregation, which is the same and cheaper.
    """
    # [stats] Table facts that hold for every query until the table or roster changes: if no
    # subject has more rows in the whole table than the bound, no subject has more in this query's
    # rows (WHERE only removes rows), so nobody needs sampling; and if every unit of the table is
    # on the roster and the whole roster is charged,
    # restricting the rows to the charged subjects would keep them all. Joins of protected tables
    # and the per-subject subquery (which cut rows first) always take the full path.
    # [order] A stored sample order that lines up with the rows in this snapshot replaces the
    # per-query hash for sampling, and names the table's units for the facts below.
    # A view is computed anew by every statement that reads it, and may not compute the same units
    # each time (random() is allowed in one): facts, or a per-subject count, read by one statement
    # need not describe the rows the aggregate's statement computes. Over a view, every subject's
    # rows are bounded inside the aggregate's own statement.
    volatile = not all(t.base_table for t in (plan.table, *plan.joined))
    order_id = sample_order.current(con, plan.table) if orderable(plan) and not volatile else None
    facts = use_stats and not plan.joined and not plan.prebound and not volatile
    # The definition, the facts' fingerprint and the roster units added since the debit: one read.
    reading = unit_stats.read(con, plan.table, order_id, generation if n_parts == 1 else None) if facts else None
    definition = reading.definition if reading is not None else ""
    if within_bounds.generated(definition):
        # A generated column is computed at each read (random() is allowed in one): facts read in
        # one scan need not describe the units the aggregate's scan computes.
        facts = False
    stats = unit_stats.current(con, plan.table, order_id, reading) if facts else None
    limit = min(plan.max_rows, plan.max_groups) if plan.bound_groups else plan.max_rows
    # Only without joins: a lookup's key was checked unique when the query was planned, in another
    # snapshot; were it to gain a duplicate since, a join could add rows, and the full pass below
    # (which counts the query's own rows) would still bound them.
    # [path] The analyst sets the query's bounds (max_rows_contributed); a path chosen by comparing
    # them with the table's facts would answer "has any subject more than k rows?" for every k tried.
    # Paths are chosen at the owner's declared bounds instead: one bit per table version.
    t = plan.table
    declared = min(t.max_rows, t.max_groups) if plan.bound_groups else t.max_rows
    within = (
        stats is not None and limit >= declared and stats.most_rows <= declared and not plan.source.args.get("joins")
    )
    everyone = (
        stats is not None and n_parts == 1 and stats.off_roster_units == 0 and stats.null_unit_rows == 0
        and (reading.added_after == 0 if reading.added_after is not None else _charged_is_roster(con, plan, charged))
    )  # fmt: skip
    # A unique constraint on the unit (a schema fact) means one row per subject: nothing to bound.
    one_row_each = plan.table.unique_unit and not plan.source.args.get("joins") and not volatile
    ordered = order_id is not None and not within and not one_row_each
    unclamped = _unclamped(con, plan, stats, definition) if facts else frozenset()
    q = _build(plan, charged, n_parts, salt, restrict=not everyone, ordered=ordered, unclamped=unclamped)
    params = dict(q.params)
    special = f"__dp_special_{next(_ids)}"
    special_sql = f"SELECT __p.__unit, (__c.unit IS NOT NULL) AS __eligible FROM {q.per_unit} WHERE __c.unit IS NULL OR {q.over}"
    heavy: int = 0
    unused: int | None = None
    made_special = False
    try:
        if ordered and everyone and stats is not None and not plan.bound_groups and _keeps_every_row(plan):
            rows = _ordered_filter(con, plan, q, stats, params)
            if rows is not None:
                heavy = stats.over(limit)
                return bounded.answer(plan, rows, [p is not None for p in q.positions], q.bounded.labels, heavy, 0, n_parts)
        parts = []
        to_sample = None
        if one_row_each:
            parts.append(f"SELECT {q.cols} FROM ({q.src}) WHERE __unit IN (SELECT unit FROM {charged})")
        elif within:
            unused = 0  # src holds charged subjects' rows only (restricted, or everyone is charged)
            parts.append(f"SELECT {q.cols} FROM ({q.src})")
        elif volatile:  # rank every subject's rows in the aggregate's statement (one evaluation of the view)
            heavy, unused = 0, None  # not counted
            to_sample = f"SELECT {q.sample_cols} FROM ({q.src})"
        elif stats is not None and 2 * stats.over(declared) >= stats.units and stats.off_roster_units == 0:
            # Most subjects of the table are over the bound: rank everyone's rows (a subject within
            # it keeps them all) without counting rows per subject first.
            heavy, unused = stats.over(limit), 0  # heavy: over the bound in the whole table
            to_sample = f"SELECT {q.sample_cols} FROM ({q.src})"
        else:
            # Subjects that need work: not charged (their rows are dropped) or over a bound
            # (sampled). Counting all their rows, in or out of the domains, only flags more.
            # [path] The statements sent do not depend on these counts: they are of the rows the
            # analyst's WHERE selects, and a WHERE can single out one person ("uid <> 17 OR x > 8"),
            # so a shortcut taken when nobody (or everybody) needs work would time that person's
            # value. Only the table facts and the plan choose a path; the rows only size it.
            con.execute(f"CREATE TEMP TABLE {special} AS {special_sql}")
            made_special = True
            heavy, unused = con.execute(
                f"SELECT count(*) FILTER (WHERE __eligible), count(*) FILTER (WHERE NOT __eligible) FROM {special}"
            ).fetchone()
            parts.append(f"SELECT {q.cols} FROM ({q.src}) WHERE __unit NOT IN (SELECT __unit FROM {special})")
            to_sample = (
                f"SELECT {q.sample_cols} FROM ({q.src}) WHERE __unit IN (SELECT __unit FROM {special} WHERE __eligible)"
            )
        if to_sample is not None:
            params["salt"] = salt
            parts.append(q.sampled(to_sample))
        kept = " UNION ALL ".join(f"({p})" for p in parts) if len(parts) > 1 else parts[0]
        # Keys without a public domain travel as text with key selection: the values of groups that key
        # selection will drop (one person's group) must not pass through Python's conversions, which
        # can fail for a value (huge intervals, time zones) and so leak it [transport].
        aggregated = q.aggregate(kept, key_text=plan.key_selection is not None)
        params = _params(aggregated, params)
        if any(a.kind == QUANTILE for a in plan.aggs):
            rows = _numpy_rows(con.execute(aggregated, params).fetchnumpy())  # lists of values arrive as arrays
        else:
            rows = con.execute(aggregated, params).fetchall()
    finally:
        if made_special:
            con.execute(f"DROP TABLE IF EXISTS {special}")

    return bounded.answer(plan, rows, [p is not None for p in q.positions], q.bounded.labels, int(heavy), unused, n_parts)


def _unclamped(con, plan: CountPlan, stats: unit_stats.UnitStats | None, definition: str | None = None) -> frozenset[int]:
    """[elide] The aggregates whose input is a bare column of the plan's one table whose every value,
    in this snapshot, lies within the aggregate's bounds (``catalog.within_bounds``): their clamp
    returns its input unchanged, so it is left out. Only on tables of ``within_bounds.MIN_ROWS`` rows
    or more, where the clamp costs more than the check."""
    if stats is None or plan.source.args.get("joins") or plan.joined or plan.prebound:
        return frozenset()
    if sum(n * u for n, u in stats.histogram) + stats.null_unit_rows < within_bounds.MIN_ROWS:
        return frozenset()
    # The FROM item is the table itself (not a subquery that could rename a computed column), and
    # it is the only item reading the table: the qualifier names its stored column.
    if not _reads_the_table_itself(plan):
        return frozenset()
    node = plan.source.args["from_"].this
    qualifier = (node.alias or node.name).lower()
    candidates: dict[tuple, list[int]] = {}
    for agg in plan.aggs:
        if agg.kind not in (SUM, AVG, QUANTILE, *VARIANCE_KINDS) or not isinstance(agg.expr, exp.Column):
            continue
        col = plan.table.columns.get(agg.expr.name.lower())
        if agg.expr.table.lower() != qualifier or col is None or not within_bounds.supported(col.type):
            continue
        candidates.setdefault((col.name, col.type, float(agg.lower), float(agg.upper)), []).append(agg.index)
    if not candidates:
        return frozenset()
    stored = within_bounds.stored_types(con, plan.table.name, definition)  # in this snapshot: a base table, its types now
    candidates = {c: ix for c, ix in candidates.items() if stored.get(c[0].lower()) == c[1].upper()}
    if not candidates:
        return frozenset()
    checks = list(candidates)
    inside = within_bounds.within(con, f"main.{quote_ident(plan.table.name)}", checks)
    return frozenset(i for c, ok in zip(checks, inside) if ok for i in candidates[c])


def _keeps_every_row(plan: CountPlan) -> bool:
    """[path] Whether a row can fail the plan only through the table's own values: no WHERE, no join,
    and each key with a domain a bare column (whether all of its best-ranked values lie in the domain
    is then a fact of the table, as a value outside a column's bounds is). ``_ordered_filter``'s
    count then chooses its path from the table alone; under a WHERE, whether the count matched would
    say whether one chosen person's best-ranked row passed it (a whole second pass when not)."""
    if plan.source.args.get("joins") or plan.joined or plan.prebound:
        return False
    where = plan.source.args.get("where")
    conds = [] if where is None else list(where.this.flatten()) if isinstance(where.this, exp.And) else [where.this]
    if not all(_is_unit_not_null(c, plan) for c in conds):
        return False  # the analyst's WHERE (dpgate's own "unit IS NOT NULL" passes every row: no NULL units)
    if not _reads_the_table_itself(plan):  # a derived table may hold a WHERE
        return False
    columns = {e.alias_or_name: e.unalias() for e in plan.source.expressions}
    return all(key.domain is None or isinstance(columns.get(f"__k{j}"), exp.Column) for j, key in enumerate(plan.keys))


def _reads_the_table_itself(plan: CountPlan) -> bool:
    """The plan's FROM item is the protected table itself (not a subquery, which could rename a
    computed column or filter rows), and it is the only item reading the table."""
    nodes, from_ = list(table_nodes(plan.source, plan.table)), plan.source.args.get("from_")
    return len(nodes) == 1 and from_ is not None and from_.this is nodes[0]


def _is_unit_not_null(cond: exp.Expr, plan: CountPlan) -> bool:
    """``NOT <the table's unit> IS NULL``, the condition the planner adds to every single-table plan."""
    inner = cond.this if isinstance(cond, exp.Not) else None
    return (
        isinstance(inner, exp.Is) and isinstance(inner.expression, exp.Null) and isinstance(inner.this, exp.Column)
        and inner.this.name.lower() == plan.table.unit.lower()
    )  # fmt: skip


def _ordered_filter(con, plan: CountPlan, q: _SQL, stats: unit_stats.UnitStats, params: dict[str, Any]):
    """[order] Every subject charged, no group bound: keep the rows ranked ``<= max_rows`` that pass
    the WHERE and the domains, in one pass. That is each subject's sample exactly when every row
    ranked ``<= max_rows`` passes, i.e. when the kept rows number sum_u min(n_u, max_rows) (the table
    facts' histogram); then the groups are returned, else None (the caller ranks the passing rows).
    The count only chooses between two computations of the same statistics."""
    if plan.key_selection is not None or any(a.kind == QUANTILE for a in plan.aggs):
        return None
    k = plan.max_rows
    expected = sum(min(n, k) * units for n, units in stats.histogram)
    sql = q.aggregate(f"SELECT {q.cols} FROM ({q.src}) WHERE __rank <= {k}", check=True)
    rows = con.execute(sql, _params(sql, params)).fetchall()
    kept = sum(int(r[-2]) for r in rows if r[-1])
    if kept != expected:
        return None
    return [r[:-2] for r in rows if r[-1]]


def _numpy_rows(columns: dict[str, Any]) -> list[tuple]:
    """Rows from ``fetchnumpy`` (a quantile's per-cell values stay numpy arrays; NULL is None)."""
    out = []
    for arr in columns.values():
        if isinstance(arr, np.ma.MaskedArray):
            mask = np.ma.getmaskarray(arr)
            out.append([None if m else v for v, m in zip(arr.data.tolist() if arr.dtype != object else arr.data, mask)])
        else:
            out.append(list(arr) if arr.dtype == object else arr.tolist())
    return list(zip(*out)) if out else []


class DuckDBPlane:
    """The data plane of tables whose rows are in the database file. It keeps no state: the
    connection (the statement's snapshot) comes with every call."""

    name = "duckdb"

    def bind_check(self, con: duckdb.DuckDBPyConnection, plan: CountPlan, probe: str) -> None:
        """Bind every statement ``exact`` may send, over ``probe`` (a charged relation with no rows)."""
        unit_type = plan.table.columns[plan.table.unit].type
        parts = 2 if plan.charge.rule in ("partition", "t_round") else 1
        # A stored sample order: (re)built now, before the debit, if needed.
        ordered = orderable(plan) and sample_order.refresh(con, plan.table) is not None
        what = ("count", probe, unit_type, parts, ordered)
        if not plan_bound(what, plan):  # the same plan object (kept by the gateway) bound under this schema
            bind_check(con, plan, probe, unit_type, parts, ordered=ordered)
            mark_plan_bound(what, plan)

    def exact(
        self, con: duckdb.DuckDBPyConnection, plan: CountPlan, charged: str, salt: int, n_parts: int = 1, *,
        generation: int | None = None,
    ) -> ExactAnswer:
        return run(con, plan, charged, salt, n_parts, roster_generation=generation)

    def forget(self) -> None:
        """Nothing is kept between statements."""

    def interrupt(self) -> bool:
        """Nothing to do: the statement's connection is interrupted by the gateway itself."""
        return False

    def end(self) -> None:
        """Nothing to do: DuckDB's work shows no progress line."""


#: The one DuckDB plane (stateless).
PLANE = DuckDBPlane()
