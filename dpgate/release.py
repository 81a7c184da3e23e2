"""Releases: noisy rows with their error bars, post-processed in DuckDB, and their metadata.

Post-processing is free (docs/privacy-model.md): the analyst's projections, HAVING, ORDER BY and
LIMIT run in DuckDB over a relation ``__noisy`` that holds only public keys and noisy
values, never a protected row. Error bars travel as ``<col>_ci_low`` / ``<col>_ci_high``:
always in ``cursor.release.intervals``, and as extra columns when asked for.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import duckdb
import numpy as np
from sqlglot import exp

from dpgate import database, errors
from dpgate.frontend.dialect import to_duckdb
from dpgate.mechanisms.base import NoisyColumn, Spent
from dpgate.memo import Memo
from dpgate.plans import CountPlan, Plan


@dataclass(frozen=True)
class ColumnNoise:
    """How one output column was made noisy."""

    mechanism: str
    epsilon: float
    description: str


@dataclass
class ReleaseInfo:
    """Metadata of one answer: what it cost, what is left, and how noisy each column is."""

    entry_id: int | None
    query_class: str
    mechanism: str
    epsilon: float
    delta: float
    epsilon_remaining: float
    delta_remaining: float
    alpha: float
    private: bool
    subjects_charged: int = 0
    subjects_excluded: int = 0  # not in the answer: no budget left, or left out by the rule
    columns: dict[str, ColumnNoise] = field(default_factory=dict)
    intervals: list[dict[str, tuple[Any, Any]]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: Of ``subjects_excluded``, those the threshold rule left out although they had some budget
    #: (the rest had none left); None when the gateway did not say.
    subjects_left_out: int | None = None
    #: The privacy unit is an edge of a graph: the answer is about the whole graph.
    edge_level: bool = False
    #: The public table the statement wrote (a release), or None.
    writes: str | None = None
    #: When the answer was first released, if this statement was answered with it again (free).
    remembered: str | None = None

    @classmethod
    def of(cls, plan: Plan, debit: Any, answer: Answer, private: bool) -> ReleaseInfo:
        """What the gateway tells about one charged answer, from its plan, its debit and the answer."""
        notes = list(plan.notes) + answer.notes
        if not private:
            notes.append("NOT PRIVATE: a fixed test seed was used")
        return cls(
            entry_id=debit.entry_id,
            query_class=plan.query_class,
            mechanism=plan.mechanism,
            epsilon=debit.epsilon,
            delta=plan.delta,
            epsilon_remaining=debit.epsilon_remaining,
            delta_remaining=debit.delta_remaining,
            alpha=plan.settings.alpha,
            private=private,
            subjects_charged=debit.subjects_charged,
            subjects_excluded=debit.subjects_excluded,
            subjects_left_out=debit.subjects.left_out if debit.subjects is not None else 0,
            columns=answer.columns,
            intervals=answer.intervals,
            notes=notes,
            edge_level=plan.edge_level,
            writes=plan.writes,
        )

    @property
    def population(self) -> Population:
        """Whose data this answer is about, out of the roster (public counts only)."""
        return Population.of(self)


@dataclass(frozen=True)
class Population:
    """The subjects an answer is about: everyone the personalization rule used.

    Every subject on the roster with budget left is used (and charged), except those the
    ``threshold`` rule leaves out; subjects with no budget left are not in the answer. A count
    over a population that is not the whole roster counts only the population's rows.
    ``no_budget`` and ``left_out`` are None when only their sum (``not_included``) is known.
    Protected graphs (edge-level DP) have no subjects: ``edge_level`` is true and the answer
    is about the whole graph.
    """

    size: int
    roster: int
    no_budget: int | None = None
    left_out: int | None = None
    edge_level: bool = False

    @classmethod
    def of(cls, info: ReleaseInfo) -> Population:
        if info.edge_level:
            return cls(info.subjects_charged, info.subjects_charged, 0, 0, edge_level=True)
        size = info.subjects_charged
        roster = info.subjects_charged + info.subjects_excluded
        if info.subjects_left_out is None:
            if info.subjects_excluded == 0:
                return cls(size, roster, 0, 0)
            return cls(size, roster)
        left_out = info.subjects_left_out
        return cls(size, roster, info.subjects_excluded - left_out, left_out)

    @property
    def not_included(self) -> int:
        return self.roster - self.size

    @property
    def whole(self) -> bool:
        """Whether the answer is about everyone on the roster."""
        return self.edge_level or self.size == self.roster

    def describe(self) -> str:
        """One line in plain words, e.g. ``19,537 of 32,561 subjects on the roster (13,024 ...)``."""
        if self.edge_level:
            return "the whole graph (edge-level DP: every edge is protected, there are no per-person budgets)"
        if self.whole:
            return f"all {self.roster:,} subjects on the roster"
        text = f"{self.size:,} of {self.roster:,} subjects on the roster"
        if self.no_budget is None or self.left_out is None:
            return text + (f" ({self.not_included:,} not included: they had no budget left, "
                           "or the threshold rule left them out)")  # fmt: skip
        parts = [f"{self.no_budget:,} had no budget left"]
        if self.left_out:
            parts.append(f"{self.left_out:,} left out by the threshold rule")
        return text + " (" + "; ".join(parts) + ")"

    def as_dict(self) -> dict[str, Any]:
        """For JSON: the counts, ``whole_roster``, and ``edge_level`` for graphs."""
        return {
            "subjects": self.size,
            "roster": self.roster,
            "whole_roster": self.whole,
            "no_budget_left": self.no_budget,
            "left_out_by_rule": self.left_out,
            "not_included": self.not_included,
            "edge_level": self.edge_level,
            "text": self.describe(),
        }


@dataclass
class Result:
    """A statement's answer: column names, DuckDB type names, rows, and release metadata."""

    columns: list[str]
    types: list[str]
    rows: list[tuple]
    release: ReleaseInfo | None = None
    message: str | None = None  # for statements without rows (SET)


@dataclass
class Answer:
    """What a query class's run hands back to the gateway to finish the release."""

    names: list[str]
    types: list[str]
    rows: list[tuple]
    intervals: list[dict[str, tuple[Any, Any]]]
    columns: dict[str, ColumnNoise] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    message: str | None = None  # for releases without rows (a synthetic table)
    released_rows: int | None = None  # rows released, when not the rows above
    #: The privacy loss the mechanisms ran at, recorded where they draw noise (or read from what
    #: they returned), one entry per run; None if the class did not report it (``check_consumed``).
    consumed: tuple[Spent, ...] | None = None


#: Shares of ε are floats summed in a different order on the way to the noise than in the plan.
_REL_TOL = 1e-9


def check_consumed(answer: Answer, plan: Plan, debit: Any) -> None:
    """Withhold an answer whose mechanisms did not run at exactly the ε and δ that were debited.

    The plan's shares are checked to sum to its ε when it is made; this checks the other end, what
    reached the noise. Per part of the personalization plan (runs on one part compose sequentially,
    so their ε and δ add up; parts hold disjoint subjects), the sum must equal the part's debited ε,
    and δ the plan's δ that every used subject paid. Less than the debit is withheld too: it is as
    much a sign that the accounting between plan and mechanism went wrong as more is. A class that
    reported nothing has not shown what it ran at. The debit stands either way (fail closed)."""
    if answer.consumed is None:
        raise errors.InternalError(
            f"The {plan.query_class} answer does not say what privacy loss its mechanisms ran at: it is withheld",
            code="DP501", hint="the debit stands (fail closed); this is a bug in dpgate, please report it",
        )  # fmt: skip
    subjects = debit.subjects
    debited = {p.index: float(p.epsilon) for p in subjects.parts} if subjects is not None else {0: debit.epsilon}
    ran: dict[int, list[Spent]] = {}
    for spent in answer.consumed:
        ran.setdefault(spent.part, []).append(spent)
    for part in sorted(set(debited) | set(ran)):
        runs = ran.get(part, [])
        eps, delta = math.fsum(s.epsilon for s in runs), math.fsum(s.delta for s in runs)
        want_eps, want_delta = debited.get(part, 0.0), plan.delta if part in debited else 0.0
        if not (math.isclose(eps, want_eps, rel_tol=_REL_TOL) and math.isclose(delta, want_delta, rel_tol=_REL_TOL)):
            what = "; ".join(f"{s.what or 'a run'} ε={s.epsilon:.17g} δ={s.delta:g}" for s in runs) or "nothing"
            raise errors.InternalError(
                f"The {plan.query_class} answer's mechanisms ran at ε={eps:.17g}, δ={delta:g} on part {part} of the "
                f"subjects, which was debited ε={want_eps:.17g}, δ={want_delta:g} ({what}): the answer is withheld",
                code="DP501", hint="the debit stands (fail closed); this is a bug in dpgate, please report it",
            )  # fmt: skip


def _list_type(col: NoisyColumn) -> str:
    if not col.integer:
        return "DOUBLE"
    limit = 2**63 - 1
    fits = all(v is None or -limit <= int(v) <= limit for arr in (col.values, col.low, col.high) for v in arr)
    return "BIGINT" if fits else "HUGEINT"


def norm_sub(values: np.ndarray, total: float) -> np.ndarray:
    """Norm-Sub: the non-negative integer vector closest to ``values`` that sums to ``total``.

    Subtract one common amount δ from every cell and clip at zero, with δ chosen so that the
    result sums to ``max(0, total)`` (the Euclidean projection onto that simplex); then round
    to integers keeping the sum (largest remainders, ties to the earlier cell). Post-processing
    of noisy values only (Norm-Sub: T. Wang et al., "Locally Differentially Private Frequency
    Estimation with Consistency", NDSS 2020; the same step PrivBayes applies to its marginals).
    """
    y = np.asarray(values, dtype=float)
    target = int(round(max(0.0, float(total))))
    if y.size == 0:
        return np.zeros(0, dtype=object)
    if target == 0:
        return np.zeros(y.size, dtype=object)
    s = np.sort(y)[::-1]
    cs = np.cumsum(s)
    k = np.arange(1, y.size + 1)
    delta_k = (cs - target) / k
    valid = np.nonzero(s - delta_k > 0)[0]
    delta = delta_k[valid[-1]] if valid.size else (cs[-1] - target) / y.size
    x = np.maximum(y - delta, 0.0)
    base = np.floor(x)
    rest = target - int(base.sum())
    if rest > 0:
        order = np.lexsort((np.arange(y.size), -(x - base)))
        base[order[:rest]] += 1
    elif rest < 0:  # float rounding: take from the largest cells
        order = np.argsort(-base, kind="stable")
        base[order[: -rest]] -= 1
    return np.array([int(v) for v in base], dtype=object)


def consistent_counts(plan: CountPlan, noisy: list[NoisyColumn]) -> list[NoisyColumn]:
    """``consistent = true``: every count aggregate's table made non-negative with its noisy total.

    The cells' intervals no longer describe the projected values, so none are reported.
    """
    out = []
    for agg, col in zip(plan.aggs, noisy):
        if agg.kind not in ("count_rows", "count_values", "count_subjects", "count_distinct"):
            out.append(col)
            continue
        raw = np.array([float(v) for v in col.values])
        values = norm_sub(raw, raw.sum())
        none = np.array([None] * len(values), dtype=object)
        out.append(NoisyColumn(values, none, none, True, col.mechanism, col.epsilon,
                               col.scale + "; made consistent (Norm-Sub: non-negative, same noisy total)"))  # fmt: skip
    return out


def noisy_rows(
    con: duckdb.DuckDBPyConnection,
    plan: CountPlan,
    keys: list[tuple],
    noisy: list[NoisyColumn],
    intervals: bool,
) -> tuple[list[str], list[str], list[tuple], list[dict[str, tuple]]]:
    """Run the post-processing query over the noisy values; return names, types, rows, intervals."""
    sql, params, n_out, ci_names = post_statement(plan, keys, noisy)
    try:
        cur = con.execute(sql, params)
        rows = cur.fetchall()
        desc = cur.description
    except duckdb.Error as e:
        raise errors.ProgrammingError(
            f"Post-processing of the noisy answer failed: {str(e).splitlines()[0]}",
            code="DP231",
            hint="the query was charged; simplify the SELECT / HAVING / ORDER BY expressions",
        ) from e
    names = [d[0] for d in desc]
    types = [str(d[1]) for d in desc]
    interval_rows = []
    for r in rows:
        iv: dict[str, list] = {}
        for (name, tag), v in zip(ci_names, r[n_out:]):
            iv.setdefault(name, [None, None])[0 if tag == "ci_low" else 1] = v
        interval_rows.append({k: (v[0], v[1]) for k, v in iv.items()})
    if intervals:
        return names, types, rows, interval_rows
    return names[:n_out], types[:n_out], [r[:n_out] for r in rows], interval_rows


def post_statement(plan: CountPlan, keys: list[tuple], noisy: list[NoisyColumn]) -> tuple[str, dict[str, Any], int, list]:
    """(SQL, parameters, output columns, interval columns) of the post-processing over the noisy values."""
    params: dict[str, Any] = {}
    cols = []
    for j, key in enumerate(plan.keys):
        key_sql, params[f"k{j}"] = database.typed_list(f"k{j}", [k[j] for k in keys], key.sql_type)
        cols.append(f"unnest({key_sql}) AS __k{j}")
    for i, col in enumerate(noisy):
        t = _list_type(col)
        for suffix, values in (("", col.values), ("_lo", col.low), ("_hi", col.high)):
            params[f"a{i}{suffix}"] = [_py(v) for v in values]
            cols.append(f"unnest(CAST($a{i}{suffix} AS {t}[])) AS __a{i}{suffix}")
    if not cols:
        raise errors.InternalError("nothing to release")
    values_sql = "SELECT " + ", ".join(cols)

    post = plan.post.copy()
    n_out = len(post.expressions)
    ci_exprs = []
    ci_names = []
    for out in plan.outputs:
        if out.agg is None:
            continue
        for suffix, tag in (("_lo", "ci_low"), ("_hi", "ci_high")):
            src = out.wrapper.copy() if out.wrapper is not None else exp.column(f"__a{out.agg}")
            src = src.transform(
                lambda n, a=out.agg, s=suffix: exp.column(f"__a{a}{s}")
                if isinstance(n, exp.Column) and n.name == f"__a{a}"
                else n
            )
            name = f"{out.name}_{tag}"
            ci_exprs.append(exp.alias_(src, name, quoted=True))
            ci_names.append((out.name, tag))
    post.set("expressions", [*post.expressions, *ci_exprs])
    return f"WITH __noisy AS ({values_sql}) {to_duckdb(post)}", params, n_out, ci_names


def _py(v: Any) -> Any:
    if hasattr(v, "item"):
        return v.item()
    return v


#: Post-processing statements that ran over a row of NULLs (they read no table: their SQL is their key).
_POST_RAN = Memo(4096)


def check_post(con: duckdb.DuckDBPyConnection, plan: Any, columns: int) -> None:
    """Before the debit: run the post-processing (SELECT expressions, HAVING, ORDER BY over the noisy
    values) over one row of NULLs, its ``columns`` noisy values typed as integers and then as doubles
    (their run-time type is one of the two). A statement that runs neither way fails whatever the data
    and the noise — ``HAVING n > 'abc'`` — and was charged before it failed: it is
    refused here, free. (Over no rows DuckDB never evaluates the conversion, and EXPLAIN does not either.)"""
    null = np.array([None], dtype=object)
    statements = [
        post_statement(plan, [tuple(None for _ in plan.keys)],
                       [NoisyColumn(null, null, null, integer, "", 0.0, "") for _ in range(columns)])[:2]
        for integer in (True, False)
    ]  # fmt: skip
    if any((sql, repr(params)) in _POST_RAN for sql, params in statements):
        return
    failure = ""
    for sql, params in statements:
        try:
            con.execute(sql, params).fetchall()
        except duckdb.Error as e:
            failure = failure or str(e).strip().splitlines()[0]  # the integer typing's: what counts are
            continue
        _POST_RAN.put((sql, repr(params)))
        return
    raise errors.ProgrammingError(
        f"The SELECT / HAVING / ORDER BY over the answer cannot run: {failure}", code="DP231",
        hint="fix the expressions over the aggregates; nothing was charged",
    )  # fmt: skip


def confidence_label(alpha: float) -> str:
    """``95%``, ``99.9%``, ``99.9999999%``: an interval's level in full (``:g`` rounds 1 - 10^-9 to
    100%, which no interval is), from 12 significant digits so float noise does not show."""
    return f"{100 * (1 - alpha):.12g}%"
