"""PostgreSQL's catalogs for clients: psql's ``\\dt`` and ``\\d``, drivers' and BI tools' introspection.

A statement that reads ``pg_catalog`` or ``information_schema``, or asks ``version()`` or
``current_schema()``, runs in a DuckDB database of its own, in memory, that holds one **empty**
table per table or view the analyst may query, with the columns and types ``SHOW TABLES`` and
``DESCRIBE`` show (``Gateway.tables()``). DuckDB's own ``pg_catalog`` and ``information_schema``
views answer over it, after the statement is read as PostgreSQL and written as DuckDB. Nothing of
the database file is in that database: the catalogs reveal what ``SHOW TABLES`` / ``DESCRIBE``
already do, and no row, no view's SQL, no other analyst's tables.

That database runs only a ``SELECT`` (no DDL, ``SET``, ``PRAGMA``, ``COPY`` or ``ATTACH``), with no
access to files or the network and one thread; its rows go through the server's limits for a
public statement (time and size), and a cancel reaches it.
"""

from __future__ import annotations

import json
import re
import threading
from typing import Any

import duckdb
import sqlglot
from sqlglot import exp

import dpgate
from dpgate import database, errors
from dpgate.release import Result

#: Relations of PostgreSQL's catalogs (their schema names, and tables named like PostgreSQL's).
_CATALOG_SCHEMAS = {"pg_catalog", "information_schema"}
#: Functions clients call at connect or to introspect, answered by the catalog database.
_CATALOG_FUNCTIONS = {
    "version", "current_schema", "current_schemas", "current_database", "pg_backend_pid", "obj_description",
    "col_description", "format_type", "pg_get_userbyid", "pg_table_is_visible", "pg_encoding_to_char",
    "pg_get_expr", "pg_get_indexdef", "pg_get_constraintdef", "has_table_privilege", "has_schema_privilege",
    "pg_is_in_recovery", "pg_postmaster_start_time", "inet_server_addr", "pg_get_viewdef",
}  # fmt: skip
#: psql's spelling of an operator and a collation (PostgreSQL syntax that neither sqlglot nor DuckDB reads).
_OPERATOR = re.compile(r"OPERATOR\s*\(\s*pg_catalog\s*\.\s*([~!*<>=]+)\s*\)", re.I)
# (?<!\s): a match starts only at a run's first space, so a long run of spaces is scanned once
_COLLATE_DEFAULT = re.compile(r"(?<!\s)\s+COLLATE\s+pg_catalog\s*\.\s*\"?default\"?", re.I)
#: PostgreSQL's types that name catalog objects (``'adult'::regclass``): text here.
_NAME_TYPES = {"regclass", "regtype", "regproc", "regprocedure", "regnamespace", "regrole", "regoper", "regconfig"}
#: PostgreSQL catalog tables whose columns clients read and DuckDB's views lack: the catalog database
#: has its own, in schema ``pg_more``, with those columns added (their PostgreSQL defaults).
_MORE = {
    "pg_class": "*, false AS relforcerowsecurity FROM pg_catalog.pg_class "
                "WHERE relnamespace IN (SELECT oid FROM pg_catalog.pg_namespace)",
    # PostgreSQL numbers a column's type by pg_type's oids (which clients join on). DuckDB 1.x numbers it
    # by its own type ids: the oid of the PostgreSQL type DuckDB names it as. DuckDB 2 gives PostgreSQL's
    # oid already, and one of its own for a type PostgreSQL lacks (a list, HUGEINT). Those are text (1043),
    # and a numeric's precision and scale are encoded as PostgreSQL does.
    "pg_attribute": "* REPLACE (" + (
        "CASE WHEN a.atttypid IN (SELECT oid FROM pg_catalog.pg_type) THEN a.atttypid ELSE 1043 END"
        if database.DUCKDB_MAJOR >= 2 else
        "coalesce((SELECT min(t.oid) FROM pg_catalog.pg_type t WHERE t.typname = (SELECT "
        "pg_catalog.format_pg_type(d.logical_type, d.type_name) FROM duckdb_types() d WHERE d.type_oid = a.atttypid)), "
        "1043)"
    ) + " AS atttypid, CASE WHEN a.atttypmod > 0 THEN (((a.atttypmod // 1000) << 16) | (a.atttypmod % 1000)) + 4 "
    "ELSE a.atttypmod END AS atttypmod) FROM pg_catalog.pg_attribute a",
    "pg_collation": "*, NULL::BIGINT AS collnamespace, 10::BIGINT AS collowner, 'c' AS collprovider, "
                    "true AS collisdeterministic, 6 AS collencoding, 'C' AS collcollate, 'C' AS collctype "
                    "FROM pg_catalog.pg_collation",
}
#: information_schema's views, of the analyst's database only (not of the catalog database's own schema).
_INFORMATION = ("tables", "columns", "views", "schemata")
#: PostgreSQL catalog tables DuckDB does not have, empty, with the columns clients read.
_EMPTY = {
    "pg_policy": "oid BIGINT, polname VARCHAR, polpermissive BOOLEAN, polroles BIGINT[], polqual VARCHAR, "
                 "polwithcheck VARCHAR, polcmd VARCHAR, polrelid BIGINT",
    "pg_roles": "oid BIGINT, rolname VARCHAR, rolsuper BOOLEAN, rolcanlogin BOOLEAN",
    "pg_inherits": "inhrelid BIGINT, inhparent BIGINT, inhseqno INTEGER, inhdetachpending BOOLEAN",
    "pg_trigger": "oid BIGINT, tgrelid BIGINT, tgname VARCHAR, tgenabled VARCHAR, tgisinternal BOOLEAN, "
                  "tgparentid BIGINT",
    "pg_statistic_ext": "oid BIGINT, stxrelid BIGINT, stxname VARCHAR, stxnamespace BIGINT, stxkeys INTEGER[], "
                        "stxkind VARCHAR[], stxstattarget INTEGER",
    "pg_publication": "oid BIGINT, pubname VARCHAR, puballtables BOOLEAN",
    "pg_publication_rel": "oid BIGINT, prpubid BIGINT, prrelid BIGINT, prqual VARCHAR, prattrs INTEGER[]",
    "pg_publication_namespace": "oid BIGINT, pnpubid BIGINT, pnnspid BIGINT",
    "pg_rewrite": "oid BIGINT, rulename VARCHAR, ev_class BIGINT, ev_type VARCHAR, is_instead BOOLEAN",
    "pg_foreign_table": "ftrelid BIGINT, ftserver BIGINT, ftoptions VARCHAR[]",
    "pg_partitioned_table": "partrelid BIGINT, partstrat VARCHAR",
    "pg_extension": "oid BIGINT, extname VARCHAR, extowner BIGINT, extnamespace BIGINT, extversion VARCHAR",
    "pg_matviews": "schemaname VARCHAR, matviewname VARCHAR, matviewowner VARCHAR, definition VARCHAR",
    "pg_stat_activity": "datid BIGINT, datname VARCHAR, pid INTEGER, usename VARCHAR, state VARCHAR, query VARCHAR",
    # DuckDB's pg_settings lists its own settings (paths of the server among them): empty here
    "pg_settings": "name VARCHAR, setting VARCHAR, unit VARCHAR, category VARCHAR, short_desc VARCHAR, "
                   "vartype VARCHAR, source VARCHAR",
}
#: One database, the one clients connect to (``dpgate``), as PostgreSQL's pg_database describes it.
_DATABASE = (
    "SELECT 1::BIGINT AS oid, 'dpgate' AS datname, 10::BIGINT AS datdba, 6 AS encoding, 'c' AS datlocprovider, "
    "false AS datistemplate, true AS datallowconn, -1 AS datconnlimit, 0::BIGINT AS dattablespace, "
    "'C' AS datcollate, 'C' AS datctype, NULL::VARCHAR AS daticulocale, NULL::VARCHAR AS daticurules, "
    "NULL::VARCHAR AS datcollversion, NULL::VARCHAR[] AS datacl"
)
#: Functions PostgreSQL has that the catalog database defines (it has the others in its pg_catalog).
_MACROS = {
    "pg_get_userbyid": "(id) AS 'dpgate'",
    "pg_encoding_to_char": "(enc) AS 'UTF8'",
    "pg_backend_pid": "() AS 0",
    "pg_is_in_recovery": "() AS false",
    "pg_get_indexdef": "(a, b := 0, c := false) AS NULL::VARCHAR",
    "pg_get_expr": "(e, r, pretty := false) AS NULL::VARCHAR",
    "pg_get_statisticsobjdef_columns": "(id) AS NULL::VARCHAR",
    "pg_get_triggerdef": "(id, pretty := false) AS NULL::VARCHAR",
    "pg_get_ruledef": "(id, pretty := false) AS NULL::VARCHAR",
    "pg_get_partkeydef": "(id) AS NULL::VARCHAR",
    "pg_relation_is_publishable": "(id) AS false",
    "pg_get_serial_sequence": "(t, c) AS NULL::VARCHAR",
    "array_upper": "(a, d) AS len(a)",
    "to_regtype": "(name) AS (SELECT min(oid) FROM pg_catalog.pg_type WHERE typname = name)",
    "to_regclass": "(name) AS (SELECT min(oid) FROM pg_catalog.pg_class WHERE relname = name)",
    "pg_get_partition_constraintdef": "(id) AS NULL::VARCHAR",
    "version": f"() AS 'PostgreSQL 15.0 (dpgate {dpgate.__version__})'",
    "pg_sleep": "(seconds) AS NULL",  # a catalog query does not wait
    # PostgreSQL's names for types (DuckDB's format_type gives the short ones, which clients do not map)
    "format_type": "(t, m) AS (SELECT CASE typname WHEN 'int2' THEN 'smallint' WHEN 'int4' THEN 'integer' "
                   "WHEN 'int8' THEN 'bigint' WHEN 'float4' THEN 'real' WHEN 'float8' THEN 'double precision' "
                   "WHEN 'varchar' THEN 'character varying' WHEN 'bool' THEN 'boolean' "
                   "WHEN 'timestamp' THEN 'timestamp without time zone' "
                   "WHEN 'timestamptz' THEN 'timestamp with time zone' WHEN 'time' THEN 'time without time zone' "
                   "ELSE typname END || CASE WHEN typname = 'numeric' AND m > 4 "
                   "THEN concat('(', (m - 4) >> 16, ',', (m - 4) & 65535, ')') ELSE '' END "
                   "FROM pg_catalog.pg_type WHERE oid = t)",
}
#: The catalog tables the catalog database answers from its own schema, ``pg_more``.
_OWN = {*_MORE, *_EMPTY, "pg_database"}
#: Catalog tables a query may name without their schema (PostgreSQL's search path starts with pg_catalog).
_CATALOG_TABLES = {
    "pg_am", "pg_attrdef", "pg_attribute", "pg_class", "pg_collation", "pg_constraint", "pg_database", "pg_depend",
    "pg_description", "pg_enum", "pg_index", "pg_indexes", "pg_namespace", "pg_proc", "pg_sequence",
    "pg_sequences", "pg_settings", "pg_tables", "pg_tablespace", "pg_type", "pg_views", "pg_user", *_EMPTY,
}
#: PostgreSQL's functions under DuckDB's names.
_RENAMED = {"json_build_object": "json_object"}
#: Longer statements are not read as catalog queries (the gateway's parser bounds them by tokens).
MAX_CATALOG_TEXT = 32 * 1024
#: At most this many rows come back from the catalog database (its tables are the analyst's list).
MAX_ROWS = 100_000
#: Its memory.
MEMORY = "256MB"


def catalog_query(sql: str) -> exp.Expr | None:
    """``sql`` read as PostgreSQL, if it reads PostgreSQL's catalogs or asks what only they answer;
    None otherwise (the gateway's). A word test first: most statements are not parsed here."""
    if len(sql) > MAX_CATALOG_TEXT:  # parsed in Python: clients' catalog queries are short
        return None
    lowered = sql.lower()
    if "pg_" not in lowered and "information_schema" not in lowered and "version" not in lowered \
            and "current_schema" not in lowered and "current_database" not in lowered:  # fmt: skip
        return None
    try:
        tree = _parse(sql)
    except errors.Error:  # not PostgreSQL's SQL (dpgate's DP statements are not): the gateway's
        return None
    if not isinstance(tree, (exp.Select, exp.Union, exp.Subquery)):
        return None
    for table in tree.find_all(exp.Table):
        if table.db.lower() in _CATALOG_SCHEMAS or (not table.db and table.name.lower() in _CATALOG_TABLES):
            return tree
    return tree if any(_function_name(f) in _CATALOG_FUNCTIONS for f in tree.find_all(exp.Func)) else None


#: What a catalog query may call: an allowlist of what psql, SQLAlchemy and the JDBC driver ask (a
#: denylist was passed by LATERAL table functions, quoted names and sqlglot's renames, and DuckDB
#: has functions that write files, run SQL from a string or build values past any memory limit).
#: Checked on the rewritten tree by class or name, so however sqlglot writes a class, an unknown one
#: is refused.
_ALLOWED_CLASSES = {
    "If", "And", "Or", "Not", "Cast", "TryCast", "Case", "Coalesce", "Nullif", "Count", "Max", "Min", "Sum",
    "Avg", "Length", "Lower", "Upper", "Trim", "Substring", "Concat", "ConcatWs", "RegexpLike", "Array",
    "ArrayToString", "GroupConcat", "ArrayAgg", "RowNumber", "CurrentVersion", "CurrentSchema",
    "CurrentSchemas", "CurrentDatabase", "CurrentUser", "Greatest", "Least", "Abs", "Round", "StrPosition",
    "Left", "Right", "LogicalOr", "LogicalAnd", "JSONObject", "Exists", "Unnest", "GenerateSeries",
    "ExplodingGenerateSeries", "ArraySize",
}  # fmt: skip
_ALLOWED_NAMES = {
    *_MACROS, "pg_table_is_visible", "pg_collation_is_visible", "pg_type_is_visible", "pg_function_is_visible",
    "obj_description", "col_description", "shobj_description", "has_table_privilege", "has_schema_privilege",
    "has_column_privilege", "has_database_privilege", "pg_has_role", "pg_get_constraintdef", "pg_get_viewdef",
    "pg_typeof", "format_pg_type", "pg_is_other_temp_schema", "pg_my_temp_schema", "json_object",
    "array_to_string", "current_schema", "current_schemas", "current_database", "current_user", "session_user",
    "pg_get_expr", "format_type", "array_upper", "to_regtype", "to_regclass", "string_agg", "bool_or", "bool_and",
}  # fmt: skip
#: FROM items a catalog query may name (clients' catalog queries name fewer than ten).
MAX_RELATIONS = 24


def _refused_function(tree: exp.Expr) -> str | None:
    """What the rewritten statement ``tree`` calls that catalog queries may not (or a reason), or None.
    Every function is an allowed class or an allowed name (quotes and qualifiers do not matter), so
    however sqlglot writes a class for DuckDB, an unknown one is refused."""
    if len(list(tree.find_all(exp.Table))) > MAX_RELATIONS:
        return f"(more than {MAX_RELATIONS} tables)"
    for f in tree.find_all(exp.Func):
        if isinstance(f, exp.Cast) and any(t.this == exp.DataType.Type.VARIANT for t in f.to.find_all(exp.DataType)):
            return "(a cast to VARIANT: one made from JSON text nests as deep as the text, and DuckDB's work on it " \
                   "recurses once per level, which killed the process)"  # as in public statements: frontend.built
        if isinstance(f, exp.Anonymous):
            if f.name.lower() not in _ALLOWED_NAMES:
                return f.name.lower()
        elif type(f).__name__ not in _ALLOWED_CLASSES:
            return _function_name(f)
        elif isinstance(f, exp.GenerateSeries) and not _small_series(f):
            return "generate_series"
    return None


def _small_series(f: exp.Expr) -> bool:
    """A series of array positions (psql's ``generate_series(0, array_upper(a, 1))``) or of constants
    below a million, read as a table."""
    if not isinstance(f.parent, exp.Table):
        return False
    for arg in f.args.values():
        if arg is None or isinstance(arg, bool):
            continue
        if isinstance(arg, exp.Literal):
            if not arg.is_number or abs(float(arg.this)) > 1_000_000:
                return False
        elif not (isinstance(arg, exp.Anonymous) and arg.name.lower() == "array_upper") and not isinstance(arg, exp.ArraySize):
            return False
    return True


def _function_name(f: exp.Func) -> str:
    if isinstance(f, exp.Anonymous):
        return str(f.this).lower()
    return f.sql(dialect="postgres").split("(")[0].strip().lower()  # version(): sqlglot's CurrentVersion


def _parse(sql: str) -> exp.Expr:
    """``sql`` read as PostgreSQL, with psql's ``OPERATOR(pg_catalog.~)`` and ``COLLATE pg_catalog.default``."""
    text = _COLLATE_DEFAULT.sub("", _OPERATOR.sub(r" \1 ", sql))
    try:
        trees = [t for t in sqlglot.parse(text, read="postgres") if t is not None]
    except (sqlglot.errors.SqlglotError, RecursionError) as e:
        raise errors.ProgrammingError(
            f"Cannot read this catalog query: {str(e).splitlines()[0]}", code="DP230",
            hint="the catalogs (pg_catalog, information_schema) answer SELECT statements",
        ) from None
    if len(trees) != 1:
        raise errors.ProgrammingError("Send one catalog query at a time", code="DP230")
    return trees[0]


def _rewrite(tree: exp.Expr) -> exp.Expr:
    """The statement as DuckDB reads it: functions unqualified (the catalog database resolves
    PostgreSQL's names in its own ``pg_catalog``, and the few it lacks are its macros)."""

    def own_tables(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Table) and isinstance(node.this, exp.Func) and node.db.lower() == "pg_catalog":
            node = node.copy()  # a table function (generate_series): DuckDB's own
            node.set("db", None)
        if isinstance(node, exp.Column) and node.db.lower() in ("pg_catalog", "information_schema"):
            node = node.copy()  # pg_catalog.pg_class.relname: the table's alias is its name
            node.set("db", None)
        alias = node.args.get("alias") if isinstance(node, exp.Table) and isinstance(node.this, exp.Func) else None
        if alias is not None and not alias.columns:  # PostgreSQL names a function's one column by its alias
            alias.set("columns", [exp.to_identifier(alias.name)])
        if not isinstance(node, exp.Table) or isinstance(node.this, exp.Func):
            return node
        db, name = node.db.lower(), node.name.lower()
        own = db in ("", "pg_catalog") and name in _OWN
        information = db == "information_schema" and name in _INFORMATION
        if not (own or db in ("pg_catalog", "information_schema")):
            return node
        node = node.copy()
        if not node.alias:  # columns qualified by the table's name still find it
            node.set("alias", exp.TableAlias(this=exp.to_identifier(node.name)))
        if own or information:  # the catalog database's own, in memory.pg_more
            if information:
                node.set("this", exp.to_identifier(f"information_{name}"))
            node.set("db", exp.to_identifier("pg_more"))
            node.set("catalog", exp.to_identifier("memory"))
        return node

    def types(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.DataType):  # PostgreSQL's object-identifier types: names and numbers here
            name = node.sql(dialect="postgres").lower().removeprefix("pg_catalog.")
            if name in _NAME_TYPES:
                return exp.DataType.build("VARCHAR")
            if name == "oid":
                return exp.DataType.build("BIGINT")
            if name in ("text", "name", "char", '"char"'):
                return exp.DataType.build("VARCHAR")
            if name == "int2":
                return exp.DataType.build("SMALLINT")
        return node

    def rename(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Anonymous) and str(node.this).lower() in _RENAMED:
            node.set("this", _RENAMED[str(node.this).lower()])  # in place: a new node's children are not visited
        return node

    def unqualify(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Dot) and isinstance(node.this, exp.Identifier) and \
                node.this.name.lower() == "pg_catalog" and isinstance(node.expression, exp.Func):  # fmt: skip
            return node.expression.transform(unqualify)  # a replaced node's children are not visited
        return node

    tree = tree.transform(own_tables).transform(types).transform(rename)
    return tree.transform(unqualify)


class CatalogDatabase:
    """One session's catalog database: the analyst's tables, empty, rebuilt when they change."""

    def __init__(self) -> None:
        self._con: duckdb.DuckDBPyConnection | None = None
        self._tables: str | None = None
        self._lock = threading.Lock()

    def close(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None

    def interrupt(self) -> None:
        with self._lock:
            if self._con is not None:
                self._con.interrupt()

    def _connection(self, tables: dict[str, tuple[str, list[tuple[str, str]]]]) -> duckdb.DuckDBPyConnection:
        key = json.dumps(tables, sort_keys=True)
        if self._con is not None and key == self._tables:
            return self._con
        # temp_directory '': nothing spills to disk (sessions' spill files would share one directory,
        # and another session could read or overwrite them), so MEMORY holds.
        con = duckdb.connect(":memory:", config={"threads": 1, "memory_limit": MEMORY, "temp_directory": ""})
        # The analyst's tables in a database named as the one clients connect to; the catalog
        # database's own schema (pg_more) in the other, which pg_namespace does not list.
        con.execute("ATTACH ':memory:' AS dpgate")
        con.execute("USE dpgate")
        for name, (kind, columns) in tables.items():
            if kind == "view":  # listed as a view, with its columns' types and no row
                cols = ", ".join(f"CAST(NULL AS {t}) AS {_quote(c)}" for c, t in columns) or "NULL AS __none"
                con.execute(f"CREATE VIEW {_quote(name)} AS SELECT {cols} WHERE false")
            else:
                cols = ", ".join(f"{_quote(c)} {t}" for c, t in columns) or "__none INTEGER"
                con.execute(f"CREATE TABLE {_quote(name)} ({cols})")
        for name, body in _MACROS.items():
            con.execute(f"CREATE MACRO {name}{body}")
        con.execute("CREATE SCHEMA memory.pg_more")
        for name, body in _MORE.items():
            con.execute(f"CREATE VIEW memory.pg_more.{name} AS SELECT {body}")
        con.execute(f"CREATE VIEW memory.pg_more.pg_database AS {_DATABASE}")
        for name, columns in _EMPTY.items():
            con.execute(f"CREATE TABLE memory.pg_more.{name} ({columns})")
        for name in _INFORMATION:
            where = "catalog_name" if name == "schemata" else "table_catalog"
            con.execute(f"CREATE VIEW memory.pg_more.information_{name} AS SELECT * FROM information_schema.{name} "
                        f"WHERE {where} = 'dpgate'")  # fmt: skip
        # Locked down after it is built: no file, no network, no extension, and no way to undo it.
        con.execute("SET enable_external_access = false")
        con.execute("SET autoload_known_extensions = false")
        con.execute("SET autoinstall_known_extensions = false")
        con.execute("SET lock_configuration = true")
        with self._lock:
            self.close()
            self._con, self._tables = con, key
        return con

    def run(self, tree: exp.Expr, tables: dict[str, tuple[str, list[tuple[str, str]]]], params: Any = None,
            reader: Any = None) -> Result:  # fmt: skip
        """The result of the catalog query ``tree`` (``catalog_query``'s) over the catalog database of
        ``tables`` (``params``: ``$1``, ...)."""
        if not isinstance(tree, (exp.Select, exp.Union)) or tree.find(exp.Into) is not None:
            # (SELECT ... INTO t is a CREATE TABLE: the catalog database writes nothing)
            raise errors.NotSupportedError(
                "The catalogs answer SELECT statements only", code="DP220",
                hint="query pg_catalog or information_schema with SELECT; SHOW TABLES and DESCRIBE list the tables",
            )  # fmt: skip
        rewritten = _rewrite(tree)
        refused = _refused_function(rewritten)
        text = rewritten.sql(dialect="duckdb")
        if refused is not None:
            raise errors.NotSupportedError(
                f"Catalog queries cannot use {refused}" + ("" if refused.startswith("(") else "()"), code="DP220",
                hint="the catalogs answer what clients ask of them: tables, columns, types, the server's version",
            )  # fmt: skip
        con = self._connection(tables)
        try:
            statements = con.extract_statements(text)
        except duckdb.Error:
            statements = []
        if len(statements) != 1 or statements[0].type != duckdb.StatementType.SELECT:
            raise errors.NotSupportedError("The catalogs answer one SELECT statement", code="DP220")
        try:
            if reader is not None:
                reader.start()
            cur = con.execute(text, params or None)
            desc = cur.description or []
            names, types = [d[0] for d in desc], [_pg_type(d[1]) for d in desc]
            if reader is not None:
                rows = reader.read(cur, names, types, None)
            else:
                rows = cur.fetchmany(MAX_ROWS + 1)
                if len(rows) > MAX_ROWS:
                    raise errors.OperationalError(f"A catalog query returns at most {MAX_ROWS:,} rows", code="DP714")
        except duckdb.Error as e:
            # DuckDB's message names its kind of error and the object; paths of the server are cut out
            first = re.sub(r'"/[^"]*"', '"..."', str(e).strip().splitlines()[0])
            raise errors.ProgrammingError(
                f"The catalogs cannot answer this query: {first}", code="DP230",
                hint="dpgate's catalogs hold what SHOW TABLES and DESCRIBE show: tables, views and their columns",
            ) from None
        return Result(names, types, rows, None)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _pg_type(t: Any) -> str:
    """DuckDB's type name for the wire layer (lists and other nested types travel as text)."""
    text = str(t)
    return text if text.isidentifier() or text.startswith("DECIMAL") else "VARCHAR"
