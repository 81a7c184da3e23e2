"""Where answers are remembered, and the owner's settings for it (``dpgate.answers`` reads and writes
the answers themselves).

The owner chooses the mode — ``own`` (each analyst's answers for themselves, the default), ``shared``
(any analyst's answer is free for everyone: the subjects pay nothing more) or ``off`` — and how many
answers each analyst keeps. The cap is per analyst: a shared cap would let one analyst's statements
push another's answers out, and the other see that in what they are charged.

Whether a remembered answer is still current never depends on the rows: it is the declarations, the
schema, and the owner's **data generation**, which every change of data made through dpgate moves
(``Owner.load``, ``refresh_roster``, ``forget_answers``) and which ``max_age`` can complement. A check
that read the rows would tell an analyst, free and as often as asked, whether a value had changed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import duckdb

from dpgate import errors
from dpgate.catalog.tables import SCHEMA, schema_table_exists

TABLE = f"{SCHEMA}.answers"
#: How answers are remembered: per analyst, shared between analysts, or not at all.
MODES = ("own", "shared", "off")
#: The owner's settings and their defaults: the mode, the answers and the stored bytes each analyst
#: keeps at most (their oldest go first), and the age after which an answer is drawn afresh (0: none).
DEFAULTS: dict[str, Any] = {"mode": "own", "max_entries": 1_000, "max_bytes": 16 << 20, "max_age": 0}
LIMITS = {"max_entries": 10_000_000, "max_bytes": 1 << 40, "max_age": 100 * 365 * 86_400}
_KEYS = {"mode": "answers_mode", "max_entries": "answers_max", "max_bytes": "answers_max_bytes",
         "max_age": "answers_max_age", "generation": "answers_generation"}  # fmt: skip
#: What each analyst holds (answers, stored bytes), kept beside the answers so that a lookup reads
#: one row of its own: counting the answers table would take longer the more other analysts hold.
HELD = f"{SCHEMA}.answers_held"
DDL = f"""CREATE TABLE IF NOT EXISTS {TABLE} (
    key VARCHAR NOT NULL, analyst VARCHAR NOT NULL, version VARCHAR NOT NULL, statement VARCHAR NOT NULL,
    entry_id BIGINT, released_at TIMESTAMP NOT NULL, epsilon DOUBLE, delta DOUBLE, result VARCHAR NOT NULL,
    PRIMARY KEY (key, analyst));
CREATE TABLE IF NOT EXISTS {HELD} (analyst VARCHAR PRIMARY KEY, answers BIGINT NOT NULL, bytes BIGINT NOT NULL)"""


def ensure(con: duckdb.DuckDBPyConnection) -> None:
    """The tables of remembered answers, in a database made by an older dpgate too (idempotent)."""
    con.execute(DDL)


def recount(con: duckdb.DuckDBPyConnection, analyst: str | None = None) -> None:
    """Set what an analyst (or everyone) holds from the answers themselves."""
    where, params = ("WHERE analyst = ?", [analyst]) if analyst is not None else ("", [])
    con.execute(f"DELETE FROM {HELD} {where}", params)
    con.execute(f"INSERT INTO {HELD} SELECT analyst, count(*), sum(strlen(result)) FROM {TABLE} {where} "
                "GROUP BY analyst", params)  # fmt: skip


@dataclass(frozen=True)
class Memory:
    """The owner's settings and the data generation (with the catalog), and what the analyst holds
    (with the lookup)."""

    mode: str = DEFAULTS["mode"]
    max_entries: int = DEFAULTS["max_entries"]
    max_bytes: int = DEFAULTS["max_bytes"]
    max_age: int = DEFAULTS["max_age"]
    generation: str = "0"
    #: The analyst's answers and their stored bytes, as the lookup saw them (for the caps).
    held: int = 0
    held_bytes: int = 0

    @property
    def on(self) -> bool:
        return self.mode != "off" and self.max_entries > 0 and self.max_bytes > 0


def settings(con: duckdb.DuckDBPyConnection) -> Memory:
    """The owner's settings as stored now (the defaults where none is)."""
    return from_catalog(dict(con.execute(f"SELECT key, value FROM {SCHEMA}.settings WHERE starts_with(key, 'answers')")
                             .fetchall()))  # fmt: skip


def from_catalog(stored: dict[str, str]) -> Memory:
    """The settings from ``dpgate.settings``'s rows (``Catalog.settings``: every change to them moves the
    catalog version, so a session reads them with the catalog); a value that is not one goes to its default."""
    values = {name: stored.get(key) for name, key in _KEYS.items()}
    out: dict[str, Any] = {"generation": values["generation"] or "0"}
    out["mode"] = values["mode"] if values["mode"] in MODES else DEFAULTS["mode"]
    for name in ("max_entries", "max_bytes", "max_age"):
        try:
            out[name] = int(values[name]) if values[name] is not None else DEFAULTS[name]
        except ValueError:
            out[name] = DEFAULTS[name]
    return Memory(**out)


def set_settings(con: duckdb.DuckDBPyConnection, mode: str | None = None, **caps: int | None) -> None:
    """Change the mode or a cap (in the caller's transaction); a lower cap drops the oldest at once."""
    if mode is not None:
        if mode not in MODES:
            raise errors.ProgrammingError(
                f"Unknown answer memory mode {mode!r}", code="DP322",
                hint="the modes are " + ", ".join(MODES) + " (own: each analyst's answers for themselves; "
                "shared: every analyst's answers for everyone; off: nothing is remembered)",
            )  # fmt: skip
        _put(con, _KEYS["mode"], mode)
        if mode == "off":
            con.execute(f"DELETE FROM {TABLE}")
            con.execute(f"DELETE FROM {HELD}")
    for name, value in caps.items():
        if value is None:
            continue
        if name not in LIMITS:
            raise errors.ProgrammingError(f"Unknown answer memory setting {name!r}", code="DP322",
                                          hint="the settings are mode, " + ", ".join(LIMITS))  # fmt: skip
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= LIMITS[name]:
            raise errors.ProgrammingError(
                f"Invalid {name} of remembered answers {value!r}", code="DP322",
                hint=f"{name} is a whole number from 0 to {LIMITS[name]:,}" + (" (0: no limit)" if name == "max_age"
                                                                               else " (0 remembers nothing)"),
            )  # fmt: skip
        _put(con, _KEYS[name], str(value))
    evict(con, settings(con))
    recount(con)


def new_generation(con: duckdb.DuckDBPyConnection) -> None:
    """The owner changed data through dpgate: every remembered answer is drawn afresh when next asked
    (in the caller's transaction). The generation is a counter: it says only that the owner acted."""
    row = con.execute(f"SELECT value FROM {SCHEMA}.settings WHERE key = ?", [_KEYS["generation"]]).fetchone()
    _put(con, _KEYS["generation"], str(int(row[0]) + 1 if row and str(row[0]).isdigit() else 1))


def _put(con: duckdb.DuckDBPyConnection, key: str, value: str) -> None:
    con.execute(f"INSERT OR REPLACE INTO {SCHEMA}.settings (key, value) VALUES (?, ?)", [key, value])


def clear(con: duckdb.DuckDBPyConnection, analyst: str | None = None) -> int:
    """Forget remembered answers (one analyst's, or all); returns how many. The ledger keeps what was paid."""
    if not schema_table_exists(con, "answers"):
        return 0
    where, params = ("WHERE analyst = ?", [analyst]) if analyst is not None else ("", [])
    n = con.execute(f"SELECT count(*) FROM {TABLE} {where}", params).fetchone()[0]
    con.execute(f"DELETE FROM {TABLE} {where}", params)
    recount(con, analyst)
    return int(n)


def summary(con: duckdb.DuckDBPyConnection) -> list[tuple[str, int, int, Any]]:
    """(analyst, answers remembered, their stored bytes, latest release time) per analyst."""
    if not schema_table_exists(con, "answers"):
        return []
    return con.execute(
        f"SELECT analyst, count(*), sum(strlen(result)), strftime(max(released_at), '%Y-%m-%d %H:%M:%S') "
        f"|| ' UTC' FROM {TABLE} GROUP BY analyst ORDER BY analyst"
    ).fetchall()  # fmt: skip


def evict(con: duckdb.DuckDBPyConnection, memory: Memory, analyst: str | None = None) -> None:
    """Keep each analyst's latest answers within ``max_entries`` and ``max_bytes``. The caps are per
    analyst: a shared cap would let one analyst's statements push another's answers out, and the
    other see that in what they are charged."""
    where, params = ("WHERE analyst = ?", [analyst]) if analyst is not None else ("", [])
    con.execute(
        f"DELETE FROM {TABLE} WHERE rowid IN (SELECT rowid FROM (SELECT rowid, row_number() OVER w AS n, "
        f"sum(strlen(result)) OVER w AS bytes FROM {TABLE} {where} WINDOW w AS (PARTITION BY analyst ORDER BY "
        "released_at DESC, rowid DESC)) WHERE n > ? OR bytes > ?)", [*params, memory.max_entries, memory.max_bytes],
    )  # fmt: skip
