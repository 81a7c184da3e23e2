"""Caps on what an analyst's releases may hold in the shared database file.

A release (``CREATE SYNTHETIC TABLE``) writes a public table into the owner's file: at ε = 1e-6 and
``rows = 9999999`` one statement wrote about 80 MB in 9 seconds, and nothing stopped the next one.
Each analyst therefore has three caps, checked inside the debit's transaction, before anything is
charged, from public facts only (the statement's options, the roster's size, the release registry):

``release_rows``
    the rows one release may write: the ``rows`` it asks for (times the rows each may write: a sequence
    up to ``max_length``), or without it the most its source could give (the subjects on the roster
    times the rows each contributes); a release whose size has a public bound whatever its source (a
    PrivTree synopsis: its node cap) stops at what the rows and bytes caps allow instead;
``releases``
    the releases the analyst holds (made and not dropped, and those being made);
``release_bytes``
    the estimated bytes the analyst's releases hold, this one included: rows times the width of a row
    (``width``: the bytes DuckDB stores a value of each column's type in, before compression; text
    longer than 12 bytes and a list's elements beside), its side tables included (a DiffPart
    release's itemsets and supports, a sequence release's model, a supermodular release's hierarchy).

A release that would pass a cap is refused (DP343, DP344, DP345) and charges nothing; the hint says the
cap and what the analyst holds. The database's defaults are kept in ``dpgate.settings``, an analyst's
own caps in ``dpgate.release_caps``; the owner changes either (``Owner.set_release_caps``, the policy's
``[release_caps]`` and ``[analysts.NAME]`` entries, ``dpgate analyst add|set --release-rows ...``).
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass
from typing import Any

import duckdb

from dpgate import errors
from dpgate.catalog.tables import SCHEMA, schema_table_exists

#: The caps, with the defaults of a database whose owner has set none.
DEFAULTS: dict[str, int] = {
    "release_rows": 1_000_000,  # about 7 s and 10 MB per column on a 2-core machine
    "releases": 100,
    "release_bytes": 1 << 30,  # 1 GiB estimated (uncompressed): DuckDB's files hold a fraction of it
}
#: What a cap may be set to (a count of rows or bytes DuckDB's BIGINT holds with room to add).
CAP_LIMIT = 2**62
TABLE = f"{SCHEMA}.release_caps"
_SETTING = "release_cap_"  # dpgate.settings keys of the database's defaults


@dataclass(frozen=True)
class ReleaseSize:
    """What a release may write, from its plan: ``rows`` (those asked for times ``rows_each``, the rows
    written for each; None: the most its source gives, ``per_subject`` rows for each subject on the
    roster, at most ``bound``) of ``row_bytes`` estimated bytes each. ``rows_option``: the release
    takes ``WITH (rows = N)`` (the hint says what else would fit when it does not). Its side tables
    add ``side_row_bytes`` for each of its rows and ``side_bytes`` in all."""

    rows: int | None
    per_subject: int
    row_bytes: int
    columns: int
    rows_each: int = 1
    bound: int | None = None
    rows_option: bool = False
    side_row_bytes: int = 0
    side_bytes: int = 0
    least: int = 1
    extra: int = 0  # rows beside one a subject's (a supermodular release's '*' row)


@dataclass(frozen=True)
class Usage:
    """What an analyst's releases hold: how many, their rows and estimated bytes (those being made in
    this process included: ``making`` of them, reserving ``making_bytes``)."""

    releases: int
    rows: int
    bytes: int
    making: int = 0
    making_bytes: int = 0


# -- widths ------------------------------------------------------------------------------------
_WIDTHS = {
    "BOOLEAN": 1, "TINYINT": 1, "UTINYINT": 1, "SMALLINT": 2, "USMALLINT": 2, "INTEGER": 4, "UINTEGER": 4,
    "FLOAT": 4, "REAL": 4, "DATE": 4, "BIGINT": 8, "UBIGINT": 8, "DOUBLE": 8, "TIME": 8, "TIMESTAMP": 8,
    "TIMESTAMP WITH TIME ZONE": 8, "TIMESTAMP_S": 8, "TIMESTAMP_MS": 8, "TIMESTAMP_NS": 8, "HUGEINT": 16,
    "UHUGEINT": 16, "UUID": 16, "INTERVAL": 16,
}  # fmt: skip
#: A string of up to 12 bytes is stored inline in 16; a longer one adds its bytes.
_STRING = 16


def width(sql_type: str, longest: int | None = None) -> int:
    """Estimated bytes of one value of ``sql_type`` (``longest``: a text column's longest value in bytes)."""
    t = str(sql_type).upper().strip()
    if t in _WIDTHS:
        return _WIDTHS[t]
    m = re.match(r"DECIMAL\((\d+)", t)
    if m:
        return 8 if int(m.group(1)) <= 18 else 16
    if t.startswith(("VARCHAR", "TEXT", "STRING", "BLOB")):
        return _STRING + (longest if longest is not None and longest > 12 else 0)
    return _STRING  # lists, structs and the rest: a reference at least


def release_size(plan: Any) -> ReleaseSize | None:
    """The size a statement's release may reach, from its plan (None: the statement writes no table).

    A release with coded columns (MST, PrivBayes, independent columns) writes those; the others write
    at most about one column per column of their source (and an id or two): the source's columns are
    the estimate."""
    if plan.writes is None:
        return None
    codings = tuple(getattr(plan, "codings", ()) or ())
    if codings:
        widths = [width(c.sql_type, _longest(getattr(c, "values", None))) for c in codings]
    elif getattr(plan, "row_types", None):
        widths = [_width(t) for t in plan.row_types]
    else:
        widths = [width(c.type) for c in plan.table.columns.values()]
    rows = getattr(plan, "rows", None)
    each = max(1, int(getattr(plan, "rows_each", 1)))
    extra = int(getattr(plan, "rows_extra", 0))
    bound = getattr(plan, "row_bound", None)
    sides = tuple(getattr(plan, "side_sizes", ()) or ())
    per_row = sum(sum(_width(t) for t in types) for n, types in sides if n is None)
    fixed = sum(int(n) * sum(_width(t) for t in types) for n, types in sides if n is not None)
    return ReleaseSize(None if rows is None else int(rows) * each, max(1, int(plan.max_rows)), max(1, sum(widths)),
                       len(widths), each, None if bound is None else int(bound),
                       bool(getattr(plan, "rows_option", False)), per_row, fixed,
                       max(1, int(getattr(plan, "row_least", 1))), extra)  # fmt: skip


def _width(column: str | tuple) -> int:
    """A column a plan states: its type; (its type, the public values it may hold: a declared domain,
    a hierarchy's labels), whose longest text counts as ``width`` counts it; or ("LIST", n, element):
    a list of at most n elements, each an element as stated here (the bytes held count a list's
    elements: ``releases.string_bytes``)."""
    if isinstance(column, tuple) and column[0] == "LIST":
        return _STRING + int(column[1]) * max(8, _width(column[2]))
    if isinstance(column, tuple):
        return width(column[0], _longest(column[1]))
    return width(column)


def _longest(values: Any) -> int | None:
    if not values:
        return None
    return max((len(str(v).encode()) for v in values if v is not None), default=0)


# -- storage -----------------------------------------------------------------------------------
def ensure(con: duckdb.DuckDBPyConnection) -> None:
    """The table of analysts' own caps (a column left NULL follows the database's default)."""
    con.execute(
        f"CREATE TABLE IF NOT EXISTS {TABLE} (analyst VARCHAR PRIMARY KEY, release_rows BIGINT, releases BIGINT, "
        "release_bytes BIGINT)"
    )


def _exists(con: duckdb.DuckDBPyConnection) -> bool:
    return schema_table_exists(con, "release_caps")


def check_value(name: str, value: Any) -> int:
    """A cap's value as the owner gives it: a whole number from 0 to ``CAP_LIMIT`` (DP346)."""
    if name not in DEFAULTS:
        raise errors.PolicyError(f"Unknown release cap {name!r}", code="DP346",
                                 hint="the caps are " + ", ".join(DEFAULTS))  # fmt: skip
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= CAP_LIMIT:
        raise errors.PolicyError(
            f"{name} must be a whole number from 0 to {CAP_LIMIT:,}, got {value!r}"[:200], code="DP346",
            hint=f"e.g. {name} = {DEFAULTS[name]:,} (the default); 0 allows no release",
        )  # fmt: skip
    return value


def set_caps(con: duckdb.DuckDBPyConnection, analyst: str | None, caps: dict[str, Any]) -> None:
    """Set caps (in the caller's transaction): an analyst's own, or with ``analyst`` None the database's
    defaults. A value None in ``caps`` puts back the default (the database's, or the built-in one)."""
    checked = {k: None if v is None else check_value(k, v) for k, v in caps.items()}
    if analyst is None:
        for name, value in checked.items():
            key = _SETTING + name
            if value is None:
                con.execute(f"DELETE FROM {SCHEMA}.settings WHERE key = ?", [key])
            else:
                con.execute(f"INSERT OR REPLACE INTO {SCHEMA}.settings (key, value) VALUES (?, ?)", [key, str(value)])
        return
    if not con.execute(f"SELECT 1 FROM {SCHEMA}.analysts WHERE name = ?", [analyst]).fetchone():
        raise errors.PolicyError(f"Unknown analyst {analyst!r}", code="DP302",
                                 hint="add the analyst first (Owner.add_analyst, dpgate analyst add)")  # fmt: skip
    ensure(con)
    con.execute(f"INSERT INTO {TABLE} (analyst) VALUES (?) ON CONFLICT DO NOTHING", [analyst])
    for name, value in checked.items():
        con.execute(f"UPDATE {TABLE} SET {name} = ? WHERE analyst = ?", [value, analyst])


def caps_of(con: duckdb.DuckDBPyConnection, analyst: str) -> dict[str, int]:
    """The caps that hold for ``analyst``: their own, else the database's default, else ``DEFAULTS``."""
    out = dict(DEFAULTS)
    for key, value in con.execute(
        f"SELECT key, value FROM {SCHEMA}.settings WHERE starts_with(key, ?)", [_SETTING]
    ).fetchall():  # fmt: skip
        name = key[len(_SETTING):]
        if name in out:
            out[name] = int(value)
    if _exists(con):
        row = con.execute(f"SELECT release_rows, releases, release_bytes FROM {TABLE} WHERE analyst = ?",
                          [analyst]).fetchone()  # fmt: skip
        if row is not None:
            for name, value in zip(("release_rows", "releases", "release_bytes"), row):
                if value is not None:
                    out[name] = int(value)
    return out


# -- what an analyst holds ---------------------------------------------------------------------
#: Releases debited in this process and not written or abandoned yet: (database, opening) ->
#: {ledger entry: (analyst, rows, bytes)}. One process holds a database file (DuckDB's lock), so
#: this sees every release in the making; the debit's ledger lock orders the checks.
_PENDING: dict[tuple, dict[int, tuple[str, int, int]]] = {}
_PENDING_LOCK = threading.Lock()


def reserve(key: tuple, entry_id: int, analyst: str, rows: int, size: int) -> None:
    with _PENDING_LOCK:
        _PENDING.setdefault(key, {})[entry_id] = (analyst, rows, size)


def settle(key: tuple, entry_id: int) -> None:
    """The release of ``entry_id`` is written (the registry counts it now) or abandoned."""
    with _PENDING_LOCK:
        pending = _PENDING.get(key)
        if pending is not None:
            pending.pop(entry_id, None)
            if not pending:
                _PENDING.pop(key, None)


def usage(con: duckdb.DuckDBPyConnection, analyst: str, key: tuple | None = None) -> Usage:
    """The releases ``analyst`` holds (active in the registry, and in the making in this process), their
    rows as recorded, and their estimated bytes as the tables stand (rows times the widths of their
    columns' types: a release's side tables count too), with the long text and lists' elements their
    registry rows recorded (``releases.string_bytes``; measured now for a release made before they
    were recorded)."""
    from dpgate.catalog import releases as registry

    count = rows = size = 0
    if registry.exists(con):
        held = con.execute(
            f"SELECT name, parameters, row_count FROM {registry.TABLE} WHERE analyst = ? AND dropped_at IS NULL",
            [analyst],
        ).fetchall()
        names: list[str] = []
        for name, parameters, row_count in held:
            count += 1
            rows += int(row_count)
            try:
                recorded = json.loads(parameters) if parameters else {}
            except ValueError:
                recorded = {}
            tables = [str(name).lower(), *(str(n).lower() for n in recorded.get("extra_tables", []))]
            if "string_bytes" in recorded:  # long text, lists' elements (``releases.record``)
                size += int(recorded["string_bytes"])
            else:  # made before 0.30.0 recorded them: measured from its public tables, as record() does
                size += registry.string_bytes(con, tables)
            names += tables
        if names:
            for _, n, types in con.execute(
                "SELECT t.table_name, any_value(t.estimated_size), list(c.data_type) FROM duckdb_tables() t "
                "JOIN duckdb_columns() c ON c.database_name = t.database_name AND c.schema_name = t.schema_name "
                "AND c.table_name = t.table_name WHERE t.database_name = current_database() AND t.schema_name = "
                "'main' AND list_contains(?, lower(t.table_name)) GROUP BY t.table_name",
                [names],
            ).fetchall():  # fmt: skip
                size += int(n or 0) * sum(width(t) for t in types)
    making = making_bytes = 0
    if key is not None:
        with _PENDING_LOCK:
            for who, r, b in _PENDING.get(key, {}).values():
                if who == analyst:
                    count, rows, size = count + 1, rows + r, size + b
                    making, making_bytes = making + 1, making_bytes + b
    return Usage(count, rows, size, making, making_bytes)


def check(con: duckdb.DuckDBPyConnection, analyst: str, release: ReleaseSize, *, population: int,
          key: tuple | None = None) -> tuple[int, int]:  # fmt: skip
    """Refuse (DP343-DP345, free: the caller's debit rolls back) a release past one of ``analyst``'s caps;
    return the (rows, estimated bytes) it may write."""
    caps = caps_of(con, analyst)
    cap_rows = caps["release_rows"]
    each = release.rows_each
    if release.rows is not None:
        rows = release.rows
        said = f"rows = {rows // each:,}" + (f" of up to {each:,} rows each" if each > 1 else "")
    elif release.bound is not None:  # its size does not follow the roster: it stops at what the caps allow
        rows = min(release.bound, cap_rows)
        said = f"it writes up to {release.bound:,} and stops at what your caps allow"
    else:
        rows = population * release.per_subject + release.extra
        said = (f"without rows = ..., up to the {population:,} subjects on the roster"
                + (f" × {release.per_subject:,} rows each" if release.per_subject > 1 else "")
                + (f" and {release.extra:,} more" if release.extra else "") + f" = {rows:,} rows")
    held = usage(con, analyst, key)
    cap_bytes = caps["release_bytes"]
    row_bytes = release.row_bytes + release.side_row_bytes  # a row of the release and its side tables' share
    fit = max(0, (cap_bytes - held.bytes - release.side_bytes) // row_bytes)  # the rows the bytes cap leaves room for
    drop = ("DROP SYNTHETIC TABLE a release of yours (SHOW RELEASES lists them), or " if held.releases > held.making
            else "wait for your releases being made, or " if held.making else "")  # fmt: skip
    if rows > cap_rows or rows < release.least:  # (rows < 1: a cap of 0, which allows no release)
        wants = (f"This release needs at least {release.least:,} rows to be worth its charge ({said})"
                 if rows < release.least else f"This release may write {rows:,} rows ({said})")
        raise errors.PolicyError(
            f"{wants}; your cap on the rows of one release is {cap_rows:,}",
            code="DP343", hint=_fit_hint(release, population, min(cap_rows, fit)) + "; the data owner sets the cap "
            "(release_rows: Owner.set_release_caps, dpgate analyst set ... --release-rows N); nothing was charged",
            rows=rows, cap=cap_rows,
        )  # fmt: skip
    if held.releases + 1 > caps["releases"]:
        making = f" ({held.making:,} being made)" if held.making else ""
        raise errors.PolicyError(
            f"You hold {held.releases:,} release(s){making}; your cap is {caps['releases']:,}", code="DP344",
            hint=drop + "ask the data owner for a larger cap (releases); nothing was charged",
            held=held.releases, cap=caps["releases"],
        )  # fmt: skip
    if release.bound is not None and release.rows is None:
        rows = max(release.least, min(rows, fit))
    size = rows * row_bytes + release.side_bytes
    if held.bytes + size > cap_bytes:
        narrower = release.columns > 1 and release.rows_option and each == 1  # a release that takes ``columns``
        if fit >= release.least:
            advice = _fit_hint(release, population, fit) + (", or fewer columns" if narrower else "") + ", or "
        elif narrower:
            advice = "your caps leave room for no row of this width: ask for fewer columns, or "
        else:
            advice = _fit_hint(release, population, fit) + "; "
        making = f" ({_mb(held.making_bytes)} of it reserved by releases being made)" if held.making else ""
        raise errors.PolicyError(
            f"This release may hold about {_mb(size)} ({rows:,} rows of {release.columns} column(s), ~{row_bytes} "
            f"bytes a row{' with its side tables' if release.side_row_bytes or release.side_bytes else ''}) and your "
            f"releases hold about {_mb(held.bytes)}{making}: your cap is {_mb(cap_bytes)}",
            code="DP345",
            hint=advice + drop + "ask the data owner for a larger cap (release_bytes); nothing was charged",
            bytes=size, held=held.bytes, cap=cap_bytes,
        )  # fmt: skip
    return rows, size


def _fit_hint(release: ReleaseSize, population: int, cap_rows: int) -> str:
    """What the analyst could ask for within ``cap_rows``: fewer rows where the release takes
    ``rows = N`` (for a sequence release, shorter sequences too), else fewer rows per subject
    (``max_rows_contributed``), else nothing of theirs (a release with a public ``bound`` fits
    itself to the caps down to its ``least`` rows)."""
    if release.bound is not None:  # refused only below its least rows (else it fits itself to the caps)
        return (f"your caps leave room for fewer than the {release.least:,} rows this release needs to be worth its "
                "charge")
    if cap_rows < 1:
        return "your caps leave room for no row of this release"
    if release.rows_option and cap_rows // release.rows_each >= 1:
        return f"ask for at most rows = {cap_rows // release.rows_each:,} in WITH (...)"
    if release.rows_option:  # not one whole sequence of max_length rows fits
        return f"ask for rows = 1 and max_length = {cap_rows:,} or less in WITH (...)"
    per = cap_rows // max(population, 1)
    if 1 <= per < release.per_subject:
        return f"ask for max_rows_contributed = {per:,} or less in WITH (...) (this release takes no rows = ...)"
    return (f"this release takes no rows = ..., and even one row for each of the {population:,} subjects on the roster "
            "passes your cap")


def _mb(n: int) -> str:
    return f"{n / 2**20:,.1f} MiB" if n >= 2**20 else f"{n:,} bytes"
