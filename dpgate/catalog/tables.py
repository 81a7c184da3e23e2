"""The data owner's declarations, read from the ``dpgate`` schema of the database file.

Everything here is a *public fact* in the sense of the privacy model (docs/privacy-model.md): the schema,
declared domains and bounds, the privacy unit and contribution bounds, the roster of
subjects with their budgets, and the analysts with their quotas. Nothing in the catalog
is read from the protected rows at query time.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

import duckdb
import sqlglot
from sqlglot import exp

from dpgate.memo import Memo

SCHEMA = "dpgate"
MAIN = "main"


def quote_ident(name: str) -> str:
    """``name`` as a quoted DuckDB identifier (a double quote inside is doubled)."""
    return '"' + name.replace('"', '""') + '"'


INTEGER_TYPES = {
    "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT",
    "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT", "UHUGEINT",
}  # fmt: skip
#: An integer column with declared bounds is its own GROUP BY domain when it spans at most this many values.
MAX_INTEGER_DOMAIN = 10_000
#: DATE and TIMESTAMP columns take bounds too, stored as numbers: days since 1970-01-01 for a
#: DATE, seconds since 1970-01-01 00:00:00 for a TIMESTAMP (no time zone: a TIMESTAMPTZ's day
#: depends on the session's zone).
DATE_TYPES = {"DATE"}
TIMESTAMP_TYPES = {"TIMESTAMP", "TIMESTAMP_S", "TIMESTAMP_MS", "TIMESTAMP_NS"}
#: A bounded DATE column is its own GROUP BY domain (every day) up to this many days (~547 years),
#: and a bounded TIMESTAMP column's days are the inputs of day-level expressions of it.
MAX_DAY_DOMAIN = 200_000
EPOCH = datetime.date(1970, 1, 1)


def is_temporal_type(type_name: str) -> bool:
    t = type_name.upper()
    return t in DATE_TYPES or t in TIMESTAMP_TYPES


def is_numeric_type(type_name: str) -> bool:
    t = type_name.upper()
    return t in INTEGER_TYPES or t in {"FLOAT", "DOUBLE", "REAL"} or t.startswith("DECIMAL")


#: Numeric types any two of which DuckDB compares without a cast that can fail.
_SAFE_NUMERIC = {
    "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT",
    "FLOAT", "REAL", "DOUBLE",
}  # fmt: skip


def join_safe(left: str, right: str) -> bool:
    """Whether an equality between these column types can never raise a conversion error.

    Identical types are safe; so are two types of ``_SAFE_NUMERIC``. HUGEINT, UHUGEINT and
    DECIMAL are cast row by row to a common type that not every value fits (an out-of-range
    value would raise an error that depends on the data), so they must match exactly.
    """
    a, b = left.upper().strip(), right.upper().strip()
    return a == b or (a in _SAFE_NUMERIC and b in _SAFE_NUMERIC)


_FLOAT_NAMES = {"FLOAT", "REAL", "DOUBLE"}


def join_exact(left: str, right: str) -> bool:
    """``join_safe``, and an equality that no two distinct values of one side satisfy with one value of
    the other: not an integer type with a floating-point one, which DuckDB compares as doubles (the
    distinct BIGINT ids 2^60 + i all equal the DOUBLE 2^60: one edge row joined 30 node
    ids). Integer types compare exactly among themselves (HUGEINT with UHUGEINT, compared as
    doubles, is not ``join_safe``), FLOAT with DOUBLE too (each FLOAT is one DOUBLE)."""
    a, b = left.upper().strip(), right.upper().strip()
    return join_safe(a, b) and (a == b or (a in _FLOAT_NAMES) == (b in _FLOAT_NAMES))


@dataclass(frozen=True)
class Column:
    """A column of a protected table: its DuckDB type and what the owner declared about it."""

    name: str
    type: str
    lower: float | None = None
    upper: float | None = None
    domain: tuple[Any, ...] | None = None
    not_null: bool = False  # a NOT NULL constraint (schema fact)
    #: Why the declared domain does not fit the column's type now (``domain_problem``); then no
    #: statement that reads the column runs until the owner declares it again.
    domain_problem: str | None = None

    @property
    def bounded(self) -> bool:
        return self.lower is not None and self.upper is not None

    @property
    def is_integer(self) -> bool:
        return self.type.upper() in INTEGER_TYPES

    @property
    def is_date(self) -> bool:
        return self.type.upper() in DATE_TYPES

    @property
    def is_timestamp(self) -> bool:
        return self.type.upper() in TIMESTAMP_TYPES

    def shown_bounds(self) -> tuple[Any, Any] | None:
        """The bounds as the owner wrote them: numbers, or dates / timestamps for temporal columns."""
        if not self.bounded:
            return None
        if self.is_date:
            return (EPOCH + datetime.timedelta(days=self.lower), EPOCH + datetime.timedelta(days=self.upper))
        if self.is_timestamp:
            start = datetime.datetime(1970, 1, 1)
            return (start + datetime.timedelta(seconds=self.lower), start + datetime.timedelta(seconds=self.upper))
        return (self.lower, self.upper)

    def days(self) -> tuple[Any, ...] | None:
        """Every day within a temporal column's bounds (dates; midnights for a TIMESTAMP)."""
        if not self.bounded or not (self.is_date or self.is_timestamp):
            return None
        per_day = 1 if self.is_date else 86400
        first, last = math.floor(self.lower / per_day), math.floor(self.upper / per_day)
        if last - first + 1 > MAX_DAY_DOMAIN:
            return None
        days = [EPOCH + datetime.timedelta(days=d) for d in range(first, last + 1)]
        if self.is_timestamp:
            return tuple(datetime.datetime(d.year, d.month, d.day) for d in days)
        return tuple(days)

    def key_domain(self) -> tuple[Any, ...] | None:
        """The public GROUP BY domain: declared values, every integer within the bounds, or
        every day within a DATE column's bounds."""
        if self.domain is not None:
            return self.domain
        if self.is_integer and self.bounded:
            lo, hi = math.ceil(self.lower), math.floor(self.upper)
            if hi - lo + 1 <= MAX_INTEGER_DOMAIN:
                return tuple(range(lo, hi + 1))
        if self.is_date:
            return self.days()
        return None


@dataclass(frozen=True)
class ProtectedTable:
    name: str
    kind: str
    unit: str
    max_rows: int
    max_groups: int
    budget_source: str
    subject_delta: float
    roster: str
    columns: dict[str, Column]
    options: dict[str, Any] = field(default_factory=dict)
    unique_unit: bool = False  # a PRIMARY KEY / UNIQUE constraint on the unit: one row per subject
    unique_keys: tuple[frozenset[str], ...] = ()  # column sets with a PRIMARY KEY / UNIQUE constraint
    budget_column: str | None = None
    budget_table: str | None = None
    default_epsilon: float | None = None
    unit_collation: str | None = None  # why the unit column has a collation (then no query runs): ``column_collation``
    base_table: bool = True  # a base table of main (False: a view, computed anew by every statement that reads it)

    def column(self, name: str) -> Column | None:
        return self.columns.get(name.lower())

    @property
    def max_groups_declared(self) -> bool:
        """Whether the owner set max_groups (else it is 1 by default)."""
        return not self.options.get("max_groups_default", False)

    @property
    def experimental(self) -> bool:
        """Whether the owner allowed experimental mechanisms on this table (``experimental = true``)."""
        return self.options.get("experimental") is True  # a stored string, even "false", is not a switch

    def hierarchies(self) -> dict[str, Any]:
        """The declared value generalization hierarchies, by column (``catalog.hierarchies``)."""
        from dpgate.catalog import hierarchies

        return hierarchies.from_options(self.options)

    @property
    def graph(self) -> dict[str, Any] | None:
        """For a protected graph: src, dst, and the node universe (``nodes`` or ``node_table``)."""
        return self.options.get("graph") if self.kind == "graph" else None

    @property
    def roster_sql(self) -> str:
        """The subjects of this table's space with their *total* spending (a view; read from this)."""
        return f"{SCHEMA}.{quote_ident(subjects_view(self.roster))}"

    @property
    def roster_table_sql(self) -> str:
        """The roster's own rows (write per-subject charges here)."""
        return f"{SCHEMA}.{quote_ident(self.roster)}"


class Views:
    """The views of the main schema with their SQL, read when first needed.

    A fresh ``Views`` is attached to the catalog for every statement, so a view redefined by
    the owner between two statements is always analysed as it is now.
    """

    def __init__(self, con: duckdb.DuckDBPyConnection | None = None, sql: dict[str, str] | None = None):
        self._con = con
        self._sql = sql

    def _load(self) -> dict[str, str]:
        if self._sql is None:
            self._sql = {name: sql for name, _, sql in self._con.execute(VIEWS_SQL).fetchall()}
        return self._sql

    def __contains__(self, name: object) -> bool:
        return name in self._load()

    def __iter__(self):
        return iter(self._load())

    def get(self, name: str) -> str | None:
        return self._load().get(name)


@dataclass(frozen=True)
class Catalog:
    version: int
    tables: dict[str, ProtectedTable]
    public_tables: frozenset[str]
    settings: dict[str, str]
    database_name: str
    views: Views = field(default_factory=Views)
    builtin_functions: frozenset[str] = frozenset()
    budget_tables: frozenset[str] = frozenset()
    relation_names: frozenset[str] = frozenset()  # every table (any schema) and built-in view
    releases: frozenset[str] = frozenset()  # public tables that are DP releases (release registry)

    def protected(self, name: str) -> ProtectedTable | None:
        return self.tables.get(name.lower())



def subjects_view(roster: str) -> str:
    return "subjects_" + roster.removeprefix("roster_")


_MAIN_VIEWS = (
    "FROM duckdb_views() WHERE database_name = current_database() AND schema_name = 'main' "
    "AND NOT internal AND NOT temporary"
)
FINGERPRINT_SQL = f"""
SELECT 'setting', 'catalog_version', value FROM {SCHEMA}.settings WHERE key = 'catalog_version'
UNION ALL SELECT 'table', lower(table_name), sql FROM duckdb_tables() WHERE database_name = current_database()
  AND NOT temporary
UNION ALL SELECT 'view', lower(view_name), CAST(view_oid AS VARCHAR) {_MAIN_VIEWS}
"""
VIEWS_SQL = f"SELECT lower(view_name), CAST(view_oid AS VARCHAR), sql {_MAIN_VIEWS}"


def fingerprint(con: duckdb.DuckDBPyConnection) -> frozenset:
    """Changes whenever the owner changes declarations, any table's definition or any view.

    A table's ``sql`` is its CREATE statement, constraints included, so ALTER changes it. A view is
    named by its catalog entry's oid, which DuckDB draws anew for every CREATE (OR REPLACE) VIEW in
    a database instance; the oids of two instances of one file can coincide, so a key made of a
    fingerprint also names the instance (``database.Instance.serial``). Views' SQL is read with
    ``view_sql`` when the fingerprint changes: generating it costs more than the rest together.
    """
    return frozenset(con.execute(FINGERPRINT_SQL).fetchall())


#: A quoted identifier, or a bare word as DuckDB reads one: letters of any script, digits, ``_`` and ``$``
#: (an ASCII-only pattern read ``größe`` as two words, so a view over such a table named neither).
_WORD = re.compile(r'"((?:[^"]|"")+)"|([^\W\d][\w$]*)')


def relevant(fp: frozenset, names: set[str], views: dict[str, str]) -> frozenset:
    """The entries of a catalog fingerprint a statement depends on: the declarations, every view, and
    the tables named by the statement (``names``) or by any view's SQL (``views``, the views of
    ``fp``). Tables nothing names — another analyst's new synthetic table, dpgate's own stored
    orders — are left out, so that their changes neither restart a statement nor fail a charged one."""
    named = {n.lower() for n in names}
    for sql in views.values():
        named |= _words(sql)
    return frozenset(e for e in fp if e[0] != "table" or e[1] in named)


def _words(sql: str) -> set[str]:
    """The names a view's SQL may use: every word and quoted identifier, lower-cased."""
    return {(quoted.replace('""', '"') if quoted else bare).lower() for quoted, bare in _WORD.findall(sql)}


def mentioned_by_views(views: "Views", name: str) -> str | None:
    """A view whose SQL has ``name`` as a word (so ``relevant`` counts a table of that name as one every
    statement depends on), or None."""
    return next((view for view in views if name.lower() in _words(views.get(view) or "")), None)


def shadowing_functions(con: duckdb.DuckDBPyConnection) -> frozenset[str]:
    """Functions or macros the owner defined in the main schema under the name of a DuckDB built-in.

    DuckDB resolves a function in the main schema before its built-ins, so such a macro replaces the
    built-in in every statement, whatever dpgate checked (a ``lower(x)`` reading a protected table).
    About 30 ms (DuckDB lists its ~3,000 built-ins with them): read when a file is opened and then
    every ``SHADOW_RECHECK`` seconds."""
    # No function call in this query: a macro could stand in for any of them (``lower`` did, and
    # answered with the protected rows). Names are lower-cased here; any database's main schema.
    rows = con.execute("SELECT function_name FROM duckdb_functions() WHERE NOT internal AND schema_name = 'main'").fetchall()
    return frozenset(str(r[0]).lower() for r in rows) & builtin_functions(con)[0]


#: Seconds between two reads of ``shadowing_functions`` (per opening of a file, shared by its gateways).
SHADOW_RECHECK = 5.0


def view_sql(con: duckdb.DuckDBPyConnection, fp: frozenset) -> dict[str, str] | None:
    """The SQL of the views of ``fp`` (by name), or None if a view changed since ``fp`` was read."""
    rows = con.execute(VIEWS_SQL).fetchall()
    if {("view", name, oid) for name, oid, _ in rows} != {t for t in fp if t[0] == "view"}:
        return None
    return {name: sql for name, _, sql in rows}


def schema_exists(con: duckdb.DuckDBPyConnection) -> bool:
    row = con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE schema_name = ? AND table_name = 'settings'",
        [SCHEMA],
    ).fetchone()
    return bool(row and row[0])


def schema_table_exists(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    """Whether dpgate's schema in this file has table ``name`` (one an older dpgate did not make)."""
    return bool(con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE database_name = current_database() AND schema_name = ? "
        "AND table_name = ?", [SCHEMA, name],
    ).fetchone()[0])  # fmt: skip


def table_columns(con: duckdb.DuckDBPyConnection, table: str, schema: str = MAIN) -> list[tuple[str, str]]:
    return [
        (name.lower(), dtype)
        for name, dtype in con.execute(
            "SELECT column_name, data_type FROM duckdb_columns() "
            "WHERE schema_name = ? AND lower(table_name) = lower(?) AND database_name = current_database() "
            "ORDER BY column_index",
            [schema, table],
        ).fetchall()
    ]


#: Strings that binary comparison keeps apart and DuckDB's collations compare equal in pairs: NOCASE
#: (a/A, İ/i), NOACCENT (e/é), NFC and ICU's canonical equivalence (é composed / e + combining accent).
_COLLATION_PROBE = ["a", "A", "e", "\u00e9", "e\u0301", "\u00df", "ss", "\ufb01", "fi", "\u0130", "i"]


def column_collation(
    con: duckdb.DuckDBPyConnection, relation: str, unit: str, unit_type: str, definition: str = "", what: str = "column"
) -> str | None:
    """Why the text column ``unit`` of ``main.relation`` (``what``: how the message names it) carries a
    collation, or None when it compares as bytes.

    A subject is its unit value. DuckDB applies a column's collation (``COLLATE NOCASE``, ...) to
    grouping, joins and ``IN``, but not to ``count(DISTINCT ...)`` or to a PRIMARY KEY / UNIQUE index:
    with a case-insensitive unit, 'a' and 'A' are one subject to the roster and the row bound, two to
    the subject count (sensitivity 1 became 4) and to the index (which dpgate read as "one row per
    subject"). Such a unit is refused. Read from a base table's CREATE statement
    (any COLLATE on the unit column) and, for tables and views alike, by grouping probe strings in the
    column's own type (a zero-row read of the column: no row is read). The same test tells whether a
    text column of a unique constraint, a graph's endpoint or a lookup's key compares with one."""
    if not unit_type.upper().startswith("VARCHAR"):
        return None
    if definition:
        try:
            create = sqlglot.parse_one(definition, dialect="duckdb")
        except sqlglot.errors.SqlglotError:
            create = None
        for col in create.find_all(exp.ColumnDef) if create is not None else ():
            for c in col.args.get("constraints") or () if col.name.lower() == unit.lower() else ():
                if isinstance(c.args.get("kind"), exp.CollateColumnConstraint):
                    return f"its {what} {unit} is declared COLLATE {c.args['kind'].this.sql(dialect='duckdb')}"
    try:
        (groups,) = con.execute(
            f"SELECT count(*) FROM (SELECT u FROM (SELECT u FROM (SELECT {quote_ident(unit)} AS u FROM "
            f"main.{quote_ident(relation)} LIMIT 0) UNION ALL SELECT unnest(CAST(? AS VARCHAR[]))) GROUP BY u)",
            [_COLLATION_PROBE],
        ).fetchone()  # fmt: skip
    except duckdb.Error:  # a view that cannot be read now: every statement over it is refused at its bind check
        return None
    if groups != len(_COLLATION_PROBE):
        return f"its {what} {unit} compares text with a collation (distinct strings such as 'a' and 'A' are equal in it)"
    return None


def _unit_collation(con, tname: str, kind: str, unit: str, options: str | None, cols: dict, definition: str) -> str | None:
    """``column_collation`` of a table's unit, and for a graph of both endpoints: with ``dst COLLATE NOCASE``
    the endpoint join matched 'x' and 'X' of the node table, and one edge row became several edges."""
    names, what = [unit], "unit column"
    if kind == "graph":
        graph = (json.loads(options) if options else {}).get("graph") or {}
        names, what = [c for c in (graph.get("src"), graph.get("dst")) if c] or names, "endpoint column"
    for c in names:
        why = column_collation(con, tname, c, cols[c].type, definition, what) if c in cols else None
        if why is not None:
            return why
    return None


def domain_text(values: list[Any]) -> list[Any]:
    """A declared domain's values as the text DuckDB casts to the column's type (JSON's true/false)."""
    return [None if v is None else json.dumps(v) if isinstance(v, bool) else str(v) for v in values]


def domain_problem(con: duckdb.DuckDBPyConnection, sql_type: str, values: list[Any]) -> str | None:
    """Why a declared domain does not describe cells of a column of ``sql_type``, or None: a value the
    type cannot hold, two values that the type reads as one ([1, 1.0] in an INTEGER: one cell counted
    twice), or a number the two routes into DuckDB read differently (dpgate hands a domain over as
    numbers — counting, top-k: a float is a DOUBLE first — or as text — releases, Spark; 0.145 in a
    DECIMAL(10, 2) is 0.14 one way and 0.15 the other). ``protect`` refuses
    such a domain; ``load`` finds one declared before that check, or made wrong by a later ALTER of
    the column's type, and no statement over the table runs (``Column.domain_problem``)."""
    return domain_problems(con, [(sql_type, values)])[0]


def domain_problems(con: duckdb.DuckDBPyConnection, domains: list[tuple[str, list[Any]]]) -> list[str | None]:
    """``domain_problem`` for each (type, values), in one statement (a catalog load checks every
    declared domain). Raises duckdb.Error for a type DuckDB does not know."""
    if not domains:
        return []
    parts, params = [], {}
    for i, (t, values) in enumerate(domains):
        params[f"x{i}"] = domain_text(values)
        params[f"f{i}"] = [isinstance(v, float) and math.isfinite(v) for v in values]  # a number as Python wrote it
        parts.append(
            f"SELECT {i} AS i, min(x) FILTER (WHERE x IS NOT NULL AND TRY_CAST(x AS {t}) IS NULL), "
            f"count(DISTINCT TRY_CAST(x AS {t})), min(x) FILTER (WHERE f AND TRY_CAST(x AS {t}) IS DISTINCT FROM "
            f"TRY_CAST(TRY_CAST(x AS DOUBLE) AS {t})) "
            f"FROM (SELECT unnest(CAST($x{i} AS VARCHAR[])) AS x, unnest(CAST($f{i} AS BOOLEAN[])) AS f)"
        )  # fmt: skip
    found = {int(r[0]): r[1:] for r in con.execute(" UNION ALL ".join(parts), params).fetchall()}
    out: list[str | None] = []
    for i, (t, values) in enumerate(domains):
        unreadable, distinct, differs = found[i]
        if unreadable is not None:
            out.append(f"{unreadable} is not a value of the type")
        elif differs is not None:
            out.append(f"{differs} is not a value of the type (DuckDB rounds it one way from a number, another from text)")
        elif distinct != sum(v is not None for v in values):
            out.append("two of its values are one value of the type")
        else:
            out.append(None)
    return out


#: (type, values as JSON) -> the domain's problem ("" for none): a function of DuckDB's casts alone, so
#: the gateways of a process share it (a server opens one per session: 32 sessions ran the check 32
#: times). Not kept for types whose text casts read the session's time zone.
_DOMAIN_CHECKS = Memo(4096)
_MISSING = object()


def _domain_problems(con: duckdb.DuckDBPyConnection, declared: list[tuple[str, str, str, list[Any]]]) -> dict[tuple[str, str], str]:
    """The declared domains (table, column, type, values) that do not fit their column's type now, in one
    statement when every type is DuckDB's; a type DuckDB does not know (a Spark table's) is left to its
    engine's check."""
    keys = [(t.upper(), json.dumps(v)) for _, _, t, v in declared]
    cached = [_DOMAIN_CHECKS.get(k, _MISSING) for k in keys]  # read once: an entry may be evicted meanwhile
    todo = [i for i, c in enumerate(cached) if c is _MISSING]
    try:
        found = domain_problems(con, [(declared[i][2], declared[i][3]) for i in todo])
    except duckdb.Error:
        found = []
        for i in todo:
            try:
                found.append(domain_problem(con, declared[i][2], declared[i][3]))
            except duckdb.Error:
                found.append(None)
    fresh = dict(zip(todo, found))
    for i, problem in fresh.items():
        if "TIME ZONE" not in keys[i][0] and "TZ" not in keys[i][0]:
            _DOMAIN_CHECKS.put(keys[i], problem or "")
    problems = [fresh[i] if i in fresh else (cached[i] or None) for i in range(len(keys))]
    return {(tname, cname): p for (tname, cname, _, _), p in zip(declared, problems) if p is not None}


def load(con: duckdb.DuckDBPyConnection) -> Catalog:
    """Read the whole catalog (a few small queries)."""
    db_name = con.execute("SELECT current_database()").fetchone()[0]
    base_tables = {
        r[0]
        for r in con.execute(
            "SELECT lower(table_name) FROM duckdb_tables() WHERE schema_name = 'main' "
            "AND database_name = current_database() AND NOT temporary"
        ).fetchall()
    }
    views = Views(con)
    relations = frozenset(
        r[0]
        for r in con.execute(
            "SELECT lower(table_name) FROM duckdb_tables() UNION SELECT lower(view_name) FROM duckdb_views() WHERE internal"
        ).fetchall()
    )
    if not schema_exists(con):
        return Catalog(0, {}, frozenset(base_tables), {}, db_name, views, builtin_functions(con)[0], frozenset(), relations)

    settings = dict(con.execute(f"SELECT key, value FROM {SCHEMA}.settings").fetchall())
    decl_rows = con.execute(
        f"SELECT table_name, column_name, lower, upper, domain FROM {SCHEMA}.columns"
    ).fetchall()
    declared: dict[str, dict[str, tuple]] = {}
    for tname, cname, lo, hi, dom in decl_rows:
        declared.setdefault(tname, {})[cname] = (lo, hi, None if dom is None else tuple(json.loads(dom)))

    # Unique column sets; a UNIQUE (not PRIMARY KEY) set counts only where its columns are NOT
    # NULL, since UNIQUE lets rows repeat with NULLs. The unit is exempt: NULL units are dropped.
    constraints = con.execute(
        "SELECT table_name, constraint_type, constraint_column_names FROM duckdb_constraints() WHERE "
        "schema_name = 'main' AND database_name = current_database() "
        "AND constraint_type IN ('PRIMARY KEY', 'UNIQUE', 'NOT NULL')"
    ).fetchall()
    not_null = {(t.lower(), cols[0].lower()) for t, kind, cols in constraints if kind == "NOT NULL"}
    unique_sets: dict[str, list[tuple[str, frozenset[str]]]] = {}
    for t, kind, cols in constraints:
        if kind != "NOT NULL":
            unique_sets.setdefault(t.lower(), []).append((kind, frozenset(c.lower() for c in cols)))
    definitions = dict(
        con.execute(
            "SELECT lower(table_name), sql FROM duckdb_tables() WHERE schema_name = 'main' "
            "AND database_name = current_database() AND NOT temporary"
        ).fetchall()
    )
    tables: dict[str, ProtectedTable] = {}
    for row in con.execute(
        f"SELECT table_name, kind, unit_column, max_rows, max_groups, budget_source, "
        f"budget_column, budget_table, default_epsilon, subject_delta, roster_table, options "
        f"FROM {SCHEMA}.protected_tables"
    ).fetchall():
        (tname, kind, unit, max_rows, max_groups, source, bcol, btab, default_eps, sdelta, roster, options) = row
        unique = {
            cols for kind, cols in unique_sets.get(tname, [])
            if kind == "PRIMARY KEY" or all((tname, c) in not_null for c in cols - {unit})
        }  # fmt: skip
        if options and json.loads(options).get("spark"):
            # A Spark table's DuckDB stub is empty: a key declared on it holds for no row of the source,
            # which nothing enforces, so it proves nothing (no skipped cut, no skipped DISTINCT)
            unique = set()
        types = dict(table_columns(con, tname))
        # A unique index compares text as bytes, GROUP BY, joins and DISTINCT with the column's collation:
        # under PRIMARY KEY (uid, item COLLATE NOCASE) a subject's 'a' and 'A' rows are one item to top-k's
        # domain join, counted twice. Such a set proves nothing dpgate relies on.
        collated = {
            c for c in set().union(*unique) if c in types
            and column_collation(con, tname, c, types[c], definitions.get(tname) or "")
        } if unique else set()  # fmt: skip
        unique = {u for u in unique if not u & collated}
        cols = {}
        for cname, ctype in types.items():
            lo, hi, dom = declared.get(tname, {}).get(cname, (None, None, None))
            cols[cname] = Column(cname, ctype, lo, hi, dom, (tname, cname) in not_null)
        tables[tname] = ProtectedTable(
            name=tname,
            kind=kind,
            unit=unit,
            max_rows=max_rows,
            max_groups=max_groups,
            budget_source=source,
            subject_delta=sdelta,
            roster=roster,
            columns=cols,
            options=json.loads(options) if options else {},
            unique_unit=frozenset({unit}) in unique,
            unique_keys=tuple(sorted(unique, key=sorted)),
            budget_column=bcol,
            budget_table=btab,
            default_epsilon=default_eps,
            unit_collation=_unit_collation(con, tname, kind, unit, options, cols, definitions.get(tname) or ""),
            base_table=tname in definitions,
        )
    declared_domains = [(t.name, c.name, c.type, list(c.domain)) for t in tables.values() for c in t.columns.values()
                        if c.domain is not None]  # fmt: skip
    for (tname, cname), problem in _domain_problems(con, declared_domains).items():
        t = tables[tname]
        cols = dict(t.columns, **{cname: dataclasses.replace(t.columns[cname], domain_problem=problem)})
        tables[tname] = dataclasses.replace(t, columns=cols)
    budget_tables = frozenset(t.budget_table for t in tables.values() if t.budget_table)
    public = frozenset(base_tables - set(tables) - budget_tables)
    releases = frozenset()
    if con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE schema_name = ? AND table_name = 'release_registry' "
        "AND database_name = current_database()", [SCHEMA],
    ).fetchone()[0]:  # fmt: skip
        releases = frozenset(
            r[0] for r in con.execute(f"SELECT name FROM {SCHEMA}.release_registry WHERE dropped_at IS NULL").fetchall()
        )
    return Catalog(
        int(settings.get("catalog_version", "0")), tables, public, settings, db_name, views,
        builtin_functions(con)[0], budget_tables, relations, releases & public,
    )  # fmt: skip


_builtins: tuple[frozenset[str], frozenset[str]] | None = None


def builtin_functions(con: duckdb.DuckDBPyConnection) -> tuple[frozenset[str], frozenset[str]]:
    """DuckDB's built-in function names, and the aggregate ones among them (read once per process).

    Anything else an analyst calls is a user-defined macro, which dpgate cannot check.
    """
    global _builtins
    if _builtins is None:
        rows = con.execute("SELECT function_name, function_type FROM duckdb_functions() WHERE internal").fetchall()
        _builtins = (
            frozenset(str(r[0]).lower() for r in rows),
            frozenset(str(r[0]).lower() for r in rows if r[1] == "aggregate"),
        )  # lower-cased in Python: see shadowing_functions
    return _builtins
