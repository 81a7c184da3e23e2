"""``Analysis``: the statement's shape (``syntax``) and what DuckDB says of it (``prepare``),
assembled from the parts in the sibling modules; ``analyse`` makes it once per statement."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol

from sqlglot import exp

from dpgate import errors
from dpgate.catalog.tables import Catalog, ProtectedTable
from dpgate.frontend.classify import GRAPH_FUNCTIONS, Classified, function_name
from dpgate.frontend.dialect import to_duckdb
from dpgate.frontend.nodes import dp_options
from dpgate.frontend.settings import QuerySettings, Session
from dpgate.mechanisms.keyselection import threshold as key_selection_threshold
from dpgate.plans import KeySpec
from dpgate.queries.analysis.aggregates import SUPPORTED_AGGREGATES, AggregateAnalysis
from dpgate.queries.analysis.common import PER_SUBJECT
from dpgate.queries.analysis.keys import KeyAnalysis
from dpgate.queries.analysis.per_subject import PerSubjectAnalysis
from dpgate.queries.analysis.post import PostProcessing
from dpgate.queries.analysis.scope import ScopeAnalysis

#: Largest number of cells (product of key domains) a query may release.
MAX_CELLS = 1_000_000


class PublicFacts(Protocol):
    """What the planner may ask DuckDB: only public facts and query binding, never rows."""

    def describe(self, sql: str) -> list[tuple[str, str]]: ...

    def columns(self, table: str) -> list[tuple[str, str]]: ...

    def distinct_values(self, table: str, column: str) -> list[Any]: ...

    def image(self, sql: str, domains: list[tuple[list[Any], str]]) -> list[Any]: ...

    def unique(self, table: str, columns: list[str], null_safe: bool = False) -> bool: ...

    def count_where(self, condition: str, domains: list[tuple[list[Any], str]]) -> int: ...

    def aggregate_functions(self) -> frozenset[str]: ...


@dataclass
class Syntax:
    """What the statement says, checked against the catalog."""

    q: exp.Select  # qualified copy of the statement
    original_sql: str
    unit: exp.Column
    projections: list[exp.Expr]
    keys_exprs: list[exp.Expr]
    key_names: list[str]
    aggs_nodes: list[exp.Expr]
    agg_inputs: list[tuple[str, exp.Expr | None]]


@dataclass
class Prepared:
    """``Syntax`` plus the public facts DuckDB gives about it."""

    syntax: Syntax
    base: exp.Select
    types: dict[str, str]
    key_specs: list[KeySpec]
    needs_selection: bool
    cells: int | None
    max_rows: int
    max_groups: int


def analyse(classified: Classified, ctx) -> Analysis:
    """The analysis of ``classified`` under ``ctx`` (a ``queries.base.Context``), made once.

    Several classes ask about one statement (top-k's ``recognises`` and then a class's ``plan``);
    they share one ``Analysis`` instead of reading the catalog and asking DuckDB twice. It is kept
    on the classified statement, keyed by everything it reads: the statement's text (the engine
    rewrite changes it in place), the catalog, session and public facts (by identity: another
    analyst's or a later transaction's are other objects) and the query's settings (by value: a
    SET between two plans changes them). Any difference makes a new one.
    """
    statement = classified.statement
    key = (repr(statement), ctx.catalog, ctx.session, ctx.facts,
           ctx.session.query_settings(dp_options(statement)))  # fmt: skip
    memo = classified.analysis
    if memo is not None and _same_key(memo[0], key):
        return memo[1]
    a = Analysis(classified, ctx.catalog, ctx.session, ctx.facts)
    classified.analysis = (key, a)
    return a


def _same_key(old: tuple, new: tuple) -> bool:
    text, catalog, session, facts, settings = old
    return (text == new[0] and catalog is new[1] and session is new[2] and facts is new[3]
            and settings == new[4])  # fmt: skip


class Analysis(ScopeAnalysis, KeyAnalysis, AggregateAnalysis, PostProcessing, PerSubjectAnalysis):
    """Scope, keys, aggregates and post-processing of a SELECT over one protected table.

    Shared by the counting and top-k classes; reads the catalog and asks DuckDB only to
    describe (bind) queries, never for rows.
    """

    def __init__(self, classified: Classified, catalog: Catalog, session: Session, facts: PublicFacts):
        self.statement = classified.statement
        self.table: ProtectedTable = classified.protected  # type: ignore[assignment]
        self.joined: tuple[ProtectedTable, ...] = classified.joined
        self.per_subject = classified.per_subject
        self.rows_table: ProtectedTable = self.table  # the relation bounded per subject (see _per_subject)
        self.inner: exp.Select | None = None  # the per-subject subquery, rewritten
        self.catalog = catalog
        self.facts = facts
        self.settings: QuerySettings = session.query_settings(dp_options(self.statement))
        self.agg_names = facts.aggregate_functions()
        self._syntax: Syntax | None = None
        s = self.settings
        if s.privacy_unit is not None and s.privacy_unit != self.table.unit:
            raise errors.PolicyError(
                f"privacy_unit_column = {s.privacy_unit} does not match {self.table.name}'s declared unit "
                f"{self.table.unit}",
                code="DP301",
                hint=f"drop the option or write privacy_unit_column = {self.table.unit}",
            )

    def syntax(self) -> Syntax:
        """The statement's shape from its text and the catalog alone (no DuckDB call); worked out once."""
        if self._syntax is None:
            self._syntax = self._read_syntax()
        return self._syntax

    def _read_syntax(self) -> Syntax:
        table = self.table
        used = sorted({function_name(f) for f in self.statement.find_all(exp.Func)} & set(GRAPH_FUNCTIONS))
        if used:
            raise errors.UnsupportedQueryError(
                f"{used[0].upper()}() counts subgraphs of a protected graph; {table.name} is not one",
                code="DP270",
                hint="SHOW TABLES lists the graphs (kind graph)",
            )
        q = self.statement.copy()
        q.set("hint", None)
        original_sql = to_duckdb(q)
        if self.per_subject:
            q = self._per_subject(q)
        self._check_shape(q)
        scope = self._scope(q)
        self._qualify(q, scope)
        self.scope = scope
        rows = self.rows_table
        protected = next(i for i in scope.items if i.protected and i.table == rows.name)
        unit = exp.column(rows.unit, table=protected.alias, quoted=True)
        where = q.args.get("where")
        if where is not None:
            self._check_row_expr(where.this, "WHERE")
        projections = list(q.expressions)
        keys_exprs, key_names = self._group_keys(q, projections)
        aggs_nodes = self._collect_aggregates(q, projections)
        if not aggs_nodes:
            raise errors.UnsupportedQueryError(
                f"This query reads rows of protected table {table.name} without aggregating them",
                code="DP211",
                hint=f"aggregate with {SUPPORTED_AGGREGATES}, e.g. SELECT COUNT(*) FROM {table.name}",
            )
        agg_inputs = [self._agg_input(node) for node in aggs_nodes]
        return Syntax(q, original_sql, unit, projections, keys_exprs, key_names, aggs_nodes, agg_inputs)

    def prepare(self, syntax: Syntax | None = None) -> Prepared:
        """The shape plus what DuckDB says of it: input types, key domains, the cells."""
        s, table = self.settings, self.table
        x = syntax or self.syntax()
        # A join of protected tables is bounded as one relation, by the largest bound the owner
        # declared for its tables (the bound sets accuracy; ε per subject is the guarantee) [joins].
        max_rows = s.max_rows or max(t.max_rows for t in (table, *self.joined))
        max_groups = s.max_groups or max(t.max_groups for t in (table, *self.joined))
        if self.per_subject:  # one row per subject: the inner rows were bounded by the table's max_rows
            max_rows = max_groups = 1
        # Row-level base: the unit, the keys and the aggregate inputs (types from DuckDB).
        base = self._base(x.q, x.unit, x.keys_exprs, [inp for _, inp in x.agg_inputs])
        if self.inner is not None:
            for node in list(base.find_all(exp.Table)):
                if node.name == PER_SUBJECT:
                    node.replace(exp.Subquery(this=self.inner.copy(), alias=exp.TableAlias(
                        this=exp.to_identifier(node.alias_or_name, quoted=True))))  # fmt: skip
        types = dict(self.facts.describe(to_duckdb(base)))
        key_specs = self._key_specs(x.keys_exprs, x.key_names, types)
        needs_selection = any(k.domain is None for k in key_specs)
        if needs_selection and s.delta <= 0:
            missing = [k.name for k in key_specs if k.domain is None]
            n_aggs = len(x.aggs_nodes)
            tau = key_selection_threshold(s.epsilon / (n_aggs + 1), 1e-6, min(max_rows, max_groups)).threshold
            raise errors.PolicyError(
                f"GROUP BY {', '.join(missing)} has no declared domain, and delta = 0 forbids DP key selection",
                code="DP214",
                hint=f"{self.declaration_hint(key_specs)}; or allow delta > 0 (with OPTIONS (delta = 1e-6) at "
                f"epsilon = {s.epsilon:g} a key is released only when about {tau} or more subjects have it)",
            )
        if needs_selection and s.consistent:
            raise errors.UnsupportedQueryError(
                "consistent = true needs the whole table of cells, and these keys have no public domain",
                code="DP273",
                hint="declare the keys' domains, or drop consistent",
            )
        cells = None if needs_selection else math.prod(len(k.domain) for k in key_specs)
        if cells is not None and cells > MAX_CELLS:
            raise errors.UnsupportedQueryError(
                f"GROUP BY over {cells:,} cells is more than dpgate releases in one query ({MAX_CELLS:,})",
                code="DP276",
                hint="group by fewer or coarser keys",
            )
        return Prepared(x, base, types, key_specs, needs_selection, cells, max_rows, max_groups)
