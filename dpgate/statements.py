"""Statements that are not DP queries: public reads, SET, SHOW, DESCRIBE, EXPLAIN PRIVACY, DROP.

``HANDLERS`` maps a statement's kind (``frontend.classify``) to its handler ``(gateway, classified,
catalog) -> Result``. None of them reads a protected row or charges anything: SHOW BUDGET shows
subjects' budgets only as counts per range, EXPLAIN PRIVACY plans without reading rows, and a
public statement runs in a transaction that is rolled back. The gateway keeps the DP pipeline.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import duckdb
from sqlglot import exp

from dpgate import errors
from dpgate.catalog import releases as registry
from dpgate.catalog import shares
from dpgate.catalog.tables import Catalog
from dpgate.frontend.classify import Classified
from dpgate.frontend.dialect import to_duckdb, to_sql
from dpgate.frontend.settings import literal_value
from dpgate.ledger import dec
from dpgate.queries.base import explain_head
from dpgate.release import Result


def public(gw: Any, statement: exp.Expr, params: Any) -> Result:
    """A statement that reads no protected row, run as written (in a transaction that is rolled back)."""
    sql = to_duckdb(statement)
    reader = gw.public_reader
    try:
        if reader is not None:
            reader.start()
        cur = gw.con.execute(sql, params if params else None)
        desc = cur.description or []
        names, types = [d[0] for d in desc], [str(d[1]) for d in desc]
        zoned = [i for i, d in enumerate(desc) if str(d[1]) == "TIMESTAMP WITH TIME ZONE"]
        convert = None
        if zoned:
            cur, convert = _zoned(gw.con, sql, params, len(desc), zoned)
        if reader is not None:
            rows = reader.read(cur, names, types, convert)
        else:
            rows = cur.fetchall() if convert is None else [convert(r) for r in cur.fetchall()]
    except duckdb.Error as e:
        raise _map_duckdb_error(e) from e
    return Result(names, types, rows, None)

def _zoned(con: duckdb.DuckDBPyConnection, sql: str, params: Any, width: int, zoned: list[int]):
    """The statement again with its TIMESTAMPTZ columns as UTC timestamps, and the map of a row
    to aware datetimes in UTC.

    DuckDB's own conversion of TIMESTAMPTZ needs the pytz package, which dpgate does not
    depend on.
    """
    names = [f"c{i}" for i in range(width)]
    cols = [f"timezone('UTC', {n})" if i in zoned else n for i, n in enumerate(names)]
    wrapped = f"SELECT {', '.join(cols)} FROM ({sql}) AS q({', '.join(names)})"
    cur = con.execute(wrapped, params if params else None)
    utc = datetime.timezone.utc

    def convert(row: tuple) -> tuple:
        # DuckDB gives a year before 1 (or after 9999) as text, which Python's datetime cannot hold: it stays text
        return tuple(v.replace(tzinfo=utc) if i in zoned and isinstance(v, datetime.datetime) else v
                     for i, v in enumerate(row))  # fmt: skip

    return cur, convert

def _set(gw: Any, classified: Classified, cat: Catalog) -> Result:
    statement = classified.statement
    changed = []
    for item in statement.expressions:
        if not isinstance(item, exp.SetItem) or item.args.get("kind") not in (None, "SESSION"):
            raise errors.NotSupportedError(
                f"{to_sql(statement)} is not a dpgate session setting", code="DP221",
                hint="use SET dp_epsilon = 0.5 (and other dp_ settings)",
            )  # fmt: skip
        eq = item.this
        if not isinstance(eq, exp.EQ):
            raise errors.ProgrammingError("SET needs name = value", code="DP205")
        name = eq.this.name
        gw.session.set(name, literal_value(eq.expression, name))
        changed.append(f"{name.lower()} = {gw.session.values[name.lower()[3:]]}")
    return Result([], [], [], None, message="SET " + ", ".join(changed))

def _show_budget(gw: Any, classified: Classified, cat: Catalog) -> Result:
    """Every budget a query draws on: the analyst's ε and δ quota, and the subjects' ε and δ.

    Subjects' budgets are shown as counts per range (never an individual's): ε in buckets,
    δ as how many subjects can still take part in key selection at the session δ.
    """
    eq, dq, ecap, dcap, es, ds = gw.ledger.quota(gw.analyst)
    eps_left, delta_left = gw.ledger.remaining(gw.analyst)
    session_eps, session_delta = gw.session.values["epsilon"], gw.session.values["delta"]
    rows: list[tuple] = [
        (
            f"analyst {gw.analyst}",
            eps_left,
            delta_left,
            None,
            f"your quota ε={float(eq):g}, δ={float(dq):g}; per query ε≤{float(ecap):g}, δ≤{float(dcap):g}; "
            f"session ε={session_eps:g}, δ={session_delta:g}",
        )
    ]
    spaces: dict[str, list[str]] = {}
    for name in sorted(cat.tables):
        spaces.setdefault(cat.tables[name].roster, []).append(name)
    for roster, names in sorted(spaces.items()):
        table = cat.tables[names[0]]
        label = roster.removeprefix("roster_")
        if table.kind == "graph":
            left = gw.ledger.graph_remaining(table)
            rows.append((f"{label}: edge budget", left, None, None,
                         "edge-level DP: one ε budget shared by every potential edge"))  # fmt: skip
            continue
        if names != [label]:
            label += f" ({', '.join(names)})"
        usable, excluded = gw.ledger.subject_counts(table, session_eps, 0.0)
        rows.append(
            (
                f"{label}: subjects",
                None,
                None,
                usable + excluded,
                f"{usable} with at least the session ε={session_eps:g} left"
                + (f"; {excluded} with less are left out of queries at that ε" if excluded else ""),
            )
        )
        for bucket, count in gw.ledger.subject_distribution(table):
            if count or bucket.startswith("0 "):
                rows.append((f"{label}: remaining ε {bucket}", None, None, count, ""))
        limit = shares.limit(gw.con, gw.analyst, table)
        if limit is not None:  # what is left to this analyst under their budget share
            share, used = limit
            (yours,) = gw.con.execute(
                f"SELECT count(*) FILTER (WHERE {shares.remaining_sql(limit)} >= ?) FROM {table.roster_sql}",
                [dec(session_eps)],
            ).fetchone()  # fmt: skip
            rows.append((f"{label}: left to you", None, None, int(yours),
                         f"with at least the session ε={session_eps:g} left for you: you may use {share.normalize():f} of each "
                         f"subject's lifetime ε (your budget share) and have charged ε={float(used):g} here"))  # fmt: skip
        # δ: spent by DP key selection (GROUP BY over an undeclared domain) and by the experimental
        # supermodular release; a subject takes part only with at least the query's δ left of
        # their lifetime δ.
        lifetime = dec(table.subject_delta)
        need = dec(session_delta) if session_delta > 0 else None
        spread = gw.con.execute(
            f"SELECT ? - delta_spent AS delta_left, count(*) FROM {table.roster_sql} GROUP BY delta_left", [lifetime]
        ).fetchall()
        if need is None:
            enough = [(Decimal(r), n) for r, n in spread if r > 0]
        else:
            enough = [(Decimal(r), n) for r, n in spread if r >= need]
        short = sum(n for _, n in spread) - sum(n for _, n in enough)
        what = f"the session δ={session_delta:g}" if need is not None else "some δ"
        room = ""
        if enough and need is not None:
            ks = sorted({int(r // need) for r, _ in enough})
            room = f": room for {ks[0]}" + (f" to {ks[-1]}" if ks[-1] != ks[0] else "") + " more key selection(s)"
        rows.append((f"{label}: δ for key selection: left", None, None, sum(n for _, n in enough),
                     f"at least {what} of their lifetime δ={float(lifetime):g} left{room}"))  # fmt: skip
        rows.append((f"{label}: δ for key selection: spent", None, None, short,
                     f"less than {what} left: left out of key selection (GROUP BY an undeclared "
                     "domain); besides key selection only experimental releases (USING supermodular) spend δ"))  # fmt: skip
    return Result(
        ["scope", "epsilon_remaining", "delta_remaining", "subjects", "detail"],
        ["VARCHAR", "DOUBLE", "DOUBLE", "BIGINT", "VARCHAR"],
        rows,
    )

def _show_releases(gw: Any, classified: Classified, cat: Catalog) -> Result:
    rows = []
    for r in registry.records(gw.con):
        status = "active" if r.active else f"dropped {r.dropped_at:%Y-%m-%d %H:%M} by {r.dropped_by}"
        if not r.private:  # its noise came from a fixed test seed: whoever knows it can remove the noise
            status += "; NOT PRIVATE (made with a fixed test seed)"
        options = r.parameters.get("options", {})
        detail = ", ".join(f"{k}={v}" for k, v in options.items() if v is not None)
        rows.append((r.name, r.kind, ", ".join(r.sources), r.mechanism, r.epsilon, r.delta, r.analyst,
                     r.row_count, r.created_at, status, detail))  # fmt: skip
    return Result(
        ["name", "kind", "source", "mechanism", "epsilon", "delta", "analyst", "rows", "created_at", "status",
         "parameters"],
        ["VARCHAR", "VARCHAR", "VARCHAR", "VARCHAR", "DOUBLE", "DOUBLE", "VARCHAR", "BIGINT", "TIMESTAMP",
         "VARCHAR", "VARCHAR"],
        rows,
    )  # fmt: skip

def _drop_synthetic(gw: Any, classified: Classified, cat: Catalog) -> Result:
    statement = classified.statement
    name = statement.this.name.lower()
    schema = statement.this.args.get("db")
    if statement.this.args.get("catalog") is not None or (schema is not None and schema.name.lower() != "main"):
        # releases live in main: a name in another schema would otherwise reach main's table of the same name
        raise errors.ProgrammingError(f"No release {statement.this.sql(dialect='duckdb')}: releases are tables of "
                                      "schema main", code="DP225", hint=f"DROP SYNTHETIC TABLE {name}")  # fmt: skip
    graph_nodes = {t.graph.get("node_table") for t in cat.tables.values() if t.graph}
    if cat.protected(name) is not None or name in cat.budget_tables or name in graph_nodes:
        raise errors.PolicyError(
            f"{name} is now declared by the data owner (protected, a budget table or a node universe)",
            code="DP320",
            hint="only the owner can remove it",
        )
    with gw.ledger_lock:
        if registry.active(gw.con, name) is None and statement.args.get("exists"):
            return Result([], [], [], None, message=f"DROP SYNTHETIC TABLE: no release named {name}")
        registry.drop(gw.con, name, by=gw.analyst)
    return Result([], [], [], None, message=f"DROP SYNTHETIC TABLE {name} (its lineage stays in SHOW RELEASES)")

def _show_tables(gw: Any, classified: Classified, cat: Catalog) -> Result:
    rows = []
    for name in sorted(cat.tables):
        t = cat.tables[name]
        if t.kind == "graph":
            rows.append((name, "graph", None, None, None))
            continue
        rows.append((name, "protected", t.unit, t.max_rows, t.max_groups))
    for name in sorted(cat.public_tables):
        rows.append((name, "release" if name in cat.releases else "public", None, None, None))
    for name in sorted(cat.views):
        rows.append((name, "view", None, None, None))
    return Result(
        ["name", "kind", "privacy_unit", "max_rows", "max_groups"],
        ["VARCHAR", "VARCHAR", "VARCHAR", "INTEGER", "INTEGER"],
        rows,
    )

def _describe(gw: Any, classified: Classified, cat: Catalog) -> Result:
    ref = classified.refs[0]
    rows = []
    if ref.protected is not None:
        t = ref.protected
        ends = {t.graph["src"]: "edge source", t.graph["dst"]: "edge target"} if t.graph else {}
        for c in t.columns.values():
            role = ends.get(c.name) or ("privacy unit" if c.name == t.unit and not t.graph else "")
            shown = c.shown_bounds()
            if shown is not None and (c.is_date or c.is_timestamp):
                bounds = f"[{shown[0]}, {shown[1]}]"
            else:
                bounds = f"[{_number(c.lower)}, {_number(c.upper)}]" if c.bounded else None
            domain = None
            if c.domain is not None:
                shown = ", ".join("NULL" if v is None else repr(v) for v in c.domain[:6])
                domain = shown + (f", ... ({len(c.domain)} values)" if len(c.domain) > 6 else "")
            rows.append((c.name, c.type, role, bounds, domain))
    else:
        for name, typ in gw.facts.columns(ref.name):
            rows.append((name, typ, "", None, None))
    return Result(
        ["column_name", "column_type", "role", "bounds", "domain"],
        ["VARCHAR"] * 5,
        rows,
    )

def _explain(gw: Any, classified: Classified, cat: Catalog) -> Result:
    inner = classified.inner
    cols = ["item", "mechanism", "epsilon", "delta", "sensitivity", "ci_half_width", "detail"]
    types = ["VARCHAR", "VARCHAR", "DOUBLE", "DOUBLE", "VARCHAR", "VARCHAR", "VARCHAR"]
    if inner.kind == "public":
        return Result(cols, types, [("query", "none", 0.0, 0.0, None, None, "reads no protected table: free")])
    _, remembered = gw.remembered(inner, cat) if inner.kind == "dp" else (None, None)
    if remembered is not None and remembered.current:
        whose = "" if remembered.analyst == gw.analyst else " to another analyst"
        detail = (f"answered with the answer released{whose} at {remembered.when()}: free; OPTIONS (fresh = true) "
                  "draws a new one and pays for it")  # fmt: skip
        return Result(cols, types, [("query", "remembered", 0.0, 0.0, None, None, detail)])
    answered, qc, plan = gw._free_or_plan(inner, cat)
    if answered is not None:
        detail = (answered.message or "answered from a release: free").splitlines()[0]
        return Result(cols, types, [("query", "release", 0.0, 0.0, None, None, detail)])
    try:
        subjects = gw.ledger.subject_plan(gw._cost(plan, "", True))
    except errors.BudgetExceededError as e:
        subjects = e  # shown in the plan: the query would be refused
    rows = [explain_head(plan), *qc.explain_rows(plan, subjects)]
    if remembered is not None and plan.writes is None:
        why = f"the answer released at {remembered.when()} is not used ({remembered.stale}): this one is charged"
        rows.append(("remembered", None, None, None, None, None, why))
    return Result(cols, types, rows)


def tables(cat: Catalog, facts: Any) -> dict[str, tuple[str, list[tuple[str, str]]]]:
    """Tables and views an analyst may name, with their kind and columns (public facts)."""
    out: dict[str, tuple[str, list[tuple[str, str]]]] = {}
    for name, t in sorted(cat.tables.items()):
        out[name] = ("graph" if t.kind == "graph" else "protected", [(c.name, c.type) for c in t.columns.values()])
    for name in sorted(cat.public_tables):
        out[name] = ("release" if name in cat.releases else "public", facts.columns(name))
    for name in sorted(cat.views):
        out.setdefault(name, ("view", facts.columns(name)))
    return out


def _number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(x)


def _map_duckdb_error(e: duckdb.Error) -> errors.Error:
    text = str(e).splitlines()[0] if str(e) else type(e).__name__
    if isinstance(e, (duckdb.ParserException, duckdb.BinderException, duckdb.CatalogException)):
        return errors.ProgrammingError(text, code="DP230")
    if isinstance(e, duckdb.PermissionException):
        return errors.NotSupportedError(text, code="DP220")
    if isinstance(e, (duckdb.ConversionException, duckdb.OutOfRangeException, duckdb.InvalidInputException)):
        return errors.DataError(text, code="DP600")
    if isinstance(e, duckdb.IntegrityError):
        return errors.IntegrityError(text, code="DP610")
    return errors.OperationalError(text, code="DP405")


#: Statement kind -> handler(gateway, classified, catalog).
HANDLERS: dict[str, Callable[[Any, Classified, Catalog], Result]] = {
    "set": _set,
    "show_budget": _show_budget,
    "show_tables": _show_tables,
    "show_releases": _show_releases,
    "describe": _describe,
    "explain": _explain,
    "drop_synthetic": _drop_synthetic,
}
