"""DuckDB statements over the charged subjects: a query's source restricted to their rows, and
the check that every statement a run will send binds, before anything is charged.

Every query class that reads protected rows in the database file uses these (``restrict_to_charged``
and ``bind``), the counting class through its data plane (``dpgate.backends.duckdb``).
"""

from __future__ import annotations

import contextvars
import weakref
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import duckdb
from sqlglot import exp

from dpgate import errors
from dpgate.backends import bounded
from dpgate.catalog import sample_order
from dpgate.catalog.tables import ProtectedTable, quote_ident
from dpgate.frontend.dialect import to_duckdb
from dpgate.memo import Memo


#: The schema a statement's binds are checked against (set by the gateway around ``bind_check``):
#: the catalog fingerprint (every table's CREATE statement and the owner's catalog version) and the
#: views' SQL. A statement that bound once binds again while they are unchanged, so its EXPLAIN is
#: skipped; failures are never cached.
@dataclass
class BindScope:
    """One statement's binds: the schema key, and which binds the cache answered or stored."""

    key: tuple
    hits: int = 0
    added: list = field(default_factory=list)

    def forget(self) -> None:
        """Drop what this statement stored (the schema moved under it: the key no longer described it)."""
        for k in self.added:
            _BOUND.pop(k)
            _PLANS_BOUND.pop(k)


_BIND_SCOPE: contextvars.ContextVar[BindScope | None] = contextvars.ContextVar("dpgate_bind_scope", default=None)
_BOUND = Memo(4096)  # (schema key, SQL, parameters) of binds that succeeded
#: (schema key, what, id(plan)) -> a weak reference to the plan, of plans all of whose statements
#: ``what`` bound: a plan the gateway kept (its plan cache) need not have its statements built again to
#: find them bound. The entry does not keep the plan alive (plans can be large); once it is gone, its
#: reference is dead and another object with the same id finds nothing.
_PLANS_BOUND = Memo(256)


def plan_bound(what: tuple, plan: Any) -> bool:
    """Whether the statements ``what`` of this very plan object bound before under the current schema."""
    scope = _BIND_SCOPE.get()
    ref = _PLANS_BOUND.get((scope.key, what, id(plan))) if scope is not None else None
    return ref is not None and ref() is plan


def mark_plan_bound(what: tuple, plan: Any) -> None:
    """Record that the statements ``what`` of ``plan`` all bound under the current schema."""
    scope = _BIND_SCOPE.get()
    if scope is not None:
        key = (scope.key, what, id(plan))
        _PLANS_BOUND.put(key, weakref.ref(plan))
        scope.added.append(key)


@contextmanager
def bind_scope(key: tuple | None):
    """Binds inside use the cache under ``key`` (None: no cache); yields the ``BindScope``."""
    scope = BindScope(key) if key is not None else None
    token = _BIND_SCOPE.set(scope)
    try:
        yield scope
    finally:
        _BIND_SCOPE.reset(token)


def bind(con: duckdb.DuckDBPyConnection, sql: str, params: Any = None, *, public: bool = False) -> None:
    """EXPLAIN one statement a run will send (binder and optimizer, no execution), before
    anything is charged.

    Every query class binds its statements this way: a statement DuckDB cannot bind fails the
    same way whatever the data, so it must fail here, where a refusal costs nothing. EXPLAIN
    rather than DESCRIBE: DuckDB 1.5 binds some calls only in the optimizer (``date_part('year',
    TIME)`` passes DESCRIBE and fails every run, empty tables included). A
    ``public`` statement (one that reads no protected row, e.g. casting a declared domain)
    is run instead, so that its runtime errors are caught here too.
    """
    scope = None if public else _BIND_SCOPE.get()
    key = (scope.key, sql, repr(params)) if scope is not None else None
    if key is not None and key in _BOUND:
        scope.hits += 1
        return
    try:
        con.execute(sql if public else f"EXPLAIN {sql}", params)
    except duckdb.Error as e:
        raise errors.ProgrammingError(
            f"DuckDB cannot bind this query: {str(e).strip().splitlines()[0]}",
            code="DP230",
            hint="fix the SQL; nothing was charged",
        ) from e
    if key is not None:
        _BOUND.put(key)
        scope.added.append(key)


def restrict_to_charged(
    source: exp.Select, table: ProtectedTable, charged: str | None, joined: tuple[ProtectedTable, ...] = (),
    salt: int = 0, prebound: bool = False, order: bool = False,
) -> str:
    """``source`` with each protected table replaced by the rows of the charged subjects only.

    The analyst's expressions (WHERE, keys, aggregate inputs, join conditions) then never meet
    a row of a subject that was not charged for the query (exhausted, left out by the rule,
    not on the roster). ``OFFSET 0`` is an optimisation fence: DuckDB pushes filters through
    subqueries and materialised CTEs, but not through a LIMIT/OFFSET, so the analyst's WHERE
    is evaluated above the restriction (``tests/queries/test_charged_rows.py`` checks this on
    the installed engine).

    With ``joined`` protected tables (a join on the unit within one subject space), every
    protected table is first cut to its own declared ``max_rows`` rows per subject, chosen by
    a hash of the row keyed with ``salt`` [pre-bound]: a subject's joined rows are then at most
    the product of those bounds, whatever they hold, before the joined relation is bounded as
    usual. The choice depends only on the subject's own rows. ``prebound`` does the same for a
    single table (the per-subject subquery aggregates the cut rows).

    With ``order`` (a single table with a stored sample order, ``catalog.sample_order``), the
    table is read beside its order, position by position, and the source gains the column
    ``__rank``; only rows whose unit equals their order row's unit are kept. ``charged`` None
    means every row's subject is charged (no restriction; the caller checked it).
    """
    q = source.copy()
    if order:
        if joined or prebound:
            raise ValueError("a stored sample order serves single-table plans only")
        alias = _replace_table(q, table, _ordered_rows(table, charged))
        if alias is None:
            raise ValueError(f"{table.name} is not read by this plan")
        q.select(exp.alias_(exp.column(sample_order.RANK, table=exp.to_identifier(alias, quoted=True)), "__rank"), copy=False)
        return to_duckdb(q)
    for t in (table, *joined):
        _replace_table(q, t, _charged_rows(t, charged, salt if joined or prebound else None))
    return to_duckdb(q)


def table_nodes(q: exp.Expression, table: ProtectedTable) -> list[exp.Table]:
    """The FROM / JOIN items of ``q`` that read the protected ``table`` (its bare or ``main.`` name)."""

    def reads(node: exp.Table) -> bool:
        in_main = node.args.get("db") in (None, "") or node.db.lower() == "main"
        return node.name.lower() == table.name.lower() and isinstance(node.this, exp.Identifier) and in_main

    return [node for node in q.find_all(exp.Table) if reads(node)]


def _replace_table(q: exp.Expression, table: ProtectedTable, inner: str) -> str | None:
    """Replace each item of ``q`` reading ``table`` by ``(inner) AS <its alias>``; the last alias, or None."""
    alias = None
    for node in table_nodes(q, table):
        alias = node.alias or table.name
        # ``inner`` is dpgate's own DuckDB SQL (names quoted, no analyst text): it is generated verbatim
        # (a ``Var``) rather than parsed and generated again, which cost about 2 ms a statement.
        sub = exp.Subquery(this=exp.Var(this=inner), alias=exp.TableAlias(this=exp.to_identifier(alias, quoted=True)))
        node.replace(sub)
    return alias


_ident = quote_ident


def _ordered_rows(t: ProtectedTable, charged: str | None) -> str:
    """The table's rows beside their stored sample order (``catalog.sample_order``): one scan of
    both; a row whose order row names another unit (a stale order) is dropped. The order's rank
    comes first: should the table itself have gained a column of that name since it was planned,
    DuckDB renames the table's (a later duplicate), never the order's."""
    unit, name = _ident(t.unit), _ident(t.name)
    charged_only = f" AND __t.{unit} IN (SELECT unit FROM {charged})" if charged is not None else ""
    return (
        f"SELECT __o.{sample_order.RANK}, __t.* FROM main.{name} __t POSITIONAL JOIN {sample_order.table_sql(t)} __o "
        f"WHERE __t.{unit} IS NOT DISTINCT FROM __o.unit{charged_only} OFFSET 0"
    )


def _charged_rows(t: ProtectedTable, charged: str, salt: int | None) -> str:
    unit, name = _ident(t.unit), _ident(t.name)
    rows = f"SELECT * FROM main.{name} WHERE {unit} IN (SELECT unit FROM {charged})"
    if salt is None or (t.unique_unit and t.max_rows >= 1):  # a unique unit: one row per subject already
        return f"{rows} OFFSET 0"
    cols = ", ".join(_ident(c) for c in t.columns)
    # Equal rows get distinct duplicate numbers, so each row has its own rank [dup].
    numbered = f"SELECT *, row_number() OVER (PARTITION BY {cols}) AS __dup FROM ({rows})"
    columns = [exp.column(exp.to_identifier(c, quoted=True)) for c in t.columns]
    salted = exp.Cast(this=exp.Literal.number(int(salt)), to=exp.DataType.build("UBIGINT", dialect="duckdb"))
    rank = bounded.sql(bounded.rank_tree([*columns, "__dup"], salted), "duckdb")
    return (
        f"SELECT * EXCLUDE (__dup) FROM ({numbered}) "
        f"QUALIFY row_number() OVER (PARTITION BY {unit} ORDER BY {rank}, __dup) <= {int(t.max_rows)} OFFSET 0"
    )
