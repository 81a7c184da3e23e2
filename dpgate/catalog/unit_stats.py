"""Per-table facts about the privacy unit column, reused across queries while the table is unchanged.

Whether any subject has more rows than a bound, and whether rows exist whose unit is NULL or not
on the roster, depends on the table and the roster, not on the query. Counting rows per subject
for every query was most of a DP query's time on large tables. ``current`` answers from a cache
keyed by a **fingerprint** of the unit column and of the roster — the row count, the sum of the
64-bit hashes of the unit values (as the sums of their two 32-bit halves) and the sum of the
values themselves (for an integer unit; else of a second hash) — one scan, no grouping — and
recomputes the facts (one GROUP BY) when the fingerprint is new.

Soundness: the facts are a function of the multiset of unit values of the table and of the
roster's units. Any change to either changes the row count or, except with probability about
2^-64 over the hash (the table's changes come from its owner, not from analysts, who cannot write
to protected tables), one of the sums; a change that keeps the multiset
(rows moved between columns other than the unit, updates of other columns) cannot change the
facts. The cache is content-addressed, so a stale entry is never used for changed data, and
the caller reads the fingerprint and the rows in one transaction (one snapshot). These facts only
choose the execution path: a path chosen from them computes exactly the statistics the full
per-subject pass would (``backends.duckdb``); they never change what is charged or released.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from dpgate.catalog import sample_order
from dpgate.catalog.tables import INTEGER_TYPES, ProtectedTable, quote_ident
from dpgate.memo import Memo

_CACHE = Memo(256)  # fingerprint -> UnitStats


@dataclass(frozen=True)
class UnitStats:
    most_rows: int  # the most rows any (non-NULL) unit has in the table
    null_unit_rows: int  # rows whose unit is NULL
    off_roster_units: int  # distinct non-NULL units of the table that are not on the roster
    histogram: tuple[tuple[int, int], ...] = ()  # (rows, units with that many rows), non-NULL units

    @property
    def units(self) -> int:
        return sum(u for _, u in self.histogram)

    def over(self, bound: int) -> int:
        """Units with more than ``bound`` rows in the whole table."""
        return sum(u for n, u in self.histogram if n > bound)


_quote = quote_ident


def _second(column: str, sql_type: str | None) -> str:
    """The fingerprint's second sum: the values themselves for an integer unit of at most 64 bits
    (DuckDB sums them exactly into a HUGEINT, at a fifth of a hash's cost; a cast to HUGEINT first
    would cost as much as the hash), else a second, independent hash (a HUGEINT sum could overflow)."""
    if sql_type is not None and sql_type.upper() in INTEGER_TYPES - {"HUGEINT", "UHUGEINT"}:
        return f"sum({column})"
    return f"sum(hash({column}, 7919))::HUGEINT"


def _sums_sql(column: str, sql_type: str | None, relation: str, later: int | None = None) -> str:
    """The row count, the sum of the column's 64-bit hashes and the second sum (``_second``), in one scan;
    with ``later``, also how many rows have ``added > later`` (a roster's units added after a generation).

    The hash sum is taken as the sums of its high and low 32-bit halves, which together give it
    exactly (sum = high * 2^32 + low); DuckDB adds 32-bit integers in 64 bits, where a sum of 64-bit
    hashes needs 128-bit additions (about twice the time at 10M rows)."""
    extra = f", count(*) FILTER (WHERE added > {int(later)})" if later is not None else ""
    inner = f"hash({column}) AS __h, {column} AS __u" + (", added" if later is not None else "")
    return (
        f"SELECT count(*), sum(CAST(__h >> 32 AS UINTEGER)), sum(CAST(__h & 4294967295 AS UINTEGER)), "
        f"{_second('__u', sql_type)}{extra} FROM (SELECT {inner} FROM {relation})"
    )


@dataclass(frozen=True)
class Reading:
    """What ``read`` found in one snapshot: the table's definition (its CREATE statement, "" unless a
    base table of main), the fingerprint (the facts' cache key), and how many roster units were
    added after the generation asked about (None when not asked)."""

    definition: str
    key: tuple
    added_after: int | None = None


def read(
    con: duckdb.DuckDBPyConnection, table: ProtectedTable, order_id: int | None = None, generation: int | None = None
) -> Reading:
    """The table's definition, the fingerprint of its unit column and roster and, with ``generation``,
    the roster units added after it: one statement, so one snapshot and one round trip (they were
    four). The sums are those of ``fingerprint``; with ``order_id`` (see there) the table is not scanned."""
    u = _quote(table.unit)
    t = f"main.{_quote(table.name)}"
    col = table.columns.get(table.unit)
    unit_type = col.type if col is not None else None
    definition = (
        "(SELECT max(sql) FROM duckdb_tables() WHERE database_name = current_database() AND schema_name = 'main' "
        "AND lower(table_name) = lower(?))"
    )
    roster = f"({_sums_sql('unit', unit_type, table.roster_table_sql, generation)})"
    if order_id is None:
        row = con.execute(f"SELECT {definition}, t.*, r.* FROM ({_sums_sql(u, unit_type, t)}) t, {roster} r",
                          [table.name]).fetchone()  # fmt: skip
        text, sums, rest = "" if row[0] is None else str(row[0]), row[1:5], row[5:]
        part: tuple = (text, *(int(v or 0) for v in sums))
    else:
        row = con.execute(f"SELECT {definition}, ({sample_order.DATABASE_PATH_SQL}), r.* FROM {roster} r",
                          [table.name]).fetchone()  # fmt: skip
        text, rest = "" if row[0] is None else str(row[0]), row[2:]
        part = ("sample_order", int(order_id), "" if row[1] is None else str(row[1]))
    key = (table.name, table.unit, table.roster, part, tuple(int(v or 0) for v in rest[:4]))
    return Reading(text, key, int(rest[4]) if generation is not None else None)


def fingerprint(con: duckdb.DuckDBPyConnection, table: ProtectedTable, order_id: int | None = None) -> tuple:
    """(rows, a hash sum, a second sum) of the table's unit column and of the roster's units, with the
    table's definition: an ALTER can change how units compare (a collation on the unit column merges
    units) without changing their hashes or sums.

    With ``order_id``, the build id of a stored sample order that the caller found lined up with
    the rows in this snapshot (``catalog.sample_order``), the table's part is that id and the
    database file's path: the table's units are then, position by position, the order's, which
    that id names (an order's rows are written once, by its build, in dpgate's own schema; a copy
    of the file carries the same build ids, hence the path; an order is only used with the table
    definition it was built on: ``sample_order.registered``)."""
    return read(con, table, order_id).key


def current(
    con: duckdb.DuckDBPyConnection, table: ProtectedTable, order_id: int | None = None, reading: Reading | None = None
) -> UnitStats:
    """The facts for the table as ``con`` sees it now (one light scan when cached); ``reading``: what
    ``read`` found, in the caller's snapshot, for the same ``order_id``."""
    key = reading.key if reading is not None else fingerprint(con, table, order_id)
    hit = _CACHE.get(key)
    if hit is not None:
        return hit
    u = _quote(table.unit)
    t = f"main.{_quote(table.name)}"
    per_unit = f"(SELECT {u} AS u, count(*) AS n FROM {t} GROUP BY {u})"
    most, nulls, off = con.execute(
        f"SELECT coalesce(max(n) FILTER (WHERE u IS NOT NULL), 0), coalesce(sum(n) FILTER (WHERE u IS NULL), 0), "
        f"count(*) FILTER (WHERE u IS NOT NULL AND NOT EXISTS (SELECT 1 FROM {table.roster_table_sql} r "
        f"WHERE r.unit = u)) FROM {per_unit}"
    ).fetchone()
    hist = con.execute(f"SELECT n, count(*) FROM {per_unit} WHERE u IS NOT NULL GROUP BY n ORDER BY n").fetchall()
    stats = UnitStats(int(most), int(nulls), int(off), tuple((int(n), int(c)) for n, c in hist))
    _CACHE.put(key, stats)
    return stats


def clear() -> None:
    """Forget every cached entry (tests)."""
    _CACHE.clear()
