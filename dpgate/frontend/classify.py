"""Classify a parsed statement, and refuse whatever could let raw data leave.

This is the stage that enforces the rule "nothing raw leaves" (docs/privacy-model.md) before any
planning: it finds every table a statement touches (through joins, subqueries, CTEs and
views), every function it calls, and decides which kind of statement it is:

- ``dp``: a query over exactly one protected table, handed to the planner;
- ``public``: a query touching no protected data, passed to DuckDB unchanged;
- ``synthetic``: ``CREATE SYNTHETIC TABLE`` from one protected table, handed to its planner;
- ``set``, ``show_budget``, ``show_releases``, ``drop_synthetic``, ``explain``, ``show_tables``,
  ``describe``: dpgate's own.

Everything else is refused with a specific error. The decisions here read only the
statement and the catalog (public facts), never the rows.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp
from sqlglot.errors import ParseError as SqlglotParseError

from dpgate import errors
from dpgate.catalog.tables import MAIN, SCHEMA, Catalog, ProtectedTable
from dpgate.frontend.nodes import CreateSynthetic, DropSynthetic, ExplainPrivacy, ShowBudget, ShowReleases, dp_options
from dpgate.frontend import functions
from dpgate.frontend.dialect import received

# Table functions an analyst may call (they generate values, read nothing).
SAFE_TABLE_FUNCTIONS = {"range", "generate_series", "unnest"}
# dpgate's own table function over a protected table (planned as a top-k query).
TOPK_COLUMNS_FUNCTION = "dp_top_k_columns"
# dpgate's subgraph-count aggregates over a protected graph (name -> ladder query).
GRAPH_FUNCTIONS = {
    "triangle_count": "triangle", "kstar_count": "kstar", "ktriangle_count": "ktriangle", "kclique_count": "kclique",
}  # fmt: skip

# Scalar functions that reach files, the network, the environment or the catalog, or run SQL.
_FORBIDDEN_NAMES = {
    "query", "query_table", "glob", "getenv", "sql_auto_complete", "sniff_csv", "read_text",
    "read_blob", "checkpoint", "force_checkpoint", "which_secret", "json_execute_serialized_sql",
    "load_extension", "current_setting", "enable_profiling", "disable_profiling",
    "getvariable", "set_variable", "current_database", "current_schema", "current_schemas",
    "current_catalog", "test_all_types", "test_vector_types", "summary",
    # sequences (dpgate's ledger uses one) and the random seed of the engine
    "nextval", "setval", "currval", "setseed",
    # Postgres compatibility macros that read the catalog
    "col_description", "obj_description", "format_type", "has_any_column_privilege",
}  # fmt: skip
_FORBIDDEN_PREFIXES = (
    "read_", "duckdb_", "pragma_", "parquet_", "iceberg_", "delta_", "sqlite_", "postgres_", "mysql_",
    "pg_", "has_", "shobj_",
)  # fmt: skip
_FORBIDDEN_SUFFIXES = ("_scan",)

# Statements that touch files, the network, extensions or engine settings.
_FORBIDDEN_STATEMENTS = (
    exp.Copy, exp.Attach, exp.Detach, exp.Install, exp.Pragma, exp.Use, exp.Summarize,
    exp.Pivot, exp.Command, exp.Cache, exp.Uncache, exp.Refresh, exp.Kill, exp.LoadData,
    exp.Analyze, exp.Declare,
)  # fmt: skip
_WRITE_STATEMENTS = (
    exp.Create, exp.Insert, exp.Update, exp.Delete, exp.Drop, exp.Alter, exp.Merge,
    exp.TruncateTable, exp.Transaction, exp.Commit, exp.Rollback, exp.Grant, exp.Revoke,
    exp.Comment,
)  # fmt: skip


@dataclass
class TableRef:
    node: exp.Table
    name: str
    kind: str  # 'protected' | 'public' | 'view' | 'cte' | 'function'
    protected: ProtectedTable | None = None


@dataclass
class Classified:
    kind: str
    statement: exp.Expr
    protected: ProtectedTable | None = None
    refs: list[TableRef] = field(default_factory=list)
    inner: Classified | None = None  # for EXPLAIN PRIVACY
    joined: tuple[ProtectedTable, ...] = ()  # other protected tables of the same subject space, joined on the unit
    per_subject: bool = False  # FROM (SELECT unit, aggregates FROM t GROUP BY unit): one row per subject
    #: The query analysis of this statement, kept so that the classes asking about it share one
    #: (``dpgate.queries.analysis.analyse``); it carries its own key and is never compared.
    analysis: Any = field(default=None, compare=False, repr=False)


def function_name(node: exp.Func) -> str:
    if isinstance(node, exp.Anonymous):
        return str(node.this).lower()
    return node.sql_name().lower()


def is_forbidden_function(name: str) -> bool:
    return (
        name in _FORBIDDEN_NAMES
        or name.startswith(_FORBIDDEN_PREFIXES)
        or name.endswith(_FORBIDDEN_SUFFIXES)
    )


def classify(statement: exp.Expr, catalog: Catalog) -> Classified:
    """Decide what a statement is, refusing anything that could leak raw data.

    ``statement`` is what runs (``dialect.parse_one``); where the text received parsed differently
    (syntax the SQL writer drops or rewrites), that is classified too and its refusals stand.
    """
    written = received(statement)
    if written is not None:
        classify(written, catalog)
    if isinstance(statement, ExplainPrivacy):
        inner = classify(statement.this, catalog)
        if inner.kind not in ("dp", "public", "synthetic"):
            raise errors.UnsupportedQueryError(
                "EXPLAIN PRIVACY takes a query", code="DP206",
                hint="write EXPLAIN PRIVACY SELECT ... FROM <protected table> ...",
            )  # fmt: skip
        return Classified("explain", statement, inner.protected, inner.refs, inner)
    if isinstance(statement, ShowBudget):
        return Classified("show_budget", statement)
    if isinstance(statement, ShowReleases):
        return Classified("show_releases", statement)
    if isinstance(statement, DropSynthetic):
        return Classified("drop_synthetic", statement)
    if isinstance(statement, CreateSynthetic):
        source = statement.args["source"]
        ref = _resolve(source, catalog, set())
        if ref.kind != "protected":
            raise errors.UnsupportedQueryError(
                f"{ref.name} is not a protected table: its rows are public already", code="DP207",
                hint="CREATE SYNTHETIC TABLE makes a DP copy of a protected table",
            )  # fmt: skip
        return Classified("synthetic", statement, ref.protected, [ref])
    if isinstance(statement, exp.Set):
        return Classified("set", statement)
    if isinstance(statement, exp.Show):
        if str(statement.this).upper() in ("TABLES", "ALL TABLES"):
            return Classified("show_tables", statement)
        raise _forbidden_statement(statement)
    if isinstance(statement, exp.Describe):
        target = statement.this
        if not isinstance(target, exp.Table) or not isinstance(target.this, exp.Identifier):
            raise errors.UnsupportedQueryError(
                "DESCRIBE takes a table name", code="DP206", hint="write DESCRIBE <table>"
            )
        ref = _resolve(target, catalog, set())
        if ref.kind not in ("protected", "public", "view"):
            raise _unknown_table(target, catalog)
        return Classified("describe", statement, ref.protected, [ref])
    if isinstance(statement, _WRITE_STATEMENTS):
        raise errors.NotSupportedError(
            f"{_statement_name(statement)} is not allowed: analysts have read-only access",
            code="DP222",
            hint="ask the data owner to change tables; analysts may run SELECT queries",
        )
    if isinstance(statement, _FORBIDDEN_STATEMENTS):
        raise _forbidden_statement(statement)
    if not isinstance(statement, exp.Query):
        raise _forbidden_statement(statement)

    refs = table_refs(statement, catalog)
    check_functions(statement, catalog)
    protected = [r for r in refs if r.kind == "protected"]
    graphs = {r.name for r in protected if r.protected.kind == "graph"}
    if graphs:
        if len({r.name for r in protected}) > 1:
            raise errors.UnsupportedQueryError(
                f"This query reads the protected graph {sorted(graphs)[0]} together with other protected data",
                code="DP215",
                hint="count subgraphs of one graph per statement",
            )
        # Graph queries (function forms and the self-join / degree shapes, which read the
        # edge table several times) are checked by the subgraph planner.
        return Classified("dp", statement, protected[0].protected, refs)
    if not protected:
        used = sorted({function_name(f) for f in statement.find_all(exp.Func)} & set(GRAPH_FUNCTIONS))
        if used:
            raise errors.UnsupportedQueryError(
                f"{used[0].upper()}() counts subgraphs of a protected graph, and this query reads none",
                code="DP270",
                hint="SHOW TABLES lists the graphs (kind graph); e.g. SELECT TRIANGLE_COUNT(src, dst) FROM <graph>",
            )
        if dp_options(statement) is not None:
            raise errors.UnsupportedQueryError(
                "WITH DIFFERENTIAL_PRIVACY is for queries over protected tables; this one reads none",
                code="DP207",
                hint="drop the WITH DIFFERENTIAL_PRIVACY OPTIONS (...) clause: public data costs nothing",
            )
        return Classified("public", statement, None, refs)
    names = sorted({r.name for r in protected})
    if len(protected) == 1 and _per_subject_source(statement, protected[0]):
        return Classified("dp", statement, protected[0].protected, refs, per_subject=True)
    if len(protected) > 1:
        # Joins of protected tables: distinct tables of one subject space only [joins]. That
        # they are joined on the privacy unit is checked by the query analysis.
        if len(names) < len(protected):
            raise errors.UnsupportedQueryError(
                f"This query reads protected table {next(n for n in names if [r.name for r in protected].count(n) > 1)} "
                "twice; self-joins of protected tables are not supported",
                code="DP215",
                hint="read each protected table once; join different tables of one subject space on the unit",
            )
        spaces = {r.protected.roster for r in protected}
        if len(spaces) > 1:
            raise errors.UnsupportedQueryError(
                f"This query joins protected tables of different subject spaces ({', '.join(names)}): "
                "one person's rows could not be bounded together",
                code="DP215",
                hint="join protected tables only when the owner declared them with the same subjects = '...'; "
                "joins with public lookup tables are fine",
            )
    for r in protected:
        if not isinstance(statement, exp.Select) or _enclosing_query(r.node) is not statement:
            raise errors.UnsupportedQueryError(
                f"Protected table {r.name} is read inside a subquery, CTE or set operation",
                code="DP216",
                hint=f"put {r.name} in the FROM clause of the outer SELECT and aggregate it there",
            )
    ref = protected[0]
    first = _first_source(statement)
    for r in protected:
        if r.node is first:
            ref = r
    joined = tuple(r.protected for r in protected if r is not ref)
    return Classified("dp", statement, ref.protected, refs, joined=joined)


def _per_subject_source(statement: exp.Expr, ref: TableRef) -> bool:
    """``ref`` is the table of the one subquery in the outer SELECT's FROM (the per-subject shape)."""
    if not isinstance(statement, exp.Select) or statement.args.get("joins"):
        return False
    source = _first_source(statement)
    if not isinstance(source, exp.Subquery) or not isinstance(source.this, exp.Select):
        return False
    inner = source.this
    return (
        _enclosing_query(ref.node) is inner
        and _first_source(inner) is ref.node
        and not inner.args.get("joins")
        and inner.args.get("group") is not None
    )


def _first_source(statement: exp.Select) -> exp.Expr | None:
    from_ = statement.args.get("from_")
    return from_.this if from_ is not None else None


def _enclosing_query(node: exp.Expr) -> exp.Expr | None:
    parent = node.parent
    while parent is not None and not isinstance(parent, exp.Query):
        parent = parent.parent
    return parent


def _statement_name(statement: exp.Expr) -> str:
    if isinstance(statement, exp.Command):
        return str(statement.this).upper()
    return statement.key.upper().replace("TRUNCATETABLE", "TRUNCATE")


def _forbidden_statement(statement: exp.Expr) -> errors.Error:
    return errors.NotSupportedError(
        f"{_statement_name(statement)} statements are not allowed through dpgate",
        code="DP221",
        hint="dpgate accepts SELECT queries, SET dp_<setting>, SHOW BUDGET, SHOW TABLES, "
        "DESCRIBE <table> and EXPLAIN PRIVACY <query>",
    )


def _cte_names(statement: exp.Expr) -> set[str]:
    return {cte.alias_or_name.lower() for cte in statement.find_all(exp.CTE)}


def _check_cte_names(statement: exp.Expr, catalog: Catalog) -> set[str]:
    """CTE names, which must not be the name of any relation DuckDB could resolve instead.

    Inside its own body (and outside its scope) a CTE's name means the real relation: a CTE
    that shadows a table would let that table be read under the CTE's cover.
    """
    ctes = _cte_names(statement)
    clash = sorted(
        c for c in ctes if c in catalog.relation_names or c in catalog.views or catalog.protected(c)
    )
    if clash:
        raise errors.UnsupportedQueryError(
            f"A CTE is named like an existing table or view: {', '.join(clash)}",
            code="DP216",
            hint="give the CTE a name that no table or view has",
        )
    return ctes


def table_refs(statement: exp.Expr, catalog: Catalog) -> list[TableRef]:
    """Every table the statement reads, resolved against the catalog (views followed)."""
    ctes = _check_cte_names(statement, catalog)
    refs = []
    for node in statement.find_all(exp.Table):
        refs.append(_resolve(node, catalog, ctes))
    return refs


def _in_cte_scope(node: exp.Table, name: str) -> bool:
    """Whether a CTE named ``name`` is in scope at ``node``: a WITH of an enclosing query defines it,
    and ``node`` is not inside that CTE's own body (unless the WITH is recursive). Elsewhere DuckDB
    binds the name to a real relation (a file path, a view of another schema, which could read a
    protected table unseen), so it is resolved as a table."""
    child: exp.Expr = node
    parent = node.parent
    while parent is not None:
        with_ = parent.args.get("with_") if isinstance(parent, exp.Query) else None
        if with_ is not None:
            for cte in with_.expressions:
                if cte.alias_or_name.lower() == name and (child is not cte or with_.args.get("recursive")):
                    return True
        child, parent = parent, parent.parent
    return False


def _resolve(node: exp.Table, catalog: Catalog, ctes: set[str], _seen: frozenset[str] = frozenset()) -> TableRef:
    if not isinstance(node.this, exp.Identifier):
        func = node.this
        name = function_name(func) if isinstance(func, exp.Func) else func.sql(dialect="duckdb")
        if name in SAFE_TABLE_FUNCTIONS:
            return TableRef(node, name, "function")
        if name == TOPK_COLUMNS_FUNCTION:
            return _topk_columns_ref(node, func, catalog)
        raise errors.NotSupportedError(
            f"Table function {name}() is not allowed: it may read files, the network or the catalog",
            code="DP220",
            hint="allowed table functions: " + ", ".join(sorted(SAFE_TABLE_FUNCTIONS | {TOPK_COLUMNS_FUNCTION})),
        )
    name = node.name.lower()
    schema = node.db.lower() if node.db else None
    cat = node.catalog.lower() if node.catalog else None
    if cat is not None and cat != catalog.database_name.lower():
        raise errors.NotSupportedError(
            f"Table {node.sql(dialect='duckdb')} is in another database", code="DP220",
            hint="query tables of this database only",
        )  # fmt: skip
    if schema == SCHEMA:
        raise errors.NotSupportedError(
            f"The {SCHEMA} schema holds dpgate's catalog and ledger; analysts cannot read it",
            code="DP223",
            hint="use SHOW BUDGET for your quota and the shell's .schema for declarations",
        )
    if schema is None and name in ctes and _in_cte_scope(node, name):
        return TableRef(node, name, "cte")
    if schema not in (None, MAIN):
        raise errors.NotSupportedError(
            f"Schema {schema!r} is not available to analysts", code="DP220",
            hint="query tables of the main schema; SHOW TABLES lists them",
        )  # fmt: skip
    prot = catalog.protected(name)
    if prot is not None:
        return TableRef(node, name, "protected", prot)
    if name in catalog.budget_tables:
        raise errors.NotSupportedError(
            f"Table {name} holds subjects' individual budgets; analysts cannot read it",
            code="DP223",
            hint="SHOW BUDGET shows how budgets are distributed",
        )
    if name in catalog.public_tables:
        return TableRef(node, name, "public")
    if name in catalog.views:
        _check_view(name, catalog, _seen)
        return TableRef(node, name, "view")
    raise _unknown_table(node, catalog)


def _topk_columns_ref(node: exp.Table, func: exp.Expr, catalog: Catalog) -> TableRef:
    """``dp_top_k_columns('table', ...)`` reads the protected table it names."""
    args = func.expressions if isinstance(func, exp.Anonymous) else []
    first = args[0] if args else None
    if not isinstance(first, exp.Literal) or not first.is_string:
        raise errors.ProgrammingError(
            f"{TOPK_COLUMNS_FUNCTION}() takes the name of a protected table as a string first",
            code="DP285",
            hint=f"write {TOPK_COLUMNS_FUNCTION}('wide_table', k => 10)",
        )
    prot = catalog.protected(first.this.lower())
    if prot is None:
        raise errors.ProgrammingError(
            f"{first.this!r} is not a protected table", code="DP225",
            hint=f"{TOPK_COLUMNS_FUNCTION} ranks the 0/1 columns of a protected table; SHOW TABLES lists them",
        )  # fmt: skip
    return TableRef(node, prot.name, "protected", prot)


def _check_view(name: str, catalog: Catalog, seen: frozenset[str]) -> None:
    """A view that (transitively) reads protected data or dpgate's schema is off limits."""
    if name in seen:
        return
    sql = catalog.views.get(name)
    if sql is None:
        return
    from dpgate.frontend.dialect import DIALECT

    try:
        view = DIALECT.parse(sql)[0]
    except SqlglotParseError as e:
        raise errors.NotSupportedError(
            f"View {name} cannot be analysed, so dpgate will not read it", code="DP224"
        ) from e
    select = view.expression if isinstance(view, exp.Create) else view
    try:
        ctes = _check_cte_names(select, catalog)
    except errors.Error as e:
        raise errors.NotSupportedError(
            f"View {name} shadows a table with a CTE, so dpgate will not read it", code="DP224"
        ) from e
    for node in select.find_all(exp.Table):
        try:
            ref = _resolve(node, catalog, ctes, seen | {name})
        except errors.Error as e:
            raise errors.NotSupportedError(
                f"View {name} reads data analysts may not read ({e.message})",
                code="DP224",
                hint="query the underlying tables directly",
            ) from e
        if ref.kind == "protected":
            raise errors.NotSupportedError(
                f"View {name} reads protected table {ref.name} row by row",
                code="DP224",
                hint=f"query {ref.name} directly with an aggregate; dpgate adds the noise",
            )
    check_functions(select, catalog)


_CALL = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\(")


def _engine_name(node: exp.Func) -> str | None:
    """The DuckDB function a call runs: its own name for a call sqlglot does not model, else the
    name sqlglot writes for DuckDB (``editdist3`` parses as ``Levenshtein``), or None where that is
    not a call by name (``CASE``, operators). Special forms such as ``CAST`` or ``COALESCE`` come
    out as names that are no DuckDB function."""
    if isinstance(node, exp.Anonymous):
        return str(node.this).lower()
    m = _CALL.match(node.sql(dialect="duckdb"))
    return m.group(1).lower() if m else None


def _unknown_table(node: exp.Table, catalog: Catalog) -> errors.Error:
    name = node.name.lower()
    known = sorted(set(catalog.tables) | set(catalog.public_tables) | set(catalog.views))
    close = difflib.get_close_matches(name, known, n=1)
    hint = f"did you mean {close[0]}?" if close else "SHOW TABLES lists the tables you can query"
    return errors.ProgrammingError(f"Table {node.sql(dialect='duckdb')} does not exist", code="DP225", hint=hint)


def check_functions(statement: exp.Expr, catalog: Catalog) -> None:
    """Refuse functions that reach files, the network, the catalog, or owner-defined macros."""
    builtins = catalog.builtin_functions
    for node in statement.find_all(exp.Func):
        if isinstance(node, exp.Connector):
            continue  # AND / OR: operators, not calls (naming one wrote its whole subtree: quadratic in a chain)
        if isinstance(node.parent, exp.Table) and node.parent.this is node:
            continue  # table functions are checked in _resolve
        name = function_name(node)
        if name in GRAPH_FUNCTIONS:
            continue  # dpgate's own aggregates
        if is_forbidden_function(name):
            raise errors.NotSupportedError(
                f"Function {name}() is not allowed: it reaches files, the network, settings or the catalog",
                code="DP220",
                hint="use ordinary scalar functions and aggregates",
            )
        engine = name if name in functions.REVIEWED else _engine_name(node)
        if name in functions.REFUSED or engine in functions.REFUSED:
            raise errors.NotSupportedError(
                f"Function {name}() is not allowed: it reads SQL text, the engine's own counters or its "
                "storage, names tables or functions in strings, or acts on the engine", code="DP220",
                hint="use ordinary scalar functions and aggregates",
            )  # fmt: skip
        if isinstance(node, exp.Anonymous) and builtins and name not in builtins:
            raise errors.NotSupportedError(
                f"Function {name}() is not a DuckDB built-in function (unknown, or a user-defined macro "
                "that dpgate cannot check)",
                code="DP220",
                hint="use DuckDB's built-in functions",
            )
        if engine not in functions.REVIEWED and (engine in builtins or isinstance(node, exp.Anonymous)):
            raise errors.NotSupportedError(
                f"Function {name}() is a DuckDB built-in that dpgate has not reviewed (functions are "
                "accepted by a positive list, and this DuckDB has functions newer than it)", code="DP220",
                hint="use another built-in; the list is dpgate.frontend.functions.REVIEWED",
            )  # fmt: skip
        called = _aggregate_named(node, engine)
        if called is not None and (called in functions.REFUSED or called not in functions.REVIEWED):
            raise errors.NotSupportedError(
                f"Function {name}() would run the aggregate {called}(), which dpgate refuses or has not reviewed "
                "(an aggregate named in a string is checked as if it were called)", code="DP220",
                hint="name a reviewed aggregate; the list is dpgate.frontend.functions.REVIEWED",
            )  # fmt: skip


def _aggregate_named(node: exp.Func, engine: str | None) -> str | None:
    """The aggregate ``list_aggregate(l, 'name', ...)`` runs (DuckDB takes only a constant name)."""
    if engine not in functions.BY_NAME or not isinstance(node, exp.Anonymous) or len(node.expressions) < 2:
        return None
    named = node.expressions[1]
    return named.this.lower() if isinstance(named, exp.Literal) and named.is_string else None
