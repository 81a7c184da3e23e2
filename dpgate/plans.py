"""Plans: frozen descriptions of what a query will compute, spend and release.

A plan is built from the statement and public facts only. It fixes the mechanism, every
sensitivity, every share of ε and δ, and what each subject is charged, before any row is
read; ``EXPLAIN PRIVACY`` prints it and the ledger debits exactly its cost.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

from sqlglot import exp

from dpgate import errors
from dpgate.catalog.tables import ProtectedTable
from dpgate.frontend.settings import QuerySettings
from dpgate.mechanisms.base import AggSpec, Component, KeySelection

#: Largest noise scale (sensitivity / ε, in grid units) dpgate will sample.
MAX_NOISE_SCALE = 2.0**52


@dataclass(frozen=True)
class KeySpec:
    """One GROUP BY key: its row-level expression and its public domain (if known)."""

    name: str
    expr: exp.Expr
    sql_type: str
    domain: tuple[Any, ...] | None
    source: str  # where the domain comes from, e.g. "declared", "bounds", "public table regions"


@dataclass(frozen=True)
class SubjectCharge:
    """What the personalization rule charges: every subject it uses pays ``epsilon`` and ``delta``.

    Which subjects it uses is decided from the roster (public budgets) inside the ledger
    transaction, never from the rows.
    """

    rule: str
    epsilon: float
    delta: float
    options: dict = field(default_factory=dict)  # partitioning, partitions, rounds, min_size

    @property
    def ledger_options(self) -> dict:
        return dict(self.options)


@dataclass(frozen=True)
class OutputColumn:
    name: str
    agg: int | None  # index of the aggregate whose error bar this column carries
    wrapper: exp.Expr | None = None  # monotone post-processing applied to the interval


class Plan:
    """What every plan declares: the gateway, the ledger and the release read these and nothing else.

    Each query class's plan is a frozen dataclass deriving from this, whose fields fill in the
    attributes below; ``query_class`` equals the name of the class that makes the plan.
    """

    table: ProtectedTable
    settings: QuerySettings
    statement_sql: str  # the statement as planned (its hash identifies it in the ledger)
    charge: SubjectCharge  # what the personalization rule charges each subject
    notes: tuple[str, ...]
    mechanism: str
    #: The query class's one name (EXPLAIN, the ledger, ``ReleaseInfo.query_class``).
    query_class: ClassVar[str]
    #: Whether the privacy unit is an edge of a graph (no per-subject budgets).
    edge_level: ClassVar[bool] = False

    @property
    def epsilon(self) -> float:
        """The ε the analyst is charged, and every subject the rule uses."""
        return self.settings.epsilon

    @property
    def delta(self) -> float:
        return 0.0

    def rows_per_subject(self, table: ProtectedTable) -> int:
        """A public bound on the rows one subject of ``table`` adds to what the statement reads."""
        return table.max_rows

    @property
    def writes(self) -> str | None:
        """The public table the statement writes (a release), or None."""
        return None


@dataclass(frozen=True)
class CountPlan(Plan):
    """A counting-class query: COUNT / SUM / AVG with WHERE and GROUP BY."""

    table: ProtectedTable
    settings: QuerySettings
    statement_sql: str
    source: exp.Select  # FROM / JOIN / WHERE of the analyst's query, projections replaced
    unit: exp.Column
    keys: tuple[KeySpec, ...]
    aggs: tuple[AggSpec, ...]
    key_selection: KeySelection | None
    max_rows: int
    max_groups: int
    bound_groups: bool
    post: exp.Select  # the analyst's projections / HAVING / ORDER BY / LIMIT over __noisy
    outputs: tuple[OutputColumn, ...]
    charge: SubjectCharge
    notes: tuple[str, ...] = field(default_factory=tuple)
    query_class: ClassVar[str] = "count"
    joined: tuple[ProtectedTable, ...] = ()  # protected tables joined on the unit (one subject space)
    prebound: bool = False  # the per-subject subquery: the table's rows are cut to max_rows first
    mechanism: str = "laplace"

    def __post_init__(self) -> None:
        spent = sum(a.epsilon for a in self.aggs) + (self.key_selection.epsilon if self.key_selection else 0.0)
        if not math.isclose(spent, self.settings.epsilon, rel_tol=1e-9, abs_tol=1e-15):
            raise errors.InternalError(f"ε shares sum to {spent}, not {self.settings.epsilon}")
        if self.key_selection is None and any(k.domain is None for k in self.keys):
            raise errors.InternalError("a key without a public domain needs key selection")
        for agg in self.aggs:
            for comp in agg.components:
                if not comp.epsilon >= 1e-9:
                    raise errors.UnsupportedQueryError(
                        f"{agg.label} would get ε={comp.epsilon:g}, too little to add noise safely",
                        code="DP275",
                        hint="ask for fewer aggregates or a larger epsilon",
                    )
                if comp.sensitivity / comp.epsilon > MAX_NOISE_SCALE:
                    raise errors.UnsupportedQueryError(
                        f"{agg.label} would need noise of scale {comp.sensitivity / comp.epsilon:.3g} "
                        f"(sensitivity {comp.sensitivity} at ε={comp.epsilon:g}): the answer would be meaningless",
                        code="DP275",
                        hint="tighten the bounds of the input, lower max_rows_contributed, or raise epsilon",
                    )

    def rows_per_subject(self, table: ProtectedTable) -> int:
        # The WHERE runs on a subject's rows before they are sampled: an analyst's smaller
        # max_rows_contributed does not make them fewer than the table's declared bound
        return max(self.max_rows, table.max_rows)

    @property
    def delta(self) -> float:
        return self.key_selection.delta if self.key_selection else 0.0

    @property
    def cells(self) -> int | None:
        if self.key_selection is not None:
            return None
        n = 1
        for k in self.keys:
            n *= len(k.domain or ())
        return n


@dataclass(frozen=True)
class TopKPlan(Plan):
    """A top-k query: the k most frequent items (cells of the GROUP BY keys, or 0/1 columns).

    Frequencies count *subjects*: a subject holding an item in several rows counts once for it.
    The selection releases only which items win (``mechanisms.topk``); counts for them are a
    separate release, paid only when the query shows them (``counts``).
    """

    table: ProtectedTable
    settings: QuerySettings
    statement_sql: str
    source: exp.Select  # rows: __unit and __k<j> (GROUP BY form) or __unit and the 0/1 columns
    keys: tuple[KeySpec, ...]  # GROUP BY form; empty for the wide-table form
    columns: tuple[str, ...]  # wide-table form: the 0/1 columns that are the items
    k: int  # items selected: LIMIT + OFFSET
    method: str
    selection_epsilon: float
    counts: Component | None  # fresh noisy counts of the selected items, when shown
    key_selection: KeySelection | None  # when the keys have no public domain
    max_groups: int  # items kept per subject for key selection and for the counts
    post: exp.Select  # the analyst's projections / ORDER BY / LIMIT over __noisy
    outputs: tuple[OutputColumn, ...]
    charge: SubjectCharge
    notes: tuple[str, ...] = field(default_factory=tuple)
    query_class: ClassVar[str] = "top_k"

    def __post_init__(self) -> None:
        spent = self.selection_epsilon + (self.counts.epsilon if self.counts else 0.0)
        spent += self.key_selection.epsilon if self.key_selection else 0.0
        if not math.isclose(spent, self.settings.epsilon, rel_tol=1e-9, abs_tol=1e-15):
            raise errors.InternalError(f"ε shares sum to {spent}, not {self.settings.epsilon}")
        if self.key_selection is None and self.n_items is None:
            raise errors.InternalError("a top-k plan needs a public universe or key selection")

    @property
    def mechanism(self) -> str:
        return f"top_k/{self.method}"

    @property
    def delta(self) -> float:
        return self.key_selection.delta if self.key_selection else 0.0

    @property
    def distinct_by_schema(self) -> bool:
        """Rows are distinct on (unit, keys): a NULL-safe unique constraint covers them.

        Only for keys that are plain columns of the protected table, with no join (a join can
        repeat rows); then ``SELECT DISTINCT``, the costliest step, can be skipped.
        """
        if self.columns or self.source.args.get("joins"):
            return False
        cols = {self.table.unit}
        for key in self.keys:
            if not isinstance(key.expr, exp.Column):
                return False
            cols.add(key.expr.name.lower())
        return any(u <= cols for u in self.table.unique_keys)

    @property
    def n_items(self) -> int | None:
        """Size of the public universe (None when key selection discovers it)."""
        if self.columns:
            return len(self.columns)
        if any(k.domain is None for k in self.keys):
            return None
        return math.prod(len(k.domain) for k in self.keys)


@dataclass(frozen=True)
class SubgraphCount:
    """One subgraph count of a graph query: which ladder, and its ε (count and error bar)."""

    index: int
    label: str  # as the analyst wrote it
    query: str  # 'triangle' | 'kstar' | 'ktriangle' | 'kclique' (dpgate.mechanisms.graphs.QUERIES)
    k: int | None
    epsilon: float  # the count's whole share, error bar included
    interval_share: float  # part of it spent on the DP width statistic (0: public error bar)
    global_sensitivity: int


@dataclass(frozen=True)
class SubgraphPlan(Plan):
    """Subgraph counts of a protected graph under edge-level DP (``mechanisms.ladder``).

    Neighbouring graphs differ in one edge of the simple undirected graph on the public node
    universe; every potential edge shares one budget (``charge``).
    """

    table: ProtectedTable
    settings: QuerySettings
    statement_sql: str
    n_nodes: int
    node_source: str  # "declared N" or "public table t.c"
    edges_where: exp.Expr | None  # a row filter over the edge table (WHERE of the function form)
    counts: tuple[SubgraphCount, ...]
    shape: str  # "functions", "triangle self-join" or "degree sum"
    post: exp.Select
    outputs: tuple[OutputColumn, ...]
    charge: SubjectCharge
    notes: tuple[str, ...] = field(default_factory=tuple)
    query_class: ClassVar[str] = "subgraph"
    edge_level: ClassVar[bool] = True
    mechanism: str = "ladder"
    keys: tuple = ()

    def rows_per_subject(self, table: ProtectedTable) -> int:
        """The edge table's rows are not public, its potential edges are: C(n, 2) (the graph's one
        budget is its roster's one row)."""
        return max(1, self.n_nodes * (self.n_nodes - 1) // 2)

    def __post_init__(self) -> None:
        spent = sum(c.epsilon for c in self.counts)
        if not self.counts or not math.isclose(spent, self.settings.epsilon, rel_tol=1e-9, abs_tol=1e-15):
            raise errors.InternalError(f"ε shares sum to {spent}, not {self.settings.epsilon}")


@dataclass(frozen=True)
class SynthesisPlan(Plan):
    """A synthetic release: fit a model to a protected table, write samples as a public table.

    ``codings`` are ``synthesis.ColumnCoding`` values (public code spaces); ``options`` the
    mechanism's parameters (for PrivBayes: degree, theta, score, beta, encoding).
    """

    table: ProtectedTable
    settings: QuerySettings
    statement_sql: str
    name: str  # the release's table in schema main
    mechanism: str
    codings: tuple[Any, ...]
    options: dict[str, Any]
    rows: int | None  # rows to write; None: the model's DP row estimate (scaled to everyone with budget)
    bins: int
    max_rows: int  # rows kept per subject: the model runs at ε / max_rows (group privacy)
    charge: SubjectCharge
    notes: tuple[str, ...] = field(default_factory=tuple)
    query_class: ClassVar[str] = "synthetic"
    keys: tuple = ()
    #: For the release caps (``catalog.caps``), public facts of what the release writes: whether it
    #: takes ``WITH (rows = N)``, how many rows it writes for each row asked (a sequence is up to
    #: ``max_length`` rows), a bound on its rows whatever the roster (a synopsis's node cap), and the
    #: columns' types of a row when they are not its source's (a synopsis's nodes); and its side
    #: tables' sizes, ``(rows, column types)`` each, rows None for as many as the release's own.
    rows_option: bool = False
    rows_each: int = 1
    row_bound: int | None = None
    row_least: int = 1  # with ``row_bound``: the fewest rows worth a charge (a synopsis's root and first split)
    row_types: tuple[Any, ...] | None = None  # a type, or (type, the public values a text column may hold)
    side_sizes: tuple[tuple[int | None, tuple[Any, ...]], ...] = ()
    rows_extra: int = 0  # rows beside one a subject's (a supermodular release's '*' row)

    @property
    def delta(self) -> float:
        return self.charge.delta  # 0 but for the experimental supermodular release

    def rows_per_subject(self, table: ProtectedTable) -> int:
        return max(self.max_rows, table.max_rows)  # as ``CountPlan``'s: the source's rows are read before the cut

    @property
    def writes(self) -> str | None:
        return self.name

    @property
    def fit_epsilon(self) -> float:
        return self.settings.epsilon / self.max_rows
