"""Answers remembered: a DP statement asked again is answered free with the answer already released.

Giving an analyst a noisy answer they were already given is post-processing: it costs no privacy and
no budget. So dashboards that refresh, notebooks that re-run and re-typed queries do not drain
budgets, and "ask ten times and average" is no longer possible by accident: the second ask returns
the first answer. ``OPTIONS (fresh = true)`` (or ``SET dp_fresh = true``) asks for a new draw and pays
for it; the new answer then replaces the remembered one.

**What identifies a statement** (``Probe.key``): the statement as parsed, with its parameters bound
and its options sorted (``fresh`` left out), every session setting, and dpgate's version. The key is
kept per analyst; the owner may share answers between analysts (``mode = 'shared'``: another
analyst's remembered answer is then free for everyone, which costs the subjects nothing more).

**When a remembered answer is still the answer** (``Probe.version``): when nothing it depended on
changed since it was released — the owner's declarations (the catalog version), the definitions of
the tables and views the statement may read, and the rows of the tables it reads: their count and
two independent 64-bit hash sums of the columns the statement may read (and of each protected
table's privacy unit). Otherwise the statement is answered afresh and charged, and a note says why.

**What a remembered answer reveals.** Whether a statement is answered from memory depends on the
analyst's own history (with sharing, on everyone's, which the owner chose to share) and on whether
the tables changed since: that the owner changed a table is treated as a public fact, as it is when
a stale stored sample order is redrawn. The version's scan reads the same columns as the statement's
exact pass, so its time depends on the rows as the exact pass's does.

Answers of statements that write a table (releases), of test seeds (not private), of statements
that read the clock or draw random numbers (``VOLATILE``), and of statements over tables outside the
database file (Spark) are not remembered.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import hashlib
import json
import math
import uuid
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import duckdb
from sqlglot import exp

import dpgate
from dpgate import errors
from dpgate.backends import engine_of
from dpgate.catalog import tables as catalog_mod
from dpgate.catalog.tables import SCHEMA, Catalog, quote_ident
from dpgate.frontend.classify import function_name
from dpgate.frontend.dialect import to_sql
from dpgate.frontend.nodes import DPOption, DPOptions
from dpgate.memo import Memo
from dpgate.release import ColumnNoise, ReleaseInfo, Result

TABLE = f"{SCHEMA}.answers"
#: How answers are remembered: per analyst, shared between analysts, or not at all.
MODES = ("own", "shared", "off")
DEFAULT_MODE = "own"
#: Remembered answers kept per analyst at most (their oldest go first); the owner changes it.
DEFAULT_MAX = 10_000
MAX_LIMIT = 10_000_000
#: An answer whose stored form is larger than this is not remembered (a top-k of 100,000 keys).
MAX_STORED_BYTES = 4 << 20
#: Functions whose value changes from one run to the next (the clock, random numbers): a statement
#: calling one is answered afresh each time, as its exact answer may differ with no change to the data.
VOLATILE = frozenset({
    "current_date", "current_time", "current_timestamp", "current_localtime", "current_localtimestamp",
    "localtime", "localtimestamp", "now", "today", "get_current_time", "get_current_timestamp",
    "transaction_timestamp", "rand", "random", "uuid", "gen_random_uuid", "uuidv4", "uuidv7", "setseed",
})  # fmt: skip
#: Session settings that change no answer (the shell's confirmation threshold; ``fresh`` itself).
_NOT_IN_KEY = frozenset({"confirm_share", "fresh"})

DDL = f"""CREATE TABLE IF NOT EXISTS {TABLE} (
    key VARCHAR NOT NULL, analyst VARCHAR NOT NULL, version VARCHAR NOT NULL, statement VARCHAR NOT NULL,
    entry_id BIGINT, released_at TIMESTAMP NOT NULL, epsilon DOUBLE, delta DOUBLE, result VARCHAR NOT NULL,
    PRIMARY KEY (key, analyst))"""


def ensure(con: duckdb.DuckDBPyConnection) -> None:
    """The table of remembered answers, in a database made by an older dpgate too (idempotent)."""
    con.execute(DDL)


@dataclass(frozen=True)
class Probe:
    """What a DP statement is remembered under: ``key`` (the statement and its settings) and how to
    read the ``version`` of what its answer depends on (``version_sql`` over the tables it reads)."""

    key: str
    statement: str
    catalog_part: str
    version_sql: str
    fresh: bool

    def version(self, con: duckdb.DuckDBPyConnection) -> str:
        """The version of the catalog and rows the statement depends on, as ``con`` sees them now."""
        rows = con.execute(self.version_sql).fetchall() if self.version_sql else []
        return _digest([self.catalog_part, sorted((str(r[0]), str(r[1]), str(r[2]), str(r[3])) for r in rows)])


@dataclass(frozen=True)
class Remembered:
    """A remembered answer: when it was released, by which ledger entry, and whether it is current."""

    result: Result
    released_at: dt.datetime
    entry_id: int | None
    analyst: str
    current: bool

    def when(self) -> str:
        return self.released_at.strftime("%Y-%m-%d %H:%M:%S UTC")  # stored in UTC (``_now``)


# -- settings ----------------------------------------------------------------------------------
def settings(con: duckdb.DuckDBPyConnection) -> tuple[str, int]:
    """The owner's (mode, most entries kept)."""
    rows = dict(
        con.execute(
            f"SELECT key, value FROM {SCHEMA}.settings WHERE key IN ('answers_mode', 'answers_max')"
        ).fetchall()
    )
    mode = rows.get("answers_mode") or DEFAULT_MODE
    try:
        most = int(rows.get("answers_max") or DEFAULT_MAX)
    except ValueError:
        most = DEFAULT_MAX
    return (mode if mode in MODES else DEFAULT_MODE), most


def set_settings(con: duckdb.DuckDBPyConnection, mode: str | None = None, max_entries: int | None = None) -> None:
    """Change the mode or the cap (in the caller's transaction); a lower cap drops the oldest at once."""
    if mode is not None:
        if mode not in MODES:
            raise errors.ProgrammingError(
                f"Unknown answer memory mode {mode!r}", code="DP322",
                hint="the modes are " + ", ".join(MODES) + " (own: each analyst's answers for themselves; "
                "shared: every analyst's answers for everyone; off: nothing is remembered)",
            )  # fmt: skip
        _put(con, "answers_mode", mode)
        if mode == "off":
            con.execute(f"DELETE FROM {TABLE}")
    if max_entries is not None:
        if isinstance(max_entries, bool) or not isinstance(max_entries, int) or not 0 <= max_entries <= MAX_LIMIT:
            raise errors.ProgrammingError(
                f"Invalid cap of remembered answers {max_entries!r}", code="DP322",
                hint=f"a whole number from 0 to {MAX_LIMIT:,} (0 remembers nothing)",
            )  # fmt: skip
        _put(con, "answers_max", str(max_entries))
        _evict(con, max_entries)


def _put(con: duckdb.DuckDBPyConnection, key: str, value: str) -> None:
    con.execute(f"DELETE FROM {SCHEMA}.settings WHERE key = ?", [key])
    con.execute(f"INSERT INTO {SCHEMA}.settings VALUES (?, ?)", [key, value])


def clear(con: duckdb.DuckDBPyConnection, analyst: str | None = None) -> int:
    """Forget remembered answers (one analyst's, or all); returns how many. The ledger keeps what was paid."""
    where, params = ("WHERE analyst = ?", [analyst]) if analyst is not None else ("", [])
    n = con.execute(f"SELECT count(*) FROM {TABLE} {where}", params).fetchone()[0]
    con.execute(f"DELETE FROM {TABLE} {where}", params)
    return int(n)


def summary(con: duckdb.DuckDBPyConnection) -> list[tuple[str, int, Any]]:
    """(analyst, answers remembered, latest release time) per analyst."""
    return con.execute(
        f"SELECT analyst, count(*), strftime(max(released_at), '%Y-%m-%d %H:%M:%S') || ' UTC' FROM {TABLE} "
        "GROUP BY analyst ORDER BY analyst"
    ).fetchall()


def _evict(con: duckdb.DuckDBPyConnection, most: int, analyst: str | None = None) -> None:
    """Keep each analyst's ``most`` latest answers. The cap is per analyst: a shared cap would let one
    analyst's statements push another's answers out, and the other see that in what they are charged."""
    where, params = ("WHERE analyst = ?", [analyst]) if analyst is not None else ("", [])
    con.execute(
        f"DELETE FROM {TABLE} WHERE rowid IN (SELECT rowid FROM (SELECT rowid, row_number() OVER (PARTITION BY "
        f"analyst ORDER BY released_at DESC, rowid DESC) AS n FROM {TABLE} {where}) WHERE n > ?)", [*params, most],
    )  # fmt: skip


# -- the probe ---------------------------------------------------------------------------------
_COLUMNS = Memo(64)  # (file, instance, catalog fingerprint) -> {table: (name, [columns])}


def probe(
    con: duckdb.DuckDBPyConnection, statement: exp.Expr, session: dict[str, Any], cat: Catalog,
    protected: tuple, pin: Any, instance: tuple,
) -> Probe | None:  # fmt: skip
    """The probe of a classified DP statement (parameters bound), or None if its answer is not
    remembered (a table outside the database file). ``protected`` are the protected tables it reads."""
    if any(engine_of(t) != "duckdb" for t in protected):
        return None
    if any(function_name(f) in VOLATILE for f in statement.find_all(exp.Func)):
        return None
    stated = statement.copy()
    options: list[tuple[str, str]] = []
    fresh = bool(session.get("fresh"))
    for node in list(stated.find_all(DPOptions)):
        kept = []
        for opt in node.expressions:
            if isinstance(opt, DPOption) and opt.option_name == "fresh":
                fresh = _fresh(opt)
            else:
                kept.append(opt)
                options.append((opt.option_name, to_sql(opt.expression)))
        node.set("expressions", sorted(kept, key=lambda o: o.option_name))
    text = to_sql(stated)
    settings_part = sorted((k, repr(v)) for k, v in session.items() if k not in _NOT_IN_KEY)
    key = _digest([dpgate.__version__, text, sorted(options), settings_part])

    # What the statement may read: the relations it names (or names in a string, for table
    # functions), the views among them and what those name, to a fixed point.
    views = dict(pin.views or {})
    names = {t.name.lower() for t in statement.find_all(exp.Table)}
    names |= {lit.this.lower() for lit in statement.find_all(exp.Literal) if lit.is_string}
    words = catalog_mod._words(text) | {w for lit in statement.find_all(exp.Literal) if lit.is_string
                                        for w in catalog_mod._words(lit.this)}  # fmt: skip
    grown = True
    while grown:
        grown = False
        for view, sql in views.items():
            if view in names and sql:
                more = catalog_mod._words(sql)
                if not more <= words:
                    words |= more
                    names |= more
                    grown = True
    for t in protected:
        names.add(t.name.lower())
        words.add(t.unit.lower())
    relevant = catalog_mod.relevant(pin.fingerprint, names, views)
    catalog_part = _digest(sorted(
        [list(map(str, e)) for e in relevant if e[0] != "view"]
        + [["view", v, views.get(v) or ""] for v in sorted(views)]
    ))  # fmt: skip

    columns = _main_tables(con, (*instance, pin.fingerprint))
    parts = []
    for name in sorted(names & set(columns)):
        real, cols = columns[name]
        read = [c for c in cols if c.lower() in words]
        rel = f"main.{quote_ident(real)}"
        if read:
            args = ", ".join(quote_ident(c) for c in read)
            parts.append(f"SELECT {_lit(name)}, count(*), sum(hash({args})::HUGEINT), "
                         f"sum(hash(0, {args})::HUGEINT) FROM {rel}")  # fmt: skip
        else:
            parts.append(f"SELECT {_lit(name)}, count(*), 0, 0 FROM {rel}")
    return Probe(key, text, catalog_part, " UNION ALL ".join(parts), fresh)


def _fresh(opt: DPOption) -> bool:
    from dpgate.frontend.settings import coerce, literal_value

    return coerce("fresh", literal_value(opt.expression, "fresh"))


def _main_tables(con: duckdb.DuckDBPyConnection, memo_key: tuple) -> dict[str, tuple[str, list[str]]]:
    """The base tables of the main schema and their columns, per catalog (memoized on its fingerprint)."""
    found = _COLUMNS.get(memo_key)
    if found is None:
        rows = con.execute(
            "SELECT c.table_name, c.column_name FROM duckdb_columns() c JOIN duckdb_tables() t "
            "ON t.table_oid = c.table_oid WHERE t.database_name = current_database() AND t.schema_name = 'main' "
            "AND NOT t.temporary ORDER BY c.table_name, c.column_index"
        ).fetchall()  # fmt: skip
        found = {}
        for table, column in rows:
            found.setdefault(table.lower(), (table, []))[1].append(column)
        _COLUMNS.put(memo_key, found)
    return found


def _now() -> dt.datetime:
    """The time a release is remembered at, in UTC without a zone (DuckDB's TIMESTAMP)."""
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)


def _lit(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


# -- lookup and store --------------------------------------------------------------------------
def lookup(con: duckdb.DuckDBPyConnection, p: Probe, analyst: str, mode: str) -> Remembered | None:
    """The remembered answer to ``p`` for ``analyst`` (their own first; with sharing, anyone's latest),
    with whether it is current (its version is the data's now). Reads the rows only if there is one."""
    if mode == "off":
        return None
    row = con.execute(
        f"SELECT result, released_at, entry_id, analyst, version FROM {TABLE} WHERE key = ? "
        "AND (analyst = ? OR ?) ORDER BY analyst = ? DESC, released_at DESC LIMIT 1",
        [p.key, analyst, mode == "shared", analyst],
    ).fetchone()  # fmt: skip
    if row is None:
        return None
    result = decode_result(row[0])
    if result is None:
        return None
    return Remembered(result, row[1], row[2], row[3], current=row[4] == p.version(con))


def store(con: duckdb.DuckDBPyConnection, p: Probe, analyst: str, version: str, result: Result, most: int) -> bool:
    """Remember ``result`` as the answer to ``p`` for ``analyst`` (replacing theirs); False if it is not
    kept (too large, a value it cannot store, a cap of 0)."""
    info = result.release
    if most <= 0 or info is None:
        return False
    text = encode_result(result)
    if text is None or len(text) > MAX_STORED_BYTES:
        return False
    con.execute(f"DELETE FROM {TABLE} WHERE key = ? AND analyst = ?", [p.key, analyst])
    con.execute(
        f"INSERT INTO {TABLE} VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [p.key, analyst, version, p.statement, info.entry_id, _now(), info.epsilon, info.delta, text],
    )
    _evict(con, most, analyst)
    return True


def served(r: Remembered, analyst: str, epsilon_remaining: float, delta_remaining: float) -> Result:
    """A remembered answer as this statement's result: charged nothing, with what is left now and a note.
    Another analyst's answer (shared by the owner) does not say whose it was."""
    info = r.result.release
    own = r.analyst == analyst
    who = f"you at {r.when()} (ledger entry {r.entry_id})" if own else f"another analyst at {r.when()}"
    note = (f"the answer released to {who}, remembered: nothing was charged; OPTIONS (fresh = true) draws a new "
            "one and pays for it")  # fmt: skip
    notes = [note] + [n for n in info.notes if not n.startswith("the answer released")]
    release = dataclasses.replace(
        info, epsilon=0.0, delta=0.0, epsilon_remaining=epsilon_remaining, delta_remaining=delta_remaining,
        notes=notes, remembered=r.when(), entry_id=r.entry_id if own else None,
    )  # fmt: skip
    return dataclasses.replace(r.result, release=release)


def stale_note(r: Remembered) -> str:
    return (f"drawn afresh and charged: the tables or declarations it reads changed since the answer released "
            f"at {r.when()}")  # fmt: skip


# -- the stored form ---------------------------------------------------------------------------
def _enc(v: Any) -> Any:
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, int):
        return v if abs(v) < 2**53 else {"$int": str(v)}
    if isinstance(v, float):
        return v if math.isfinite(v) else {"$float": repr(v)}
    if isinstance(v, Decimal):
        return {"$dec": str(v)}
    if isinstance(v, dt.datetime):
        return {"$ts": v.isoformat()}
    if isinstance(v, dt.date):
        return {"$date": v.isoformat()}
    if isinstance(v, dt.time):
        return {"$time": v.isoformat()}
    if isinstance(v, dt.timedelta):
        return {"$td": [v.days, v.seconds, v.microseconds]}
    if isinstance(v, uuid.UUID):
        return {"$uuid": str(v)}
    if isinstance(v, (bytes, bytearray)):
        return {"$bytes": base64.b64encode(bytes(v)).decode()}
    if isinstance(v, (list, tuple)):
        return {"$tuple": [_enc(x) for x in v]} if isinstance(v, tuple) else [_enc(x) for x in v]
    if isinstance(v, dict):
        return {"$dict": [[_enc(k), _enc(x)] for k, x in v.items()]}
    raise TypeError(type(v).__name__)


_DEC = {
    "$int": int, "$float": float, "$dec": Decimal, "$ts": dt.datetime.fromisoformat,
    "$date": dt.date.fromisoformat, "$time": dt.time.fromisoformat, "$uuid": uuid.UUID,
    "$td": lambda a: dt.timedelta(days=a[0], seconds=a[1], microseconds=a[2]),
    "$bytes": base64.b64decode,
}  # fmt: skip


def _dec(v: Any) -> Any:
    if isinstance(v, list):
        return [_dec(x) for x in v]
    if isinstance(v, dict):
        ((tag, inner),) = v.items()
        if tag == "$tuple":
            return tuple(_dec(x) for x in inner)
        if tag == "$dict":
            return {_dec(k): _dec(x) for k, x in inner}
        return _DEC[tag](inner)
    return v


def encode_result(result: Result) -> str | None:
    """The JSON a result is remembered as, or None if a value has a type it does not keep."""
    info = dataclasses.asdict(result.release)
    info.pop("remembered", None)
    try:
        return json.dumps({
            "columns": list(result.columns), "types": list(result.types), "rows": [_enc(tuple(r)) for r in result.rows],
            "message": result.message, "release": _enc(info),
        })  # fmt: skip
    except (TypeError, ValueError):
        return None


def decode_result(text: str) -> Result | None:
    """The result a stored JSON describes (None if it is not one this version reads)."""
    try:
        d = json.loads(text)
        info = _dec(d["release"])
        info["columns"] = {k: ColumnNoise(**v) for k, v in info["columns"].items()}
        info["intervals"] = [{k: tuple(x) for k, x in row.items()} for row in info["intervals"]]
        fields = {f.name for f in dataclasses.fields(ReleaseInfo)}
        release = ReleaseInfo(**{k: v for k, v in info.items() if k in fields})
        return Result(d["columns"], d["types"], [tuple(_dec(r)) for r in d["rows"]], release, d.get("message"))
    except (KeyError, TypeError, ValueError, json.JSONDecodeError):
        return None
