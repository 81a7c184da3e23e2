"""What every synthesizer's release shares: the registry entry type and the planning helpers.

A synthesizer plugs into ``CREATE SYNTHETIC TABLE ... USING <name>`` with one ``Release`` entry in
``dpgate.queries.synthetic.SYNTHESIZERS``: how it plans from the statement and public facts,
its free dry run, its bind check, its answer after the debit, and its EXPLAIN rows. The maths is
the mechanism's (``dpgate.mechanisms.synthesizer(name)``, one signature for all).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from dpgate import errors
from dpgate.catalog.tables import MAIN, Catalog, mentioned_by_views
from dpgate.plans import SynthesisPlan


@dataclass(frozen=True)
class Release:
    """One synthesizer of ``CREATE SYNTHETIC TABLE ... USING name``, as the synthetic class runs it.

    ``plan(classified, catalog, session)`` reads the statement and public facts only;
    ``dry_run(plan, epsilon)`` runs the mechanism over no rows (its refusals are free);
    ``bind_check(con, plan, charged)``; ``answer(con, plan, debit, analyst, *, rng, sampling,
    progress)`` after the debit; ``explain_rows(plan, subjects)``; ``check_size(plan,
    population, epsilon)`` what the release would hold, from the number of subjects it reads
    (those who pay) and the ε it runs at, in the debit's transaction.
    """

    name: str  # after USING; also the mechanism's name in ``dpgate.mechanisms.MECHANISMS``
    plan: Callable[..., SynthesisPlan]
    dry_run: Callable[[SynthesisPlan, float], None]
    bind_check: Callable[..., None]
    answer: Callable[..., Any]
    explain_rows: Callable[..., list[tuple]]
    check_size: Callable[[SynthesisPlan, int, float], None] | None = None
    side_tables: tuple[str, ...] = ()  # tables written beside the release (NAME + each suffix)
    #: The release's counts can be scaled from a sample of subjects to everyone with budget. Those
    #: that count the subjects who took part cannot: personalization 'sample' is refused for them.
    scales_sample: bool = True


def named(plan: Callable[..., SynthesisPlan]) -> Callable[..., SynthesisPlan]:
    """A planner given the release's name, checked first (its refusals come before the options')."""

    def planner(classified, catalog: Catalog, session) -> SynthesisPlan:
        return plan(classified, catalog, session, release_name(classified.statement.this, catalog))

    return planner


def release_name(node: exp.Table, catalog: Catalog) -> str:
    if node.args.get("catalog") or (node.db and node.db.lower() != MAIN):
        raise errors.ProgrammingError(
            f"A release is written to schema main, not {node.sql(dialect='duckdb')}", code="DP226",
            hint="name the table without a schema",
        )  # fmt: skip
    name = node.name.lower()
    if not name or name.startswith("__"):
        raise errors.ProgrammingError(f"{node.name!r} is not a valid release name", code="DP226", hint="use a plain name")
    require_free_name(
        catalog, name, "choose another name (SHOW RELEASES lists the releases; DROP SYNTHETIC TABLE drops one you made)"
    )
    return name


def require_free_name(catalog: Catalog, name: str, hint: str) -> None:
    """Refuse (free, at planning) a release table name that a table, view or protected table has."""
    if name in catalog.relation_names or name in catalog.views or catalog.protected(name) is not None:
        raise errors.ProgrammingError(f"A table or view named {name} already exists", code="DP226", hint=hint)
    view = mentioned_by_views(catalog.views, name)
    if view is not None:
        # Every statement depends on the tables a view's SQL may name (its words): creating or dropping
        # such a table would restart other analysts' statements, or fail them after their debit
        raise errors.ProgrammingError(
            f"A release cannot be named {name}: the SQL of view {view} mentions that name", code="DP226",
            hint="choose another name",
        )  # fmt: skip


def run_epsilon(debit, release: str) -> float:
    """The ε a release runs at: its personalization plan's (every release is made from one part)."""
    if debit.subjects is None:  # every protected table has a roster; the row count must never stand in for it
        raise errors.InternalError(f"{release} needs the personalization plan of its subjects")
    return float(debit.subjects.parts[0].epsilon)


def subject_rows_sql(t, columns: list[str], max_rows: int, charged: str, salt: int) -> str:
    """``columns`` of the charged subjects' rows, at most ``max_rows`` each (keyed random choice)."""
    q = lambda n: exp.to_identifier(n, quoted=True).sql(dialect="duckdb")  # noqa: E731
    cols = ", ".join(f"__s.{q(c)}" for c in columns)
    names = ", ".join(q(c) for c in columns)
    rows = (
        f"SELECT __s.{q(t.unit)} AS __unit, {cols} FROM main.{q(t.name)} __s "
        f"JOIN (SELECT DISTINCT unit FROM {charged}) __c ON __s.{q(t.unit)} = __c.unit"
    )
    if t.unique_unit and max_rows >= 1:
        return f"SELECT {names} FROM ({rows})"
    # Rows equal in every column get distinct duplicate numbers, and the salt is re-hashed
    # (as in execute.py) so that the choice is uniform and independent across queries.
    dup = f"SELECT *, row_number() OVER (PARTITION BY __unit, {names}) AS __dup FROM ({rows})"
    rank = f"hash(xor(hash(__unit, {names}, __dup), {int(salt)}::UBIGINT))"
    return (
        f"SELECT {names} FROM ({dup}) "
        f"QUALIFY row_number() OVER (PARTITION BY __unit ORDER BY {rank}, __dup) <= {max_rows}"
    )


__all__ = ["Release", "named", "release_name", "require_free_name", "run_epsilon", "subject_rows_sql"]
