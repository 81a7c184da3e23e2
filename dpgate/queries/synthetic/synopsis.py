"""PrivTree synopses: ``CREATE SYNTHETIC TABLE t_tree FROM t USING privtree WITH (columns = 'lon, lat')``.

A synopsis is released once (``mechanisms.privtree``) as an ordinary public table of the tree's
nodes — ``node_id, parent_id, depth, is_leaf, <col>_lo, <col>_hi`` per column, ``count`` (the
consistent estimate: every parent is the sum of its children) and its 95% interval — and then
answers range counts for free: a counting query over the source table whose WHERE is a
conjunction of ranges on the synopsis's columns is rewritten into
``Σ count · |query ∩ leaf| / |leaf|`` over the leaves when the analyst asks for it
(``OPTIONS (from_synopsis = 't_tree')``, or ``SET dp_from_synopsis = 't_tree'`` for a session).
Releases made before the nodes were written hold only leaves (``leaf_id``, integer counts, no
``is_leaf``); they answer the same way over all their rows.

Plan (public facts only): 1–4 numeric columns, each with declared bounds (the domain Ω; never
the data's min/max), fan-out 2^d. Integer columns use unit cells: Ω = [lo, hi + 1) and a value v
stands for [v, v + 1), so ``BETWEEN a AND b`` is [a, b + 1). Run, after the debit: the charged
subjects' rows, at most ``max_rows`` each (keyed random choice), values clamped into Ω, rows
with a NULL coordinate dropped; PrivTree with λ scaled by ``max_rows`` (one subject adds up to
that many points) and counts with sensitivity ``max_rows`` per family of disjoint boxes.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any

import duckdb
import numpy as np
from sqlglot import exp

from dpgate import backends, errors, mechanisms
from dpgate.backends.charged import bind
from dpgate.catalog import releases as registry
from dpgate.catalog.tables import Catalog, quote_ident
from dpgate.frontend.classify import Classified
from dpgate.frontend.dialect import to_sql
from dpgate.frontend.nodes import dp_options
from dpgate.frontend.settings import Session, Spec, coerce, literal_value
from dpgate.mechanisms import privtree
from dpgate.mechanisms.base import spend
from dpgate.plans import SubjectCharge, SynthesisPlan
from dpgate.queries.synthetic import options
from dpgate.queries.synthetic.common import Release, named, run_epsilon
from dpgate.release import Answer, Result

OPTIONS: dict[str, Spec] = {
    "columns": Spec("str", "1 to 4 comma-separated numeric columns with declared bounds"),
    "tree_share": Spec("float", "share of ε spent on the tree (the rest on the node counts)", 0.0, 1.0, low_open=True),
}
GENERAL = ("epsilon", "personalization", "max_rows_contributed", "privacy_unit_column", "alpha")
_INTEGER = {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT"}
_NUMERIC = _INTEGER | {"FLOAT", "DOUBLE", "REAL"}


_q = quote_ident


def _is_numeric(typ: str) -> bool:
    t = typ.upper()
    return t in _NUMERIC or t.startswith("DECIMAL")


def plan(classified: Classified, catalog: Catalog, session: Session, name: str) -> SynthesisPlan:
    stmt = classified.statement
    table = classified.protected
    settings, own = options.parse(stmt, table, session, OPTIONS, GENERAL, "privtree")
    if "columns" not in own:
        numeric = [c for c, col in table.columns.items() if c != table.unit and _is_numeric(col.type) and col.bounded]
        raise errors.ProgrammingError(
            "A PrivTree synopsis needs the columns it covers", code="DP286",
            hint=f"WITH (columns = '{', '.join(numeric[:2]) or 'x, y'}')  -- numeric columns with declared bounds",
        )  # fmt: skip
    names = [c.strip().lower() for c in own["columns"].split(",") if c.strip()]
    if not 1 <= len(names) <= privtree.MAX_DIMENSIONS or len(set(names)) != len(names):
        raise errors.ProgrammingError(f"columns must name 1 to {privtree.MAX_DIMENSIONS} different columns",
                                      code="DP286", hint="columns = 'lon, lat'")  # fmt: skip
    lower, upper, integer = [], [], []
    for c in names:
        col = table.columns.get(c)
        if col is None or c == table.unit:
            raise errors.ProgrammingError(f"{table.name} has no column {c!r} to cover", code="DP218",
                                          hint="columns are: " + ", ".join(x for x in table.columns if x != table.unit))  # fmt: skip
        if not _is_numeric(col.type):
            raise errors.UnsupportedQueryError(f"{c} is {col.type}: a synopsis covers numeric columns", code="DP284",
                                               hint="choose numeric columns with declared bounds")  # fmt: skip
        if not col.bounded:
            raise errors.PolicyError(f"{table.name}.{c} has no declared bounds: the synopsis's domain must be public",
                                     code="DP312", hint=f"the owner declares them (--bounds {c}=LO,HI)")  # fmt: skip
        is_int = col.is_integer
        lo, hi = float(col.lower), float(col.upper)
        if is_int:  # unit cells [v, v + 1) of the integers within the bounds
            lo, hi = math.ceil(lo), math.floor(hi) + 1
        lower.append(float(lo)), upper.append(float(hi)), integer.append(is_int)
        if not upper[-1] > lo:
            raise errors.PolicyError(f"{table.name}.{c}'s bounds are empty", code="DP312")
    tree_share = own.get("tree_share", privtree.TREE_SHARE)
    if tree_share >= 1.0:
        raise errors.ProgrammingError("tree_share must leave some ε for the node counts", code="DP287",
                                      hint=f"tree_share = {privtree.TREE_SHARE} (the default)")  # fmt: skip
    max_rows = settings.max_rows or table.max_rows
    return SynthesisPlan(
        table=table, settings=settings, statement_sql=to_sql(stmt), name=name, mechanism="privtree", codings=(),
        options={"columns": names, "lower": lower, "upper": upper, "integer": integer, "tree_share": tree_share},
        rows=None, bins=0, max_rows=max_rows, charge=SubjectCharge(settings.personalization, settings.epsilon, 0.0),
        row_bound=privtree.MAX_NODES,  # one row a node: the tree and its refinement stop there
        row_least=1 + 2 ** len(names),  # fewer would leave the root unsplit: a charge for one noisy total
        # node_id, parent_id, depth, is_leaf, each column's bounds, count and its interval (``_write``)
        row_types=("BIGINT", "BIGINT", "BIGINT", "BOOLEAN", *["DOUBLE"] * (2 * len(names)), "DOUBLE", "DOUBLE", "DOUBLE"),
        notes=((f"at most {max_rows} point(s) per subject: λ and the leaf noise are scaled by {max_rows}",)
               if max_rows > 1 else ()),
    )  # fmt: skip


def source_sql(plan: SynthesisPlan, charged: str, salt: int) -> str:
    """The charged subjects' points, at most ``max_rows`` each (keyed random choice); a point with a NULL or
    NaN coordinate is dropped (a NaN was counted in the domain's lower corner, where MST and PrivBayes
    read NaN as NULL)."""
    t = plan.table
    cols = plan.options["columns"]
    sel = ", ".join(f"CAST(__s.{_q(c)} AS DOUBLE) AS {_q(c)}" for c in cols)
    where = " AND ".join(f"NOT isnan(CAST(__s.{_q(c)} AS DOUBLE))" for c in cols)  # NULL is not TRUE either
    rows = (
        f"SELECT __s.{_q(t.unit)} AS __unit, {sel} FROM main.{_q(t.name)} __s "
        f"JOIN (SELECT DISTINCT unit FROM {charged}) __c ON __s.{_q(t.unit)} = __c.unit WHERE {where}"
    )
    names = ", ".join(_q(c) for c in cols)
    if t.unique_unit:
        return f"SELECT {names} FROM ({rows})"
    dup = f"SELECT *, row_number() OVER (PARTITION BY __unit, {names}) AS __dup FROM ({rows})"
    rank = f"hash(xor(hash(__unit, {names}, __dup), {int(salt)}::UBIGINT))"
    return (f"SELECT {names} FROM ({dup}) "
            f"QUALIFY row_number() OVER (PARTITION BY __unit ORDER BY {rank}, __dup) <= {plan.max_rows}")  # fmt: skip


def dry_run(plan: SynthesisPlan, epsilon: float) -> None:
    """PrivTree over no points at ``epsilon``: its parameters and the root's noise at that ε."""
    _synthesize(plan, np.zeros((0, len(plan.options["columns"]))), epsilon, np.random.default_rng(0))


def _synthesize(plan: SynthesisPlan, points: np.ndarray, epsilon: float, rng,
                max_nodes: int = privtree.MAX_NODES) -> privtree.Synopsis:  # fmt: skip
    o = plan.options
    options = {"lower": o["lower"], "upper": o["upper"], "contributions": plan.max_rows, "tree_share": o["tree_share"],
               "integer": o["integer"], "max_nodes": max_nodes}  # fmt: skip
    syn = mechanisms.synthesizer("privtree").synthesize(points, epsilon=epsilon, rng=rng, options=options)
    spend(syn.epsilon, what="privtree")
    return syn.release


def spark_sql(plan: SynthesisPlan, salt: int, source: str, units: str) -> str:
    """``source_sql`` for a table in Spark (``SparkPlane.release_rows``): the charged subjects' points
    as DOUBLEs, a point with a NULL or NaN coordinate dropped, then at most ``max_rows`` a subject by
    a keyed ``xxhash64`` of the point and its duplicate number [bound]."""
    from dpgate.backends.spark.rows import keyed_rank
    from dpgate.queries.synthetic import coding_spark

    t, cols = plan.table, plan.options["columns"]
    unit = coding_spark.quoted(t.unit)
    names = [coding_spark.quoted(c) for c in cols]
    sel = ", ".join(f"CAST(__s.{n} AS DOUBLE) AS {n}" for n in names)
    # Spark's isnan(NULL) is false, where DuckDB's NOT isnan(NULL) drops the row: NULL is dropped by name
    where = " AND ".join(f"__s.{n} IS NOT NULL AND NOT isnan(CAST(__s.{n} AS DOUBLE))" for n in names)
    rows = f"SELECT __s.{unit} AS __unit, {sel} FROM {source} __s JOIN {units} __c ON __s.{unit} = __c.unit WHERE {where}"
    listed = ", ".join(names)
    if t.unique_unit:
        return f"SELECT {listed} FROM ({rows}) __r"
    dup = f"SELECT *, row_number() OVER (PARTITION BY __unit, {listed} ORDER BY __unit) AS __dup FROM ({rows}) __r"
    rank = keyed_rank([exp.column(c) for c in ("__unit", *cols, "__dup")], salt)
    ranked = f"SELECT *, row_number() OVER (PARTITION BY __unit ORDER BY {rank}, __dup) AS __rn FROM ({dup}) __d"
    return f"SELECT {listed} FROM ({ranked}) __x WHERE __rn <= {int(plan.max_rows)}"


def check_spark(plan: SynthesisPlan) -> None:
    """Refuse, before the debit, a synopsis Spark would read other coordinates for: a DECIMAL of more than
    15 digits made a DOUBLE (DuckDB rounds it twice, Spark once: one unit in the last place apart)."""
    for c in plan.options["columns"]:
        t = plan.table.columns[c].type.upper().replace(" ", "")
        if t.startswith("DECIMAL(") and int(t[8:].split(",")[0]) > 15:
            raise errors.UnsupportedQueryError(
                f"{plan.table.name}.{c} is {t}: on Spark a synopsis covers DECIMALs of at most 15 digits", code="DP261",
                hint="the data owner protects a Spark view that casts it to DOUBLE; nothing was charged",
            )  # fmt: skip


def read_points(con: duckdb.DuckDBPyConnection, plan: SynthesisPlan, charged: str, salt: int) -> np.ndarray:
    """The charged subjects' points ``(n, d)`` as floats, read where the rows are."""
    cols = plan.options["columns"]
    if backends.engine_of(plan.table) == "spark":
        found = backends.plane("spark").release_rows(con, plan, partial(spark_sql, plan, salt), charged)
        got = {c: found.column(c).to_numpy() for c in cols}
    else:
        got = con.execute(source_sql(plan, charged, salt)).fetchnumpy()
    if not len(got[cols[0]]):
        return np.zeros((0, len(cols)))
    return np.column_stack([np.asarray(got[c], dtype=float) for c in cols])


def bind_check(con: duckdb.DuckDBPyConnection, plan: SynthesisPlan, charged: str) -> None:
    bind(con, source_sql(plan, charged, 0))  # a Spark table's stub too
    if backends.engine_of(plan.table) == "spark":  # and Spark must run its own statement
        check_spark(plan)
        backends.plane("spark").check_release(plan, partial(spark_sql, plan, 0))


def answer(con, plan: SynthesisPlan, debit, analyst: str, *, rng: np.random.Generator, sampling=None,
           progress=None) -> Answer:  # fmt: skip
    """Grow the tree, count its nodes and write them; no sampling (the synopsis is the release)."""
    eps = run_epsilon(debit, "a synopsis")
    o = plan.options
    salt = int(rng.integers(0, 2**62))
    points = read_points(con, plan, debit.charged, salt)
    # one row a node: a tree stops at the rows its release reserved against the analyst's caps (a stop
    # that reads only the tree released so far, as at MAX_NODES)
    max_nodes = min(privtree.MAX_NODES, debit.release_rows or privtree.MAX_NODES)
    syn = _synthesize(plan, points, eps, rng, max_nodes)
    del points
    alpha = plan.settings.alpha
    half = syn.half_widths(alpha)
    _write(con, plan, syn, half, debit, analyst, eps)
    lam, delta, _ = privtree.parameters(eps * o["tree_share"], 2 ** len(o["columns"]), plan.max_rows)
    leaves = int(syn.leaf.sum())
    notes = [
        f"{len(syn.counts):,} nodes ({leaves:,} leaves), depth up to {int(syn.depth.max())}; λ = {lam:.3g}, "
        f"δ = {delta:.3g}; counts are consistent (a parent is the sum of its children); a leaf's count "
        f"± {float(np.median(half[syn.leaf])):.3g} ({1 - alpha:.0%}, median over the leaves)",
        f"{plan.name} is public from now on; counts over {', '.join(o['columns'])} ranges of {plan.table.name} are "
        f"free with OPTIONS (from_synopsis = '{plan.name}')",
    ]
    if syn.stopped:
        why = "a release's work is bounded" if max_nodes == privtree.MAX_NODES else "the rows your release caps allow"
        notes.append(f"the tree stopped growing within {max_nodes:,} nodes ({why}): at this ε it would split some "
                     "leaves further")  # fmt: skip
    message = f"CREATE SYNTHETIC TABLE {plan.name}: {len(syn.counts):,} nodes, {leaves:,} leaves (PrivTree synopsis)"
    return Answer([], [], [], [], {}, notes, message=message, released_rows=len(syn.counts))


def _write(con, plan: SynthesisPlan, syn: privtree.Synopsis, half: np.ndarray, debit, analyst: str, eps: float) -> None:
    from dpgate.queries.synthetic.coding import relation_exists

    o = plan.options
    if relation_exists(con, plan.name):
        raise errors.ProgrammingError(f"A table or view named {plan.name!r} already exists", code="DP226")
    n = len(syn.counts)
    parent = [None if p < 0 else int(p) + 1 for p in syn.parent.tolist()]
    params: list[Any] = [list(range(1, n + 1)), parent, syn.depth.astype(int).tolist(), syn.leaf.astype(bool).tolist()]
    cols = []
    for j, c in enumerate(o["columns"]):
        params += [syn.lo[:, j].tolist(), syn.hi[:, j].tolist()]
        cols += [f"unnest(${len(params) - 1}) AS {_q(c + '_lo')}", f"unnest(${len(params)}) AS {_q(c + '_hi')}"]
    counts = syn.counts.astype(float)
    params += [counts.tolist(), (counts - half).tolist(), (counts + half).tolist()]
    k = len(params)
    sql = (f"CREATE TABLE main.{_q(plan.name)} AS SELECT unnest($1) AS node_id, unnest($2)::BIGINT AS parent_id, "
           f"unnest($3) AS depth, unnest($4) AS is_leaf, {', '.join(cols)}, unnest(${k - 2})::DOUBLE AS count, "
           f"unnest(${k - 1})::DOUBLE AS count_ci_low, unnest(${k})::DOUBLE AS count_ci_high")  # fmt: skip
    with registry.transaction(con):
        con.execute(sql, params)
        parameters = {
            "columns": o["columns"], "lower": o["lower"], "upper": o["upper"], "integer": o["integer"],
            "tree_share": o["tree_share"], "max_rows": plan.max_rows, "epsilon_run": eps,
            "personalization": plan.charge.rule, "leaves": int(syn.leaf.sum()), "nodes": n,
            # every node is a row (is_leaf marks the leaves); releases without this key hold leaves only
            "rows": "nodes",
            # who the counts describe: the subjects that took part, and those not in it (no budget, or
            # left out by the threshold rule); free answers from it say so
            "subjects_used": debit.subjects_charged, "subjects_not_in": debit.subjects_excluded,
        }  # fmt: skip
        registry.record(
            con, entry_id=debit.entry_id, name=plan.name, kind="synopsis", sources=[plan.table.name],
            mechanism="privtree", parameters=parameters, epsilon=debit.epsilon, delta=0.0, analyst=analyst,
            row_count=n,
        )  # fmt: skip


def explain_rows(plan: SynthesisPlan, subjects=None) -> list[tuple]:
    o = plan.options
    eps = plan.epsilon
    d = len(o["columns"])
    lam, delta, _ = privtree.parameters(eps * o["tree_share"], 2**d, plan.max_rows)
    doms = ", ".join(f"{c} in [{lo:g}, {hi:g})" for c, lo, hi in zip(o["columns"], o["lower"], o["upper"]))
    rest = 1 - o["tree_share"]
    share = {k: rest * v for k, v in privtree.COUNT_SHARES.items()}
    shares = (f"ε×{share['upper']:.3g} for the {privtree.UPPER_BOXES} upper boxes, ε×{share['middle']:.3g} for the "
              f"middle cut (about n'·ε/{privtree.MIDDLE_C:g} boxes, n' the upper boxes' noisy total; when that "
              f"is under {privtree.MIDDLE_GAP} times the upper boxes, this ε goes half to each of the next two), "
              f"ε×{share['leaves']:.3g} for the leaves, ε×{share['refined']:.3g} "
              f"for the leaves split by their noisy counts")  # fmt: skip
    return [
        ("model", "privtree", eps, 0.0, None, None,
         f"PrivTree over {doms} (declared bounds), fan-out {2**d}: ε×{o['tree_share']:g} for the tree "
         f"(λ = {lam:.3g}, δ = λ·ln {2**d} = {delta:.3g}, θ = 0, no depth limit), the rest for node counts "
         f"(discrete Laplace, sensitivity {plan.max_rows} per family): {shares}; made consistent"),
        ("release", None, None, None, None, None,
         f"{plan.name}: one row per node (node_id, parent_id, depth, is_leaf, bounds, count with its interval); "
         f"range counts over these columns are then free with OPTIONS (from_synopsis = '{plan.name}')"),
    ]  # fmt: skip


# -- answering from a synopsis ------------------------------------------------------------------
def requested(classified: Classified, session: Session) -> tuple[str | None, bool]:
    """(synopsis name, strict): the statement's OPTIONS (from_synopsis) or the session's setting."""
    opts = dp_options(classified.statement)
    for opt in (opts.expressions if opts is not None else []):
        if opt.option_name == "from_synopsis":
            return coerce("from_synopsis", literal_value(opt.expression, "from_synopsis")), True
    value = session.values.get("from_synopsis")
    return (value or None), False


def _ranges(where: exp.Expr | None, columns: list[str], integer: list[bool]) -> dict[str, list[float]] | None:
    """The WHERE as one [lo, hi) per column (None: not a conjunction of ranges on these columns)."""
    box = {c: [-math.inf, math.inf] for c in columns}
    if where is None:
        return box
    parts = list(where.flatten()) if isinstance(where, exp.And) else [where]
    for p in parts:
        if isinstance(p, exp.Paren):
            inner = _ranges(p.this, columns, integer)
            if inner is None:
                return None
            for c in columns:
                box[c] = [max(box[c][0], inner[c][0]), min(box[c][1], inner[c][1])]
            continue
        col = p.this if isinstance(p, (exp.Between, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.EQ)) else None
        if not isinstance(col, exp.Column) or col.name.lower() not in box:
            return None
        c = col.name.lower()
        is_int = integer[columns.index(c)]

        def num(node) -> float | None:
            if isinstance(node, exp.Neg):
                v = num(node.this)
                return None if v is None else -v
            if isinstance(node, exp.Literal) and not node.is_string:
                v = float(node.this)
                return v if math.isfinite(v) else None  # 1e999: no range (ceil(inf) raised OverflowError)
            return None

        step = 1.0 if is_int else 0.0
        if isinstance(p, exp.Between):
            a, b = num(p.args["low"]), num(p.args["high"])
            if a is None or b is None:
                return None
            lo, hi = (math.ceil(a), math.floor(b) + 1) if is_int else (a, b)
        else:
            v = num(p.expression)
            if v is None:
                return None
            if isinstance(p, exp.GTE):
                lo, hi = (math.ceil(v) if is_int else v), math.inf
            elif isinstance(p, exp.GT):
                lo, hi = (math.floor(v) + step if is_int else v), math.inf
            elif isinstance(p, exp.LTE):
                lo, hi = -math.inf, (math.floor(v) + step if is_int else v)
            elif isinstance(p, exp.LT):
                lo, hi = -math.inf, (math.ceil(v) if is_int else v)
            else:  # EQ: a unit cell of an integer column; a point (no mass) of a real one
                if not is_int:
                    return None
                # x = 2.5 holds for no integer: the empty range (it was [2.5, 3.5), half of two cells)
                lo, hi = (v, v + 1) if float(v).is_integer() else (math.inf, -math.inf)
        box[c] = [max(box[c][0], lo), min(box[c][1], hi)]
    return box


def from_synopsis(con, classified: Classified, catalog: Catalog, session: Session) -> Result | None:
    """The statement answered from the synopsis it names, or None (session setting that does not fit)."""
    name, strict = requested(classified, session)
    if name is None:
        return None
    rec = registry.active(con, name) if name in catalog.releases else None

    def refuse(message: str, hint: str) -> None:
        if strict:
            raise errors.UnsupportedQueryError(message, code="DP227", hint=hint)

    if rec is None or rec.mechanism != "privtree":
        refuse(f"No PrivTree synopsis named {name!r}", "SHOW RELEASES lists the synopses (kind 'synopsis')")
        return None
    stmt = classified.statement
    table = classified.protected
    p = rec.parameters
    shape = ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (from_synopsis = ...) [FLOOR(col / w) AS x, ...,] COUNT(*) "
             "FROM t WHERE <ranges on its columns> [GROUP BY x, ...]")
    if table is None or table.name not in rec.sources or len(classified.refs) != 1:
        refuse(f"Synopsis {name} was built from {', '.join(rec.sources)}, and answers counts over that table only",
               shape)  # fmt: skip
        return None
    if not isinstance(stmt, exp.Select) or any(stmt.args.get(k) for k in ("having", "joins", "distinct", "order",
                                                                           "limit", "offset", "qualify")):  # fmt: skip
        refuse("A synopsis answers COUNT(*) with a WHERE of ranges, optionally per bin (GROUP BY FLOOR(col / w)); "
               "no HAVING, ORDER BY, LIMIT or joins", shape)  # fmt: skip
        return None
    where = stmt.args.get("where")
    box = _ranges(where.this if where is not None else None, p["columns"], p["integer"])
    if box is None:
        refuse(f"The WHERE must be a conjunction of ranges (BETWEEN, <, <=, >, >=, = on integers) on "
               f"{', '.join(p['columns'])} with numbers", shape)  # fmt: skip
        return None
    bins = _bins(stmt, p["columns"])
    if bins is None:
        refuse("A synopsis answers COUNT(*), or COUNT(*) per bin: SELECT FLOOR(col / w) AS x, ..., COUNT(*) ... "
               "GROUP BY x, ... on its columns (w and an offset a in FLOOR((col - a) / w) numbers)", shape)  # fmt: skip
        return None
    keys, count_name = bins
    for _, c, w, off in keys:
        if p["integer"][p["columns"].index(c)] and not (float(w).is_integer() and float(off).is_integer()):
            # FLOOR(x / 2.5) puts every integer wholly in one bin, but the bins' edges cut unit cells in
            # two, and the cells' counts would be split by area (5,000 / 15,000 for 10,000 / 10,000)
            refuse(f"{c} is an integer column: its bins need a whole width and offset", "FLOOR(x / 5), FLOOR((x - 1) / 10)")
            return None
    terms, params, ranges = [], [], []
    cols = p["columns"]
    for j, (c, lo, hi) in enumerate(zip(cols, p["lower"], p["upper"])):
        qlo, qhi = max(box[c][0], lo), min(box[c][1], hi)
        params += [qlo, qhi]
        a, b = f"${len(params) - 1}", f"${len(params)}"
        key = next((k for k in keys if k[1] == c), None)
        if key is not None:  # the bin's own range, within the WHERE's
            _, _, w, off = key
            first, last = math.floor((qlo - off) / w), math.ceil((qhi - off) / w) - 1
            if qhi <= qlo:
                first, last = 0, -1
            ranges.append((first, last))
            a = f"greatest({a}, {off!r} + __b{j} * {w!r})"
            b = f"least({b}, {off!r} + (__b{j} + 1) * {w!r})"
        terms.append(f"greatest(0, least({_q(c + '_hi')}, {b}) - greatest({_q(c + '_lo')}, {a})) / "
                     f"({_q(c + '_hi')} - {_q(c + '_lo')})")  # fmt: skip
    if math.prod(max(0, hi - lo + 1) for lo, hi in ranges) > 1_000_000:
        refuse("More than a million bins", "use wider bins or a narrower WHERE")
        return None
    # a release of nodes answers from its leaves (consistent counts: the same as a minimal cover of nodes);
    # an earlier release of leaves only, from every row
    leaves = f"(SELECT * FROM main.{_q(rec.name)} WHERE is_leaf)" if p.get("rows") == "nodes" else f"main.{_q(rec.name)}"
    if not keys:
        sql = f"SELECT coalesce(sum(count * {' * '.join(terms)}), 0)::DOUBLE FROM {leaves} __l"
        (value,) = con.execute(sql, params).fetchone()
        names, types, rows = [count_name], ["DOUBLE"], [(round(float(value), 1),)]
    else:
        grid = " CROSS JOIN ".join(f"range({lo}, {hi + 1}) AS __r{j}(__b{cols.index(k[1])})"
                                   for j, ((lo, hi), k) in enumerate(zip(ranges, keys)))  # fmt: skip
        bvars = [f"__b{cols.index(k[1])}" for k in keys]
        sql = (f"SELECT {', '.join(bvars)}, coalesce(sum(count * {' * '.join(terms)}), 0)::DOUBLE "
               f"FROM {grid} LEFT JOIN {leaves} __l ON true GROUP BY ALL ORDER BY ALL")  # fmt: skip
        got = con.execute(sql, params).fetchall()
        names = [k[0] for k in keys] + [count_name]
        types = ["DOUBLE"] * len(keys) + ["DOUBLE"]
        rows = [tuple(float(v) for v in r[:-1]) + (round(float(r[-1]), 1),) for r in got]
    notes = [
        f"answered from synopsis {rec.name} (PrivTree, made with ε {rec.epsilon:g}): free; points are taken as "
        "spread evenly inside each leaf" + ("; every bin is listed, empty ones included" if keys else ""),
        "no interval: the error of that assumption is not known (each node's own interval is in the synopsis table)",
    ]
    if p.get("subjects_not_in"):
        notes.append(f"the synopsis counts the {p.get('subjects_used', 0):,} subjects that took part when it was made; "
                     f"{p['subjects_not_in']:,} others (no budget left, or left out by personalization = "
                     f"'{p.get('personalization')}') are not in these counts")  # fmt: skip
    return Result(names, types, rows, None, message="\n".join(notes))


def _bins(stmt: exp.Select, columns: list[str]) -> tuple[list[tuple[str, str, float, float]], str] | None:
    """([(output name, column, width w, offset a)] of FLOOR((col − a) / w) keys, the COUNT(*)'s name)."""
    keys, count_name = [], None
    for i, e in enumerate(stmt.expressions):
        node = e.this if isinstance(e, exp.Alias) else e
        if isinstance(node, exp.Count) and isinstance(node.this, exp.Star) and count_name is None:
            count_name = e.alias if isinstance(e, exp.Alias) else "count_star()"
            continue
        key = _bin_key(node, columns)
        if key is None or not isinstance(e, exp.Alias):
            return None
        keys.append((e.alias, *key))
    group = stmt.args.get("group")
    if count_name is None or (bool(keys) != bool(group)) or len({k[1] for k in keys}) != len(keys):
        return None
    if group:  # GROUP BY names every key (by alias, position or the same expression) and nothing else
        named = set()
        for g in group.expressions:
            if isinstance(g, exp.Literal) and not g.is_string and g.this.isdigit():
                idx = int(g.this) - 1
                sel = stmt.expressions[idx] if 0 <= idx < len(stmt.expressions) else None
                named.add(sel.alias if isinstance(sel, exp.Alias) else None)
            elif isinstance(g, exp.Column) and not g.table:
                named.add(g.name)
            else:
                match = [k[0] for k, e in zip(keys, [x for x in stmt.expressions if isinstance(x, exp.Alias)])
                         if e.this == g]  # fmt: skip
                named.add(match[0] if match else None)
        if named != {k[0] for k in keys}:
            return None
    return keys, count_name


def _bin_key(node: exp.Expr, columns: list[str]) -> tuple[str, float, float] | None:
    """(column, w, a) of ``FLOOR(col / w)``, ``FLOOR((col - a) / w)`` or ``FLOOR((col + b) / w)``, w > 0."""
    if not isinstance(node, exp.Floor) or not isinstance(node.this, exp.Div):
        return None
    num, den = node.this.this, node.this.expression

    def number(x) -> float | None:
        if isinstance(x, exp.Neg):
            v = number(x.this)
            return None if v is None else -v
        if isinstance(x, exp.Literal) and not x.is_string:
            v = float(x.this)
            return v if math.isfinite(v) else None  # 1e999 is inf: no bin width, and no SQL number
        return None

    w = number(den)
    if w is None or not w > 0:
        return None
    offset = 0.0
    if isinstance(num, exp.Paren):
        num = num.this
    if isinstance(num, (exp.Sub, exp.Add)):  # (col − a) or (col + b): offset a = −b
        o = number(num.expression)
        if o is None:
            return None
        offset, num = (o if isinstance(num, exp.Sub) else -o), num.this
    if not isinstance(num, exp.Column) or num.name.lower() not in columns:
        return None
    return num.name.lower(), w, offset


RELEASE = Release(name="privtree", plan=named(plan), dry_run=dry_run, bind_check=bind_check,
                  answer=answer, explain_rows=explain_rows, scales_sample=False)  # fmt: skip
