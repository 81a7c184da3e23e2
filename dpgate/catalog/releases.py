"""The release registry: the lineage of every table dpgate publishes from protected data.

One row per release (``sql/schema.sql``): its name, kind, source tables, mechanism and
parameters, what it cost, who made it, when. Later release kinds (histograms, synopses,
anonymised tables) record themselves the same way. A release's table is ordinary and public;
dropping it keeps the registry row, so the lineage of everything ever published stays.
"""

from __future__ import annotations

from contextlib import contextmanager

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import duckdb

from dpgate import database, errors, resources
from dpgate.catalog.tables import SCHEMA, quote_ident, schema_table_exists

TABLE = f"{SCHEMA}.release_registry"


@dataclass(frozen=True)
class ReleaseRecord:
    entry_id: int
    name: str
    kind: str
    sources: list[str]
    mechanism: str
    parameters: dict[str, Any]
    epsilon: float
    delta: float
    analyst: str
    row_count: int
    created_at: datetime
    dropped_at: datetime | None = None
    dropped_by: str | None = None
    #: False when its ledger entry was made with a fixed test seed: its noise can be reproduced
    private: bool = True

    @property
    def active(self) -> bool:
        return self.dropped_at is None


def exists(con: duckdb.DuckDBPyConnection) -> bool:
    return schema_table_exists(con, "release_registry")


def ensure(con: duckdb.DuckDBPyConnection) -> None:
    """Create the registry in a database made by an older dpgate (the schema DDL is idempotent)."""
    if not exists(con):
        con.execute(resources.read_sql("schema.sql"))


_COLUMNS = (
    "entry_id, name, kind, sources, mechanism, parameters, epsilon, delta, analyst, row_count, "
    "created_at, dropped_at, dropped_by, "
    f"coalesce((SELECT l.private FROM {SCHEMA}.ledger l WHERE l.entry_id = {SCHEMA}.release_registry.entry_id), true)"
)


def _record(row: tuple) -> ReleaseRecord:
    (entry_id, name, kind, sources, mechanism, parameters, eps, delta, analyst, rows, created, dropped, by, private) = row
    return ReleaseRecord(
        int(entry_id), name, kind, json.loads(sources), mechanism, json.loads(parameters), float(eps), float(delta),
        analyst, int(rows), created, dropped, by, bool(private),
    )  # fmt: skip


def records(con: duckdb.DuckDBPyConnection, *, include_dropped: bool = True) -> list[ReleaseRecord]:
    if not exists(con):
        return []
    where = "" if include_dropped else " WHERE dropped_at IS NULL"
    rows = con.execute(f"SELECT {_COLUMNS} FROM {TABLE}{where} ORDER BY entry_id").fetchall()
    return [_record(r) for r in rows]


def active(con: duckdb.DuckDBPyConnection, name: str) -> ReleaseRecord | None:
    if not exists(con):
        return None
    row = con.execute(
        f"SELECT {_COLUMNS} FROM {TABLE} WHERE name = ? AND dropped_at IS NULL", [name.lower()]
    ).fetchone()
    return _record(row) if row else None


def record(
    con: duckdb.DuckDBPyConnection, *, entry_id: int, name: str, kind: str, sources: list[str], mechanism: str,
    parameters: dict[str, Any], epsilon: float, delta: float, analyst: str, row_count: int,
) -> None:  # fmt: skip
    """Register a release (in the caller's transaction, with the table it describes), with the bytes its
    tables hold beyond their types' widths (``string_bytes``: long text, lists' elements; for the
    release caps, which the types alone do not tell)."""
    parameters = {**parameters, "string_bytes": string_bytes(con, [name, *parameters.get("extra_tables", [])])}
    con.execute(
        f"INSERT INTO {TABLE} (entry_id, name, kind, sources, mechanism, parameters, epsilon, delta, analyst, "
        "row_count) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [entry_id, name.lower(), kind, json.dumps(sources), mechanism, json.dumps(parameters, default=str),
         repr(float(epsilon)), repr(float(delta)), analyst, int(row_count)],
    )  # fmt: skip


def string_bytes(con: duckdb.DuckDBPyConnection, tables: list[str]) -> int:
    """What ``tables`` (schema main) hold beyond the width of their columns' types (``caps.width``, a
    list counted as one 16-byte value): the characters of text values longer than 12 bytes, which
    DuckDB keeps outside the value's 16, and a list's elements (16 bytes each and their long text for
    a list of text, 8 for any other)."""
    total = 0
    for table in tables:
        parts, lists = [], []
        for name, kind in con.execute(
            "SELECT column_name, data_type FROM duckdb_columns() WHERE database_name = current_database() AND "
            "schema_name = 'main' AND table_name = ?", [str(table)]).fetchall():  # fmt: skip
            c = quote_ident(name)
            if kind == "VARCHAR":
                parts.append(f"coalesce(sum(CASE WHEN strlen({c}) > 12 THEN strlen({c}) END), 0)")
            elif kind == "VARCHAR[]":  # each element, from the list unnested (no lambda: plain SQL on 1.x and 2.x)
                lists.append(f"SELECT coalesce(sum(16 + CASE WHEN strlen(x) > 12 THEN strlen(x) ELSE 0 END), 0) FROM "
                             f"(SELECT unnest({c}) AS x FROM main.{quote_ident(str(table))})")  # fmt: skip
            elif kind.endswith("[]"):
                parts.append(f"8 * coalesce(sum(len({c})), 0)")
        if parts:
            total += int(con.execute(f"SELECT {' + '.join(parts)} FROM main.{quote_ident(str(table))}").fetchone()[0])
        for sql in lists:
            total += int(con.execute(sql).fetchone()[0])
    return total


def drop(con: duckdb.DuckDBPyConnection, name: str, *, by: str, owner: bool = False) -> ReleaseRecord:
    """Drop a release's table and mark it dropped; only its creator or the owner may."""
    rec = active(con, name)
    if rec is None:
        raise errors.ProgrammingError(
            f"No release named {name!r}", code="DP225", hint="SHOW RELEASES lists the releases"
        )
    if not owner and rec.analyst != by:
        raise errors.PolicyError(
            f"Release {rec.name} was made by {rec.analyst}; only its creator or the data owner may drop it",
            code="DP320",
            hint="ask its creator or the owner",
        )
    with transaction(con):
        # A table the owner has protected since is not the release's any more: else an
        # analyst's DROP SYNTHETIC TABLE would delete a protected table that had been a release's side table.
        protected = {str(r[0]).lower() for r in con.execute(f"SELECT table_name FROM {SCHEMA}.protected_tables").fetchall()}
        for part in [rec.name, *(rec.parameters or {}).get("extra_tables", [])]:  # e.g. a set-valued release's itemsets
            if str(part).lower() in protected:
                continue
            quoted = '"' + str(part).replace('"', '""') + '"'
            con.execute(f"DROP TABLE IF EXISTS main.{quoted}")
        con.execute(
            f"UPDATE {TABLE} SET dropped_at = current_timestamp, dropped_by = ? WHERE entry_id = ?", [by, rec.entry_id]
        )
    return rec


@contextmanager
def transaction(con: duckdb.DuckDBPyConnection):
    """A release's tables and its registry row: written together, or not at all (inside the
    statement's own transaction when there is one, ``database.transaction``).

    A write the file cannot take (a full disk: DuckDB writes a large table's blocks before the
    commit) is a dpgate error that says so (DP607, DP608): nothing of the release is kept, and a
    debit made for it stands."""
    try:
        with database.transaction(con):
            yield con
    except duckdb.Error as e:
        mapped = database.failed_write(e)
        if mapped is None:
            raise
        raise mapped from None
