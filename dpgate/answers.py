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

**When a remembered answer is still the answer** (``Probe.version``): when the owner changed
nothing it depends on since it was released — the declarations of the protected tables it reads
(domains, bounds, options; not the analysts' quotas), the definitions of the tables and views it may
read, and the owner's data generation, which every change of data made through dpgate moves
(``Owner.load``, ``refresh_roster``, ``forget_answers``) — and, if the owner set ``max_age``, it is
not older. Otherwise the statement is drawn afresh and charged, and a note says why.

**No row is read to decide.** A check of the rows (say, hash sums of the columns a statement reads)
would be a free oracle: an analyst who paid once could then ask, as often as they liked and at no
cost, whether any value of a column had changed since — one person's test result, after a nightly
rewrite of the table. So rows changed with plain SQL behind dpgate's back are not noticed: the owner
forgets the answers (``dpgate answers DB --forget``) or sets ``max_age``. What a remembered answer
reveals is the analyst's own history (with sharing, everyone's, which the owner chose to share) and
that the owner acted; its time depends on no row.

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
import uuid
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import duckdb
from sqlglot import exp

import dpgate
from dpgate import database
from dpgate.backends import engine_of
from dpgate.catalog import tables as catalog_mod
from dpgate.catalog.remembered import HELD, TABLE, Memory, evict, recount
from dpgate.frontend.classify import function_name
from dpgate.frontend.dialect import to_sql
from dpgate.frontend.nodes import DPOption, DPOptions
from dpgate.frontend.settings import coerce, literal_value
from dpgate.release import ColumnNoise, ReleaseInfo, Result

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

@dataclass(frozen=True)
class Probe:
    """What a DP statement is remembered under: ``key`` (the statement and its settings) and the part
    of the catalog its answer depends on (``catalog_part``; ``version`` adds the owner's data generation)."""

    key: str
    statement: str
    catalog_part: str
    fresh: bool
    #: The owner's settings and data generation, as read with the lookup (in the planning snapshot),
    #: and the remembered answer found then (a new one replaces it).
    memory: Memory | None = None
    replaces: Any = None

    @property
    def out_of_date(self) -> Remembered | None:
        """The remembered answer this statement is drawn afresh in place of because it is out of date
        (not because ``fresh = true`` asked for a new draw), or None."""
        r = self.replaces
        return r if r is not None and not r.current and not self.fresh else None

    def version(self, generation: Any) -> str:
        """The version of what the answer depends on, under the owner's data generation ``generation``."""
        return _digest([self.catalog_part, str(generation)])


@dataclass(frozen=True)
class Remembered:
    """A remembered answer: when it was released, by which ledger entry, and whether it is current
    (``stale`` says why it is not)."""

    result: Result | None  # None for a fresh draw (not read)
    released_at: dt.datetime
    entry_id: int | None
    analyst: str
    stale: str | None
    size: int = 0  # its stored bytes

    @property
    def current(self) -> bool:
        return self.stale is None

    def when(self) -> str:
        return self.released_at.strftime("%Y-%m-%d %H:%M:%S UTC")  # stored in UTC (``_now``)


# -- the probe ---------------------------------------------------------------------------------
def probe(statement: exp.Expr, session: dict[str, Any], protected: tuple, pin: Any) -> Probe | None:
    """The probe of a classified DP statement (parameters bound), or None if its answer is not
    remembered (it reads the clock or random numbers, or a table outside the database file).
    ``protected`` are the protected tables it reads, ``pin`` the catalog it was classified under.

    Nothing here reads a row: whether an answer is still current is decided from the declarations,
    the schema and the owner's data generation only. A check that read the rows would answer, free
    and as often as asked, whether any value of a column had changed."""
    if any(engine_of(t) != "duckdb" for t in protected) or volatile(statement):
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

    # The relations it names, and the views among them and what those name, to a fixed point.
    views = dict(pin.views or {})
    names = {t.name.lower() for t in statement.find_all(exp.Table)}
    words: set[str] = set()
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
    if words & VOLATILE:  # a view it reads that reads the clock or draws random numbers
        return None
    names |= {t.name.lower() for t in protected} | {t.roster.lower() for t in protected}
    relevant = catalog_mod.relevant(pin.fingerprint, names, views)
    catalog_part = _digest(sorted(
        [list(map(str, e)) for e in relevant if e[0] == "table"]  # the tables' definitions
        + [["view", v, views.get(v) or ""] for v in sorted(views)]
        + [["declared", t.name, repr(t)] for t in protected]  # domains, bounds, options: not the analysts
    ))  # fmt: skip
    return Probe(key, text, catalog_part, fresh)


def volatile(statement: exp.Expr) -> bool:
    """Whether a statement reads the clock or draws random numbers (defence in depth: the allowlist
    keeps them away from protected rows, but a joined public table's expressions may call them)."""
    return any(function_name(f) in VOLATILE for f in statement.find_all(exp.Func))


def _fresh(opt: DPOption) -> bool:
    return coerce("fresh", literal_value(opt.expression, "fresh"))


def _now() -> dt.datetime:
    """The time a release is remembered at, in UTC without a zone (DuckDB's TIMESTAMP)."""
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


# -- lookup and store --------------------------------------------------------------------------
_FIELDS = "result, released_at, entry_id, analyst, version"


def lookup(con: duckdb.DuckDBPyConnection, p: Probe, analyst: str, memory: Memory) -> tuple[Memory, Remembered | None]:
    """What ``analyst`` holds and their remembered answer to ``p`` (under the owner's settings
    ``memory``), with why it is out of date if it is. One statement reads what the analyst holds and
    their own answer, by their own keys only: its time does not depend on what other analysts asked
    or hold. With sharing, a second statement looks for another analyst's current answer when the
    analyst has none."""
    row = con.execute(
        f"SELECT h.answers, h.bytes, a.* FROM (SELECT 1) LEFT JOIN (SELECT * FROM {HELD} WHERE analyst = ?) h ON true "
        f"LEFT JOIN (SELECT {_FIELDS} FROM {TABLE} WHERE key = ? AND analyst = ?) a ON true",
        [analyst, p.key, analyst],
    ).fetchone()  # fmt: skip
    memory = dataclasses.replace(memory, held=int(row[0] or 0), held_bytes=int(row[1] or 0))
    version = p.version(memory.generation)
    found = _remembered(row[2:], p, version, memory)
    if memory.mode == "shared" and (found is None or not found.current) and not p.fresh:
        other = con.execute(
            f"SELECT {_FIELDS} FROM {TABLE} WHERE key = ? AND version = ? ORDER BY released_at DESC LIMIT 1",
            [p.key, version],
        ).fetchone()  # fmt: skip
        theirs = _remembered(other, p, version, memory) if other is not None else None
        if theirs is not None and theirs.current:
            found = theirs
    return memory, found


def _remembered(fields: tuple, p: Probe, version: str, memory: Memory) -> Remembered | None:
    text, released_at, entry_id, who, stored = fields
    if text is None:
        return None
    size = len(text.encode())
    if p.fresh:  # charged whatever: only EXPLAIN PRIVACY says what is remembered, so it is not read
        return Remembered(None, released_at, entry_id, who, "fresh = true asks for a new draw", size)
    result = decode_result(text)
    if result is None:
        return None
    stale = None
    if stored != version:
        stale = "the owner changed data or declarations it reads since"
    elif memory.max_age and (_now() - released_at).total_seconds() > memory.max_age:
        stale = f"the owner keeps answers for {memory.max_age:,} seconds, and it is older"
    return Remembered(result, released_at, entry_id, who, stale, size)


def store(con: duckdb.DuckDBPyConnection, p: Probe, analyst: str, result: Result, replaces: Remembered | None) -> bool:
    """Remember ``result`` as the answer to ``p`` for ``analyst`` (replacing ``replaces``, their own
    earlier one, if any), under the data generation the statement was planned in; False if it is not
    kept (too large, a value it cannot store, remembering off). One transaction: the answer and what
    the analyst holds. The oldest go when that passes a cap (statements of one analyst that run at
    once may pass it by an answer each; a recount after an eviction sets it right)."""
    info, memory = result.release, p.memory
    if memory is None or not memory.on or info is None:
        return False
    text = encode_result(result)
    size = len(text.encode()) if text is not None else 0
    if text is None or size > min(MAX_STORED_BYTES, memory.max_bytes):
        return False
    own = replaces is not None and replaces.analyst == analyst
    held = memory.held + (0 if own else 1)
    held_bytes = memory.held_bytes + size - (replaces.size if own else 0)
    # An UPDATE of the row when there is one (a new draw of the same statement), else an INSERT:
    # INSERT OR REPLACE costs DuckDB a delete and an insert in the key's index, three times as long.
    values = [p.version(memory.generation), p.statement, info.entry_id, _now(), info.epsilon, info.delta, text]
    with database.transaction(con):
        (n,) = con.execute(
            f"UPDATE {TABLE} SET version = ?, statement = ?, entry_id = ?, released_at = ?, epsilon = ?, delta = ?, "
            "result = ? WHERE key = ? AND analyst = ?", [*values, p.key, analyst],
        ).fetchone()  # fmt: skip
        if not n:
            con.execute(f"INSERT INTO {TABLE} VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", [p.key, analyst, *values])
        if held > memory.max_entries or held_bytes > memory.max_bytes:
            evict(con, memory, analyst)
            recount(con, analyst)
        else:
            counts = [held, max(held_bytes, 0)]
            (n,) = con.execute(f"UPDATE {HELD} SET answers = ?, bytes = ? WHERE analyst = ?", [*counts, analyst]).fetchone()
            if not n:
                con.execute(f"INSERT INTO {HELD} VALUES (?, ?, ?)", [analyst, *counts])
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
    return f"drawn afresh and charged: the answer released at {r.when()} is out of date ({r.stale})"


# -- the stored form ---------------------------------------------------------------------------
def _tag(v: Any) -> Any:
    """JSON for the values json does not write itself (``json.dumps``'s ``default``)."""
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
    raise TypeError(type(v).__name__)


_UNTAG = {
    "$dec": Decimal, "$ts": dt.datetime.fromisoformat, "$date": dt.date.fromisoformat,
    "$time": dt.time.fromisoformat, "$uuid": uuid.UUID, "$bytes": base64.b64decode,
    "$td": lambda a: dt.timedelta(days=a[0], seconds=a[1], microseconds=a[2]),
}  # fmt: skip


def _untag(d: dict) -> Any:
    """``json.loads``'s ``object_hook``: a tagged value back to its type (a value's own dict with one
    of these keys alone would be read as one: a DP answer's cells are keys and numbers)."""
    if len(d) == 1:
        ((tag, inner),) = d.items()
        if tag in _UNTAG:
            return _UNTAG[tag](inner)
    return d


def encode_result(result: Result) -> str | None:
    """The JSON a result is remembered as, or None if a value has a type it does not keep."""
    info = dataclasses.asdict(result.release)
    info.pop("remembered", None)
    try:
        return json.dumps({"columns": list(result.columns), "types": list(result.types), "rows": result.rows,
                           "message": result.message, "release": info}, default=_tag)  # fmt: skip
    except (TypeError, ValueError):
        return None


def decode_result(text: str) -> Result | None:
    """The result a stored JSON describes (None if it is not one this version reads). Rows and
    intervals come back as tuples (json writes them as lists)."""
    try:
        d = json.loads(text, object_hook=_untag)
        info = d["release"]
        info["columns"] = {k: ColumnNoise(**v) for k, v in info["columns"].items()}
        info["intervals"] = [{k: tuple(x) for k, x in row.items()} for row in info["intervals"]]
        fields = {f.name for f in dataclasses.fields(ReleaseInfo)}
        release = ReleaseInfo(**{k: v for k, v in info.items() if k in fields})
        return Result(d["columns"], d["types"], [tuple(r) for r in d["rows"]], release, d.get("message"))
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
