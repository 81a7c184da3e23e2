"""One DuckDB instance per database file per process, opened locked down.

Every dpgate connection (analyst or owner) to a file shares one instance, whose
configuration disables external access (files, network, extension installs) as a second
line of defence behind the query checks of ``classify``. The per-file lock serialises
ledger transactions so that concurrent queries in this process can never overspend;
DuckDB's own file lock keeps other processes out while the file is open.
"""

from __future__ import annotations

import itertools
import math
import os
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import duckdb

from dpgate import errors

LOCKED_CONFIG = {
    "enable_external_access": False,
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
}

#: The installed DuckDB's major version. dpgate runs on 1.4-1.5 and 2.x; where 2.x changed a default
#: dpgate relies on, the instance is opened with 1.x's behaviour (below), so that both behave alike.
DUCKDB_MAJOR = int(duckdb.__version__.split(".")[0])

#: How a file dpgate creates is written. DuckDB 2 writes a new file in its own storage format
#: (storage_compatibility_version 'latest'), which DuckDB 1.x cannot open at all; 1.x writes one 1.0+
#: reads. A file that exists keeps the format it has whatever this says (DuckDB reads it from the
#: file), so this only decides what a new file (``Owner(path, create=True)``, ``dpgate demo``) is:
#: one DuckDB 1.4 (the oldest dpgate supports) and later read. What it costs: a VARIANT column
#: needs v1.5.0 storage (DuckDB 1.x refuses one by default too).
STORAGE_CONFIG: dict[str, Any] = {"storage_compatibility_version": "v1.4.0"} if DUCKDB_MAJOR >= 2 else {}

if DUCKDB_MAJOR >= 2:
    LOCKED_CONFIG |= STORAGE_CONFIG
    # DuckDB 2 fails the open transaction on every error; 1.x kept it usable after a parser, binder or
    # catalog error, and dpgate asks the catalog inside its transactions and goes on after such an error
    # (``logins.owner_login``, ``sample_order``: a table that may not exist). An error while running a
    # statement (a conversion, a constraint) fails the transaction on both.
    LOCKED_CONFIG["default_transaction_invalidation_policy"] = "SYNTACTIC_ERRORS_DO_NOT_INVALIDATE"
    # DuckDB 2 raises on integer and DECIMAL ``//``, ``%`` (and ``divide``, ``mod``) by zero where 1.x
    # returned NULL. Inside TRY both give NULL; outside it -- an answer's post-processing, which runs
    # over noisy values after the debit (``HAVING COUNT(*) // 0 > 1``) -- 2.x would fail a statement
    # already charged, depending on the noise. NULL, as on 1.x (``tests/test_duckdb_versions.py``).
    LOCKED_CONFIG["error_on_division_by_zero"] = False


_serials = itertools.count(1)


@dataclass
class Instance:
    path: str
    root: duckdb.DuckDBPyConnection
    ledger_lock: threading.RLock = field(default_factory=threading.RLock)
    users: int = 0
    #: Unique to this opening of the file in this process (catalog oids are per opening).
    serial: int = field(default_factory=lambda: next(_serials))
    #: (monotonic time read, names): the last ``catalog.tables.shadowing_functions``, shared by the
    #: gateways on this opening.
    shadowing: tuple[float, frozenset[str]] | None = None


_instances: dict[str, Instance] = {}
_registry_lock = threading.Lock()


def _key(path: str | os.PathLike) -> str:
    path = os.fspath(path)
    if path == ":memory:":
        raise errors.InterfaceError(
            "dpgate needs a database file, not ':memory:'",
            code="DP101",
            hint="create a DuckDB file, declare its protected tables, and connect to its path",
        )
    return os.path.realpath(path)


def acquire(path: str | os.PathLike, *, create: bool = False) -> Instance:
    """The shared instance for ``path`` (opened on first use)."""
    key = _key(path)
    with _registry_lock:
        inst = _instances.get(key)
        if inst is None:
            if not create and not os.path.exists(key):
                raise errors.InterfaceError(
                    f"No database file at {os.fspath(path)!r}",
                    code="DP101",
                    hint="check the path, or run `dpgate demo --db PATH` to build the demo database",
                )
            if os.path.isdir(key):
                raise errors.InterfaceError(
                    f"{os.fspath(path)!r} is a directory, not a database file", code="DP103",
                    hint="give the path of a DuckDB file (e.g. data/company.duckdb)",
                )  # fmt: skip
            try:
                root = duckdb.connect(key, config=dict(LOCKED_CONFIG))
            except duckdb.Error as e:
                text = str(e)
                if "lock" in text.lower():
                    raise errors.OperationalError(
                        f"Cannot open {os.fspath(path)!r}: another process holds its lock", code="DP102",
                        hint="close other DuckDB connections to this file (in this process they "
                        "must use dpgate, in other processes they hold the file lock)",
                    ) from e  # fmt: skip
                failed = failed_write(e)  # replaying the log at opening needs room on the disk too
                if failed is not None:
                    raise failed from None
                if "newer version of DuckDB" in text:  # DuckDB 1.x and a file DuckDB 2 created in its own format
                    raise errors.InterfaceError(
                        f"{os.fspath(path)!r} was written by a newer DuckDB than this one ({duckdb.__version__}), "
                        "in a storage format it cannot read", code="DP104",
                        hint="open it where a newer DuckDB is installed (dpgate supports 1.4 to 2.x: pip install "
                        "'duckdb>=2,<3'); files dpgate creates are readable by DuckDB 1.4 and later",
                    ) from e  # fmt: skip
                raise errors.InterfaceError(
                    f"{os.fspath(path)!r} is not a DuckDB database file", code="DP104",
                    hint="give the path of a DuckDB file; to bring a CSV or Parquet file in, use "
                    "`dpgate load DB TABLE FILE`",
                ) from e
            inst = Instance(key, root)
            _instances[key] = inst
        else:
            _require_usable(inst)
        inst.users += 1
        return inst


def register(con: duckdb.DuckDBPyConnection, name: str, obj: Any) -> None:
    """``con.register(name, obj)``, after ending a result of ``con.execute`` that is still open.

    DuckDB 2 streams results: one read with ``fetchone()`` stays open until a fetch returns no row,
    and while it is open ``register`` (like ``sql`` and ``create_function``) raises
    ResourceInUseException. Whether it is still open depends on how many rows it had -- data, after
    a debit in a synthetic release -- so it is ended here, always. ``abort()`` stops a read where it
    is (``complete()`` would run it to its end: work, and time, that depend on rows nobody reads);
    a write's result is whole already. DuckDB 1.x materialises every result and has no ``abort``."""
    abort = getattr(con, "abort", None)
    if abort is not None:
        abort()
    con.register(name, obj)


def _require_usable(inst: Instance) -> None:
    """Refuse a new user of an opening DuckDB has stopped: a checkpoint that failed to write (a full disk)
    invalidates the database until every connection to it is closed and the file opened again."""
    try:
        probe = inst.root.cursor()  # its own connection: the root is shared by every thread's cursor() call
        try:
            probe.execute("SELECT 1").fetchall()
        finally:
            probe.close()
    except duckdb.Error as e:
        raise (failed_write(e) or e) from None


#: How DuckDB's I/O errors say that a write failed (not that a file is unreadable or not a database).
_WRITE_FAILURES = ("Could not write", "No space left", "File too large", "Disk quota")


def failed_write(e: duckdb.Error) -> errors.Error | None:
    """The dpgate error for a DuckDB failure to write the file (None: not such a failure).

    A commit whose write-ahead log cannot be written is undone (DP608: nothing of the statement was
    kept); a checkpoint that cannot be written stops the whole database (DP607) until it is opened again,
    when DuckDB replays the log: what was committed stands."""
    text = str(e)
    if isinstance(e, duckdb.FatalException):
        return errors.OperationalError(
            "The database stopped after a failed write and must be reopened (" + text.strip().splitlines()[0][:300]
            + ")", code="DP607",
            hint="free disk space, then reconnect (or restart dpgate serve); what was committed before the failure "
            "stands, debits included (the ledger shows them)",
        )  # fmt: skip
    if (isinstance(e, duckdb.IOException) and any(w in text for w in _WRITE_FAILURES)) or (
            isinstance(e, duckdb.TransactionException) and "Failed to commit" in text):  # fmt: skip
        return errors.OperationalError(
            "The database could not write this statement's changes (" + text.strip().splitlines()[0][:300]
            + "); none of them was kept", code="DP608",
            hint="the database file cannot grow (a full disk or a file size limit?): free disk space, then try "
            "again; a statement already charged keeps its debit (the ledger shows it)",
        )  # fmt: skip
    return None


def forget(path: str | os.PathLike) -> None:
    """Close the instance of ``path`` if one is open in this process (before deleting the file)."""
    with _registry_lock:
        inst = _instances.pop(os.path.realpath(os.fspath(path)), None)
    if inst is not None:
        try:
            inst.root.close()
        except duckdb.Error:
            pass


def release(inst: Instance) -> None:
    """Drop one user of the instance; the last one closes it (and frees the file lock)."""
    with _registry_lock:
        inst.users -= 1
        if inst.users <= 0:
            _instances.pop(inst.path, None)
            try:
                inst.root.close()
            except duckdb.Error:
                pass


#: Connections inside a transaction opened by ``transaction`` (weakly held: an id could be reused
#: by a later connection, which would then never begin its own).
_open: weakref.WeakSet = weakref.WeakSet()


@contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    """One DuckDB transaction on ``con``: committed at the end, rolled back on any exception.

    Inside another ``transaction`` on the same connection it adds nothing: the outer one covers it.
    (DuckDB cannot nest transactions, and a refused BEGIN aborts the transaction it was sent in.)
    """
    if con in _open:
        yield con
        return
    try:
        con.execute("BEGIN TRANSACTION")
    except duckdb.Error as e:  # a database stopped by a failed checkpoint refuses every statement
        raise (failed_write(e) or e) from None
    _open.add(con)
    try:
        yield con
    except BaseException:
        _open.discard(con)
        _rollback(con)
        raise
    _open.discard(con)
    try:
        con.execute("COMMIT")
    except duckdb.Error as e:  # a full disk: DuckDB undid the commit, or stopped the database
        raise (failed_write(e) or e) from None


def _rollback(con: duckdb.DuckDBPyConnection) -> None:
    """ROLLBACK, again when an interrupt meant for the statement lands on it instead.

    A cancel or a timeout can race the statement's end, and DuckDB keeps an interrupt aimed at a
    streaming result for the connection's next call: a ROLLBACK it ended left the transaction
    aborted, and every later statement of the connection failed."""
    for attempt in range(3):
        try:
            con.execute("ROLLBACK")
            return
        except duckdb.InterruptException:
            if attempt == 2:
                raise
        except duckdb.FatalException:  # the database stopped (a failed checkpoint): the error being raised says why
            return


_FLOAT_TYPES = ("DOUBLE", "FLOAT", "REAL", "FLOAT4", "FLOAT8")


def typed_list(name: str, values: list[Any], sql_type: str) -> tuple[str, list[Any]]:
    """SQL reading the list parameter ``$name`` as ``sql_type[]``, and the value to bind to it.

    DuckDB's Python binding turns a float NaN inside a list into NULL (a scalar NaN stays NaN): a
    declared NaN domain value then matched no row, and a NaN cell was released as NULL. A
    list of a floating-point type holding a NaN travels as text instead — Python's
    ``repr`` of a float reads back as the same double — and is read as DOUBLE before ``sql_type``,
    as the list of floats was."""
    if not any(isinstance(v, float) and math.isnan(v) for v in values):
        return f"CAST(${name} AS {sql_type}[])", list(values)
    text = [None if v is None else repr(v) if isinstance(v, float) else str(v) for v in values]
    if sql_type.upper() in _FLOAT_TYPES:
        # an integer too large for a DOUBLE reads as Infinity, as DuckDB casts such an integer
        return f"CAST(CAST(CAST(${name} AS VARCHAR[]) AS DOUBLE[]) AS {sql_type}[])", text
    return f"CAST(CAST(${name} AS VARCHAR[]) AS {sql_type}[])", text  # a text domain's 'nan', as protect read it
