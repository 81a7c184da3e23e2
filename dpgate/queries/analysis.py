"""The SQL analysis shared by the classes that aggregate rows of one protected table.

Used by the counting class (COUNT / SUM / AVG with WHERE, GROUP BY and post-processing)
and the top-k class; it imports no query class.

Input: a SELECT that ``classify`` found to read exactly one protected table. Output: a
``CountPlan`` fixing, from the statement and public facts only,

- the rows: the protected table, its joins with public lookup tables, the WHERE clause;
- the GROUP BY keys and their public domains (declared values, integer bounds, a public
  lookup column, or the image of an expression over those), or DP key selection when a
  key has no public domain (costs δ);
- each aggregate's bounded input, sensitivity and share of ε (equal shares);
- the post-processing (the analyst's projections, HAVING, ORDER BY, LIMIT) to run on the
  noisy values;
- what the personalization rule charges each subject.

Everything refused here is refused before any row is read, with errors that depend only
on the statement and the catalog.
"""

from __future__ import annotations

import datetime
import difflib
import hashlib
import math
import re
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from sqlglot import exp

from dpgate import errors, noise
from dpgate.queries import bounds
from dpgate.catalog.tables import (
    EPOCH,
    Column,
    INTEGER_TYPES,
    TIMESTAMP_TYPES,
    Catalog,
    ProtectedTable,
    is_temporal_type,
    join_exact,
    join_safe,
)
from dpgate.frontend.classify import GRAPH_FUNCTIONS, Classified, function_name
from dpgate.frontend.dialect import to_duckdb
from dpgate.frontend.nodes import dp_options
from dpgate.plans import (
    AVG,
    COUNT_DISTINCT,
    COUNT_ROWS,
    COUNT_SUBJECTS,
    COUNT_VALUES,
    QUANTILE,
    STDDEV_POP,
    STDDEV_SAMP,
    SUM,
    VAR_POP,
    VAR_SAMP,
    VARIANCE_KINDS,
    AggSpec,
    Component,
    KeySelection,
    KeySpec,
    OutputColumn,
)
from dpgate.frontend.settings import QuerySettings, Session

#: Largest number of cells (product of key domains) a query may release.
MAX_CELLS = 1_000_000
#: Largest cross product of input domains evaluated to find an expression's image.
MAX_IMAGE_INPUTS = 200_000
#: Bits of resolution below the bound range for real-valued sums (grid = range / 2^32).
GRID_BITS = 32
#: Variances sum squares of grid values, so they use a coarser grid (range / 2^20): squares
#: stay below 2^40 and their sum is an exact integer.
VARIANCE_GRID_BITS = 20
#: Quantiles choose among the grid points of [L, U]; the rank error grows with log(points),
#: so their grid is range / 2^20 (integer columns with a smaller range use unit steps).
QUANTILE_GRID_BITS = 20
_VARIANCES = {exp.VariancePop: VAR_POP, exp.Variance: VAR_SAMP, exp.StddevPop: STDDEV_POP,
              exp.StddevSamp: STDDEV_SAMP, exp.Stddev: STDDEV_SAMP}  # fmt: skip

SUPPORTED_AGGREGATES = (
    "COUNT(*), COUNT(expr), COUNT(DISTINCT expr), SUM(expr), AVG(expr), VAR_POP / VAR_SAMP / VARIANCE(expr), "
    "STDDEV_POP / STDDEV_SAMP / STDDEV(expr), MEDIAN(expr), QUANTILE_CONT(expr, q), PERCENTILE_CONT(expr, q)"
)
_MONOTONE_WRAPPERS = (exp.Round, exp.Floor, exp.Ceil, exp.Cast, exp.Paren)


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
class _Item:
    alias: str
    table: str
    columns: dict[str, str]  # name -> type
    protected: bool
    nullable: bool = False  # its columns can be NULL because of an outer join
    prot: ProtectedTable | None = None  # the catalog entry of a protected table


@dataclass
class _Scope:
    items: list[_Item]
    using: set[str] = field(default_factory=set)

    def find(self, column: exp.Column) -> _Item | None:
        name = column.name.lower()
        if column.table:
            alias = column.table.lower()
            for item in self.items:
                if item.alias == alias:
                    if name not in item.columns:
                        raise errors.ProgrammingError(
                            f"Column {column.sql(dialect='duckdb')} does not exist", code="DP218",
                            hint=_suggest(name, item.columns),
                        )  # fmt: skip
                    return item
            raise errors.ProgrammingError(
                f"Unknown table alias {column.table!r} in {column.sql(dialect='duckdb')}", code="DP218",
                hint="aliases in this query: " + ", ".join(i.alias for i in self.items),
            )  # fmt: skip
        owners = [i for i in self.items if name in i.columns]
        if len(owners) > 1:
            protected = [i for i in owners if i.protected]
            if name in self.using and protected:
                return protected[0]
            if name in self.using and len({i.table for i in owners}) == 1:
                return owners[0]
            raise errors.ProgrammingError(
                f"Column {name} is ambiguous: it is in {', '.join(i.alias for i in owners)}", code="DP218",
                hint=f"qualify it, e.g. {owners[0].alias}.{name}",
            )  # fmt: skip
        return owners[0] if owners else None

    def all_columns(self) -> list[str]:
        return [c for i in self.items for c in i.columns]


def _suggest(name: str, candidates) -> str:
    close = difflib.get_close_matches(name, list(candidates), n=1)
    return f"did you mean {close[0]}?" if close else "check the column name"


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


class Analysis:
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

    # -- the analysis every class over one protected table shares -------------------------
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
                code="DP219",
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
                code="DP219",
                hint="declare the keys' domains, or drop consistent",
            )
        cells = None if needs_selection else math.prod(len(k.domain) for k in key_specs)
        if cells is not None and cells > MAX_CELLS:
            raise errors.UnsupportedQueryError(
                f"GROUP BY over {cells:,} cells is more than dpgate releases in one query ({MAX_CELLS:,})",
                code="DP219",
                hint="group by fewer or coarser keys",
            )
        return Prepared(x, base, types, key_specs, needs_selection, cells, max_rows, max_groups)

    # -- shape -----------------------------------------------------------------------------
    def _per_subject(self, q: exp.Select) -> exp.Select:
        """``FROM (SELECT unit, agg AS v, ... FROM t [WHERE ...] GROUP BY unit) s``: one row per subject.

        Wilson et al.'s user-level pattern [per-subject]. The inner rows are the charged subjects'
        rows, cut to the table's ``max_rows`` per subject by a keyed hash before anything else
        (``restrict_to_charged``), with every aggregate's input clamped to its bounds; so each
        inner value has public bounds: COUNT in ``[0, R]``, SUM in ``[R min(L, 0), R max(U, 0)]``,
        AVG / MIN / MAX in ``[L, U]``. The outer query then reads one row per subject (max_rows
        = 1) of a relation whose columns have those bounds: its sensitivities follow as for any
        table. Returns the outer statement over a placeholder table; ``self.inner`` is the
        rewritten subquery, which replaces the placeholder in the row-level source.
        """
        sub = q.args["from_"].this
        inner: exp.Select = sub.this.copy()
        alias = sub.alias_or_name or "per_subject"
        table = self.table
        for key in ("having", "order", "limit", "offset", "joins", "with_", "distinct"):
            if inner.args.get(key):
                raise errors.UnsupportedQueryError(
                    "The per-subject subquery has only SELECT, FROM, WHERE and GROUP BY", code="DP216",
                    hint=f"write FROM (SELECT {table.unit}, COUNT(*) AS n FROM {table.name} GROUP BY {table.unit}) s",
                )  # fmt: skip
        scope = self._scope(inner)
        self._qualify(inner, scope)
        self.scope = scope
        group = inner.args.get("group")
        keys = list(group.expressions) if group is not None else []
        item = scope.items[0]
        if len(keys) != 1 or not (isinstance(keys[0], exp.Column) and keys[0].name.lower() == table.unit
                                  and scope.find(keys[0]) is item):  # fmt: skip
            raise errors.UnsupportedQueryError(
                f"The subquery over {table.name} must group by its privacy unit {table.unit} alone, so that each "
                "subject yields one row",
                code="DP216",
                hint=f"write FROM (SELECT {table.unit}, COUNT(*) AS n FROM {table.name} GROUP BY {table.unit}) s",
            )
        where = inner.args.get("where")
        if where is not None:
            self._check_row_expr(where.this, "WHERE")
            inner.set("where", exp.Where(this=_try(where.this.copy())))
        rows = table.max_rows
        columns: dict[str, Column] = {}
        unit_name = None
        out = []
        for p in inner.expressions:
            node = p.unalias() if isinstance(p, exp.Alias) else p
            name = (p.alias if isinstance(p, exp.Alias) else node.name if isinstance(node, exp.Column) else "").lower()
            if isinstance(node, exp.Column) and node.name.lower() == table.unit:
                unit_name = name
                columns[name] = Column(name, table.columns[table.unit].type)
                out.append(exp.alias_(node.copy(), name, quoted=True))
                continue
            if not name:
                raise errors.ProgrammingError(
                    f"Name the per-subject value {display_sql(node)}", code="DP218",
                    hint=f"e.g. {display_sql(node)} AS v",
                )  # fmt: skip
            expr, lo, hi = self._per_subject_value(node, rows)
            columns[name] = Column(name, "DOUBLE", lo, hi)
            out.append(exp.alias_(expr, name, quoted=True))
        if unit_name is None:
            raise errors.UnsupportedQueryError(
                f"The per-subject subquery must select the privacy unit {table.unit}", code="DP216",
                hint=f"write SELECT {table.unit}, ... GROUP BY {table.unit}",
            )  # fmt: skip
        inner.set("expressions", out)
        types = dict(self.facts.describe(to_duckdb(inner)))
        for name, c in columns.items():
            typ = types.get(name, c.type)
            integer = typ.upper() in INTEGER_TYPES
            if c.lower is not None and integer:
                c = replace(c, type=typ, lower=float(math.floor(c.lower)), upper=float(math.ceil(c.upper)))
            else:
                c = replace(c, type=typ)
            columns[name] = c
        self.inner = inner
        self.rows_table = replace(
            table, name=PER_SUBJECT, unit=unit_name, max_rows=1, max_groups=1, columns=columns,
            unique_unit=True, unique_keys=(frozenset({unit_name}),),
        )  # fmt: skip
        outer = q.copy()
        outer.set("from_", exp.From(this=exp.Table(this=exp.to_identifier(PER_SUBJECT),
                                                    alias=exp.TableAlias(this=exp.to_identifier(alias)))))  # fmt: skip
        return outer

    def _per_subject_value(self, node: exp.Expr, rows: int) -> tuple[exp.Expr, float, float]:
        """One per-subject aggregate: SQL over clamped inputs, and its bounds with ``rows`` rows."""
        text = display_sql(node)
        if isinstance(node, exp.Count):
            arg = node.this
            if isinstance(arg, exp.Star):
                return exp.Count(this=exp.Star()), 0.0, float(rows)
            if isinstance(arg, exp.Distinct) and len(arg.expressions) == 1:
                self._check_row_expr(arg.expressions[0], text)
                return exp.Count(this=exp.Distinct(expressions=[_try(arg.expressions[0].copy())])), 0.0, float(rows)
            if arg is not None and not isinstance(arg, exp.Distinct):
                self._check_row_expr(arg, text)
                return exp.Count(this=_try(arg.copy())), 0.0, float(rows)
        if isinstance(node, (exp.Sum, exp.Avg, exp.Min, exp.Max)) and node.this is not None and not isinstance(
            node.this, exp.Distinct
        ):
            arg = node.this
            self._check_row_expr(arg, text)
            lo, hi = self._input_bounds(arg, text, "LEAST(GREATEST(expr, lo), hi)")
            clamped = exp.Least(this=exp.Greatest(this=_try(arg.copy()), expressions=[_num(lo)]),
                                expressions=[_num(hi)])  # fmt: skip
            agg = type(node)(this=clamped)
            if isinstance(node, exp.Sum):
                return agg, rows * min(lo, 0.0), rows * max(hi, 0.0)
            return agg, lo, hi
        raise errors.UnsupportedQueryError(
            f"{text} is not supported in the per-subject subquery", code="DP212",
            hint="per subject: COUNT(*), COUNT(expr), COUNT(DISTINCT expr), SUM, AVG, MIN or MAX of bounded inputs",
        )  # fmt: skip

    def declaration_hint(self, key_specs: list[KeySpec]) -> str:
        """What the owner could declare so that these keys get public domains (no δ, every cell)."""
        wanted = []
        for k in key_specs:
            if k.domain is not None:
                continue
            for col in k.expr.find_all(exp.Column):
                item = self.scope.find(col)
                if item is None or not item.protected:
                    continue
                c = item.prot.column(col.name)
                if c is None or c.domain is not None:
                    continue
                what = "domain = [...]"
                if c.is_timestamp and c.bounded:
                    what += "; or group by a day or coarser: date_trunc('day', ts), year(ts), ts::DATE"
                elif c.bounded and (c.is_integer or c.is_date):
                    what += " or bounds spanning fewer values"
                elif c.is_integer or c.is_date or c.is_timestamp:
                    what += " or bounds = [lo, hi]"
                text = f"{item.table}.{c.name} ({what}, under [tables.{item.table}.columns.{c.name}])"
                if text not in wanted:
                    wanted.append(text)
        if not wanted:
            return "group by plain columns with declared domains, or by a public lookup table's column"
        return "ask the owner to declare " + "; ".join(wanted) + ": every cell is then released, with no δ"

    def _check_shape(self, q: exp.Select) -> None:
        name = self.table.name
        if q.args.get("distinct"):
            raise errors.UnsupportedQueryError(
                "SELECT DISTINCT over a protected table would list raw values", code="DP211",
                hint=f"use GROUP BY with an aggregate, e.g. SELECT col, COUNT(*) FROM {name} GROUP BY col",
            )  # fmt: skip
        if q.args.get("with_"):
            raise errors.UnsupportedQueryError(
                "CTEs (WITH ...) are not supported in queries over protected tables yet", code="DP216",
                hint=f"write the query directly over {name}",
            )  # fmt: skip
        for arg in ("qualify", "windows", "into", "laterals", "pivots", "connect", "match", "prewhere", "sample"):
            if q.args.get(arg):
                raise errors.UnsupportedQueryError(
                    f"{arg.upper()} is not supported in queries over protected tables", code="DP217",
                    hint="use WHERE, GROUP BY, HAVING, ORDER BY and LIMIT",
                )  # fmt: skip
        if q.find(exp.Window):
            raise errors.UnsupportedQueryError(
                "Window functions are not supported over protected tables", code="DP217",
                hint="aggregate with GROUP BY instead; ORDER BY / LIMIT on the result are free",
            )  # fmt: skip
        for node in q.find_all(exp.Subquery, exp.Select, exp.Lateral):
            if node is not q:
                raise errors.UnsupportedQueryError(
                    "Subqueries are not supported in queries over protected tables yet", code="DP216",
                    hint="join public lookup tables directly in FROM; filter with WHERE",
                )  # fmt: skip
        for node in q.find_all(exp.Star):
            if not isinstance(node.parent, exp.Count):
                raise errors.UnsupportedQueryError(
                    f"SELECT * would return rows of protected table {name}", code="DP211",
                    hint=f"aggregate instead, e.g. SELECT COUNT(*) FROM {name}",
                )  # fmt: skip
        for node in q.find_all(exp.Columns, exp.PositionalColumn):
            raise errors.UnsupportedQueryError(
                f"{node.sql(dialect='duckdb')} is not supported over protected tables", code="DP218",
                hint="name the columns",
            )  # fmt: skip
        if q.find(exp.Placeholder):
            raise errors.ProgrammingError(
                "The query has a parameter placeholder with no value", code="DP603",
                hint="pass the parameters to execute(sql, params)",
            )  # fmt: skip

    def _scope(self, q: exp.Select) -> _Scope:
        items: list[_Item] = []
        from_ = q.args.get("from_")
        sources = [(from_.this if from_ else None, None)]
        for join in q.args.get("joins") or []:
            sources.append((join.this, join))
        using: set[str] = set()
        conditions: list[exp.Expr] = []
        for node, join in sources:
            if not isinstance(node, exp.Table) or not isinstance(node.this, exp.Identifier):
                raise errors.UnsupportedQueryError(
                    "Only tables may appear in FROM and JOIN of a query over a protected table",
                    code="DP216",
                    hint="join public lookup tables by name",
                )
            name = node.name.lower()
            alias = node.alias_or_name.lower()
            if any(i.alias == alias for i in items):
                raise errors.ProgrammingError(
                    f"Table alias {alias!r} is used twice", code="DP218", hint="give each table its own alias"
                )
            prot = self.rows_table if name == PER_SUBJECT and self.inner is not None else self.catalog.protected(name)
            if prot is not None:
                cols = {c.name: c.type for c in prot.columns.values()}
            else:
                cols = dict(self.facts.columns(name))
            item = _Item(alias, name, cols, prot is not None, prot=prot)
            if join is not None:
                method = (join.args.get("method") or "").upper()
                if join.args.get("kind", "").upper() == "NATURAL" or method == "NATURAL":
                    raise errors.UnsupportedQueryError(
                        "NATURAL joins are not supported over protected tables", code="DP218",
                        hint="name the join columns: JOIN lookup USING (col)",
                    )  # fmt: skip
                if method in ("POSITIONAL",):
                    raise errors.UnsupportedQueryError(
                        "POSITIONAL JOIN pairs rows by storage order, which would let one subject's rows "
                        "change what others contribute",
                        code="DP218",
                        hint="join on key columns",
                    )
                side = (join.args.get("side") or "").upper()
                if side in ("LEFT", "FULL") and prot is None:
                    item.nullable = True
                for ident in join.args.get("using") or []:
                    col = ident.name.lower()
                    earlier = [i for i in items if col in i.columns]
                    if col not in item.columns or not earlier:
                        raise errors.ProgrammingError(
                            f"USING ({col}): both sides of the join need a column {col}", code="DP218",
                            hint="check the column names",
                        )  # fmt: skip
                    _check_comparable(col, earlier[0].columns[col], col, item.columns[col])
                    using.add(col)
                on = join.args.get("on")
                if on is not None:
                    conditions.append(on)
            items.append(item)
        scope = _Scope(items, using)
        for on in conditions:
            _check_join_condition(on, scope)
        if len(items) > 1:
            self._check_lookups(q, scope, conditions)
        return scope

    def _check_lookups(self, q: exp.Select, scope: _Scope, conditions: list[exp.Expr]) -> None:
        """Every joined table is a lookup: the join can never multiply a subject's rows [lookup].

        Starting from the protected table in FROM, a table is *attached* when equalities in the
        join conditions tie it to attached tables: another protected table (of the same subject
        space) by its privacy unit, a public table by columns whose values are unique in it (a
        public fact, checked here). By induction, each row of the protected table meets at most
        one row of every attached public table, and only rows of its own subject in the other
        protected tables; tables left unattached (CROSS JOIN, ``ON a.x < b.y``, a non-unique
        key) are refused. Without this rule a join with a large public table could make one
        subject's rows grow without bound, and the query's memory or running out of it would
        depend on that subject.
        """
        pairs: list[tuple[_Item, str, _Item, str, bool]] = []  # (item, column, other item, column, null-safe)
        for on in conditions:
            parts = list(on.flatten()) if isinstance(on, exp.And) else [on]
            for part in parts:
                while isinstance(part, exp.Paren):
                    part = part.this
                if isinstance(part, (exp.EQ, exp.NullSafeEQ)):
                    a, b = scope.find(part.this), scope.find(part.expression)
                    if a is not None and b is not None and a is not b:
                        ns = isinstance(part, exp.NullSafeEQ)
                        pairs.append((a, part.this.name.lower(), b, part.expression.name.lower(), ns))
                        pairs.append((b, part.expression.name.lower(), a, part.this.name.lower(), ns))
        for join in q.args.get("joins") or []:
            using = [i.name.lower() for i in join.args.get("using") or []]
            if not using:
                continue
            alias = join.this.alias_or_name.lower()
            item = next(i for i in scope.items if i.alias == alias)
            before = scope.items[: scope.items.index(item)]
            for col in using:
                for other in before:
                    if col in other.columns:
                        pairs.append((item, col, other, col, False))
                        pairs.append((other, col, item, col, False))
        root = next(i for i in scope.items if i.protected and i.table == self.rows_table.name)
        attached = [root]
        pending = [i for i in scope.items if i is not root]
        unique_cache: dict[tuple[str, frozenset[str], bool], bool] = {}
        changed = True
        while pending and changed:
            changed = False
            for item in list(pending):
                ties = [(c, o, oc, ns) for (it, c, o, oc, ns) in pairs if it is item and any(o is a for a in attached)]
                if item.protected:
                    ok = any(
                        c == item.prot.unit and o.protected and oc == o.prot.unit and not ns for c, o, oc, ns in ties
                    )
                else:
                    # A tie from a column that compares with a collation matches 'x' and 'X' of a key unique
                    # as bytes: the lookup would repeat rows (red team helper-45). (The key's own collation
                    # makes its GROUP BY find the duplicate.)
                    ties = [(c, o, oc, ns) for c, o, oc, ns in ties
                            if not self.facts.collated(o.table, oc, o.columns.get(oc, ""))]  # fmt: skip
                    cols = frozenset(c for c, _, _, _ in ties)
                    null_safe = any(ns for *_, ns in ties)
                    key = (item.table, cols, null_safe)
                    if cols and key not in unique_cache:
                        unique_cache[key] = self.facts.unique(item.table, sorted(cols), null_safe)
                    ok = bool(cols) and unique_cache[key]
                if ok:
                    attached.append(item)
                    pending.remove(item)
                    changed = True
        if pending:
            item = pending[0]
            if item.protected:
                raise errors.UnsupportedQueryError(
                    f"Protected table {item.table} is not joined on the privacy unit: rows of different "
                    "people would be paired",
                    code="DP215",
                    hint=f"join on the unit, e.g. JOIN {item.table} USING ({item.prot.unit})",
                )
            raise errors.UnsupportedQueryError(
                f"The join with {item.table}{'' if item.alias == item.table else ' ' + item.alias} is not a lookup: no equality ties it, on columns whose values are "
                f"unique in {item.table}, to the protected table, so it could repeat a person's rows without limit",
                code="DP218",
                hint=f"join {item.table} with ON t.col = {item.alias}.key (or USING (key)) where key has no "
                "duplicate values; CROSS JOIN and joins on <, > or non-unique columns are refused",
            )

    def _qualify(self, q: exp.Select, scope: _Scope) -> None:
        """Qualify every source column with its table alias, so that equal expressions compare equal."""
        aliases = {p.alias.lower() for p in q.expressions if isinstance(p, exp.Alias)}
        for col in list(q.find_all(exp.Column)):
            if isinstance(col.this, exp.Star):
                continue
            item = scope.find(col)
            if item is None:
                if col.table or col.name.lower() not in aliases:
                    raise errors.ProgrammingError(
                        f"Column {col.sql(dialect='duckdb')} does not exist", code="DP218",
                        hint=_suggest(col.name.lower(), scope.all_columns()),
                    )  # fmt: skip
                continue  # a reference to a SELECT alias (GROUP BY / HAVING / ORDER BY)
            col.set("table", exp.to_identifier(item.alias, quoted=True))
            col.set("this", exp.to_identifier(col.name.lower(), quoted=True))

    def _is_aggregate(self, node: exp.Expr) -> bool:
        if isinstance(node, exp.AggFunc):
            return True
        if isinstance(node, exp.Filter) and isinstance(node.this, exp.AggFunc):
            return True
        return isinstance(node, exp.Anonymous) and function_name(node) in self.agg_names

    def _check_row_expr(self, node: exp.Expr, where: str) -> None:
        for sub in node.walk():
            if self._is_aggregate(sub):
                raise errors.UnsupportedQueryError(
                    f"Aggregate {sub.sql(dialect='duckdb')} is not allowed in {where}", code="DP219",
                    hint="aggregates go in SELECT, HAVING or ORDER BY",
                )  # fmt: skip
            if isinstance(sub, exp.Column) and not sub.table:
                raise errors.ProgrammingError(
                    f"{sub.name} in {where} is a SELECT alias, not a column of the tables", code="DP218",
                    hint="repeat the expression instead of its alias",
                )  # fmt: skip

    # -- keys ------------------------------------------------------------------------------
    def _group_keys(self, q: exp.Select, projections: list[exp.Expr]) -> tuple[list[exp.Expr], list[str]]:
        group = q.args.get("group")
        if group is None:
            return [], []
        for arg in ("rollup", "cube", "grouping_sets", "totals"):
            if group.args.get(arg):
                raise errors.UnsupportedQueryError(
                    f"GROUP BY {arg.upper().replace('_', ' ')} is not supported", code="DP219",
                    hint="run one GROUP BY per grouping",
                )  # fmt: skip
        for node in group.expressions:
            if isinstance(node, (exp.Rollup, exp.Cube, exp.GroupingSets)):
                raise errors.UnsupportedQueryError(
                    f"GROUP BY {node.key.upper()} is not supported", code="DP219",
                    hint="run one GROUP BY per grouping",
                )  # fmt: skip
        exprs: list[exp.Expr] = []
        if group.args.get("all"):
            exprs = [p.unalias() for p in projections if not any(self._is_aggregate(n) for n in p.walk())]
        for node in group.expressions:
            if isinstance(node, exp.Literal) and not node.is_string:
                idx = int(node.this)
                if not 1 <= idx <= len(projections):
                    raise errors.ProgrammingError(
                        f"GROUP BY {idx} is out of range: the SELECT list has {len(projections)} items",
                        code="DP218",
                    )
                exprs.append(projections[idx - 1].unalias().copy())
            elif isinstance(node, exp.Column) and not node.table:
                match = [p for p in projections if isinstance(p, exp.Alias) and p.alias.lower() == node.name.lower()]
                exprs.append(match[0].this.copy())
            else:
                exprs.append(node)
        names = []
        seen = set()
        keys = []
        for e in exprs:
            self._check_row_expr(e, "GROUP BY")
            text = e.sql(dialect="duckdb")
            if text in seen:
                continue
            seen.add(text)
            keys.append(e)
            name = None
            for p in projections:
                if isinstance(p, exp.Alias) and p.this.sql(dialect="duckdb") == text:
                    name = p.alias
                    break
            names.append(name or (e.name if isinstance(e, exp.Column) else text))
        return keys, names

    def _key_specs(self, keys: list[exp.Expr], names: list[str], types: dict[str, str]) -> list[KeySpec]:
        specs = []
        for j, (e, name) in enumerate(zip(keys, names)):
            sql_type = types[f"__k{j}"]
            domain, source = self._domain(e)
            specs.append(KeySpec(name=name, expr=e, sql_type=sql_type, domain=domain, source=source))
        return specs

    def _column_domain(self, col: exp.Column, *, days: bool = False) -> tuple[tuple[Any, ...] | None, str, str]:
        """A column's public domain; with ``days``, a bounded TIMESTAMP's days (midnights) too."""
        item = self.scope.find(col)
        name = col.name.lower()
        if item is None:
            return None, "", ""
        if item.protected:
            c = item.prot.column(name)
            dom = c.key_domain() if c else None
            if dom is None and days and c is not None and c.is_timestamp:
                dom = c.days()
            if dom is None:
                return None, "", c.type if c else ""
            if c.domain is not None:
                source = "declared"
            else:
                source = "date bounds" if (c.is_date or c.is_timestamp) else "integer bounds"
            return dom, source, c.type
        values = list(self.facts.distinct_values(item.table, name))
        if item.nullable and None not in values:
            values.append(None)
        return tuple(values), f"public table {item.table}", item.columns[name]

    def _domain(self, e: exp.Expr) -> tuple[tuple[Any, ...] | None, str]:
        if isinstance(e, exp.Column):
            dom, source, _ = self._column_domain(e)
            return dom, source or "DP key selection"
        cols = {}
        for col in e.find_all(exp.Column):
            cols[col.sql(dialect="duckdb")] = col
        if not cols:
            return None, "DP key selection"
        inputs = []
        total = 1
        timestamps = []
        for text, col in cols.items():
            dom, _, typ = self._column_domain(col, days=len(cols) == 1)
            if dom is None:
                return None, "DP key selection"
            if typ.upper() in TIMESTAMP_TYPES:
                timestamps.append(len(inputs))
            total *= len(dom)
            inputs.append((text, list(dom), typ))
        if total > MAX_IMAGE_INPUTS:
            return None, "DP key selection"
        names = {text: f"__c{i}" for i, (text, _, _) in enumerate(inputs)}

        def renamed(shift: str | None = None) -> exp.Expr:
            def rename(node: exp.Expr) -> exp.Expr:
                if isinstance(node, exp.Column):
                    name = names[node.sql(dialect="duckdb")]
                    if shift is not None:
                        return exp.maybe_parse(f"({name} + INTERVAL '{shift}')", dialect="duckdb")
                    return exp.column(name)
                return node

            return e.copy().transform(rename)

        domains = [(vals, typ) for _, vals, typ in inputs]
        if timestamps:
            # A TIMESTAMP's inputs are its days: only an expression constant within each day
            # (date_trunc to a day or coarser, year(), month(), ts::DATE ...) gets this domain.
            # Structurally first (every use of the column sits inside a day-level function), then
            # by probing three instants of each day; either failing means DP key selection.
            stamp_cols = {inputs[i][0] for i in timestamps}
            if not all(_day_constant(c, e) for c in e.find_all(exp.Column) if c.sql(dialect="duckdb") in stamp_cols):
                return None, "DP key selection"
            base = to_duckdb(_try(renamed()))
            moved = [to_duckdb(_try(renamed(s))) for s in ("12 hours", "86399.999999 seconds")]
            if self.facts.count_where(" OR ".join(f"({base}) IS DISTINCT FROM ({m})" for m in moved), domains):
                return None, "DP key selection"
        image = self.facts.image(to_duckdb(_try(renamed())), domains)
        return tuple(image), "image of " + ", ".join(sorted({c.name for c in cols.values()}))

    # -- aggregates ------------------------------------------------------------------------
    def _collect_aggregates(self, q: exp.Select, projections: list[exp.Expr]) -> list[exp.Expr]:
        places = list(projections)
        if q.args.get("having") is not None:
            places.append(q.args["having"].this)
        if q.args.get("order") is not None:
            places.append(q.args["order"])
        found: dict[str, exp.Expr] = {}
        for place in places:
            for node in place.walk():
                if self._is_aggregate(node) and not any(self._is_aggregate(a) for a in _ancestors(node, place)):
                    found.setdefault(node.sql(dialect="duckdb"), node)
        return list(found.values())

    def _agg_input(self, node: exp.Expr) -> tuple[str, exp.Expr | None]:
        cond = None
        if isinstance(node, exp.Filter):
            cond = node.expression.this
            self._check_row_expr(cond, "FILTER")
            node = node.this
        text = node.sql(dialect="duckdb")
        if isinstance(node, exp.Count):
            arg = node.this
            if arg is None:
                raise errors.UnsupportedQueryError(
                    f"{text} needs an argument", code="DP212", hint="write COUNT(*) or COUNT(expr)"
                )
            if isinstance(arg, exp.Star):
                if cond is None:
                    return COUNT_ROWS, None
                return COUNT_VALUES, exp.Case(ifs=[exp.If(this=cond, true=exp.Literal.number(1))])
            if isinstance(arg, exp.Distinct):
                if len(arg.expressions) != 1:
                    raise errors.UnsupportedQueryError(
                        f"{text}: COUNT(DISTINCT ...) takes one expression here", code="DP212",
                        hint="count distinct values of one expression",
                    )  # fmt: skip
                inner = arg.expressions[0]
                self._check_row_expr(inner, text)
                if isinstance(inner, exp.Column) and self._is_unit(inner):
                    if cond is None:
                        return COUNT_SUBJECTS, None
                    return COUNT_SUBJECTS, exp.Case(ifs=[exp.If(this=cond, true=inner.copy())])
                return COUNT_DISTINCT, _filtered(inner, cond)
            self._check_row_expr(arg, text)
            return COUNT_VALUES, _filtered(arg, cond)
        if isinstance(node, (exp.Sum, exp.Avg)):
            arg = node.this
            if arg is None:
                raise errors.UnsupportedQueryError(f"{text} needs an argument", code="DP212")
            if isinstance(arg, exp.Distinct):
                raise errors.UnsupportedQueryError(
                    f"{text}: DISTINCT inside SUM/AVG is not supported", code="DP212",
                    hint="drop DISTINCT",
                )  # fmt: skip
            if node.args.get("expressions"):
                raise errors.UnsupportedQueryError(f"{text}: too many arguments", code="DP212")
            self._check_row_expr(arg, text)
            return (SUM if isinstance(node, exp.Sum) else AVG), _filtered(arg, cond)
        if type(node) in _VARIANCES or isinstance(node, (exp.Median, exp.PercentileCont)):
            arg = node.this
            if arg is None or isinstance(arg, exp.Distinct):
                raise errors.UnsupportedQueryError(
                    f"{text}: write the aggregate over one expression, without DISTINCT", code="DP212"
                )
            if isinstance(node, exp.PercentileCont):
                quantile_level(node)
            self._check_row_expr(arg, text)
            kind = _VARIANCES.get(type(node), QUANTILE)
            return kind, _filtered(arg, cond)
        raise errors.UnsupportedQueryError(
            f"Aggregate {text} is not supported over protected tables", code="DP212",
            hint=f"supported: {SUPPORTED_AGGREGATES}",
        )  # fmt: skip

    def _is_unit(self, col: exp.Column) -> bool:
        item = self.scope.find(col)
        return bool(item and item.protected and col.name.lower() == item.prot.unit)

    def _column_bounds(self, col: exp.Column) -> bounds.Interval | None:
        item = self.scope.find(col)
        if item is None or not item.protected:
            return None  # public columns have no declared bounds
        c = item.prot.column(col.name)
        if c is None:
            return None
        if c.bounded and not (c.is_date or c.is_timestamp):
            return (c.lower, c.upper)
        if c.type.upper() == "BOOLEAN":
            return (0.0, 1.0)
        values = [v for v in (c.domain or ()) if isinstance(v, (int, float)) and not isinstance(v, bool)]
        if values and len(values) == len([v for v in c.domain if v is not None]):
            return (float(min(values)), float(max(values)))  # a numeric declared domain bounds the column
        return None

    def _input_bounds(self, node: exp.Expr, label: str, clamp_example: str) -> bounds.Interval:
        """The derived bounds of an aggregate's input, or DP213 naming the columns without any."""
        lo, hi = bounds.derive(node, self._column_bounds, self._temporal_bounds)
        if not bounds.is_bounded((lo, hi)):
            cols = sorted({c.name for c in node.find_all(exp.Column)})
            raise errors.PolicyError(
                f"{label} needs bounds on its input, and {', '.join(cols) or 'its input'} has none declared",
                code="DP213",
                hint=f"ask the owner to declare bounds, or clamp it yourself: {clamp_example}",
            )
        return lo, hi

    def _temporal_bounds(self, node: exp.Expr) -> bounds.Temporal | None:
        """Declared bounds of a DATE / TIMESTAMP column, or a DATE / TIMESTAMP constant, as numbers."""
        while isinstance(node, exp.Paren):
            node = node.this
        if isinstance(node, exp.Column):
            item = self.scope.find(node)
            c = item.prot.column(node.name) if item is not None and item.protected else None
            if c is not None and c.bounded and (c.is_date or c.is_timestamp):
                return ("day" if c.is_date else "second", c.lower, c.upper)
            return None
        if isinstance(node, exp.Cast) and isinstance(node.this, exp.Literal) and node.this.is_string and node.to:
            text = node.this.this
            try:
                if node.to.is_type(exp.DType.DATE):
                    days = (datetime.date.fromisoformat(text) - EPOCH).days
                    return ("day", float(days), float(days))
                if node.to.is_type(exp.DType.TIMESTAMP, exp.DType.TIMESTAMPNTZ):
                    t = (datetime.datetime.fromisoformat(text) - datetime.datetime(1970, 1, 1)).total_seconds()
                    return ("second", t, t)
            except ValueError:
                return None
        return None

    def _agg_spec(
        self, i: int, node: exp.Expr, kind: str, inp: exp.Expr | None, epsilon: float,
        max_rows: int, groups_per_subject: float, vtype: str | None,
    ) -> AggSpec:  # fmt: skip
        label = display_sql(node)
        if kind in (COUNT_ROWS, COUNT_VALUES, COUNT_DISTINCT):
            return AggSpec(i, kind, label, inp, (Component("count", max_rows, epsilon),))
        if kind == COUNT_SUBJECTS:
            return AggSpec(i, kind, label, inp, (Component("subjects", int(groups_per_subject), epsilon),))
        if vtype is not None and is_temporal_type(vtype):
            raise errors.UnsupportedQueryError(
                f"{label} aggregates {vtype} values; dpgate aggregates numbers",
                code="DP212",
                hint="aggregate a difference: days between DATEs, e.g. AVG(end_date - start_date) or "
                "AVG(d - DATE '2020-01-01'), or AVG(date_diff('hour', start_ts, end_ts)) for TIMESTAMPs; "
                "GROUP BY year(d) or date_trunc('month', d) for counts",
            )
        fn = label.split("(", 1)[0] if "(" in label else "SUM"
        lo, hi = self._input_bounds(inp, label, f"{fn}(LEAST(GREATEST(expr, lo), hi))")
        if lo == hi:
            hi = lo + 1.0
        integer = (vtype or "").upper() in INTEGER_TYPES and float(lo).is_integer() and float(hi).is_integer()
        if kind in (SUM, AVG):
            grid = 1.0 if integer else 2.0 ** (math.floor(math.log2(hi - lo)) - GRID_BITS)
        else:  # a coarser grid; integers keep unit steps unless their range is wider than it
            bits = VARIANCE_GRID_BITS if kind in VARIANCE_KINDS else QUANTILE_GRID_BITS
            grid = 2.0 ** (math.floor(math.log2(hi - lo)) - bits)
            grid = max(1.0, grid) if integer else grid
        lo_i, hi_i = math.floor(lo / grid), math.ceil(hi / grid)
        if max(abs(lo_i), abs(hi_i)) >= 2**53:
            raise errors.PolicyError(
                f"{label}: the bounds [{lo:.15g}, {hi:.15g}] are too far from 0 for an exact sum", code="DP213",
                hint="subtract an offset inside the aggregate, e.g. SUM(x - 1e12), and add it back afterwards",
            )  # fmt: skip
        if kind == SUM:
            sens = max_rows * max(abs(lo_i), abs(hi_i))
            comps = (Component("sum", max(1, sens), epsilon),)
            return AggSpec(i, kind, label, inp, comps, lo_i * grid, hi_i * grid, grid, integer)
        mid = (lo_i + hi_i) // 2
        if kind == QUANTILE:
            # The rank utility moves by at most one per row: max_rows per subject [quantile].
            comps = (Component("quantile", max_rows, epsilon),)
            level = quantile_level(node.this if isinstance(node, exp.Filter) else node)
            return AggSpec(i, kind, label, inp, comps, lo_i * grid, hi_i * grid, grid, False, level)
        if kind in VARIANCE_KINDS:
            half = max(hi_i - mid, mid - lo_i)
            third = epsilon / 3
            comps = (
                Component("centered sum", max(1, max_rows * half), third),
                Component("centered squares", max(1, max_rows * half * half), third),
                Component("count", max_rows, epsilon - 2 * third),
            )
            return AggSpec(i, kind, label, inp, comps, lo_i * grid, hi_i * grid, grid, False)
        half = max(hi_i - mid, mid - lo_i)
        comps = (
            Component("centered sum", max(1, max_rows * half), epsilon / 2),
            Component("count", max_rows, epsilon - epsilon / 2),
        )
        return AggSpec(i, kind, label, inp, comps, lo_i * grid, hi_i * grid, grid, False)

    # -- base and post-processing ----------------------------------------------------------
    def _base(self, q: exp.Select, unit: exp.Column, keys: list[exp.Expr], inputs: list[exp.Expr | None]) -> exp.Select:
        base = q.copy()
        for arg in ("group", "having", "order", "limit", "offset"):
            base.set(arg, None)
        cols: list[exp.Expr] = [exp.alias_(unit.copy(), "__unit")]
        for j, k in enumerate(keys):
            cols.append(exp.alias_(_try(k.copy()), f"__k{j}"))
        for i, v in enumerate(inputs):
            if v is not None:
                cols.append(exp.alias_(_try(v.copy()), f"__v{i}"))
        base.set("expressions", cols)
        conds: list[exp.Expr] = [exp.Not(this=exp.Is(this=unit.copy(), expression=exp.Null()))]
        where = q.args.get("where")
        if where is not None:
            conds.append(_try(where.this.copy()))
        base.set("where", exp.Where(this=exp.and_(*conds)))
        return base

    def _post(
        self, q: exp.Select, projections: list[exp.Expr], keys: list[exp.Expr], aggs: list[exp.Expr],
        key_specs: list[KeySpec], original_sql: str,
    ) -> tuple[exp.Select, list[OutputColumn]]:  # fmt: skip
        agg_index = {a.sql(dialect="duckdb"): i for i, a in enumerate(aggs)}
        key_index = {k.sql(dialect="duckdb"): j for j, k in enumerate(keys)}

        def rewrite(node: exp.Expr) -> exp.Expr:
            text = node.sql(dialect="duckdb")
            if text in agg_index and self._is_aggregate(node):
                return exp.column(f"__a{agg_index[text]}")
            if text in key_index:
                return exp.column(f"__k{key_index[text]}")
            return node

        rewritten = []
        for p in projections:
            inner = p.unalias() if isinstance(p, exp.Alias) else p
            new = inner.copy().transform(rewrite)
            self._check_post(new, "SELECT")
            rewritten.append(new)
        names = [n for n, _ in self.facts.describe(original_sql)]
        post_exprs = []
        outputs = []
        for new, name in zip(rewritten, names):
            post_exprs.append(exp.alias_(new, name, quoted=True))
            outputs.append(output_column(name, new))
        post = exp.select(*post_exprs).from_("__noisy")
        having = q.args.get("having")
        if having is not None:
            cond = having.this.copy().transform(rewrite)
            self._check_post(cond, "HAVING")
            post = post.where(cond)
        order = q.args.get("order")
        if order is not None:
            new_order = order.copy().transform(rewrite)
            self._check_post(new_order, "ORDER BY")
            post.set("order", new_order)
        elif key_specs:
            post = post.order_by(*[exp.Ordered(this=exp.column(f"__k{j}"), nulls_first=False) for j in range(len(key_specs))])
        for arg in ("limit", "offset"):
            if q.args.get(arg) is not None:
                post.set(arg, q.args[arg].copy())
        return post, outputs

    def _check_post(self, node: exp.Expr, where: str) -> None:
        for col in node.find_all(exp.Column):
            if col.name.startswith("__"):
                continue
            if col.table:
                raise errors.UnsupportedQueryError(
                    f"{col.sql(dialect='duckdb')} in {where} is neither aggregated nor in GROUP BY; "
                    "it would return row-level values",
                    code="DP211",
                    hint="add it to GROUP BY (over a declared domain) or aggregate it",
                )


def output_column(name: str, expr: exp.Expr) -> OutputColumn:
    """Which aggregate's error bar an output column carries (bare or monotone-wrapped)."""
    node = expr
    wrapper = None
    while isinstance(node, _MONOTONE_WRAPPERS):
        if wrapper is None:
            wrapper = expr
        node = node.this
    if isinstance(node, exp.Column) and node.name.startswith("__a"):
        if isinstance(expr, exp.Cast) and not expr.to.is_type(*exp.DataType.NUMERIC_TYPES):
            return OutputColumn(name, None)
        return OutputColumn(name, int(node.name[3:]), wrapper)
    return OutputColumn(name, None)


def _ancestors(node: exp.Expr, stop: exp.Expr):
    """Parents of ``node`` up to and including ``stop``."""
    parent = node.parent
    while parent is not None and node is not stop:
        yield parent
        if parent is stop:
            return
        parent = parent.parent


def _filtered(arg: exp.Expr, cond: exp.Expr | None) -> exp.Expr:
    if cond is None:
        return arg
    return exp.Case(ifs=[exp.If(this=cond.copy(), true=arg.copy())])


def _try(node: exp.Expr) -> exp.Expr:
    """Wrap a row-level expression in TRY(), so a bad value becomes NULL instead of an error.

    A runtime error whose occurrence depends on a row would reveal one bit about it.
    """
    if isinstance(node, (exp.Column, exp.Literal, exp.Boolean, exp.Null)):
        return node
    return exp.Anonymous(this="TRY", expressions=[node])


def _check_join_condition(on: exp.Expr, scope: _Scope) -> None:
    """Joins compare columns of the same kind of type only.

    Join conditions are not wrapped in TRY (that would defeat hash joins), so they must be
    unable to fail at run time: a VARCHAR compared with a number is cast row by row, and a
    row that does not convert would raise an error that depends on the data.
    """
    parts = list(on.flatten()) if isinstance(on, exp.And) else [on]
    for part in parts:
        if isinstance(part, exp.Paren):
            part = part.this
        ok = isinstance(part, (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ)) and all(
            isinstance(side, exp.Column) for side in (part.this, part.expression)
        )
        if not ok:
            raise errors.UnsupportedQueryError(
                f"Join condition {part.sql(dialect='duckdb')} is not a comparison of two columns", code="DP218",
                hint="join public lookup tables on key columns, e.g. ON t.code = lookup.code; "
                "put conditions on constants in WHERE",
            )  # fmt: skip
        types = []
        for side in (part.this, part.expression):
            item = scope.find(side)
            if item is None:
                raise errors.ProgrammingError(
                    f"Column {side.sql(dialect='duckdb')} does not exist", code="DP218",
                    hint=_suggest(side.name.lower(), scope.all_columns()),
                )  # fmt: skip
            types.append(item.columns[side.name.lower()])
        _check_comparable(part.this.sql(dialect="duckdb"), types[0], part.expression.sql(dialect="duckdb"), types[1])


def _check_comparable(left: str, left_type: str, right: str, right_type: str) -> None:
    if not join_exact(left_type, right_type):
        why = ("compared as doubles (distinct integer keys equal one double: a lookup would repeat rows)"
               if join_safe(left_type, right_type)
               else "converted row by row (a failing conversion would depend on the data)")  # fmt: skip
        raise errors.UnsupportedQueryError(
            f"Join compares {left} ({left_type}) with {right} ({right_type}): values would be {why}",
            code="DP218",
            hint="join columns of the same type (cast the public side in a view if needed)",
        )


def _with_epsilon(agg: AggSpec, epsilon: float) -> AggSpec:
    total = agg.epsilon
    comps = []
    acc = 0.0
    for k, c in enumerate(agg.components):
        e = epsilon - acc if k == len(agg.components) - 1 else c.epsilon * epsilon / total
        acc += e
        comps.append(replace(c, epsilon=e))
    return replace(agg, components=tuple(comps))


def key_selection_threshold(epsilon: float, delta: float, groups: int) -> KeySelection:
    """Smallest threshold τ >= 2 with ``groups * P(Z >= τ - 1) <= delta`` (Z discrete Laplace).

    A key only one subject has reaches τ with probability ``P(1 + Z >= τ)``; a subject
    touches at most ``groups`` keys, so the chance that any of them appears is at most δ.
    """
    a = noise.discrete_laplace_alpha(epsilon, groups)
    if a == 0.0:  # ε / groups past ~745: P(Z >= 1) underflows to 0, so the smallest threshold already holds
        return KeySelection(epsilon=epsilon, delta=delta, sensitivity=groups, threshold=2)
    tau = max(2, math.ceil(math.log(delta * (1 + a) / groups) / math.log(a)) + 1)
    while tau > 2 and groups * noise.discrete_laplace_tail(epsilon, groups, tau - 2) <= delta:
        tau -= 1
    while groups * noise.discrete_laplace_tail(epsilon, groups, tau - 1) > delta:
        tau += 1
    return KeySelection(epsilon=epsilon, delta=delta, sensitivity=groups, threshold=tau)


#: The placeholder name of the per-subject relation in the outer query (never a real table).
PER_SUBJECT = "__per_subject"


def _num(v: float) -> exp.Expr:
    return exp.Literal.number(int(v) if float(v).is_integer() else repr(float(v)))


def quantile_level(node: exp.Expr) -> float:
    """The level q of MEDIAN (0.5) or QUANTILE_CONT / PERCENTILE_CONT(x, q): a constant in [0, 1]."""
    if isinstance(node, exp.Median):
        return 0.5
    q = node.args.get("expression")
    value = None
    if isinstance(q, exp.Literal) and not q.is_string:
        value = float(q.this)
    if value is None or not 0.0 <= value <= 1.0:
        raise errors.UnsupportedQueryError(
            f"{node.sql(dialect='duckdb')}: the quantile level must be one number between 0 and 1", code="DP212",
            hint="write QUANTILE_CONT(x, 0.9); for several quantiles write several aggregates",
        )  # fmt: skip
    return value


def display_sql(node: exp.Expr) -> str:
    """SQL for messages and EXPLAIN: without the table qualifiers dpgate added."""

    def strip(n: exp.Expr) -> exp.Expr:
        if isinstance(n, exp.Column) and n.table:
            return exp.column(n.name)
        return n

    return node.copy().transform(strip).sql(dialect="duckdb")


def query_hash(sql: str) -> str:
    return hashlib.sha256(sql.encode()).hexdigest()[:16]


#: Functions of a TIMESTAMP that are constant within each day (their value depends on the day).
_DAY_FUNCTIONS = (exp.Year, exp.Month, exp.Day, exp.DayOfWeek, exp.DayOfYear, exp.Quarter, exp.Week,
                  exp.DayOfWeekIso, exp.WeekOfYear, exp.DayOfMonth, exp.LastDay, exp.Dayname, exp.Monthname)  # fmt: skip
_DAY_UNITS = {"DAY", "WEEK", "MONTH", "QUARTER", "YEAR", "DECADE", "CENTURY", "MILLENNIUM"}
_DAY_ANONYMOUS = {"YEARWEEK", "ISOYEAR"}
_DAY_PARTS = _DAY_UNITS | {"DOW", "DOY", "ISODOW", "ISOYEAR", "DAYOFWEEK", "DAYOFYEAR", "DAYOFMONTH", "YEARWEEK"}
_DAY_FORMAT = re.compile(r"^(?:[^%]|%[-]?[YymdbBaAjUWuwVGe%])*$")


def _day_constant(col: exp.Column, root: exp.Expr) -> bool:
    """Whether this use of a TIMESTAMP column sits inside a function whose value depends only on
    the day (so a day-level domain of the column is the domain of the expression)."""
    node = col
    while node is not root and node.parent is not None:
        node = node.parent
        if isinstance(node, _DAY_FUNCTIONS):
            return True
        if isinstance(node, (exp.TimestampTrunc, exp.DateTrunc, exp.DateDiff)):
            unit = node.args.get("unit")
            return unit is not None and unit.name.upper() in _DAY_UNITS
        if isinstance(node, exp.Cast):
            if node.to.this == exp.DataType.Type.DATE:
                return True
            continue
        if isinstance(node, exp.Extract):
            return node.this.name.upper() in _DAY_PARTS
        if isinstance(node, exp.TimeToStr):
            fmt = node.args.get("format")
            return isinstance(fmt, exp.Literal) and fmt.is_string and bool(_DAY_FORMAT.match(fmt.this))
        if isinstance(node, exp.Anonymous) and node.name.upper() in _DAY_ANONYMOUS:
            return True
        if isinstance(node, exp.Anonymous) and node.name.upper() == "DATE_PART":
            part = node.expressions[0] if node.expressions else None
            return isinstance(part, exp.Literal) and part.is_string and part.this.upper() in _DAY_PARTS
        if isinstance(node, (exp.Paren, exp.Try)):
            continue
        return False  # any other function or operator applied to the instant itself
    return False
