"""What every query class implements, and what the classes share.

A query class (counting, top-k, subgraph counts, synthetic releases, …) is one module under
``dpgate.queries`` with an object that satisfies ``QueryClass``: it recognises its statements,
plans them without reading a protected row, lets DuckDB bind the plan's SQL before the debit,
explains the plan, and answers after the debit. The gateway iterates the registry in
``dpgate.queries`` and has no per-class code. This module imports no query class.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

import duckdb
import numpy as np

from dpgate import errors
from dpgate.catalog.tables import Catalog
from dpgate.frontend.classify import Classified
from dpgate.frontend.settings import Session
from dpgate.release import Answer, confidence_label


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

    def reusable(self, plan: Any) -> bool:
        """Whether ``plan`` may answer the same statement text again under the same schema and session
        settings, when planning read no row (the gateway's plan cache). Only a class whose plan is a
        function of those alone, and never changed after planning, says yes."""
        return False


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
        f"class {plan.query_class} over {plan.table.name}; error bars at {confidence_label(s.alpha)}",
    )
