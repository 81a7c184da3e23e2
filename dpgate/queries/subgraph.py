"""Subgraph-count queries on protected graphs: plan (from SQL) and answer (ladder functions).

What an analyst may write over a protected graph ``g(src, dst)`` (``Owner.protect_graph``):

- the function forms ``TRIANGLE_COUNT(src, dst)``, ``KSTAR_COUNT(src, dst, k)``,
  ``KTRIANGLE_COUNT(src, dst, k)``, ``KCLIQUE_COUNT(src, dst, k)`` in the SELECT list, with an
  optional WHERE over the edge table's columns (it selects the edges) and arithmetic on the
  counts (post-processing); several counts split ε equally;
- the triangle self-join ``SELECT COUNT(*) FROM g a JOIN g b ON a.dst = b.src JOIN g c ON
  c.src = a.src AND c.dst = b.dst`` (any equalities that close a triangle), answered as
  ``TRIANGLE_COUNT``;
- the k-star degree sum ``WITH d AS (SELECT x, COUNT(*) AS deg FROM (SELECT src AS x FROM g
  UNION ALL SELECT dst FROM g) GROUP BY x) SELECT SUM(deg * (deg - 1) / 2) FROM d``, where the
  summand must equal C(deg, k) (checked on public values), answered as ``KSTAR_COUNT``
  (thesis chapter 5).

Semantics (stated in EXPLAIN and docs/queries/graphs.md): counts are of the simple undirected graph on
the public node universe — duplicates and reversed edges merged, self-loops and edges with an
endpoint outside the universe dropped — which is what makes one row of the edge table at most
one edge of the neighbouring relation. The literal SQL result on a raw table can differ.

Every potential edge shares one budget (the graph's one-row roster), so the ledger charges
the analyst and that budget; personalization rules do not apply.
"""

from __future__ import annotations

import math
import secrets
from typing import Any

import duckdb
import numpy as np
from sqlglot import exp

from dpgate import backends, database, errors, noise
from dpgate.backends.charged import bind
from dpgate.catalog.tables import Catalog, ProtectedTable, join_exact
from dpgate.frontend.classify import GRAPH_FUNCTIONS, Classified, function_name
from dpgate.frontend.dialect import to_duckdb
from dpgate.frontend.nodes import dp_options
from dpgate.frontend.settings import Session
from dpgate.mechanisms import graphs, ladder
from dpgate.mechanisms.base import NoisyColumn, metered, spend
from dpgate.plans import OutputColumn, SubgraphCount, SubgraphPlan, SubjectCharge
from dpgate.queries.base import QueryClass
from dpgate.release import Answer, ColumnNoise, noisy_rows

#: k-cliques (k >= 4) are served without the owner's ``allow_kclique`` when C(N, k), the most
#: k-cliques a graph on N nodes can have (their count bounds the work), is at most this. The
#: cost grows with the graph's cliques, so the rule must be a public one on (N, k).
KCLIQUE_FREE_WORK = 10**6
#: Released counts and their error bars are HUGEINTs (below 2^127): a count is served only when a
#: public bound on them stays below this (``output_bound``).
OUTPUT_LIMIT = 1 << 126
#: Degrees at which a degree-sum summand is compared with C(deg, k).
_DEGREE_PROBES = 41

ACCEPTED = (
    "TRIANGLE_COUNT(src, dst), KSTAR_COUNT(src, dst, k), KTRIANGLE_COUNT(src, dst, k), KCLIQUE_COUNT(src, dst, k); "
    "the triangle self-join; or the k-star sum over degrees"
)


def _refuse(message: str, code: str, hint: str | None = None) -> errors.Error:
    return errors.UnsupportedQueryError(message, code=code, hint=hint or f"a graph answers {ACCEPTED}")


# -- planning ------------------------------------------------------------------------------------
def plan(classified: Classified, catalog: Catalog, session: Session, facts) -> SubgraphPlan:
    table = classified.protected
    graph = table.graph
    statement = classified.statement
    if not isinstance(statement, exp.Select):
        raise _refuse(f"Set operations over the graph {table.name} are not supported", code="DP216")
    settings = session.query_settings(dp_options(statement))
    if settings.privacy_unit is not None:
        raise errors.PolicyError(
            f"{table.name} is a graph with edge-level DP: it has no privacy unit column", code="DP301",
            hint="drop privacy_unit_column",
        )  # fmt: skip
    if "consistent" in settings.explicit:
        raise _refuse("consistent = true applies to tables of counts, not to subgraph counts", code="DP272")
    q = statement.copy()
    q.set("hint", None)
    original_sql = to_duckdb(q)
    n_nodes, node_source = _universe(table, catalog, facts)
    if q.args.get("with_") is not None:
        shape, calls, where = "degree sum", [_degree_sum(q, table)], None
    elif q.args.get("joins"):
        shape, calls, where = "triangle self-join", [_triangle_join(q, table)], None
    else:
        shape = "functions"
        calls, where = _function_form(q, table)
    counts = []
    share = settings.epsilon / len(calls)
    for i, (label, query, k) in enumerate(calls):
        try:
            k = graphs.check_query(query, k)
        except ValueError as e:
            raise _refuse(f"{label}: {e}", code="DP282") from e
        if query == "kclique" and k >= 4 and math.comb(n_nodes, k) > KCLIQUE_FREE_WORK and not graph.get("allow_kclique"):
            raise errors.PolicyError(
                f"{label} on {n_nodes:,} nodes: a graph this size may hold C({n_nodes}, {k}) = "
                f"{math.comb(n_nodes, k):.3g} {k}-cliques, and the count's cost grows with them; k-cliques with "
                f"k >= 4 are served up to {KCLIQUE_FREE_WORK:,} possible cliques unless the owner allows more",
                code="DP319",
                hint="ask for triangles, k-stars, k-triangles or a smaller k, or ask the owner for allow_kclique",
            )
        eps = settings.epsilon - share * (len(calls) - 1) if i == len(calls) - 1 else share
        _check_split(label, eps, settings.interval_share, n_nodes)
        _check_size(label, query, k, n_nodes, eps, settings.interval_share, settings.alpha)
        gs = graphs.global_sensitivity(query, k, n_nodes)
        counts.append(SubgraphCount(i, label, query, k, eps, settings.interval_share, gs))
    post, outputs = _post(q, shape, calls)
    notes = [
        f"edge-level DP on the simple undirected graph of {table.name} over {n_nodes:,} nodes ({node_source}): "
        "duplicates and reversed edges merged, self-loops and edges outside the universe dropped"
    ]
    if shape != "functions":
        notes.append(f"the {shape} is answered as {calls[0][0]} over the simple graph, not the literal SQL on the raw rows")
    return SubgraphPlan(
        table=table,
        settings=settings,
        statement_sql=original_sql,
        n_nodes=n_nodes,
        node_source=node_source,
        edges_where=where,
        counts=tuple(counts),
        shape=shape,
        post=post,
        outputs=tuple(outputs),
        charge=SubjectCharge("threshold", settings.epsilon, 0.0),
        notes=tuple(notes),
    )


def _check_split(label: str, epsilon: float, share: float, n_nodes: int) -> None:
    """Refuse, before the debit, a count whose ε or error-bar share is below what its sampler can
    run at: the samplers check the same numbers after the debit and would fail charged."""
    width = epsilon * share
    try:
        ladder.sampling_epsilon(epsilon - width, n_nodes)
        if width:
            noise.discrete_laplace_alpha(width, 1)
        return
    except ValueError:
        pass
    count_floor = ladder.sampling_margin(n_nodes)
    width_floor = noise.EPSILON_MARGIN + 2.0**-53
    lo, hi = 1.01 * width_floor / epsilon, 1 - 1.01 * count_floor / epsilon
    shares = f"interval_share = 0 (a public error bar) or between {lo:.3g} and {hi:.6g}" if lo < hi else (
        "interval_share = 0 (a public error bar)" if epsilon > 1.01 * count_floor else None)  # fmt: skip
    raise errors.ProgrammingError(
        f"{label}: ε = {epsilon:.3g} with interval_share = {share:.10g} leaves ε = {epsilon - width:.3g} for the "
        f"count and {width:.3g} for its error bar; the count needs more than {count_floor:.3g} and the error "
        f"bar, when it spends anything, more than {width_floor:.3g}",
        code="DP264",
        hint=f"set {shares}" if shares else f"raise epsilon above {1.01 * count_floor:.3g} for each count",
    )


def output_bound(query: str, k: int | None, n_nodes: int, epsilon: float, share: float, alpha: float) -> int | None:
    """A public bound ``B`` such that the released value, clipped to ``[-B, B]``, and its error bar's
    ends stay within ``±2^127`` (DuckDB's HUGEINT); None when ``B`` would reach ``OUTPUT_LIMIT``.

    ``B`` is the largest count a graph on ``n_nodes`` can have plus ``cap``, twice a closed-form
    bound on every half-width the ladder's error bar can take: any ladder's widths are at most
    ``GS``, so distance ``r`` lies on rung ``>= r / GS`` and ``P(|X - f| > m) <= 2 GS e^{-hm/GS} /
    (1 - e^{-h})``, which is below ``β`` from ``m = GS ln(2 GS / (β (1 - e^{-h}))) / h``; the bound
    ``dpgate.mechanisms.ladder_bounds`` computes is at most this (its sandwich bound), up to its
    0.2% search precision, at the smallest ``β`` of the calibration cells. Clipping the value to
    ``[-B, B]``, with the interval taken around the clipped value, keeps every count the interval
    held, since every count lies in ``[0, B]``."""
    eps_width = epsilon * share
    h = ladder.sampling_epsilon(epsilon - eps_width, n_nodes) / 2
    beta = min(b for _, _, b in ladder.statistic_cells(eps_width, alpha)) if eps_width else alpha
    gs = graphs.global_sensitivity(query, k, n_nodes)
    top = graphs.max_count(query, k, n_nodes)
    if gs == 0:
        return top if top < OUTPUT_LIMIT else None
    reach = (math.log(2 * gs) - math.log(beta) - math.log(-math.expm1(-h))) / h
    log_cap = math.log(2) + math.log(gs) + math.log1p(reach)
    if log_cap >= math.log(OUTPUT_LIMIT) or top >= OUTPUT_LIMIT:
        return None
    bound = top + 2 * math.ceil(math.exp(log_cap)) + 16
    return bound if bound < OUTPUT_LIMIT else None


def _check_size(label: str, query: str, k: int | None, n_nodes: int, epsilon: float, share: float, alpha: float):
    """Refuse, before the debit, a count whose values could not be released as 128-bit integers."""
    if output_bound(query, k, n_nodes, epsilon, share, alpha) is not None:
        return
    least = {"kstar": 2, "kclique": 3, "ktriangle": 1}.get(query)
    served = None
    if least is not None:
        for j in range(least, min(k, n_nodes + 1)):
            if output_bound(query, j, n_nodes, epsilon, share, alpha) is None:
                break
            served = j
    raise errors.UnsupportedQueryError(
        f"{label} on {n_nodes:,} nodes at ε = {epsilon:.3g}: the count (up to {_magnitude(graphs.max_count(query, k, n_nodes))}) "
        f"or its noise could exceed the 128-bit integers answers are released as",
        code="DP265",
        hint=(f"ask for k <= {served} on this graph at this ε, or a larger ε" if served is not None
              else "ask with a larger ε"),
    )  # fmt: skip


def _magnitude(x: int) -> str:
    return f"{x:.3g}" if x < 10**300 else f"about 10^{int(x.bit_length() * math.log10(2))}"


def _universe(table: ProtectedTable, catalog: Catalog, facts) -> tuple[int, str]:
    graph = table.graph
    if graph.get("nodes") is not None:
        return int(graph["nodes"]), f"declared N = {graph['nodes']}"
    node_table, col = graph["node_table"], graph["node_column"]
    if node_table not in catalog.public_tables:
        raise errors.PolicyError(
            f"The node table {node_table} of graph {table.name} is not a public table", code="DP318",
            hint="the owner declares the node universe with protect_graph(nodes=...)",
        )  # fmt: skip
    node_type = dict(facts.columns(node_table)).get(col)
    for end in ("src", "dst"):
        edge_type = table.columns[graph[end]].type
        if node_type is None or not join_exact(edge_type, node_type):
            # Joining differently typed ids would cast row by row, and a failing cast would
            # depend on the data; an integer id compared with a floating-point endpoint is compared
            # as a double, where distinct ids can equal one endpoint (one edge row, many edges):
            # refuse before anything is read (the owner may have changed a type since protect).
            raise errors.PolicyError(
                f"{table.name}.{graph[end]} ({edge_type}) and {node_table}.{col} ({node_type}) are not comparable",
                code="DP318",
                hint="the owner re-declares the graph with a node table of the endpoints' type",
            )
    n = len([v for v in facts.distinct_values(node_table, col) if v is not None])
    if n < 2:
        raise errors.PolicyError(f"The node table {node_table} lists fewer than 2 nodes", code="DP318")
    return n, f"public table {node_table}.{col}"


def _endpoint(node: exp.Expr, table: ProtectedTable, aliases: set[str]) -> str | None:
    """'src' or 'dst' when ``node`` names one of the graph's endpoint columns."""
    if not isinstance(node, exp.Column) or (node.table and node.table.lower() not in aliases):
        return None
    name = node.name.lower()
    graph = table.graph
    return "src" if name == graph["src"] else "dst" if name == graph["dst"] else None


def _function_form(q: exp.Select, table: ProtectedTable) -> tuple[list[tuple[str, str, int | None]], exp.Expr | None]:
    """``SELECT <expressions over subgraph counts> FROM g [WHERE <edge filter>]``, nothing else.

    The SELECT list becomes the post-processing query: besides the counts it may hold only
    literals and arithmetic, so that no expression can read a table or a column there.
    """
    from_ = q.args.get("from_")
    if from_ is None or not isinstance(from_.this, exp.Table) or from_.this.name.lower() != table.name:
        raise _refuse("A graph query reads the graph table in FROM", code="DP271")
    alias = from_.this.alias_or_name.lower()
    aliases = {alias, table.name}
    for arg in ("group", "having", "distinct", "qualify", "windows", "order", "limit", "offset", "with_"):
        if q.args.get(arg):
            raise _refuse(
                f"{arg.upper().rstrip('_')} is not supported in subgraph-count queries (they return one row)",
                code="DP271", hint=f"write SELECT TRIANGLE_COUNT(src, dst) FROM {table.name} [WHERE <edge filter>]",
            )
    # Exactly one read of the graph, in FROM: no subquery, EXISTS, ARRAY(SELECT ...) or lateral
    # table anywhere (classify let several reads of a graph through for the recognised shapes).
    for node in q.walk():
        if node is not q and isinstance(node, (exp.Query, exp.Subquery, exp.Lateral, exp.Window)):
            raise _refuse(
                "Subqueries and windows are not supported in subgraph-count queries", code="DP216",
                hint=f"write SELECT TRIANGLE_COUNT(src, dst) FROM {table.name} [WHERE <edge filter>]",
            )  # fmt: skip
        if isinstance(node, exp.Table) and node is not from_.this:
            raise _refuse("A graph query reads the graph table once, in FROM", code="DP215")
    calls: dict[str, tuple[str, str, int | None]] = {}
    for place in q.expressions:
        for node in place.find_all(exp.Func):
            name = function_name(node)
            if name in GRAPH_FUNCTIONS:
                calls.setdefault(node.sql(dialect="duckdb"), _call(node, name, table, aliases))
            elif isinstance(node, exp.AggFunc):
                raise _refuse(f"{node.sql(dialect='duckdb')}: a protected graph answers subgraph counts only", code="DP212")
    if not calls:
        raise _refuse(f"{table.name} is a protected graph: it answers subgraph counts only", code="DP211")
    for place in q.expressions:
        for node in place.find_all(exp.Column, exp.Star):
            if not any(isinstance(a, exp.Anonymous) and function_name(a) in GRAPH_FUNCTIONS for a in _ancestors(node)):
                raise _refuse(
                    f"{node.sql(dialect='duckdb')} outside a subgraph count would return edge-level values",
                    code="DP211",
                )
    where = q.args.get("where")
    cond = None
    if where is not None:
        for node in where.this.walk():
            if isinstance(node, (exp.AggFunc, exp.Subquery, exp.Query)) or (
                isinstance(node, exp.Func) and function_name(node) in GRAPH_FUNCTIONS
            ):
                raise _refuse(f"WHERE may only filter edges by their own columns, not {node.sql(dialect='duckdb')}",
                              code="DP271")
            if isinstance(node, exp.Column):
                if node.table and node.table.lower() not in aliases or node.name.lower() not in table.columns:
                    raise errors.ProgrammingError(
                        f"Column {node.sql(dialect='duckdb')} does not exist in {table.name}", code="DP218",
                        hint=f"columns are: {', '.join(table.columns)}",
                    )  # fmt: skip
        cond = where.this.copy().transform(
            lambda n: exp.column(n.name.lower(), quoted=True) if isinstance(n, exp.Column) else n
        )
        cond = exp.Anonymous(this="TRY", expressions=[cond])  # no runtime error may depend on a row
    return list(calls.values()), cond


def _ancestors(node: exp.Expr):
    parent = node.parent
    while parent is not None:
        yield parent
        parent = parent.parent


def _call(node: exp.Expr, name: str, table: ProtectedTable, aliases: set[str]) -> tuple[str, str, int | None]:
    label = node.sql(dialect="duckdb")
    args = list(node.expressions)
    query = GRAPH_FUNCTIONS[name]
    want = 2 if query == "triangle" else 3
    usage = f"{name.upper()}({table.graph['src']}, {table.graph['dst']}{'' if want == 2 else ', k'})"
    if len(args) != want:
        raise errors.ProgrammingError(f"{label} takes {want} arguments", code="DP282", hint=f"write {usage}")
    ends = {_endpoint(a, table, aliases) for a in args[:2]}
    if ends != {"src", "dst"}:
        raise errors.ProgrammingError(
            f"{label}: the first two arguments must be the graph's endpoint columns", code="DP282",
            hint=f"write {usage}",
        )  # fmt: skip
    k = None
    if want == 3:
        lit = args[2]
        if not (isinstance(lit, exp.Literal) and not lit.is_string and lit.this.isdigit()):
            raise errors.ProgrammingError(f"{label}: k must be a whole number", code="DP282", hint=f"write {usage}")
        k = int(lit.this)
    return label, query, k


def _triangle_join(q: exp.Select, table: ProtectedTable) -> tuple[str, str, None]:
    """The 3-way self-join whose equalities close a triangle, with COUNT(*) as its only output."""
    sources = [q.args["from_"].this] + [j.this for j in q.args.get("joins") or []]
    joins = q.args.get("joins") or []
    if len(sources) != 3 or any(not isinstance(s, exp.Table) or s.name.lower() != table.name for s in sources):
        raise _refuse("Joins over a protected graph are supported only as the 3-way triangle self-join", code="DP215")
    for j in joins:
        if (j.args.get("side") or "") or (j.args.get("kind") or "").upper() not in ("", "INNER", "CROSS"):
            raise _refuse("The triangle self-join uses inner joins only", code="DP215")
        if j.args.get("using") or j.args.get("method"):
            raise _refuse("The triangle self-join compares endpoints with ON or WHERE equalities", code="DP215")
    _only(q, {id(s) for s in sources}, {id(q)})
    aliases = [s.alias_or_name.lower() for s in sources]
    if len(set(aliases)) != 3:
        raise errors.ProgrammingError("Give each copy of the graph its own alias", code="DP218")
    if len(q.expressions) != 1 or not isinstance(q.expressions[0].unalias(), exp.Count) or not isinstance(
        q.expressions[0].unalias().this, exp.Star
    ):
        raise _refuse("The triangle self-join must select COUNT(*) only", code="DP271")
    for arg in ("group", "having", "distinct", "order", "limit", "offset", "qualify", "windows", "with_"):
        if q.args.get(arg):
            raise _refuse(f"{arg.upper().rstrip('_')} is not supported in the triangle self-join", code="DP271")
    conds = [j.args["on"] for j in joins if j.args.get("on") is not None]
    if q.args.get("where") is not None:
        conds.append(q.args["where"].this)
    parent: dict[tuple[str, str], tuple[str, str]] = {(a, e): (a, e) for a in aliases for e in ("src", "dst")}

    def find(x):
        while parent[x] != x:
            x = parent[x]
        return x

    for cond in conds:
        for eq in _conjuncts(cond):
            if not isinstance(eq, exp.EQ):
                raise _refuse(f"The triangle self-join may only equate endpoints, not {eq.sql(dialect='duckdb')}",
                              code="DP271")
            sides = []
            for side in (eq.this, eq.expression):
                if not isinstance(side, exp.Column) or side.table.lower() not in aliases:
                    raise _refuse("The triangle self-join compares alias-qualified endpoint columns (a.src = b.dst)",
                                  code="DP271")
                end = _endpoint(side, table, {side.table.lower()})
                if end is None:
                    raise _refuse(f"{side.sql(dialect='duckdb')} is not an endpoint column of {table.name}",
                                  code="DP271")
                sides.append((side.table.lower(), end))
            parent[find(sides[0])] = find(sides[1])
    classes: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for slot in parent:
        classes.setdefault(find(slot), []).append(slot)
    nodes = list(classes.values())
    triangle = (
        len(nodes) == 3
        and all(len(c) == 2 and c[0][0] != c[1][0] for c in nodes)
        and all(find((a, "src")) != find((a, "dst")) for a in aliases)
    )
    if not triangle:
        raise _refuse("These join conditions do not close a triangle (three edges, each node shared by two of them)",
                      code="DP271")
    return f"TRIANGLE_COUNT({table.graph['src']}, {table.graph['dst']})", "triangle", None


def _extra(select: exp.Expr, *allowed: str) -> bool:
    """Whether a SELECT (or UNION) has any clause beyond SELECT list and FROM (and ``allowed``)."""
    clauses = ("where", "group", "having", "order", "limit", "offset", "qualify", "windows", "distinct", "joins",
               "laterals", "with_", "sample", "pivots")  # fmt: skip
    return any(select.args.get(c) for c in clauses if c not in allowed)


def _only(q: exp.Expr, tables: set[int], queries: set[int]) -> None:
    """Every table read and every (sub)query of ``q`` is one the recognised shape expects."""
    for node in q.walk():
        if isinstance(node, exp.Table) and id(node) not in tables:
            raise _refuse(f"{node.sql(dialect='duckdb')} is not part of a recognised graph query", code="DP215")
        if isinstance(node, exp.Subquery):  # a parenthesised query: judged by what it wraps
            if id(node.this) not in queries:
                raise _refuse("Subqueries are not part of a recognised graph query", code="DP216")
        elif isinstance(node, (exp.Query, exp.Lateral, exp.Window)) and id(node) not in queries:
            raise _refuse("Subqueries and windows are not part of a recognised graph query", code="DP216")


def _conjuncts(cond: exp.Expr):
    if isinstance(cond, exp.And):
        yield from _conjuncts(cond.this)
        yield from _conjuncts(cond.expression)
    elif isinstance(cond, exp.Paren):
        yield from _conjuncts(cond.this)
    else:
        yield cond


def _degree_sum(q: exp.Select, table: ProtectedTable) -> tuple[str, str, int]:
    """``WITH d AS (degrees) SELECT SUM(f(deg)) FROM d`` with f(deg) = C(deg, k)."""
    ctes = q.args["with_"].expressions
    bad = _refuse(
        "The only CTE accepted over a graph is the degree table of the k-star sum",
        code="DP216",
        hint="WITH d AS (SELECT x, COUNT(*) AS deg FROM (SELECT src AS x FROM g UNION ALL SELECT dst FROM g) "
        "GROUP BY x) SELECT SUM(deg * (deg - 1) / 2) FROM d",
    )
    if len(ctes) != 1 or q.args["with_"].args.get("recursive"):
        raise bad
    cte = ctes[0]
    body = cte.this
    if not isinstance(body, exp.Select) or len(body.expressions) != 2 or _extra(body, "group"):
        raise bad
    key, deg = body.expressions
    count = deg.unalias()
    if not (isinstance(count, exp.Count) and isinstance(count.this, exp.Star)) or not isinstance(deg, exp.Alias):
        raise bad
    group = body.args.get("group")
    inner_from = body.args.get("from_")
    if group is None or len(group.expressions) != 1 or inner_from is None or body.args.get("joins"):
        raise bad
    sub = inner_from.this
    union = sub.this if isinstance(sub, exp.Subquery) else None
    if not isinstance(union, exp.Union) or union.args.get("distinct"):
        raise bad
    if _extra(union):
        raise bad
    ends = set()
    graph_reads = set()
    for part in (union.this, union.expression):
        if not isinstance(part, exp.Select) or len(part.expressions) != 1 or _extra(part):
            raise bad
        src = part.args.get("from_")
        if src is None or not isinstance(src.this, exp.Table) or src.this.name.lower() != table.name:
            raise bad
        ends.add(_endpoint(part.expressions[0].unalias(), table, {src.this.alias_or_name.lower(), table.name}))
        graph_reads.add(id(src.this))
    if ends != {"src", "dst"}:
        raise bad
    key_name = key.alias_or_name.lower()
    group_key = group.expressions[0]
    if not (isinstance(group_key, exp.Column) and group_key.name.lower() == key_name):
        raise bad
    outer_from = q.args.get("from_")
    if (
        outer_from is None
        or not isinstance(outer_from.this, exp.Table)
        or outer_from.this.name.lower() != cte.alias_or_name.lower()
        or _extra(q, "with_")
        or len(q.expressions) != 1
    ):
        raise bad
    _only(q, graph_reads | {id(outer_from.this)}, {id(q), id(body), id(union), id(union.this), id(union.expression)})
    total = q.expressions[0].unalias()
    if not isinstance(total, exp.Sum):
        raise bad
    k = _binomial_order(total.this, deg.alias.lower())
    if k is None:
        raise _refuse(
            f"SUM({total.this.sql(dialect='duckdb')}) over degrees is not a k-star count", code="DP271",
            hint="the summand must equal C(deg, k), e.g. deg * (deg - 1) * (deg - 2) / 6 for 3-stars",
        )
    return f"KSTAR_COUNT({table.graph['src']}, {table.graph['dst']}, {k})", "kstar", k


def _binomial_order(expr: exp.Expr, deg: str) -> int | None:
    """The k with expr(deg) = C(deg, k) for deg = 0 .. 40 (arithmetic on deg and numbers only)."""
    for node in expr.walk():
        ok = isinstance(node, (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.IntDiv, exp.Paren, exp.Neg, exp.Literal))
        if isinstance(node, exp.Column):
            ok = node.name.lower() == deg and not node.table
        elif isinstance(node, exp.Identifier):
            ok = isinstance(node.parent, exp.Column)
        if not ok or (isinstance(node, exp.Literal) and node.is_string):
            return None
    probe = expr.copy().transform(lambda n: exp.column("v") if isinstance(n, exp.Column) else n)
    con = duckdb.connect()
    try:
        values = [r[0] for r in con.execute(
            f"SELECT TRY(CAST({probe.sql(dialect='duckdb')} AS DOUBLE)) FROM range({_DEGREE_PROBES}) t(v) ORDER BY v"
        ).fetchall()]  # fmt: skip
    finally:
        con.close()
    for k in range(2, _DEGREE_PROBES - 1):
        if all(v is not None and abs(v - math.comb(d, k)) <= 1e-9 * max(1, math.comb(d, k)) for d, v in enumerate(values)):
            return k
    return None


def _post(q: exp.Select, shape: str, calls) -> tuple[exp.Select, list[OutputColumn]]:
    """The analyst's SELECT list over ``__noisy`` (counts as __a<i>)."""
    from dpgate.queries.analysis import output_column

    if shape != "functions":
        p = q.expressions[0]
        name = p.alias if isinstance(p, exp.Alias) else p.sql(dialect="duckdb").lower()
        return exp.select(exp.alias_(exp.column("__a0"), name, quoted=True)).from_("__noisy"), [OutputColumn(name, 0)]
    index = {label: i for i, (label, _, _) in enumerate(calls)}

    def rewrite(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Func) and node.sql(dialect="duckdb") in index:
            return exp.column(f"__a{index[node.sql(dialect='duckdb')]}")
        return node

    exprs, outputs = [], []
    for p in q.expressions:
        name = p.alias if isinstance(p, exp.Alias) else p.sql(dialect="duckdb").lower()
        new = (p.unalias() if isinstance(p, exp.Alias) else p).copy().transform(rewrite)
        exprs.append(exp.alias_(new, name, quoted=True))
        outputs.append(output_column(name, new))
    post = exp.select(*exprs).from_("__noisy")
    for arg in ("order", "limit", "offset"):
        if q.args.get(arg) is not None:
            post.set(arg, q.args[arg].copy().transform(rewrite))
    return post, outputs


# -- running ------------------------------------------------------------------------------------
def edges_sql(plan: SubgraphPlan, pairs: str | None = None) -> tuple[str, dict[str, Any]]:
    """(src index, dst index) of every edge row whose endpoints are in the public universe.

    ``pairs``: a relation of endpoint values ``(__a, __b)`` read elsewhere (a Spark graph's, its WHERE
    applied there) to map to node indices through the node table, instead of the edge table."""
    graph = plan.table.graph
    t = exp.to_table(plan.table.name, quoted=True).sql(dialect="duckdb")
    s, d = (exp.to_identifier(graph[c], quoted=True).sql(dialect="duckdb") for c in ("src", "dst"))
    where = f" WHERE {to_duckdb(plan.edges_where)}" if plan.edges_where is not None else ""
    edge_rows = f"SELECT {s} AS __a, {d} AS __b FROM main.{t}{where}" if pairs is None else f"SELECT * FROM {pairs}"
    if graph.get("nodes") is not None:
        n = int(graph["nodes"])
        inner = f"SELECT TRY_CAST({s} AS BIGINT) AS __s, TRY_CAST({d} AS BIGINT) AS __d FROM main.{t}{where}"
        return f"SELECT __s, __d FROM ({inner}) WHERE __s BETWEEN 0 AND {n - 1} AND __d BETWEEN 0 AND {n - 1}", {}
    nt = exp.to_table(graph["node_table"], quoted=True).sql(dialect="duckdb")
    nc = exp.to_identifier(graph["node_column"], quoted=True).sql(dialect="duckdb")
    nodes = (
        f"(SELECT __id, CAST(row_number() OVER (ORDER BY __id) - 1 AS BIGINT) AS __i "
        f"FROM (SELECT DISTINCT {nc} AS __id FROM main.{nt} WHERE {nc} IS NOT NULL))"
    )
    return (
        f"SELECT ns.__i AS __s, nd.__i AS __d FROM ({edge_rows}) e "
        f"JOIN {nodes} ns ON e.__a = ns.__id JOIN {nodes} nd ON e.__b = nd.__id"
    ), {}


def bind_check(con: duckdb.DuckDBPyConnection, plan: SubgraphPlan) -> None:
    """Bind the edge query and the post-processing (over placeholder counts) before the debit; a
    graph in Spark binds on its stub here and in Spark too."""
    sql, params = edges_sql(plan)
    noisy = ", ".join(
        f"CAST(0 AS BIGINT) AS __a{c.index}, CAST(0 AS BIGINT) AS __a{c.index}_lo, CAST(0 AS BIGINT) AS __a{c.index}_hi"
        for c in plan.counts
    )
    bind(con, sql, params)
    bind(con, f"WITH __noisy AS (SELECT {noisy}) {to_duckdb(plan.post)}")
    if backends.engine_of(plan.table) == "spark":
        backends.plane("spark").check_graph(plan)


def read_edges(con: duckdb.DuckDBPyConnection, plan: SubgraphPlan) -> np.ndarray:
    """The simple undirected graph the plan counts on (``graphs.simple_edges``), read where the edges
    are: the database file, or Spark (which returns the distinct edges, or the distinct endpoint
    pairs that the node table then maps here)."""
    if backends.engine_of(plan.table) == "spark":
        found = backends.plane("spark").graph_edges(plan)
        if plan.table.graph.get("nodes") is not None:
            s, d = found.column("__s").to_numpy(), found.column("__d").to_numpy()
            return graphs.simple_edges(np.asarray(s, dtype=np.int64), np.asarray(d, dtype=np.int64))
        name = f"__dp_spark_edges_{secrets.token_hex(4)}"
        database.register(con, name, found)
        try:
            sql, params = edges_sql(plan, pairs=name)
            res = con.execute(sql, params).fetchnumpy()
        finally:
            con.unregister(name)
    else:
        sql, params = edges_sql(plan)
        res = con.execute(sql, params).fetchnumpy()
    return graphs.simple_edges(np.asarray(res["__s"], dtype=np.int64), np.asarray(res["__d"], dtype=np.int64))


def answer(con: duckdb.DuckDBPyConnection, plan: SubgraphPlan, *, rng: np.random.Generator) -> Answer:
    """Read the edges once, then one ladder release (count and error bar) per count."""
    edges = read_edges(con, plan)
    alpha = plan.settings.alpha
    noisy, columns, notes = [], {}, []
    for c in plan.counts:
        lf = ladder.ladder_function(edges, plan.n_nodes, c.query, c.k)
        rel = ladder.release_with_interval(lf, c.epsilon, width_share=c.interval_share, alpha=alpha, rng=rng)
        # What the release says it spent: the count's ε and the error bar's (basic composition).
        spend(rel.interval.epsilon, what=f"{c.label} (count)")
        spend(rel.interval.epsilon_width, what=f"{c.label} (error bar)")
        bound = output_bound(c.query, c.k, plan.n_nodes, c.epsilon, c.interval_share, alpha)  # checked at planning
        clipped = min(max(rel.value, -bound), bound)
        value, low, high = clamped_interval(clipped, rel.interval.half_width, plan.settings.clamp_counts)
        iv = rel.interval
        desc = (
            f"ladder ({c.query}{'' if c.k is None else f', k={c.k}'}), GS {c.global_sensitivity}, "
            f"ε={c.epsilon - iv.epsilon_width:.4g} on the count"
            + (f" + {iv.epsilon_width:.4g} on the error bar (noisy {iv.statistic} = {iv.noisy_statistic}: "
               f"discrete Laplace, sensitivity 1)" if iv.epsilon_width else "; public error bar")
        )  # fmt: skip
        noisy.append(NoisyColumn(np.array([value], dtype=object), np.array([low], dtype=object),
                                 np.array([high], dtype=object), True, "ladder", c.epsilon, desc))  # fmt: skip
        if noise_dominates(rel.value, iv.half_width):
            notes.append(
                f"{c.label}: the noise is larger than the count on a graph this small: "
                f"read this as 'somewhere between {low:,} and {high:,}'"
            )
    names, types, rows, intervals = noisy_rows(con, plan, [()], noisy, plan.settings.intervals)
    for out in plan.outputs:
        if out.agg is not None:
            col = noisy[out.agg]
            columns[out.name] = ColumnNoise(col.mechanism, col.epsilon, col.scale)
    return Answer(names, types, rows, intervals, columns, notes)


def clamped_interval(value: int, half_width: int, clamp: bool) -> tuple[int, int, int]:
    """``(value, low, high)`` of a release ``value ± half_width``; with ``clamp``, the value is
    first clamped at 0 and the interval taken around it, ``[max(0, v - m), max(v, 0) + m]``.

    Clamping both ends of ``v ± m`` instead would print ``0 [0, 0]`` whenever ``v + m < 0``
    (the noise pushed ``v`` more than ``m`` below zero). Around the clamped value the
    interval still holds every count it held before (a true count ``f >= 0`` with
    ``|v - f| <= m`` and ``v < 0`` has ``f <= v + m < m``), so coverage stays at least
    ``1 - alpha``, and it is a point only when ``m = 0`` (an exact count).
    """
    value, m = int(value), int(half_width)
    if not clamp:
        return value, value - m, value + m
    return max(0, value), max(0, value - m), max(0, value) + m


def noise_dominates(value: int, half_width: int) -> bool:
    """Whether the error bar reaches zero: the count cannot be told from 0 at the bar's level,
    i.e. the noise is comparable to the count or larger (post-processing of the release)."""
    return half_width > 0 and int(value) - int(half_width) <= 0


def explain_rows(plan: SubgraphPlan) -> list[tuple]:
    rows = [
        ("graph", None, None, None, None, None, plan.notes[0]),
        ("edge budget", "edge-level DP", plan.epsilon, 0.0, None, None,
         "every potential edge pays ε (one shared budget; personalization rules do not apply)"),
    ]  # fmt: skip
    alpha = plan.settings.alpha
    for c in plan.counts:
        eps_width = c.epsilon * c.interval_share
        eps_count = c.epsilon - eps_width
        if eps_width:  # the widest bar any noisy statistic could give (the calibration's cells at their strictest)
            bound = ladder.largest_half_width(c.query, c.k, plan.n_nodes, eps_count, eps_width, alpha)
        else:
            lo, hi = graphs.statistic_range(c.query, plan.n_nodes, c.k)
            bound = ladder.interval_half_width(c.query, c.k, plan.n_nodes, eps_count, lo, hi, alpha)
        name = f"{c.query}{'' if c.k is None else f' k={c.k}'}"
        stat = ladder.width_statistic_label(c.query, c.k, plan.n_nodes, eps_width)
        detail = (
            f"{name}: ε split {eps_count:.4g} on the count (exponential mechanism over the ladder of local "
            f"sensitivities) + {eps_width:.4g} on the error bar (the width statistic {stat}, sensitivity 1, "
            f"with discrete Laplace noise); the bound shown is the public worst case"
            if eps_width
            else f"{name}: all ε={eps_count:.4g} on the count (exponential mechanism over the ladder); "
            "error bar from public quantities"
        )
        rows.append((c.label, "ladder", c.epsilon, 0.0, f"GS {c.global_sensitivity}", f"≤ ±{bound}", detail))
    for note in plan.notes[1:]:
        rows.append(("note", None, None, None, None, None, note))
    return rows


# -- the class -----------------------------------------------------------------------------------
class SubgraphQuery(QueryClass):
    """Subgraph counts (triangles, k-stars, k-triangles, k-cliques) on a protected graph."""

    name = "subgraph"
    title = "subgraph counts"
    plan_type = SubgraphPlan

    def recognises(self, classified: Classified, ctx) -> bool:
        return classified.kind == "dp" and classified.protected.kind == "graph"

    def plan(self, classified: Classified, ctx) -> SubgraphPlan:
        return plan(classified, ctx.catalog, ctx.session, ctx.facts)

    def bind_check(self, con: duckdb.DuckDBPyConnection, plan: SubgraphPlan, probe: str) -> None:
        bind_check(con, plan)

    def answer(self, run) -> Answer:
        with metered() as spent:  # several counts split ε and compose sequentially on the one edge budget
            out = answer(run.con, run.plan, rng=run.rng)
        out.consumed = tuple(spent)
        return out

    def explain_rows(self, plan: SubgraphPlan, subjects) -> list[tuple]:
        rows = []
        if isinstance(subjects, errors.Error):
            rows.append(("edge budget", None, None, None, None, None, f"the query would be refused: {subjects.message}"))
        return rows + explain_rows(plan)


QUERY_CLASS = SubgraphQuery()
