"""What the web pages show, as JSON: an answer, an analyst's budget and history, the owner's reports.

Everything here runs in a worker thread on a session's own connection (an analyst's ``Gateway``,
an owner's ``Owner``), and reads only what that interface already gives its user:

- an answer is ``dpgate.interfaces.render.json_envelope`` of the gateway's ``Result`` (the rows,
  each noisy value's interval, the cost, the population and the notes), as ``dpgate query --mode
  json`` prints it;
- an analyst's budget is their quota row and ``SHOW BUDGET``; their history is their own ledger
  rows (the statement text they sent, what it cost), never another analyst's;
- the owner's reports are ``Owner.budgets``, the ledger, the subjects' remaining ε per protected
  table (a histogram: counts of subjects per range, as ``SHOW BUDGET`` shows them), the release
  registry, ``Owner.quality`` and a synopsis's leaves (a public table).
"""

from __future__ import annotations

import datetime
import math
from decimal import Decimal
from typing import Any

from dpgate.catalog import releases as registry
from dpgate.catalog import tables as catalog
from dpgate.catalog.tables import quote_ident
from dpgate.interfaces import owner_commands
from dpgate.interfaces.render import json_envelope
from dpgate.release import Result

#: Rows of the ledger an analyst's history shows (newest first), and points of the owner's timeline.
HISTORY_ROWS = 200
TIMELINE_POINTS = 4000
#: Bins of a remaining-ε histogram, and leaves of a synopsis the owner page draws.
HISTOGRAM_BINS = 20
MAX_LEAVES = 20_000


def plain(v: Any) -> Any:
    """A value JSON can carry and a browser can read back: non-finite floats and integers past
    2^53 (which JavaScript would round) as strings, times in ISO format."""
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, int):
        return v if abs(v) <= 2**53 else str(v)
    if isinstance(v, float):
        return v if math.isfinite(v) else str(v)
    if isinstance(v, Decimal):
        return plain(float(v))
    if isinstance(v, (datetime.datetime, datetime.date, datetime.time)):
        return v.isoformat()
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, dict):
        return {str(k): plain(x) for k, x in v.items()}
    return str(v)


def answer(result: Result, streamed: list[tuple] | None = None) -> dict[str, Any]:
    """One statement's answer: ``{"columns", "types", "rows", "intervals", "cost", "population",
    "notes"}`` (``dpgate query --mode json``'s envelope), ``message`` for statements without rows.
    ``streamed``: a public statement's rows, which came through the server's row stream."""
    if streamed is not None:
        result = Result(result.columns, result.types, streamed, result.release, result.message)
    env = json_envelope(result)
    if env["intervals"] is None:
        env["intervals"] = []
    return plain(env)


# -- an analyst ---------------------------------------------------------------------------------------
def budget(gateway: Any) -> dict[str, Any]:
    """The analyst's quota and what is left, and ``SHOW BUDGET`` (subjects' budgets as counts per range)."""
    eq, dq, ecap, dcap, es, ds = gateway.ledger.quota(gateway.analyst)
    left_e, left_d = gateway.ledger.remaining(gateway.analyst)
    shown = gateway.run("SHOW BUDGET")
    return plain({
        "analyst": gateway.analyst, "epsilon_quota": eq, "epsilon_spent": es, "epsilon_remaining": left_e,
        "delta_quota": dq, "delta_spent": ds, "delta_remaining": left_d, "epsilon_per_query": ecap,
        "delta_per_query": dcap, "show_budget": {"columns": shown.columns, "rows": shown.rows},
    })  # fmt: skip


def history(gateway: Any) -> dict[str, Any]:
    """The analyst's own ledger rows, newest first: when, what, and what it cost."""
    rows = gateway.con.execute(
        f"SELECT l.entry_id, l.logged_at, l.query_class, l.mechanism, l.table_name, l.epsilon, l.delta, "
        f"r.entry_id IS NOT NULL AS released, l.statement FROM {catalog.SCHEMA}.ledger l "
        f"LEFT JOIN {catalog.SCHEMA}.releases r USING (entry_id) WHERE l.analyst = ? ORDER BY l.entry_id DESC LIMIT ?",
        [gateway.analyst, HISTORY_ROWS],
    ).fetchall()  # fmt: skip
    names = ["entry", "at", "class", "mechanism", "table", "epsilon", "delta", "released", "statement"]
    return {"columns": names, "rows": plain(rows), "limit": HISTORY_ROWS}


def tables(gateway: Any) -> dict[str, Any]:
    """The tables the analyst may ask about, with their columns (what the shell completes)."""
    return {"tables": [{"name": name, "kind": kind, "columns": [c for c, _ in cols]}
                       for name, (kind, cols) in sorted(gateway.tables().items())]}  # fmt: skip


# -- the owner ------------------------------------------------------------------------------------------
def overview(owner: Any) -> dict[str, Any]:
    """Where the budget went: the analysts' quotas, each one's ε over time, the subjects' remaining ε
    per protected table, and the release registry."""
    analysts, tables_ = owner_commands.budgets(owner)
    return plain({
        "analysts": {"columns": analysts.names, "rows": analysts.rows},
        "tables": {"columns": tables_.names, "rows": tables_.rows},
        "timeline": timeline(owner.con),
        "histograms": histograms(owner),
        "releases": releases(owner.con),
        "overcommitted": owner_commands.overcommit_notes(owner),
    })  # fmt: skip


def analysts(owner: Any) -> dict[str, Any]:
    """Every analyst's quota, spending and what is left (``dpgate budget``)."""
    listing, _ = owner_commands.budgets(owner)
    return plain({"columns": listing.names, "rows": listing.rows})


def timeline(con: Any) -> dict[str, Any]:
    """Each analyst's cumulative ε after each debit (at most TIMELINE_POINTS points, evenly thinned)."""
    rows = con.execute(
        f"SELECT analyst, logged_at, sum(epsilon) OVER (PARTITION BY analyst ORDER BY entry_id) AS spent, "
        f"row_number() OVER (PARTITION BY analyst ORDER BY entry_id DESC) AS from_end "
        f"FROM {catalog.SCHEMA}.ledger ORDER BY entry_id"
    ).fetchall()  # fmt: skip
    step = max(1, math.ceil(len(rows) / TIMELINE_POINTS))
    points = [r[:3] for i, r in enumerate(rows) if i % step == 0 or r[3] == 1]  # each analyst's last point stays
    return {"columns": ["analyst", "at", "epsilon_spent"], "rows": points, "debits": len(rows)}


def histograms(owner: Any) -> list[dict[str, Any]]:
    """Per protected table with subjects: how many subjects have how much ε left, in equal bins from 0
    to the largest lifetime ε of its roster."""
    out = []
    for t in sorted(owner.catalog().tables.values(), key=lambda t: t.name):
        if t.kind == "graph":
            continue
        left = "(epsilon_budget - epsilon_spent)"
        (top, n, none_left) = owner.con.execute(
            f"SELECT max(epsilon_budget), count(*), count(*) FILTER (WHERE {left} <= 0) FROM {t.roster_sql}"
        ).fetchone()
        top = float(top or 0.0)
        bins = []
        if n and top > 0:
            width = top / HISTOGRAM_BINS
            found = dict(owner.con.execute(
                f"SELECT least(greatest(floor({left} / ?), 0), ?)::INTEGER AS b, count(*) FROM {t.roster_sql} GROUP BY b",
                [width, HISTOGRAM_BINS - 1],
            ).fetchall())  # fmt: skip
            bins = [[i * width, (i + 1) * width, int(found.get(i, 0))] for i in range(HISTOGRAM_BINS)]
        out.append({"table": t.name, "unit": t.unit, "roster": t.roster, "subjects": int(n),
                    "none_left": int(none_left or 0), "max_epsilon": top, "bins": bins})  # fmt: skip
    return out


def releases(con: Any) -> list[dict[str, Any]]:
    """The release registry, newest first, with what each release holds and which reports it has."""
    out = []
    for r in reversed(registry.records(con)):
        p = r.parameters
        columns = [c["name"] for c in p.get("codings", [])] or list(p.get("columns", []))
        out.append({
            "name": r.name, "kind": r.kind, "sources": r.sources, "mechanism": r.mechanism, "epsilon": r.epsilon,
            "delta": r.delta, "analyst": r.analyst, "rows": r.row_count, "created_at": r.created_at,
            "dropped_at": r.dropped_at, "private": r.private, "columns": columns,
            "quality": r.active and (r.mechanism == "supermodular" or "codings" in p),
            "leaves": r.active and r.mechanism == "privtree",
        })  # fmt: skip
    return out


def quality(owner: Any, name: str) -> dict[str, Any]:
    """``Owner.quality``: the release's 1-, 2- and 3-way marginals against its source (reads raw rows)."""
    return plain(owner.quality(name))


def leaves(owner: Any, name: str) -> dict[str, Any]:
    """A PrivTree synopsis's leaves: each one's box on the synopsis's columns and its noisy count."""
    from dpgate import errors

    rec = registry.active(owner.con, name)
    if rec is None or rec.mechanism != "privtree":
        raise errors.ProgrammingError(f"No PrivTree synopsis named {name!r}", code="DP225",
                                      hint="SHOW RELEASES lists the releases; synopses have kind 'synopsis'")  # fmt: skip
    cols = rec.parameters["columns"]
    bounds = ", ".join(f"{quote_ident(c + '_lo')}, {quote_ident(c + '_hi')}" for c in cols)
    # Since 0.26 a synopsis holds every node of its tree (is_leaf marks the leaves); before, leaves only.
    nodes = rec.parameters.get("rows") == "nodes"
    source = f"main.{quote_ident(rec.name)}" + (" WHERE is_leaf" if nodes else "")
    rows = owner.con.execute(
        f"SELECT {bounds}, count, count_ci_low, count_ci_high FROM {source} "
        f"ORDER BY {'node_id' if nodes else 'leaf_id'} LIMIT {MAX_LEAVES + 1}"
    ).fetchall()  # fmt: skip
    d = len(cols)
    shown = [{"lo": [r[2 * j] for j in range(d)], "hi": [r[2 * j + 1] for j in range(d)], "count": r[2 * d],
              "ci": [r[2 * d + 1], r[2 * d + 2]]} for r in rows[:MAX_LEAVES]]  # fmt: skip
    return plain({"release": rec.name, "source": rec.sources[0], "columns": cols, "lower": rec.parameters["lower"],
                  "upper": rec.parameters["upper"], "leaves": shown, "truncated": len(rows) > MAX_LEAVES})  # fmt: skip
