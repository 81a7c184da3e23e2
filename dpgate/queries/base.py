"""What every query class implements, and what the classes share.

A query class (counting, top-k, subgraph counts, synthetic releases, …) is one module under
``dpgate.queries`` with an object that satisfies ``QueryClass``: it recognises its statements,
plans them without reading a protected row, lets DuckDB bind the plan's SQL before the debit,
explains the plan, and answers after the debit. The gateway iterates the registry in
``dpgate.queries`` and has no per-class code. This module imports no query class.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any

import duckdb
import numpy as np
from sqlglot import exp

from dpgate import errors
from dpgate.catalog import sample_order
from dpgate.catalog.tables import Catalog, ProtectedTable, quote_ident
from dpgate.frontend.classify import Classified
from dpgate.frontend.dialect import to_duckdb
from dpgate.frontend.settings import Session
from dpgate.memo import Memo
from dpgate.release import Answer


@dataclass
class Context:
    """What planning may read: the catalog, the session settings and public facts (no rows)."""

    catalog: Catalog
    session: Session
    facts: Any  # dpgate.queries.analysis.PublicFacts


@dataclass
class Run:
    """One charged execution: the connection, the plan, the debit and the random streams."""

    con: duckdb.DuckDBPyConnection
    plan: Any
    debit: Any  # dpgate.ledger.Debit
    analyst: str
    rng: np.random.Generator  # noise
    sampling: np.random.Generator  # post-processing sampling (rows of public releases)
    progress: Callable[[float, str], None] | None = None

    @property
    def subjects(self):
        return self.debit.subjects

    @property
    def charged(self) -> str:
        return self.debit.charged


class QueryClass:
    """What every query class implements; the gateway calls nothing else.

    ``name`` is the class's one name: EXPLAIN shows it, the ledger stores it, and its plans carry it
    as ``query_class``. The last three methods are optional hooks with neutral defaults, so the
    gateway calls them on every class instead of asking whether a class has them.
    """

    name: str
    #: The class in a sentence's words ("top-k queries"), for messages.
    title: str

    def recognises(self, classified: Classified, ctx: Context) -> bool:
        """Whether this class answers the statement (cheap; reads no rows; may refuse)."""
        raise NotImplementedError

    def plan(self, classified: Classified, ctx: Context) -> Any:
        """The plan: mechanism, ε/δ, sensitivities, charges. Pure: reads no protected row."""
        raise NotImplementedError

    def bind_check(self, con: duckdb.DuckDBPyConnection, plan: Any, probe: str) -> None:
        """Let DuckDB bind every statement the answer will run (over ``probe``, no rows)."""
        raise NotImplementedError

    def explain_rows(self, plan: Any, subjects: Any) -> list[tuple]:
        """EXPLAIN PRIVACY rows after the common ``query`` row."""
        raise NotImplementedError

    def answer(self, run: Run) -> Answer:
        """Exact bounded statistics, noise and post-processing, after the debit."""
        raise NotImplementedError

    def debit_scope(self, plan: Any, instance_key: tuple) -> AbstractContextManager:
        """A scope held from before the debit to the end of the release (a release's name in the
        making, so two statements cannot both write it)."""
        return nullcontext()

    def check_at_debit(self, con: duckdb.DuckDBPyConnection, plan: Any, subjects: Any) -> None:
        """A last check inside the debit's transaction, against the subjects the personalization rule
        chose (a refusal there is free: the transaction rolls back)."""

    def answer_from_release(self, classified: Classified, ctx: Context, con: duckdb.DuckDBPyConnection) -> Any:
        """The statement's answer from a public release, free and reading nothing protected, or None."""
        return None


def personalization_notes(plan, subjects, *, scaled_note: bool = True) -> list[str]:
    """What the personalization rule did, in plain words, for the answer's notes.

    Counts only, never an identity. Says who is not in the answer (no budget left, or left out
    by the threshold rule) and how the others took part when some had less than the ε asked;
    EXPLAIN PRIVACY keeps the detail (partitions, allowances, charges). ``scaled_note=False``
    when the caller says itself how the answer is scaled to everyone with budget.
    """
    if subjects is None:
        return []
    who = _subjects_noun(plan.table)
    requested = f"{float(subjects.requested):g}"
    notes = []
    if subjects.excluded:
        spent = "their privacy budget"
        if plan.delta:
            spent += f" (ε, or the δ={plan.delta:g} that this query needs)"
        notes.append(f"{subjects.excluded:,} {who} have used up {spent} and are not in this answer (they paid nothing)")
    if subjects.left_out:
        notes.append(
            f"{subjects.left_out:,} {who} have less than ε={requested} left and are not in this answer: "
            "personalization = 'threshold' uses only those with the whole ε (they paid nothing; the default "
            "rule, 'sample', would use them too)"
        )
    short = sum(lv.count for lv in subjects.levels if lv.allowance < subjects.requested)
    run_at = sorted({float(p.epsilon) for p in subjects.parts})
    rule = subjects.rule
    if rule == "sample" and short:
        if subjects.combined:
            text = (f"{short:,} {who} have less than ε={requested} left: each took part with a chance that matches "
                    "what they have left, and paid that (personalization = 'sample', the default)")  # fmt: skip
            if scaled_note:
                text += (f"; the answer is scaled to all subjects with budget left, {subjects.population:,} {who}, "
                         "from those who took part")  # fmt: skip
            notes.append(text + " (EXPLAIN PRIVACY shows how)")
        else:
            notes.append(f"no one has ε={requested} left: personalization = 'sample' ran everyone at "
                         f"ε={run_at[0]:g}, what they all have, so the answer is noisier than asked")  # fmt: skip
    elif rule == "minimum" and run_at and run_at[0] < float(subjects.requested):
        notes.append(f"personalization = 'minimum': everyone was run at ε={run_at[0]:g}, the smallest budget anyone "
                     f"has left, so the answer is noisier than ε={requested} would give")  # fmt: skip
    elif rule in ("minimum", "partition", "t_round") and len(subjects.parts) == 1 and not short:
        notes.append(f"personalization = '{rule}': everyone in the answer has the whole ε={requested} left, "
                     "so all were run at it, as asked")  # fmt: skip
    elif rule in ("partition", "t_round") and len(subjects.parts) == 1:
        notes.append(f"personalization = '{rule}': everyone was run at ε={run_at[0]:g}, the most all of them "
                     f"can afford, so the answer is noisier than ε={requested} would give")  # fmt: skip
    elif rule in ("partition", "t_round"):
        span = f"ε={run_at[0]:g}" if len(run_at) == 1 else f"ε={run_at[0]:g} to {run_at[-1]:g}"
        notes.append(
            f"{who.capitalize()} have different amounts of budget left: personalization = '{rule}' answered in "
            f"{len(subjects.parts)} group(s), each at the ε all its members can afford ({span}), and combined them "
            "(EXPLAIN PRIVACY shows the groups)"
        )
    return notes


def _subjects_noun(table) -> str:
    """What a table's subjects are called in notes: ``person_id`` → people, ``basket_id`` → baskets."""
    unit = (getattr(table, "unit", "") or "").lower()
    stem = unit[: -len("_id")] if unit.endswith("_id") else ""
    if not stem.isalpha():
        return "subjects"
    if stem == "person":
        return "people"
    if stem.endswith("y") and stem[-2:-1] not in ("a", "e", "i", "o", "u"):
        return stem[:-1] + "ies"
    if stem.endswith(("s", "x", "ch", "sh")):
        return stem + "es"
    return stem + "s"


def _subject_rows(plan, subjects) -> list[tuple]:
    """EXPLAIN rows of the personalization rule: who is used, who pays what."""
    rule = plan.charge.rule
    if isinstance(subjects, errors.Error):
        return [("subjects", f"personalization: {rule}", None, None, None, None,
                 f"the query would be refused: {subjects.message}")]  # fmt: skip
    rows = [
        (
            "subjects",
            f"personalization: {rule}",
            float(subjects.max_charge),
            plan.charge.delta,
            None,
            None,
            f"{subjects.population} subject(s) with budget left, {subjects.excluded} with none (excluded)"
            + (f", {subjects.left_out} left out by the threshold" if subjects.left_out else ""),
        )
    ]
    for line in subjects.describe():
        rows.append(("partition", None, None, None, None, None, line))
    for charge, count in subjects.charge_distribution():
        rows.append(("charge", None, float(charge), plan.charge.delta if charge > 0 else 0.0, None, None,
                     f"{count} subject(s) pay ε={float(charge):g}"))  # fmt: skip
    return rows


def explain_head(plan) -> tuple:
    """The first EXPLAIN row, common to every class."""
    s = plan.settings
    return (
        "query",
        plan.mechanism,
        plan.epsilon,
        plan.delta,
        None,
        None,
        f"class {plan.query_class} over {plan.table.name}; error bars at {100 * (1 - s.alpha):g}%",
    )


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


_BIND_SCOPE: contextvars.ContextVar[BindScope | None] = contextvars.ContextVar("dpgate_bind_scope", default=None)
_BOUND = Memo(4096)  # (schema key, SQL, parameters) of binds that succeeded


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
    rank = f"hash(xor(hash({cols}, __dup), {int(salt)}::UBIGINT))"
    return (
        f"SELECT * EXCLUDE (__dup) FROM ({numbered}) "
        f"QUALIFY row_number() OVER (PARTITION BY {unit} ORDER BY {rank}, __dup) <= {int(t.max_rows)} OFFSET 0"
    )
