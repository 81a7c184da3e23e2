"""A stored sample order: the order in which each subject's rows are taken when they are sampled.

A table protected with ``sample_order = "stored"`` (the default for a base table of the database
file: ``default_for``) has a companion table in dpgate's schema,
``dpgate."sample_order_<table>"``, with one row per row of the table, **in the table's own scan
order**: the row's unit and its ``rank`` among its subject's rows, 1 .. n. The ranks are a
uniformly random permutation of each subject's rows, drawn from the OS (``os.urandom``, 64 bits
per row, ties broken by position) when the order is built — by ``Owner.protect`` and
``refresh_roster``, and by a gateway before the debit of a query that finds it stale.

A query then reads the table beside its order (``POSITIONAL JOIN``: one scan of both, no hash
join) and keeps, of each subject's rows that pass its WHERE and key domains, the ``max_rows``
with the smallest ranks (``backends.duckdb``). When every subject's ``max_rows``
best-ranked rows pass — a query without a selective WHERE — that is a filter, ``rank <= max_rows``,
checked by a count in the same pass; otherwise one window over the passing rows, ordered by the
stored rank (no per-query hashing, no duplicate numbering).

Soundness (the privacy model, docs/privacy-model.md: contribution bounding):

* **A stale order is never used.** A query uses the order only when, in its own snapshot, every
  position lines up (``current``); otherwise it samples by the per-query hash. This is a privacy
  requirement, not only an accuracy one: in a partly stale order, which of a subject's rows line up
  would depend on where other subjects' rows sit. Inside the query, a table row is also kept only
  beside an order row of its own unit, and the order's rank is read before any column of the table
  (a table column of the same name can never stand in for it): ranks being distinct within a unit,
  no subject keeps more than ``max_rows`` rows even then.
* **The choice depends only on the subject's own rows and on coins independent of the data.**
  A subject's ranks are a function of the 64-bit keys drawn for its rows, which are independent
  of every value in the database. Removing or adding another subject changes neither those keys
  (for a fixed draw) nor which of this subject's rows pass, so the sensitivity argument of the
  per-query hash applies unchanged: for every draw, neighbouring tables' bounded rows differ in
  the one subject's rows only (``tests/privacy/test_sample_order.py`` checks it on neighbours whose
  orders are coupled, as the argument couples the draws).
* **Uniform.** For any WHERE (which cannot read the ranks: they are not a column of the table),
  the kept rows are a uniformly random subset of the passing rows of the size the bound allows.
* **Fresh per table version, not per query.** The same rows are kept by every query until the
  table changes. Privacy does not depend on fresh coins (each query is ε-DP for every fixed
  draw, so sequential composition holds draw by draw); accuracy does in one way: averaging
  repeated answers removes their noise but not the sampling error of the fixed sample.

**Trust.** The order's rows are written once, by its build, in dpgate's own schema, like the
roster and the ledger; the table facts are cached under (database file, build id), so an order
edited by hand could make them stale.

**Validity** is checked in the query's own snapshot: the table's units, position by position,
must equal the order's (one scan of the unit column beside the order, cheaper than the unit
fingerprint of ``unit_stats``). Any insert, delete or unit change breaks it; updates of other
columns keep it, and the order stays a uniformly random permutation of each subject's rows.
While the check holds, the table's multiset of units is the order's, so the table facts of
``unit_stats`` are cached under the order's ``build_id`` instead of the fingerprint.

**A Spark table** has no rows in the file to keep an order beside, and no version dpgate could
check one against. Its equivalent is a kept **sample key** (``dpgate.sample_keys``): 62 bits drawn
from the OS (``draw_key``) by ``Owner.protect`` and ``refresh_roster``, with which Spark ranks each
row by a keyed hash of all its declared columns (equal rows numbered apart:
``dpgate.backends.spark.plane``). The same argument holds draw by draw: a row's rank is a
function of that row (and of how many equal rows its subject has) and of a key independent of the
data. Stable: every query keeps the same rows of a subject (of those that pass it) until the key is
drawn again — rows added to the source keep their ranks, so nothing in the source makes the key
stale; the owner's ``refresh_roster`` draws a new one.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import duckdb
import numpy as np

from dpgate import database, errors
from dpgate.catalog.tables import SCHEMA, ProtectedTable, quote_ident

REGISTRY = f"{SCHEMA}.sample_orders"
#: The companion table's column holding the rank (a column name no analyst expression can reach:
#: the order table is joined inside dpgate's own subquery).
RANK = "__dp_rank"
STORED = "stored"
PER_QUERY = "per_query"
#: Asked for by a policy entry without the key: the default for the table, whatever was kept.
DEFAULT = "default"
CHOICES = (PER_QUERY, STORED)


def default_for(con: duckdb.DuckDBPyConnection, name: str, columns, spark: str | None) -> str:
    """The sample order a table gets when its owner does not choose: stored for a base table of the
    database file, which samples a subject's rows by a filter instead of two window passes (12-15x
    faster at 10M rows when subjects exceed their bound), and for a Spark source (a kept key:
    stable samples); per query for a view (no rows of its own in the file to keep an order beside)
    and for a table with a column named like the order's rank."""
    if spark is not None or (RANK not in columns and definition(con, name)):
        return STORED
    return PER_QUERY


_q = quote_ident


def table_sql(table: ProtectedTable | str) -> str:
    name = table if isinstance(table, str) else table.name
    return f"{SCHEMA}.{_q('sample_order_' + name)}"


def wanted(table: ProtectedTable) -> bool:
    """Whether the owner declared a stored sample order for this table."""
    return table.options.get("sample_order") == STORED


def ensure_registry(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(
        f"CREATE TABLE IF NOT EXISTS {REGISTRY} (table_name VARCHAR PRIMARY KEY, build_id BIGINT NOT NULL, "
        "row_count BIGINT NOT NULL, built_at TIMESTAMP NOT NULL, definition VARCHAR NOT NULL)"
    )


def build(
    con: duckdb.DuckDBPyConnection, table: ProtectedTable | str, unit: str | None = None, *, seed: int | None = None
) -> int:
    """(Re)build the order of ``table`` inside the caller's transaction; returns its build id.

    ``seed`` (tests only: statistical tests use fixed seeds) draws the keys from a seeded
    generator instead of the OS."""
    name = table if isinstance(table, str) else table.name
    unit = unit if unit is not None else table.unit  # type: ignore[union-attr]
    src = f"main.{_q(name)}"
    (n,) = con.execute(f"SELECT count(*) FROM {src}").fetchone()
    if seed is None:
        keys = np.frombuffer(os.urandom(8 * max(int(n), 1)), dtype=np.uint64)[: int(n)]
    else:
        keys = np.random.default_rng(seed).integers(0, 2**64, size=int(n), dtype=np.uint64)
    view = f"__dp_order_keys_{secrets.token_hex(6)}"
    database.register(con, view, {"k": keys})
    try:
        con.execute(
            f"CREATE OR REPLACE TABLE {table_sql(name)} AS SELECT unit, {RANK} FROM ("
            f"SELECT t.rowid AS pos, t.{_q(unit)} AS unit, "
            f"CAST(row_number() OVER (PARTITION BY t.{_q(unit)} ORDER BY k.k, t.rowid) AS INTEGER) AS {RANK} "
            f"FROM {src} t POSITIONAL JOIN {view} k) ORDER BY pos"
        )
    finally:
        con.unregister(view)
    build_id = secrets.randbits(62)
    ensure_registry(con)
    con.execute(
        f"INSERT OR REPLACE INTO {REGISTRY} VALUES (?, ?, ?, current_timestamp, ?)",
        [name, build_id, int(n), definition(con, name)],
    )  # fmt: skip
    if mismatches(con, name, unit) != 0:  # the table's scan order must be the one the ranks were stored in
        raise errors.PolicyError(
            f"The stored sample order of {name} does not line up with its rows", code="DP312",
            hint="DuckDB must keep insertion order (SET preserve_insertion_order = true); "
            "or protect the table with sample_order = 'per_query'",
        )  # fmt: skip
    return build_id


def keep(con: duckdb.DuckDBPyConnection, table: str, unit: str, spark: str | None) -> None:
    """Draw what a stored sample order keeps, inside the caller's transaction: the order of a table
    in the file, the sample key of a Spark table (the other one is dropped)."""
    drop(con, table)
    if spark is None:
        build(con, table, unit)
    else:
        draw_key(con, table)


def drop(con: duckdb.DuckDBPyConnection, name: str) -> None:
    con.execute(f"DROP TABLE IF EXISTS {table_sql(name)}")
    _forget(con, name)
    _drop_key(con, name)


def _exists(con: duckdb.DuckDBPyConnection, table: str) -> bool:
    return bool(con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE schema_name = ? AND table_name = ? "
        "AND database_name = current_database()", [SCHEMA, table],
    ).fetchone()[0])  # fmt: skip


def _forget(con: duckdb.DuckDBPyConnection, name: str) -> None:
    if _exists(con, "sample_orders"):
        con.execute(f"DELETE FROM {REGISTRY} WHERE table_name = ?", [name])


#: A Spark table's sample key (see the module's docstring).
KEYS = f"{SCHEMA}.sample_keys"


def draw_key(con: duckdb.DuckDBPyConnection, name: str) -> int:
    """Draw the sample key of a Spark table from the OS and keep it (in the caller's transaction)."""
    key = secrets.randbits(62)
    con.execute(f"CREATE TABLE IF NOT EXISTS {KEYS} (table_name VARCHAR PRIMARY KEY, sample_key BIGINT NOT NULL, "
                "drawn_at TIMESTAMP NOT NULL)")  # fmt: skip
    con.execute(f"INSERT OR REPLACE INTO {KEYS} VALUES (?, ?, current_timestamp)", [name, key])
    return key


def kept_key(con: duckdb.DuckDBPyConnection, table: ProtectedTable) -> int | None:
    """The sample key a Spark table's queries rank its rows with, or None: the table samples per
    query (not declared stored, or no key kept for it)."""
    if not wanted(table):
        return None
    try:
        row = con.execute(f"SELECT sample_key FROM {KEYS} WHERE table_name = ?", [table.name]).fetchone()
    except duckdb.CatalogException:
        return None
    return None if row is None else int(row[0])


def _drop_key(con: duckdb.DuckDBPyConnection, name: str) -> None:
    if _exists(con, "sample_keys"):
        con.execute(f"DELETE FROM {KEYS} WHERE table_name = ?", [name])


def mismatches(con: duckdb.DuckDBPyConnection, name: str, unit: str) -> int:
    """Positions where the table and its order disagree: every position when their row counts
    differ (a row on one side only), else those whose units differ."""
    # One statement (one round trip): the counts first, because a positional join pads the shorter
    # side with NULLs, which a NULL unit would match.
    (rows, ordered, bad) = con.execute(f"SELECT {_counts_sql(name, unit)}").fetchone()
    if rows != ordered:
        return max(int(rows), int(ordered), 1)
    return int(bad)


def _counts_sql(name: str, unit: str) -> str:
    """The table's rows, the order's rows, and the positions whose units differ (``mismatches``)."""
    order = table_sql(name)
    return (
        f"(SELECT count(*) FROM main.{_q(name)}), (SELECT count(*) FROM {order}), "
        f"(SELECT count(*) FROM main.{_q(name)} t POSITIONAL JOIN {order} o WHERE t.{_q(unit)} IS DISTINCT FROM o.unit)"
    )


#: (table, build id) of orders a query found out of line with their rows in its snapshot: the next
#: query's planning rebuilds them (a query after its debit never writes; it samples by hash).
_STALE: set[tuple[str, str, int]] = set()
#: (database, table) -> when a rebuild last failed: the next attempt waits ``RETRY_AFTER`` seconds
#: (a rebuild that keeps failing would otherwise cost every query its full price).
_FAILED: dict[tuple[str, str], float] = {}
RETRY_AFTER = 30.0
_LOCK = threading.Lock()


#: Where a rebuild that lands on a statement is announced: the statement's ``progress(fraction, message)``.
_ANNOUNCE: ContextVar[Callable[[float, str], None] | None] = ContextVar("dpgate_order_announce", default=None)


@contextmanager
def announcing(progress: Callable[[float, str], None] | None) -> Iterator[None]:
    """Announce through ``progress`` a rebuild that a statement inside has to wait for.

    A rebuild takes seconds on a large table (3-4 s at 10M rows); a statement that finds the order
    stale says so instead of stalling without a word."""
    token = _ANNOUNCE.set(progress)
    try:
        yield
    finally:
        _ANNOUNCE.reset(token)


def _announce(fraction: float, message: str) -> None:
    progress = _ANNOUNCE.get()
    if progress is not None:
        with contextlib.suppress(Exception):  # a failing progress callback must not fail the statement
            progress(fraction, message)


def current(con: duckdb.DuckDBPyConnection, table: ProtectedTable) -> int | None:
    """The build id of the table's order if it lines up with the rows ``con`` sees now, else None.

    One statement: the registry's row (``registered``) and the positions where the table and its
    order disagree (``mismatches``), read together (a statement's fixed work is mostly round trips)."""
    name = table.name
    try:
        row = con.execute(
            f"{_REGISTERED}, {_counts_sql(name, table.unit)} {_REGISTERED_FROM}", _registry_params(name)
        ).fetchone()
    except duckdb.CatalogException:  # no registry, or the order table was dropped: no usable order
        return None
    build_id = _usable(row)
    if build_id is None:
        return None
    (rows, ordered, bad) = row[3:]
    # The counts first, because a positional join pads the shorter side with NULLs, which a NULL
    # unit would match.
    if rows != ordered or bad:
        with _LOCK:
            _STALE.add((database_identity(con), name, build_id))
        return None
    return build_id


def definition(con: duckdb.DuckDBPyConnection, name: str) -> str:
    """The table's CREATE statement as DuckDB keeps it: it changes with every ALTER, a collation
    put on the unit column included (which would merge units that the order ranked apart)."""
    row = con.execute(
        "SELECT sql FROM duckdb_tables() WHERE database_name = current_database() AND schema_name = 'main' "
        "AND lower(table_name) = lower(?)", [name],
    ).fetchone()  # fmt: skip
    return "" if row is None or row[0] is None else str(row[0])


#: The registry's row for a table (``$name``) beside the definitions DuckDB keeps now: ``registered``.
_REGISTERED = "SELECT r.build_id, r.definition, d.defs"
_REGISTERED_FROM = (
    f"FROM {REGISTRY} r, (SELECT "
    "max(sql) FILTER (WHERE schema_name = 'main' AND lower(table_name) = lower($name)) AS defs, "
    "count(*) FILTER (WHERE schema_name = $schema AND table_name = $order) AS orders "
    "FROM duckdb_tables() WHERE database_name = current_database()) d "
    "WHERE r.table_name = $name AND d.orders = 1"
)


def registered(con: duckdb.DuckDBPyConnection, name: str) -> int | None:
    """The build id the registry names for the table, if its order table exists and the table's
    definition is the one the order was built for (None: no usable order). One catalog read."""
    try:
        row = con.execute(f"{_REGISTERED} {_REGISTERED_FROM}", _registry_params(name)).fetchone()
    except duckdb.CatalogException:
        return None
    return _usable(row)


def _registry_params(name: str) -> dict[str, str]:
    return {"name": name, "schema": SCHEMA, "order": "sample_order_" + name}


def _usable(row: tuple | None) -> int | None:
    """The build id of a ``_REGISTERED`` row, if the table's definition is the one the order was built for."""
    if row is None or row[1] != (row[2] or ""):
        return None
    return int(row[0])


#: The file the connection's current database lives in, as a scalar subquery's SELECT.
DATABASE_PATH_SQL = "SELECT path FROM duckdb_databases() WHERE database_name = current_database()"


def database_identity(con: duckdb.DuckDBPyConnection) -> str:
    """The file the connection's current database lives in (part of the facts' cache key: a copy
    of a file carries its orders' build ids)."""
    row = con.execute(DATABASE_PATH_SQL).fetchone()
    return str(row[0]) if row and row[0] is not None else ""


def _count_moved(registered_rows: int | None, rows: int) -> bool:
    """Whether the table has another number of rows than its order (a cheap sign of staleness).

    A query that finds the order out of line marks it stale for this process only (``_STALE``); a
    new process (each ``dpgate query`` is one) would otherwise never rebuild it after rows were
    added or deleted, and sample per query from then on. An update that keeps the count is still
    found by the query's own check, and rebuilt by the next statement of the same process."""
    return registered_rows != rows


def refresh(con: duckdb.DuckDBPyConnection, table: ProtectedTable) -> int | None:
    """Before a query's debit: build the order if it is missing or a query found it stale.

    The build runs in its own transaction on a cursor of its own, so the analyst's connection never
    holds it. Returns what ``registered`` answers afterwards. When it cannot be built (another
    writer, a read-only file), queries sample by the per-query hash: a query uses an order only
    after checking, in its own snapshot, that it lines up."""
    name = table.name
    try:  # the registry row, both row counts and the file, in one statement (it runs before every debit)
        row = con.execute(
            f"{_REGISTERED}, r.row_count, (SELECT count(*) FROM main.{_q(name)}), "
            f"(SELECT path FROM duckdb_databases() WHERE database_name = current_database()) {_REGISTERED_FROM}",
            _registry_params(name),
        ).fetchone()  # fmt: skip
    except duckdb.CatalogException:
        row = None
    build_id = _usable(row)
    db = (str(row[5]) if row[5] is not None else "") if row is not None else database_identity(con)
    with _LOCK:
        stale = build_id is not None and (db, name, build_id) in _STALE
        failed = _FAILED.get((db, name))
    if build_id is not None and not stale and not _count_moved(row[3], row[4]):
        return build_id
    if failed is not None and time.monotonic() - failed < RETRY_AFTER:
        return registered(con, table.name)
    why = "it is missing" if build_id is None else "the table changed since it was drawn"
    message = f"drawing the stored sample order of {table.name} ({why})"
    _announce(0.0, message + "...")
    started = time.monotonic()
    cur = con.cursor()
    try:
        cur.execute("BEGIN TRANSACTION")
        try:
            if registered(cur, table.name) == build_id:  # nobody rebuilt it meanwhile
                build(cur, table)
            cur.execute("COMMIT")
            _announce(1.0, f"{message}: done in {time.monotonic() - started:.1f} s")
        except BaseException:
            try:
                cur.execute("ROLLBACK")
            except duckdb.Error:
                pass
            with _LOCK:
                _FAILED[(db, table.name)] = time.monotonic()
            _announce(1.0, f"{message}: not possible now; this statement samples per query")
            raise
    except (duckdb.Error, errors.Error):
        return registered(con, table.name)
    finally:
        cur.close()
    with _LOCK:
        _STALE.discard((db, table.name, build_id))
        _FAILED.pop((db, table.name), None)
    return registered(con, table.name)
