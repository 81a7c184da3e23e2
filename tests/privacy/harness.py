"""The neighbour-differential harness: exact statistics dpgate perturbs, on D and on D′.

dpgate's contract (docs/privacy-model.md): neighbouring databases differ in all the
rows of ONE subject of a protected table (for graphs: in ONE edge of the simple undirected
graph). For every accepted DP statement the exact statistics the mechanism adds noise to must
move by at most the sensitivity the plan declares, only the charged subjects' rows may reach
the aggregation, and whether the statement is answered (or refused, with which code) must
not depend on the neighbour.

This module is an internal hook *in the test code*: it plans a statement exactly as
``Gateway._dp`` does (classify -> registry -> ``plan`` -> ``bind_check`` over the roster),
then computes, without a debit and without noise, what the query class would perturb, with
a FIXED salt so that the keyed per-subject row sample is drawn identically on D and D′:

- counting class: ``backends.duckdb.run`` -> one statistic per noise component (AVG's
  "centered sum" centred as ``mechanisms.laplace._avg`` does before the noise), declared L1
  bound = the component's sensitivity; DP key selection adds the per-key subject counts
  (L1 <= ``key_selection.sensitivity``, L∞ <= 1);
- top-k: per-item subject frequencies from the class's own pairs SQL through the
  mechanism's own ``_stats_from`` (L∞ <= 1, the monotone "1 per item" of EXPLAIN), the
  exact counts of the shown ``count`` column (L1 <= ``counts.sensitivity`` over the selected
  items), for the TPS / ``laplace`` methods the truncated frequencies (L1 <= θ·2^GRID_BITS)
  and the truncation quality (L∞ <= 1), and for key selection the per-key subject counts;
- subgraph counts: the simple graph from ``edges_sql`` and ``ladder.ladder_function``: the
  count moves by at most min(I_0(g), I_0(g′)) <= GS (I_0 = local sensitivity), the ladder
  property I_t(g) <= I_{t+1}(g′) both ways, the width statistic by at most 1;
- set-valued releases (``USING diffpart``): the records as a multiset of itemsets (L1 <= 1), and
  the marginals path's statistics at several truncations (``set_statistics``);
- synthetic releases: the encoded source (``source_sql`` + ``encode_query``) as a multiset
  of code tuples (add/remove distance <= ``max_rows``: the model runs at ε / max_rows), and
  every 1- and 2-way marginal (L1 <= ``max_rows``); for the supermodular release the records as
  tuples of hierarchy leaves (L1 <= 1: one record per subject; every cube count is a sum of them);
  for a PrivTree synopsis the points (L1 <= ``max_rows``) and the counts of each family of boxes
  it measures, in the tree released on D (L1 <= ``max_rows`` per family).

``compare`` returns every violation with its numbers; ``assert_neighbours`` raises
``NeighbourViolation`` (an AssertionError) listing them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import math
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import numpy as np

import dpgate
from dpgate import backends, errors
from dpgate.backends import duckdb as exact_mod
from dpgate.catalog import sample_order
from dpgate.catalog.owner import Owner
from dpgate.frontend.classify import classify
from dpgate.frontend.dialect import parse_one
from dpgate.mechanisms import graphs, ladder
from dpgate.mechanisms import topk as topk_mech
from dpgate.mechanisms.base import AVG, COUNT_SUBJECTS
from dpgate.plans import CountPlan, SubgraphPlan, SynthesisPlan, TopKPlan
from dpgate.queries import subgraph as subgraph_mod
from dpgate.queries import topk as topk_mod
from dpgate.queries.synthetic import tabular

import set_statistics

#: The fixed salt of the keyed per-subject sample: the same on D and D′.
SALT = 0x2545F4914F6CDD1D & ((1 << 62) - 1)
#: Analyst with a large quota and test seeds, added to the harness's databases.
ANALYST = "harness"
SEED = 20261122


#: What a failed exact pass raises: DuckDB's errors, and Spark's (Py4J and PySpark exceptions,
#: which share no base class but ``Exception``) for tables whose rows live in Spark.
_ENGINE_ERRORS = (duckdb.Error, Exception)


class NotDP(Exception):
    """The statement is not a DP statement over a protected table (SHOW, public, ...)."""


class NeighbourViolation(AssertionError):
    """The exact statistics of D and D′ differ by more than the plan declares."""

    def __init__(self, violations: list[Violation], context: str = ""):
        self.violations = violations
        head = f"{len(violations)} neighbour violation(s)" + (f" [{context}]" if context else "")
        super().__init__(head + ":\n" + "\n".join(f"  - {v}" for v in violations))


# -- statistics ----------------------------------------------------------------------------------
@dataclass
class Statistic:
    """One exact statistic the mechanism perturbs (a vector over cells) and its declared bounds."""

    name: str
    values: dict[Any, float]  # cell -> exact value (missing cells are 0)
    l1: float | None = None  # declared bound on sum |Δ| over cells
    linf: float | None = None  # declared bound on max |Δ|
    top: int | None = None  # l1 applies to the `top` largest |Δ| only (a selection of that many items)
    fixed_keys: bool = False  # the cells are a public domain: identical on D and D′
    tolerance: float = 0.0  # float slack (real-valued qualities only)
    ladder: tuple[tuple[int, ...], int, int] | None = None  # graphs: (rungs, GS, convergence cap)


@dataclass
class Exact:
    """The exact statistics of one statement on one database."""

    kind: str  # count | top_k | subgraph | synthetic
    plan: Any
    stats: dict[str, Statistic]
    hints: dict[str, Any] = field(default_factory=dict)  # passed to the D′ computation (e.g. selected items)

    def values(self) -> dict[str, dict]:
        """Each statistic's values by cell: what two engines, or two runs, must agree on."""
        return {name: s.values for name, s in self.stats.items()}


@dataclass
class Violation:
    statistic: str
    what: str
    observed: float
    declared: float
    cells: list[tuple[Any, float, float]]  # worst cells: (cell, value on D, value on D′)

    def __str__(self) -> str:
        shown = ", ".join(f"{c!r}: {a} -> {b}" for c, a, b in self.cells[:5])
        return f"{self.statistic}: {self.what} {self.observed:g} > declared {self.declared:g} (cells {shown})"


def _key(v: Any) -> Any:
    """A hashable, NaN-safe cell key."""
    if isinstance(v, tuple):
        return tuple(_key(x) for x in v)
    if isinstance(v, float) and math.isnan(v):
        return "NaN"
    return v


# -- planning, as the gateway does ---------------------------------------------------------------
def roster_charged(plan) -> str:
    """The charged relation ``bind_check`` uses: every unit on the roster, partition 0."""
    return f"(SELECT unit, 0 AS part FROM {plan.table.roster_table_sql})"


def plan_statement(gateway, sql: str):
    """(query class, plan) of a DP statement, as ``Gateway._dp`` builds them (no debit).

    EXPLAIN PRIVACY plans its inner statement. Raises ``NotDP`` for statements without a
    protected table, and dpgate's ``errors.Error`` for refusals (plan or bind_check).
    """
    statement = parse_one(sql)
    cat = gateway.catalog()
    classified = classify(statement, cat)
    if classified.kind == "explain":
        classified = classified.inner
    if classified.kind not in ("dp", "synthetic"):
        raise NotDP(classified.kind)
    qc, plan = gateway._plan(classified, cat)  # the allowlist, engine rewrites and served classes, as the gateway
    with backends.planes(gateway._plane):  # a table whose rows live in Spark is checked there too
        qc.bind_check(gateway._con, plan, roster_charged(plan))
    return qc, plan


def planning_outcome(gateway, sql: str) -> tuple[str, str | None]:
    """('ok', class) when the statement plans and binds, else ('error', code)."""
    try:
        _, plan = plan_statement(gateway, sql)
    except errors.Error as e:
        return "error", e.code
    return "ok", plan.query_class


def gateway_outcome(path: str | Path, sql: str, *, analyst: str = ANALYST, seed: int = SEED) -> tuple[str, str | None]:
    """Run the full statement through ``dpgate.connect``: ('ok', class) or ('error', code)."""
    with dpgate.connect(str(path), analyst=analyst, test_seed=seed) as con:
        cur = con.cursor()
        try:
            cur.execute(sql)
            cur.fetchall()
        except errors.Error as e:
            return "error", e.code
        return "ok", cur.release.query_class if cur.release is not None else None


# -- exact statistics per class ------------------------------------------------------------------
def exact_statistics(con: duckdb.DuckDBPyConnection, plan, *, charged: str | None = None, salt: int = SALT,
                     hints: dict[str, Any] | None = None, n_parts: int = 1) -> Exact:  # fmt: skip
    """What the plan's mechanism perturbs, exactly, over ``charged`` (default: the roster).

    ``n_parts`` > 1 (counting class, partition personalization): one statistic per part.
    """
    charged = charged or roster_charged(plan)
    hints = hints or {}
    if isinstance(plan, CountPlan):
        return _counting(con, plan, charged, salt, n_parts)
    if isinstance(plan, TopKPlan):
        return _topk(con, plan, charged, salt, hints)
    if isinstance(plan, SubgraphPlan):
        return _subgraph(con, plan)
    if isinstance(plan, SynthesisPlan):
        return _synthetic(con, plan, charged, salt, hints)
    raise TypeError(f"no harness for {type(plan).__name__}")


def _counting(con, plan: CountPlan, charged: str, salt: int, n_parts: int = 1) -> Exact:
    if backends.engine_of(plan.table) == "duckdb":
        ex = exact_mod.run(con, plan, charged, salt, n_parts)
    else:  # the rows live in Spark: the gateway's plane (``statistics_of`` / ``check_statement`` open it)
        ex = backends.plane(backends.engine_of(plan.table)).exact(con, plan, charged, salt, n_parts)
    public = plan.key_selection is None
    cells = list(range(len(ex.keys))) if public else [_key(tuple(k)) for k in ex.keys]
    stats: dict[str, Statistic] = {}
    for part in range(n_parts):
        suffix = f" part {part}" if n_parts > 1 else ""
        for agg in plan.aggs:
            for comp in agg.components:
                arr = ex.components[(agg.index, comp.label)][part]
                if agg.kind == AVG and comp.label == "centered sum":
                    # mechanisms.laplace._avg centres the exact sum before the noise [sens-avg].
                    g = agg.grid
                    mid = (round(agg.lower / g) + round(agg.upper / g)) // 2
                    arr = arr - ex.components[(agg.index, "count")][part] * mid
                name = f"agg {agg.index} {agg.label} [{comp.label}]{suffix}"
                if comp.label == "quantile":
                    # A quantile's input: each cell's multiset of grid values. One subject adds or
                    # removes at most max_rows of them in all (the rank utility's sensitivity).
                    counts: dict[Any, int] = {}
                    for c, vals in zip(cells, arr):
                        for v in vals.tolist():
                            counts[(c, v)] = counts.get((c, v), 0) + 1
                    stats[name] = Statistic(name, counts, l1=comp.sensitivity, fixed_keys=False)
                    continue
                stats[name] = Statistic(
                    name, {c: int(v) for c, v in zip(cells, arr)}, l1=comp.sensitivity,
                    linf=1 if agg.kind == COUNT_SUBJECTS else None, fixed_keys=public,
                )  # fmt: skip
    if plan.key_selection is not None:
        ks = plan.key_selection
        stats["key selection subjects"] = Statistic(
            "key selection subjects", {c: int(v) for c, v in zip(cells, ex.subjects)}, l1=ks.sensitivity, linf=1
        )
    return Exact("count", plan, stats, {"labels": list(ex.keys)})


@contextlib.contextmanager
def _no_noise():
    """dpgate's own exact count code, with the noise draw replaced by zeros (harness only)."""
    original = topk_mech.noise.discrete_laplace

    def zeros(epsilon, sensitivity, size, rng):
        return np.zeros(int(size), dtype=np.int64)

    topk_mech.noise.discrete_laplace = zeros
    try:
        yield
    finally:
        topk_mech.noise.discrete_laplace = original


class _FixedSalt:
    """Stands in for the generator ``noisy_counts`` draws its 62-bit salt from."""

    def __init__(self, salt: int):
        self.salt = salt

    def integers(self, low, high=None, size=None):
        return self.salt


def _topk(con, plan: TopKPlan, charged: str, salt: int, hints: dict[str, Any]) -> Exact:
    # The query class's own statements, on the engine that holds the rows (a Spark table's on Spark).
    with topk_mod._exact(con, plan, charged) as exact:
        return _topk_stats(exact, plan, salt, hints)


def _topk_stats(exact, plan: TopKPlan, salt: int, hints: dict[str, Any]) -> Exact:
    stats: dict[str, Statistic] = {}
    if plan.columns:
        labels = list(plan.columns)
    elif plan.key_selection is None:
        labels = list(itertools.product(*[k.domain for k in plan.keys]))
    else:
        nk = len(plan.keys)
        rows = exact.key_subjects(salt)
        stats["key selection subjects"] = Statistic(
            "key selection subjects", {_key(tuple(r[:nk])): int(r[nk]) for r in rows},
            l1=plan.key_selection.sensitivity, linf=1,
        )  # fmt: skip
        # The universe key selection would release: every key held on D (the same list on D′).
        labels = hints.get("labels") or sorted({tuple(r[:nk]) for r in rows}, key=repr)
        if not labels:
            return Exact("top_k", plan, stats, {"labels": labels})
    pairs = exact.pairs(labels if plan.key_selection is not None else None)
    n_items = len(labels)
    cells = [_key(lab if isinstance(lab, tuple) else (lab,)) for lab in labels]
    public = plan.key_selection is None
    lengths = plan.method in topk_mech._LENGTH_METHODS
    st = topk_mech._stats_from(pairs, n_items, lengths)
    freq = {c: int(v) for c, v in zip(cells, st.counts)}
    stats["frequency"] = Statistic("frequency", freq, linf=1, fixed_keys=public)
    if lengths:
        shares = topk_mech.planned_shares(plan.method, plan.selection_epsilon)
        eps_f = shares.get("phase1", shares.get("counts", plan.selection_epsilon))
        for theta in sorted({1, 2, 5, 18, n_items}):
            stats[f"truncated θ={theta}"] = Statistic(
                f"truncated θ={theta}", {c: int(v) for c, v in zip(cells, st.truncated(theta))},
                l1=theta << topk_mech.GRID_BITS, fixed_keys=public,
            )  # fmt: skip
        q = topk_mech.truncation_quality(st.length_histogram(), eps_f)
        stats["truncation quality"] = Statistic(
            "truncation quality", {i + 1: float(v) for i, v in enumerate(q)}, linf=1.0, fixed_keys=True, tolerance=1e-6
        )
    if plan.counts is not None:
        k = min(plan.k, n_items)
        selected = hints.get("selected")
        if selected is None:  # the k most frequent items on D: one fixed selection for D and D′
            selected = [int(i) for i in np.argsort(-np.asarray(st.counts), kind="stable")[:k]]
        if plan.max_groups < len(selected):
            with _no_noise():
                vals = topk_mech.counts_of(pairs, selected, 1.0, rng=_FixedSalt(salt),
                                           max_items_per_subject=plan.max_groups)  # fmt: skip
        else:
            vals = [int(st.counts[i]) for i in selected]
        stats["counts of the selected items"] = Statistic(
            "counts of the selected items", {cells[i]: int(v) for i, v in zip(selected, vals)},
            l1=plan.counts.sensitivity, fixed_keys=True,
        )  # fmt: skip
        hints = {**hints, "selected": selected}
    return Exact("top_k", plan, stats, {**hints, "labels": labels})


def _subgraph(con, plan: SubgraphPlan) -> Exact:
    edges = subgraph_mod.read_edges(con, plan)  # the class's own read, on the engine that holds the edges
    stats: dict[str, Statistic] = {}
    for c in plan.counts:
        lf = ladder.ladder_function(edges, plan.n_nodes, c.query, c.k)
        name = f"{c.label} ({c.query}{'' if c.k is None else f', k={c.k}'})"
        rungs = (lf.rungs, lf.global_sensitivity, graphs.convergence_cap(plan.n_nodes))
        stats[name] = Statistic(name, {(): lf.value}, l1=lf.global_sensitivity, fixed_keys=True, ladder=rungs)
        if lf.width_statistic is not None:
            stats[f"{name} width statistic"] = Statistic(
                f"{name} width statistic", {(): lf.width_statistic}, l1=1, fixed_keys=True
            )
            eps_width = c.epsilon * c.interval_share
            if eps_width > 0:  # the statistic the release reads at its ε (triangles: c_K, its own knee)
                released = ladder.width_statistic(lf, eps_width)
                stats[f"{name} released width statistic"] = Statistic(
                    f"{name} released width statistic", {(): released}, l1=1, fixed_keys=True
                )
    return Exact("subgraph", plan, stats, {"edges": len(edges)})


def _counts(a: np.ndarray) -> dict[Any, int]:
    """Multiset of the rows (or values) of an integer array."""
    if a.ndim == 1:
        values, n = np.unique(a, return_counts=True)
        return dict(zip(values.tolist(), n.tolist()))
    if len(a) == 0:
        return {}
    rows, n = np.unique(a, axis=0, return_counts=True)
    return dict(zip(map(tuple, rows.tolist()), n.tolist()))


def _synthetic(con, plan: SynthesisPlan, charged: str, salt: int, hints: dict[str, Any] | None = None) -> Exact:
    hints = hints or {}
    if plan.mechanism == "diffpart":  # the records (one itemset per subject): one subject moves one record
        from dpgate.queries.synthetic import setvalued

        got = zip(*setvalued.read_records(con, plan, charged, salt))  # on the engine that holds the rows
        records: dict[int, list[int]] = {}
        for r, i in got:
            records.setdefault(r, []).append(i)
        counts: dict = {}
        for items in records.values():
            key = tuple(sorted(items))
            counts[key] = counts.get(key, 0) + 1
        stats = {"records": Statistic("records", counts, l1=1)}
        marginals, selected = set_statistics.marginals(plan, list(records.values()), hints.get("selected"))
        stats.update({name: Statistic(name, values, l1=l1, fixed_keys=True) for name, (values, l1) in marginals.items()})
        return Exact("synthetic", plan, stats, {"rows": len(records), "selected": selected})
    if plan.mechanism == "privtree_markov":  # the sequences: one subject is one sequence
        from dpgate.queries.synthetic import sequences

        seqs = sequences.read_sequences(con, plan, charged)  # on the engine that holds the rows
        counts: dict = {}
        for s in seqs:
            key = tuple(int(x) for x in s)
            counts[key] = counts.get(key, 0) + 1
        rows = sum(len(s) for s in seqs)
        return Exact("synthetic", plan, {"sequences": Statistic("sequences", counts, l1=1)}, {"rows": rows})
    if plan.mechanism == "supermodular":  # the records as leaf tuples: one subject is one record
        from dpgate.queries.synthetic import generalized

        leaves = generalized.fetch_leaves(con, plan, charged, salt)
        counts = _counts(leaves)
        return Exact("synthetic", plan, {"records": Statistic("records", counts, l1=1)}, {"rows": len(leaves)})
    if plan.mechanism == "privtree":  # the points: one subject moves at most max_rows of them
        from dpgate.mechanisms import privtree
        from dpgate.queries.synthetic import synopsis

        pts_raw = synopsis.read_points(con, plan, charged, salt)  # on the engine that holds the rows
        got = [tuple(float(x) for x in row) for row in pts_raw]
        counts: dict = {}
        for row in got:
            counts[row] = counts.get(row, 0) + 1
        stats = {"points": Statistic("points", counts, l1=plan.max_rows)}
        # The node counts: each family the release measures is a set of disjoint boxes of the tree,
        # which is public once released; on D′ the same boxes (the tree released on D, a fixed
        # seed) hold counts that move by at most max_rows per family.
        o = plan.options
        lower, upper = np.array(o["lower"]), np.array(o["upper"])
        pts = privtree.prepare(np.array(got, dtype=float).reshape(-1, len(o["columns"])), lower, upper, o["integer"])
        syn = (hints or {}).get("privtree tree")
        if syn is None:
            syn = privtree.release(pts, lower, upper, plan.epsilon, rng=np.random.default_rng(SEED),
                                   contributions=plan.max_rows, tree_share=o["tree_share"], integer=o["integer"])  # fmt: skip
        held = np.bincount(syn.locate(pts), minlength=len(syn.counts))
        for k in range(int(syn.depth.max()), 0, -1):  # a node holds its leaves' points
            at = np.flatnonzero(syn.depth == k)
            np.add.at(held, syn.parent[at], held[at])
        for name, family in syn.families.items():
            stats[f"{name} counts"] = Statistic(f"{name} counts", dict(zip(family.tolist(), held[family].tolist())),
                                                l1=plan.max_rows, fixed_keys=True)  # fmt: skip
        return Exact("synthetic", plan, stats, {"rows": len(got), "privtree tree": syn})
    # The release's own exact pass, on the engine that holds the rows (weighted distinct rows from Spark)
    codes = tabular.coded_rows(con, plan, charged, salt).rows()
    m = plan.max_rows
    names = [c.name for c in plan.codings]
    stats = {"rows": Statistic("rows", _counts(codes), l1=m)}
    for j, n in enumerate(names):
        stats[f"1-way {n}"] = Statistic(f"1-way {n}", _counts(codes[:, j]), l1=m)
    for a, b in itertools.combinations(range(len(names)), 2):
        pair = codes[:, a] * (plan.codings[b].size + 1) + codes[:, b]
        stats[f"2-way {names[a]} x {names[b]}"] = Statistic(f"2-way {names[a]} x {names[b]}", _counts(pair), l1=m)
    return Exact("synthetic", plan, stats, {"rows": len(codes)})


# -- comparison ----------------------------------------------------------------------------------
def compare(before: Exact, after: Exact, *, scale: float = 1.0) -> list[Violation]:
    """Every way ``after`` (on D′) moved further from ``before`` (on D) than declared.

    ``scale`` multiplies every declared bound (the harness's own test uses 0.5).
    """
    out: list[Violation] = []
    for name, a in before.stats.items():
        b = after.stats.get(name)
        if b is None:
            out.append(Violation(name, "statistic missing on D′", 1, 0, []))
            continue
        if a.fixed_keys and set(a.values) != set(b.values):
            diff = sorted(map(repr, set(a.values) ^ set(b.values)))[:5]
            out.append(Violation(name, f"public key set differs ({diff})", len(set(a.values) ^ set(b.values)), 0, []))
        cells = set(a.values) | set(b.values)
        deltas = sorted(((abs(b.values.get(c, 0) - a.values.get(c, 0)), c) for c in cells), key=lambda t: -t[0])
        worst = [(c, a.values.get(c, 0), b.values.get(c, 0)) for d, c in deltas[:5] if d]
        l1_bound = a.l1
        if a.ladder is not None:
            # Ladder functions: |f(g) - f(g′)| <= LS(g) <= I_0(g), on both sides, and <= GS.
            i0 = [x.ladder[0][0] if x.ladder[0] else x.ladder[1] for x in (a, b)]  # I_0 (GS when no rung)
            l1_bound = min(i0)
            out += _ladder_property(name, a.ladder, b.ladder)
        if l1_bound is not None:
            used = deltas[: a.top] if a.top is not None else deltas
            l1 = sum(d for d, _ in used)
            if l1 > l1_bound * scale + a.tolerance:
                out.append(Violation(name, "L1 change", l1, l1_bound * scale, worst))
        if a.linf is not None and deltas:
            linf = deltas[0][0]
            if linf > a.linf * scale + a.tolerance:
                out.append(Violation(name, "L∞ change", linf, a.linf * scale, worst))
    return out


def _ladder_property(name: str, a, b) -> list[Violation]:
    """I_t(g) <= I_{t+1}(g′) for neighbours, both ways (Zhang et al. 2015, Definition 5.1)."""
    (ra, gs, cap), (rb, _, _) = a, b

    def width(r, t):
        return r[t] if t < len(r) else gs

    out = []
    for x, y, label in ((ra, rb, "D -> D′"), (rb, ra, "D′ -> D")):
        for t in range(cap + 1):
            if width(x, t) > width(y, t + 1):
                out.append(Violation(f"{name} ladder {label}", f"I_{t} > I_{t + 1} of the neighbour:", width(x, t),
                                     width(y, t + 1), []))  # fmt: skip
                break
    return out


def differences(a: Exact, b: Exact) -> list[str]:
    """Where two computations of the same statement differ at all (key sets or values)."""
    out = []
    for name in sorted(set(a.stats) | set(b.stats)):
        x, y = a.stats.get(name), b.stats.get(name)
        if x is None or y is None:
            out.append(f"{name}: only on one side")
            continue
        if set(x.values) != set(y.values):
            out.append(f"{name}: cells differ ({sorted(map(repr, set(x.values) ^ set(y.values)))[:5]})")
            continue
        diff = [(c, x.values.get(c, 0), y.values.get(c, 0)) for c in set(x.values) | set(y.values)
                if x.values.get(c, 0) != y.values.get(c, 0)]  # fmt: skip
        if diff:
            out.append(f"{name}: {len(diff)} cell(s) differ, e.g. {sorted(diff, key=repr)[:5]}")
    return out


def assert_neighbours(before: Exact, after: Exact, *, scale: float = 1.0, context: str = "") -> None:
    found = compare(before, after, scale=scale)
    if found:
        raise NeighbourViolation(found, context)


def check_statement(gw_d, gw_n, sql: str, *, scale: float = 1.0, context: str = "",
                    before: Exact | None = None) -> tuple[Exact | None, Exact | None]:  # fmt: skip
    """Plan on D and D′ (same outcome required), compute and compare the exact statistics.

    Returns (None, None) when both refuse the statement the same way. ``before``: the
    statistics of D computed earlier (``statistics_of``), to check several neighbours of one D.
    """
    def planned(gw):
        try:
            plan = plan_statement(gw, sql)[1]
        except errors.Error as e:
            return ("error", e.code), None
        return ("ok", plan.query_class), plan

    out_d, plan_d = (("ok", before.plan.query_class), before.plan) if before is not None else planned(gw_d)
    out_n, plan_n = planned(gw_n)
    assert out_d == out_n, f"planning outcome differs on D and D′ [{context}]: {out_d} vs {out_n}"
    if plan_d is None:
        return None, None
    failed = {}
    if before is None:
        try:
            with backends.planes(gw_d._plane):
                before = exact_statistics(gw_d._con, plan_d)
        except _ENGINE_ERRORS as e:  # the gateway would answer DP404 after the debit
            failed["D"] = str(e).splitlines()[0]
    try:
        with backends.planes(gw_n._plane):
            after = exact_statistics(gw_n._con, plan_n, hints=before.hints if before is not None else None)
    except _ENGINE_ERRORS as e:
        failed["D′"] = str(e).splitlines()[0]
    assert not failed, f"the exact pass fails (DP404 after the debit) on {sorted(failed)} [{context}]: {failed}"
    assert_neighbours(before, after, scale=scale, context=context)
    return before, after


def statistics_of(gw, sql: str, **kwargs) -> Exact:
    """Plan (as the gateway does) and compute the exact statistics of ``sql`` on one database."""
    plan = plan_statement(gw, sql)[1]
    with backends.planes(gw._plane):
        return exact_statistics(gw._con, plan, **kwargs)


# -- databases -----------------------------------------------------------------------------------
def copy_db(src: str | Path, dst: str | Path) -> Path:
    shutil.copy(src, dst)
    wal = Path(str(src) + ".wal")
    if wal.exists():
        shutil.copy(wal, str(dst) + ".wal")
    return Path(dst)


def mutate(path: str | Path, sql: Iterable[str] | str) -> Path:
    """Run data-changing SQL on a database file with a plain DuckDB connection (closed after)."""
    con = duckdb.connect(str(path))
    try:
        for s in [sql] if isinstance(sql, str) else sql:
            con.execute(s)
    finally:
        con.close()
    return Path(path)


def sample_per_query(path: str | Path) -> None:
    """Every protected table of the file samples per query (the file's stored orders dropped).

    The neighbour checks couple two worlds' samples through the per-query hash, the same for every
    world under one salt. A stored order is drawn afresh from the OS in each world (and rebuilt when a
    mutation leaves it stale), so two worlds' samples would differ in every sampled subject; its own
    argument, on neighbours whose orders are coupled, is checked in ``test_sample_order.py``."""
    con = duckdb.connect(str(path))
    try:
        for table, options in con.execute("SELECT table_name, options FROM dpgate.protected_tables").fetchall():
            opts = json.loads(options or "{}")
            if opts.get("sample_order") != sample_order.PER_QUERY:
                opts["sample_order"] = sample_order.PER_QUERY
                con.execute("UPDATE dpgate.protected_tables SET options = ? WHERE table_name = ?", [json.dumps(opts), table])
                sample_order.drop(con, table)
    finally:
        con.close()


def add_harness_analyst(path: str | Path) -> None:
    with Owner(path, create=False) as owner:
        owner.add_analyst(ANALYST, epsilon=1e6, delta=1.0, epsilon_per_query=100.0, delta_per_query=0.5)
        owner.allow_test_seed(ANALYST)


@contextlib.contextmanager
def gateways(*paths: str | Path):
    """One harness-analyst gateway per path (closed on exit)."""
    cons = [dpgate.connect(str(p), analyst=ANALYST, test_seed=SEED) for p in paths]
    try:
        yield [c.gateway for c in cons]
    finally:
        for c in cons:
            c.close()


def halved(plan):
    """The same plan with every declared sensitivity halved (rounded down, at least 1): wrong on purpose."""
    if isinstance(plan, CountPlan):
        aggs = tuple(
            dataclasses.replace(a, components=tuple(dataclasses.replace(c, sensitivity=max(1, c.sensitivity // 2))
                                                    for c in a.components))  # fmt: skip
            for a in plan.aggs
        )
        return dataclasses.replace(plan, aggs=aggs)
    if isinstance(plan, SynthesisPlan):
        raise TypeError("a synthesis plan's bound is max_rows, which also sets its sample; halve it with scale")
    raise TypeError(type(plan).__name__)



# -- the demo database and its neighbours --------------------------------------------------------
#: Units of the off-roster rows added to the heavy world (never on a roster: never charged).
OFF_ROSTER = (10_000_001, 10_000_002)


@dataclass
class Neighbour:
    path: Path
    changed: dict[str, str]  # protected table -> what differs from the base (tables not listed: identical)


@dataclass
class DemoWorld:
    base: Path  # the demo, plus the harness analyst
    neighbours: list[Neighbour]  # each removes one subject per subject space / changes one edge per graph
    heavy: Path  # the demo, a heavy subject per space (over max_rows; extreme, out-of-domain values), off-roster rows
    heavy_neighbour: Neighbour  # heavy minus its heavy subjects
    restricted: Path  # heavy with only the units u % 3 = 0 that are on the roster
    subjects: dict[str, list[int]]
    heavy_subjects: dict[str, int]


def _one(con, sql: str):
    row = con.execute(sql).fetchone()
    assert row is not None, sql
    return row[0]


def _graph_edits(con, table: str, nodes: list | None) -> tuple[tuple, tuple]:
    """(the edge of largest support, the absent pair with most common neighbours at the top-degree node)."""
    raw = con.execute(f"SELECT src, dst FROM {table}").fetchall()
    if nodes is None:
        index = None
        s = np.array([a for a, _ in raw], dtype=np.int64)
        d = np.array([b for _, b in raw], dtype=np.int64)
        n = int(max(s.max(), d.max())) + 1
    else:
        index = {v: i for i, v in enumerate(nodes)}
        s = np.array([index[a] for a, _ in raw], dtype=np.int64)
        d = np.array([index[b] for _, b in raw], dtype=np.int64)
        n = len(nodes)
    edges = graphs.simple_edges(s, d)
    g = graphs.Graph(edges, n)
    support = g.edge_support()
    heavy = tuple(int(x) for x in edges[int(np.argmax(support))])
    adj: list[set[int]] = [set() for _ in range(n)]
    for a, b in edges.tolist():
        adj[a].add(b)
        adj[b].add(a)
    u = max(range(n), key=lambda v: (len(adj[v]), -v))
    absent = (v for v in range(n) if v != u and v not in adj[u])
    best = max(absent, key=lambda v: (len(adj[u] & adj[v]), len(adj[v]), -v))
    names = (lambda i: i) if nodes is None else (lambda i: nodes[i])
    return (names(heavy[0]), names(heavy[1])), (names(u), names(best))


def _lit(v) -> str:
    return f"'{v}'" if isinstance(v, str) else str(int(v))


def build_demo_world(template: str | Path, workdir: str | Path) -> DemoWorld:
    """The demo database, five one-subject neighbours, a heavy world and its neighbour, a restricted copy."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    base = copy_db(template, workdir / "d0.duckdb")
    add_harness_analyst(base)
    sample_per_query(base)
    con = duckdb.connect(str(base), read_only=True)
    try:
        adult = [
            _one(con, "SELECT min(person_id) FROM adult WHERE capital_gain = (SELECT max(capital_gain) FROM adult)"),
            _one(con, "SELECT min(person_id) FROM adult WHERE age = 90"),
            _one(con, "SELECT min(person_id) FROM adult WHERE workclass IS NULL AND occupation IS NULL"),
            _one(con, "SELECT min(person_id) FROM adult WHERE age BETWEEN 30 AND 50 AND income = '>50K' "
                      "AND sex = 'Female'"),
            _one(con, "SELECT min(person_id) FROM adult WHERE age < 25 AND income = '<=50K'"),  # matches no WHERE
        ]
        sizes = "(SELECT basket_id, count(*) AS n, bool_or(item = 'bread and cake') AS bread FROM baskets GROUP BY 1)"
        baskets = [
            _one(con, f"SELECT basket_id FROM {sizes} ORDER BY n DESC, basket_id LIMIT 1"),
            _one(con, f"SELECT basket_id FROM {sizes} WHERE n = 1 ORDER BY basket_id LIMIT 1"),
            _one(con, f"SELECT basket_id FROM {sizes} WHERE bread ORDER BY abs(n - 18), basket_id LIMIT 1"),
            _one(con, f"SELECT basket_id FROM {sizes} WHERE NOT bread ORDER BY n DESC, basket_id LIMIT 1"),
            _one(con, f"SELECT basket_id FROM {sizes} ORDER BY n DESC, basket_id LIMIT 1 OFFSET 1"),
        ]
        karate_cut, karate_add = _graph_edits(con, "karate", None)
        genes = [r[0] for r in con.execute("SELECT DISTINCT gene FROM wormnet_genes WHERE gene IS NOT NULL ORDER BY 1")
                 .fetchall()]
        worm_cut, worm_add = _graph_edits(con, "wormnet", genes)
        heavy_a = _one(con, "SELECT min(person_id) FROM adult WHERE person_id % 3 = 0 AND age BETWEEN 30 AND 50 "
                            "AND income = '>50K' AND sex = 'Male'")  # fmt: skip
        heavy_b = _one(con, "SELECT min(basket_id) FROM baskets WHERE basket_id % 3 = 0 AND basket_id IN "
                            "(SELECT basket_id FROM baskets GROUP BY 1 HAVING count(*) >= 30)")  # fmt: skip
        places = [  # the densest spot, the domain's corners, a repeated coordinate, an ordinary place
            _one(con, "SELECT min(place_id) FROM cities WHERE lon BETWEEN 2.2 AND 2.5 AND lat BETWEEN 48.8 AND 48.9"),
            _one(con, "SELECT min(place_id) FROM cities WHERE lon = (SELECT max(lon) FROM cities)"),
            _one(con, "SELECT min(place_id) FROM cities WHERE (lon, lat) IN (SELECT (lon, lat) FROM cities "
                      "GROUP BY lon, lat HAVING count(*) > 1)"),
            _one(con, "SELECT min(place_id) FROM cities WHERE lat = (SELECT min(lat) FROM cities)"),
            _one(con, "SELECT min(place_id) FROM cities WHERE country = 'NA'"),
        ]  # fmt: skip
        heavy_c = _one(con, "SELECT min(place_id) FROM cities WHERE place_id % 3 = 0 AND country = 'FR'")
        careers = [  # a school leaver into work, the longest HE spell, a jobless one, the first and the last person
            _one(con, "SELECT min(person_id) FROM careers WHERE month = 1 AND state = 'school'"),
            _one(con, "SELECT person_id FROM careers WHERE state = 'HE' GROUP BY 1 ORDER BY count(*) DESC, 1 LIMIT 1"),
            _one(con, "SELECT min(person_id) FROM careers WHERE state = 'joblessness'"),
            _one(con, "SELECT min(person_id) FROM careers"),
            _one(con, "SELECT max(person_id) FROM careers"),
        ]  # fmt: skip
        heavy_s = _one(con, "SELECT min(person_id) FROM careers WHERE person_id % 3 = 0 AND month = 72 AND state = 'employment'")
        columns = "SELECT column_name FROM duckdb_columns() WHERE table_name = ? ORDER BY column_index"
        flag_cols = [r[0] for r in con.execute(columns, ["basket_flags"]).fetchall() if r[0] != "basket_id"]
        adult_cols = [r[0] for r in con.execute(columns, ["adult"]).fetchall()]
    finally:
        con.close()

    def remove_subject(a: int, b: int, c: int, s: int) -> list[str]:
        return [f"DELETE FROM adult WHERE person_id = {a}", f"DELETE FROM baskets WHERE basket_id = {b}",
                f"DELETE FROM basket_flags WHERE basket_id = {b}", f"DELETE FROM cities WHERE place_id = {c}",
                f"DELETE FROM careers WHERE person_id = {s}"]  # fmt: skip

    def edge_sql(table: str, edge: tuple, add: bool) -> str:
        u, v = (_lit(x) for x in edge)
        if add:
            return f"INSERT INTO {table} VALUES ({u}, {v})"
        return f"DELETE FROM {table} WHERE (src = {u} AND dst = {v}) OR (src = {v} AND dst = {u})"

    graph_edits = [
        ({"karate": f"edge {karate_cut} removed (largest support)",
          "wormnet": f"edge {worm_cut} removed (largest support)"},
         [edge_sql("karate", karate_cut, False), edge_sql("wormnet", worm_cut, False)]),
        ({"karate": f"edge {karate_add} added (most common neighbours)",
          "wormnet": f"edge {worm_add} added (most common neighbours)"},
         [edge_sql("karate", karate_add, True), edge_sql("wormnet", worm_add, True)]),
        ({"karate": "edge (0, 1) removed"}, [edge_sql("karate", (0, 1), False)]),
        ({"karate": "edge (16, 30) added (no common neighbour)"}, [edge_sql("karate", (16, 30), True)]),
        ({}, []),
    ]  # fmt: skip
    neighbours = []
    for i, (a, b, c, q) in enumerate(zip(adult, baskets, places, careers)):
        changed, sql = graph_edits[i]
        changed = {"adult": f"person {a} removed", "baskets": f"basket {b} removed",
                   "basket_flags": f"basket {b} removed", "cities": f"place {c} removed",
                   "careers": f"person {q} removed", **changed}  # fmt: skip
        path = mutate(copy_db(base, workdir / f"n{i + 1}.duckdb"), remove_subject(a, b, c, q) + sql)
        neighbours.append(Neighbour(path, changed))

    # The heavy world: a person with 5 rows (extreme, out-of-bounds and out-of-domain values; max_rows = 1),
    # a basket holding every item (over max_rows = 48, plus an unknown item) with two flag rows, and
    # off-roster units (rows of subjects that are on no roster: never charged).
    flags_true = ", ".join("true" for _ in flag_cols)

    def adult_copy(where: str, **values: Any) -> str:
        """INSERT copies of adult rows with some columns replaced (SQL expressions)."""
        select = ", ".join(str(values.get(c, c)) for c in adult_cols)
        return f"INSERT INTO adult ({', '.join(adult_cols)}) SELECT {select} FROM adult WHERE {where}"

    one = f"person_id = {heavy_a}"
    heavy_rows = [
        adult_copy(one, age=90, capital_gain=99999, capital_loss=4356, hours_per_week=99, income="'>50K'"),
        adult_copy(one, age=200, workclass="'Not-a-class'", fnlwgt=9000000, education="'Unknown'", education_num=40,
                   capital_gain=10000000, capital_loss=-5, hours_per_week=-10, native_country="'Atlantis'"),
        adult_copy(one, age=45, education="'Doctorate'", education_num=16, sex="'Male'", capital_gain=0,
                   capital_loss=0, hours_per_week=99, native_country="'United-States'", income="'>50K'"),
        adult_copy(one, age=30, workclass="NULL", occupation="NULL", native_country="NULL", capital_gain=0,
                   capital_loss=0, hours_per_week=40),
        *[adult_copy("person_id <= 40", person_id=u) for u in OFF_ROSTER],
        f"INSERT INTO baskets SELECT {heavy_b}, item FROM "
        f"(SELECT DISTINCT item FROM baskets UNION SELECT 'not-an-item') "
        f"WHERE item NOT IN (SELECT item FROM baskets WHERE basket_id = {heavy_b})",
        *[f"INSERT INTO baskets SELECT {u}, item FROM (SELECT DISTINCT item FROM baskets)" for u in OFF_ROSTER],
        f"INSERT INTO basket_flags VALUES ({heavy_b}, {flags_true})",
        *[f"INSERT INTO basket_flags VALUES ({u}, {flags_true})" for u in OFF_ROSTER],
        # a place with three rows (max_rows = 1): outside the globe, a NULL coordinate, a copy; off-roster places
        f"INSERT INTO cities SELECT place_id, name, country, 500.0, -300.0, population FROM cities WHERE place_id = {heavy_c}",
        f"INSERT INTO cities SELECT place_id, name, country, NULL, lat, population FROM cities WHERE place_id = {heavy_c}",
        f"INSERT INTO cities SELECT * FROM cities WHERE place_id = {heavy_c} LIMIT 1",
        *[f"INSERT INTO cities SELECT {u}, name, country, lon, lat, population FROM cities WHERE place_id <= 40"
          for u in OFF_ROSTER],
        # a career with 10 extra months (over max_rows = 72), an unknown state, and off-roster people
        f"INSERT INTO careers SELECT person_id, month + 72, CASE WHEN month = 3 THEN 'prison' ELSE state END FROM careers "
        f"WHERE person_id = {heavy_s} AND month <= 10",
        *[f"INSERT INTO careers SELECT {u}, month, state FROM careers WHERE person_id = 1" for u in OFF_ROSTER],
        # the shipped demo exhausts nobody; a tenth of people with 0.5 left exercises every rule
        "UPDATE dpgate.roster_adult SET epsilon_budget = 0.5 WHERE unit % 10 = 1",
    ]  # fmt: skip
    heavy = mutate(copy_db(base, workdir / "heavy.duckdb"), heavy_rows)
    heavy_n = mutate(copy_db(heavy, workdir / "heavy_n.duckdb"), remove_subject(heavy_a, heavy_b, heavy_c, heavy_s))
    restricted = mutate(
        copy_db(heavy, workdir / "restricted.duckdb"),
        [f"DELETE FROM {t} WHERE {u} % 3 <> 0 OR {u} >= {min(OFF_ROSTER)}"
         for t, u in (("adult", "person_id"), ("baskets", "basket_id"), ("basket_flags", "basket_id"),
                      ("cities", "place_id"), ("careers", "person_id"))],
    )  # fmt: skip
    return DemoWorld(
        base=base,
        neighbours=neighbours,
        heavy=heavy,
        heavy_neighbour=Neighbour(heavy_n, {"adult": f"heavy person {heavy_a} removed",
                                            "baskets": f"heavy basket {heavy_b} removed",
                                            "basket_flags": f"heavy basket {heavy_b} removed",
                                            "cities": f"heavy place {heavy_c} removed",
                                            "careers": f"heavy career {heavy_s} removed"}),  # fmt: skip
        restricted=restricted,
        subjects={"adult": adult, "baskets": baskets, "cities": places, "careers": careers},
        heavy_subjects={"adult": heavy_a, "baskets": heavy_b, "cities": heavy_c, "careers": heavy_s},
    )


_worlds: dict[str, DemoWorld] = {}


def demo_world(template: str | Path, workdir: str | Path) -> DemoWorld:
    """``build_demo_world`` once per template per process (test modules share it)."""
    key = str(template)
    if key not in _worlds:
        _worlds[key] = build_demo_world(template, workdir)
    return _worlds[key]
