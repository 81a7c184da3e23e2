"""Exact subgraph counts, local sensitivities and ladder functions (``dpgate.mechanisms.graphs``).

The closed forms of the thesis (Lemmas 5.2-5.5, Theorems 5.6-5.7) are checked against a
search over edits on *every* simple graph with 5 nodes (and a sample with 6): ``LS(g, t)``
is computed by dynamic programming over the hypercube of edge sets, where one step toggles
one edge.
"""

from __future__ import annotations

import itertools
import math

import networkx as nx
import numpy as np
import pytest

from dpgate.mechanisms import graphs, ladder_widths, width_statistics
from dpgate.resources import data_dir

# -- brute force over all graphs on n nodes ------------------------------------------------------

VARIANTS = [
    ("triangle", None),
    ("kstar", 2),
    ("kstar", 3),
    ("kclique", 3),
    ("kclique", 4),
    ("kclique", 5),
    ("ktriangle", 1),
    ("ktriangle", 2),
    ("ktriangle", 3),
]
EXACT_LS_T = [("triangle", None), ("kstar", 2), ("kstar", 3), ("kclique", 3)]  # I_t = LS(g, t)
CUSTOMISED = [("kclique", 4), ("kclique", 5), ("ktriangle", 1), ("ktriangle", 2), ("ktriangle", 3)]


class Hypercube:
    """All simple graphs on ``n`` nodes as bit masks over the ``C(n, 2)`` pairs."""

    def __init__(self, n: int):
        self.n = n
        self.pairs = list(itertools.combinations(range(n), 2))
        self.bit = {p: 1 << i for i, p in enumerate(self.pairs)}
        self.masks = np.arange(1 << len(self.pairs), dtype=np.int64)
        self._f: dict = {}

    def has(self, u: int, v: int) -> np.ndarray:
        return (self.masks & self.bit[(min(u, v), max(u, v))]) != 0

    def edges(self, mask: int) -> np.ndarray:
        return np.array([p for p, b in self.bit.items() if mask & b], dtype=np.int64).reshape(-1, 2)

    def count(self, query: str, k: int | None) -> np.ndarray:
        """``f`` on every graph, from the definitions (no code from ``dpgate.mechanisms.graphs``)."""
        if (query, k) in self._f:
            return self._f[(query, k)]
        n = self.n
        if query == "triangle" or query == "kclique":
            size = 3 if query == "triangle" else k
            f = np.zeros(self.masks.size, dtype=np.int64)
            for nodes in itertools.combinations(range(n), size):
                f += np.logical_and.reduce([self.has(u, v) for u, v in itertools.combinations(nodes, 2)])
        elif query == "kstar":
            deg = [sum(self.has(v, w).astype(np.int64) for w in range(n) if w != v) for v in range(n)]
            f = sum(np.array([math.comb(int(d), k) for d in dv]) for dv in deg)
        else:  # an edge with a k-subset of its common neighbours
            f = np.zeros(self.masks.size, dtype=np.int64)
            for u, v in self.pairs:
                common = [w for w in range(n) if w not in (u, v)]
                for ws in itertools.combinations(common, k):
                    f += self.has(u, v) & np.logical_and.reduce([self.has(u, w) & self.has(v, w) for w in ws])
        self._f[(query, k)] = f
        return f

    def neighbours(self) -> list[np.ndarray]:
        return [self.masks ^ b for b in self.bit.values()]

    def local_sensitivity_at_distance(self, query: str, k: int | None, t_max: int) -> np.ndarray:
        """``LS(g, t)`` for ``t = 0 .. t_max`` (rows: graphs) by search over edits."""
        f = self.count(query, k)
        nb = self.neighbours()
        ls = np.max([np.abs(f - f[x]) for x in nb], axis=0)
        out = [ls]
        for _ in range(t_max):
            ls = np.maximum(ls, np.max([ls[x] for x in nb], axis=0))
            out.append(ls)
        return np.stack(out, axis=1)


@pytest.fixture(scope="module")
def cube5():
    return Hypercube(5)


@pytest.fixture(scope="module")
def ladders5(cube5):
    """``I_t`` (padded with GS), ``LS(g)`` and the width statistic of every 5-node graph, per variant."""
    t_max = 2 * graphs.convergence_cap(5)
    out = {}
    for query, k in VARIANTS:
        rows, ls, stat = [], [], []
        for mask in cube5.masks.tolist():
            q = graphs.ladder_quantities(cube5.edges(mask), 5, query, k)
            assert q.value == cube5.count(query, k)[mask]
            rows.append(list(q.rungs) + [q.global_sensitivity] * (t_max + 1 - len(q.rungs)))
            ls.append(q.local_sensitivity)
            stat.append(q.statistic)
        out[(query, k)] = (np.array(rows, dtype=np.int64), np.array(ls), np.array(stat))
    return out


EXPECTED_GS = {  # digest section 9.5 A.1
    5: {("triangle", None): 3, ("kstar", 3): 6, ("kstar", 2): 6, ("kclique", 4): 3, ("ktriangle", 2): 15},
    6: {("triangle", None): 4, ("kstar", 3): 12, ("kstar", 2): 8, ("kclique", 4): 6, ("ktriangle", 2): 30},
}


@pytest.mark.parametrize("n", [5, 6])
def test_global_sensitivity_table(n):
    for (query, k), gs in EXPECTED_GS[n].items():
        assert graphs.global_sensitivity(query, k, n) == gs


@pytest.mark.parametrize("query, k", VARIANTS)
def test_global_sensitivity_is_the_largest_change_on_five_nodes(cube5, query, k):
    f = cube5.count(query, k)
    largest = max(int(np.abs(f - f[x]).max()) for x in cube5.neighbours())
    assert graphs.global_sensitivity(query, k, 5) == largest


@pytest.mark.parametrize("query, k", VARIANTS)
def test_counts_match_the_definitions_on_every_five_node_graph(cube5, query, k):
    f = cube5.count(query, k)
    for mask in range(0, 1024, 7):
        assert graphs.subgraph_count(cube5.edges(mask), 5, query, k) == f[mask]


@pytest.mark.parametrize("query, k", EXACT_LS_T)
def test_closed_form_ls_at_distance_equals_search_over_edits(cube5, ladders5, query, k):
    """Lemmas 5.2 and 5.3 (with our candidate sets): I_t = LS(g, t) for every graph and t."""
    ladder, ls, _ = ladders5[(query, k)]
    brute = cube5.local_sensitivity_at_distance(query, k, ladder.shape[1] - 1)
    np.testing.assert_array_equal(ladder, brute)
    np.testing.assert_array_equal(ls, brute[:, 0])


@pytest.mark.parametrize("query, k", CUSTOMISED)
def test_customised_ladders_satisfy_definition_5_6(cube5, ladders5, query, k):
    """Theorems 5.6 and 5.7: LS(g) is exact (Lemmas 5.4, 5.5), I_0 >= LS, and
    I_t(g') <= I_{t+1}(g) for every neighbour g' and every t; hence I_t >= LS(g, t)."""
    ladder, ls, _ = ladders5[(query, k)]
    brute = cube5.local_sensitivity_at_distance(query, k, ladder.shape[1] - 1)
    np.testing.assert_array_equal(ls, brute[:, 0])
    assert np.all(ladder[:, 0] >= ls)
    for x in cube5.neighbours():
        assert np.all(ladder[x, :-1] <= ladder[:, 1:])
    assert np.all(ladder >= brute)
    assert np.all(ladder[:, -1] == graphs.global_sensitivity(query, k, 5))


@pytest.mark.parametrize("query, k", VARIANTS)
def test_ladders_are_monotone_and_converge_within_the_cap(ladders5, query, k):
    ladder, _, _ = ladders5[(query, k)]
    assert np.all(np.diff(ladder, axis=1) >= 0)
    cap = graphs.convergence_cap(5)
    assert np.all(ladder[:, cap] == graphs.global_sensitivity(query, k, 5))


@pytest.mark.parametrize("query, k", VARIANTS)
def test_width_bounds_sandwich_every_ladder(cube5, ladders5, query, k):
    """L_t(s) <= I_t(g) <= U_t(s) for the graph's own statistic, which has sensitivity 1."""
    ladder, _, stat = ladders5[(query, k)]
    _assert_sandwiched(cube5, ladder, stat, lambda s: ladder_widths.width_bounds(query, k, 5, s))
    lo, hi = graphs.statistic_range(query, 5, k)
    assert stat.min() >= lo and stat.max() <= hi


def _assert_sandwiched(cube, ladder, stat, bounds) -> None:
    """Every graph's ladder lies between the public ladders of its statistic, which moves by at most
    1 between neighbours."""
    t_max = ladder.shape[1]
    for s in np.unique(stat).tolist():
        (lw, lt), (uw, ut) = bounds(s)
        lower = np.array((lw + [lt] * t_max)[:t_max])
        upper = np.array((uw + [ut] * t_max)[:t_max])
        rows = ladder[stat == s]
        assert np.all(lower <= rows) and np.all(rows <= upper)
    for x in cube.neighbours():
        assert np.all(np.abs(stat[x] - stat) <= 1)


@pytest.mark.parametrize("knee", [0, 1, 2, 3, 5])
def test_triangle_shift_bounds_sandwich_every_ladder(cube5, ladders5, knee):
    """The triangle statistic c_K [triangle]: L_t(c) <= I_t(g) <= U_t(c) for every 5-node graph,
    c_K moves by at most 1 between neighbours, and lies in its public range."""
    ladder, _, a_m = ladders5[("triangle", None)]
    stat = np.array([width_statistics.triangle_shift_statistic(row[row < 3].tolist(), 5, knee) for row in ladder])
    _assert_sandwiched(cube5, ladder, stat, lambda s: ladder_widths.width_bounds("triangle", None, 5, s, knee))
    lo, hi = graphs.statistic_range("triangle", 5, None, knee)
    assert stat.min() >= lo and stat.max() <= hi
    if knee == 0:
        assert np.array_equal(stat, a_m)  # ψ_0(x) = x: c_0 is a_m


def test_triangle_shift_lower_ladder_is_the_least_over_pairs():
    """The lower ladder of c_K is exactly the least ladder of a pair ``(a, b)`` that fails ``c - 1``
    (Lemma 5.2's pair ladders, every ``t``), by brute force over all pairs on small universes: the
    kink search of ``_pair_fails`` misses no peak."""
    for n in range(4, 11):
        top = n - 2

        def pair(a, b, t):
            return min(a + min(t, (t + b) // 2), top)

        ts = range(4 * n + 4)
        for knee in range(n + 1):
            end = graphs.statistic_range("triangle", n, None, knee)[1]
            for c in range(end + 1):
                (lw, lt), (uw, ut) = ladder_widths.width_bounds("triangle", None, n, c, knee)
                psi = [width_statistics.triangle_psi(x, n, knee) for x in range(c + len(ts))]
                assert [(uw + [ut] * len(ts))[t] for t in ts] == psi[c:]
                failing = [(a, b) for a in range(top + 1) for b in range(2 * (top - a) + 1)
                           if c == 0 or any(pair(a, b, t) > psi[c - 1 + t] for t in ts)]  # fmt: skip
                least = [min(pair(a, b, t) for a, b in failing) for t in ts]
                assert [(lw + [lt] * len(ts))[t] for t in ts] == least, (n, knee, c)


@pytest.mark.parametrize("knee", [0, 3, 20, 75])
def test_triangle_shift_bounds_grow_and_sandwich_real_ladders(knee):
    """c_K on Les Misérables and graphs a few edges away: the sandwich, and both ladders
    non-decreasing in the statistic."""
    edges, n = les_miserables(), 77
    rng = np.random.default_rng(5)
    t_max = graphs.convergence_cap(n) + 1
    for _ in range(4):
        q = graphs.ladder_quantities(edges, n, "triangle")
        s = width_statistics.triangle_shift_statistic(q.rungs, n, knee)
        ladder = np.array(list(q.rungs) + [q.global_sensitivity] * (t_max - len(q.rungs)))
        (lw, lt), (uw, ut) = ladder_widths.width_bounds("triangle", None, n, s, knee)
        assert np.all(np.array((lw + [lt] * t_max)[:t_max]) <= ladder)
        assert np.all(ladder <= np.array((uw + [ut] * t_max)[:t_max]))
        u, v = sorted(rng.choice(n, size=2, replace=False).tolist())
        edges = np.array(sorted({tuple(e) for e in edges.tolist()} ^ {(u, v)}), dtype=np.int64)
    prev = None
    for s in range(graphs.statistic_range("triangle", n, None, knee)[1] + 1):
        (lw, lt), (uw, ut) = ladder_widths.width_bounds("triangle", None, n, s, knee)
        cur = [np.array((w + [t] * t_max)[:t_max]) for w, t in ((lw, lt), (uw, ut))]
        if prev is not None:
            assert np.all(cur[0] >= prev[0]) and np.all(cur[1] >= prev[1])
        prev = cur


@pytest.mark.parametrize("k", [4, 5])
def test_kclique_path_bounds_sandwich_every_theorem_5_6_ladder(k):
    """The k-clique statistic c_K [kclique]: for every ladder Theorem 5.6 can produce (``a_m`` in
    ``[0, N-2]``, ``LS`` in ``[0, C(a_m, k-2)]``), the public ladders of its c_K sandwich it, at
    knees from a_m's (none) to past the range; and both grow with c."""
    r = k - 2
    for n in (6, 11, 20, 29):
        gs, cap = graphs.global_sensitivity("kclique", k, n), graphs.convergence_cap(n)

        def pad(widths):
            (w, tail) = widths
            return np.array((w + [tail] * cap)[:cap], dtype=object)

        for knee in (0, 1, 3, 8, n):
            prev = None
            for c in range(graphs.statistic_range("kclique", n, k, knee)[1] + 1):
                cur = [pad(x) for x in ladder_widths.width_bounds("kclique", k, n, c, knee)]
                if prev is not None:
                    assert np.all(cur[0] >= prev[0]) and np.all(cur[1] >= prev[1])
                prev = cur
            for a in range(n - 1):
                top = graphs.binom(a, r)
                for ls in sorted({x for x in (0, 1, top // 3, top // 2, top - 1, top) if 0 <= x <= top}):
                    ladder = np.array([min(ls + graphs.binom(a + t, r) - top, gs) for t in range(cap)], dtype=object)
                    rungs = ladder[ladder < gs].tolist()
                    c = width_statistics.kclique_shift_statistic(rungs, n, k, knee)
                    lower, upper = (pad(x) for x in ladder_widths.width_bounds("kclique", k, n, c, knee))
                    assert np.all(lower <= ladder) and np.all(ladder <= upper), (n, knee, a, ls, c)


@pytest.mark.parametrize("query, k", VARIANTS)
def test_width_bounds_grow_with_the_statistic(query, k):
    n = 9
    lo, hi = graphs.statistic_range(query, n, k)
    prev = None
    for s in range(lo, hi + 1):
        (lw, lt), (uw, ut) = ladder_widths.width_bounds(query, k, n, s)
        cur = [np.array((w + [t] * 40)[:40]) for w, t in ((lw, lt), (uw, ut))]
        if prev is not None:
            assert np.all(cur[0] >= prev[0]) and np.all(cur[1] >= prev[1])
        prev = cur


@pytest.mark.parametrize("query, k", VARIANTS)
def test_width_bounds_sandwich_real_ladders_and_their_neighbours(query, k):
    """The same sandwich on Les Misérables (77 nodes) and on graphs one and two edges away
    (the tighter k-star upper and k-triangle lower bounds included); the k-star upper bound
    is still below 0.6.0's 2 C(min(s + t, N-2), k-1)."""
    edges, n = les_miserables(), 77
    rng = np.random.default_rng(5)
    graphs_ = [edges]
    for _ in range(4):
        u, v = sorted(rng.choice(n, size=2, replace=False).tolist())
        present = {tuple(e) for e in graphs_[-1].tolist()}
        graphs_.append(np.array(sorted(present ^ {(u, v)}), dtype=np.int64))
    for e in graphs_:
        q = graphs.ladder_quantities(e, n, query, k)
        t_max = graphs.convergence_cap(n) + 1
        ladder = np.array(list(q.rungs) + [q.global_sensitivity] * (t_max - len(q.rungs)), dtype=object)
        (lw, lt), (uw, ut) = ladder_widths.width_bounds(query, k, n, q.statistic)
        lower = np.array((lw + [lt] * t_max)[:t_max], dtype=object)
        upper = np.array((uw + [ut] * t_max)[:t_max], dtype=object)
        assert np.all(lower <= ladder) and np.all(ladder <= upper)
        if query == "kstar":
            s = q.statistic
            assert all(u <= 2 * graphs.binom(min(s + t, n - 2), k - 1) for t, u in enumerate(upper))
        if query == "ktriangle":
            assert lower[0] == graphs.binom(q.statistic, k)


def test_six_node_sample_against_search_over_edits():
    """A seeded sample of 6-node graphs (the full set of 2^15 is too slow for the closed forms)."""
    cube = Hypercube(6)
    rng = np.random.default_rng(6)
    sample = rng.choice(cube.masks.size, size=150, replace=False).tolist() + [0, cube.masks.size - 1]
    t_max = 2 * graphs.convergence_cap(6)
    for query, k in [("triangle", None), ("kstar", 3), ("kclique", 4), ("ktriangle", 2)]:
        brute = cube.local_sensitivity_at_distance(query, k, t_max)
        gs = graphs.global_sensitivity(query, k, 6)
        assert int(brute[:, 0].max()) == gs
        for mask in sample:
            q = graphs.ladder_quantities(cube.edges(mask), 6, query, k)
            ladder = np.array(list(q.rungs) + [gs] * (t_max + 1 - len(q.rungs)))
            assert q.value == cube.count(query, k)[mask]
            assert q.local_sensitivity == brute[mask, 0]
            if (query, k) in EXACT_LS_T:
                np.testing.assert_array_equal(ladder, brute[mask])
            else:
                assert np.all(ladder >= brute[mask])
    # the slowest convergence of the triangle ladder at n = 6 is 2 (n - 2) = 8 steps
    worst = max(len(graphs.ladder_quantities(cube.edges(m), 6, "triangle").rungs) for m in sample + [0])
    assert worst == 8


# -- the candidate sets against the all-pairs formulas on larger random graphs ------------------


def all_pairs_triangle(adj: np.ndarray, t: int) -> int:
    n = adj.shape[0]
    a = adj @ adj
    d = adj.sum(axis=1)
    best = 0
    for i, j in itertools.combinations(range(n), 2):
        b = d[i] + d[j] - 2 * a[i, j] - 2 * adj[i, j]
        best = max(best, min(a[i, j] + (t + min(t, b)) // 2, n - 2))
    return int(best)


def all_pairs_kstar(adj: np.ndarray, k: int, t: int) -> int:
    n = adj.shape[0]
    d = adj.sum(axis=1)
    best = 0
    for i, j in itertools.combinations(range(n), 2):
        di, dj = sorted((int(d[i] - adj[i, j]), int(d[j] - adj[i, j])), reverse=True)
        bi, bj = n - 2 - di, n - 2 - dj
        if t <= bi:
            v = math.comb(di + t, k - 1) + math.comb(dj, k - 1)
        elif t <= bi + bj:
            v = math.comb(n - 2, k - 1) + math.comb(dj + t - bi, k - 1)
        else:
            v = 2 * math.comb(n - 2, k - 1)
        best = max(best, v)
    return best


@pytest.mark.parametrize("seed", range(6))
def test_candidate_sets_match_the_all_pairs_formulas(seed):
    rng = np.random.default_rng(seed)
    used, universe = 18, 22  # four isolated nodes in the declared universe
    p = [0.08, 0.2, 0.35, 0.5, 0.7, 0.9][seed]
    g = nx.gnp_random_graph(used, p, seed=seed)
    if seed == 5:  # a clique plus a star: many ties and saturated pairs
        g = nx.disjoint_union(nx.complete_graph(9), nx.star_graph(8))
    edges = np.array(g.edges(), dtype=np.int64).reshape(-1, 2)
    edges = edges[rng.permutation(len(edges))]
    adj = np.zeros((universe, universe), dtype=np.int64)
    adj[edges[:, 0], edges[:, 1]] = adj[edges[:, 1], edges[:, 0]] = 1
    tri = graphs.ladder_quantities(edges, universe, "triangle")
    star = graphs.ladder_quantities(edges, universe, "kstar", 3)
    for t in range(0, 2 * universe + 2, 3):
        assert (tri.rungs[t] if t < len(tri.rungs) else universe - 2) == all_pairs_triangle(adj, t)
        assert (star.rungs[t] if t < len(star.rungs) else star.global_sensitivity) == all_pairs_kstar(adj, 3, t)


# -- counts on real graphs ----------------------------------------------------------------------


def karate() -> np.ndarray:
    return np.array(nx.karate_club_graph().edges(), dtype=np.int64)


def les_miserables() -> np.ndarray:
    g = nx.convert_node_labels_to_integers(nx.les_miserables_graph())
    return np.array(g.edges(), dtype=np.int64)


def test_counts_match_networkx():
    for edges, n, graph in [(karate(), 34, nx.karate_club_graph()), (les_miserables(), 77, None)]:
        graph = graph or nx.convert_node_labels_to_integers(nx.les_miserables_graph())
        cliques = {}
        for c in nx.enumerate_all_cliques(graph):
            cliques[len(c)] = cliques.get(len(c), 0) + 1
        assert graphs.subgraph_count(edges, n, "triangle") == sum(nx.triangles(graph).values()) // 3
        for k in (4, 5, 6):
            assert graphs.subgraph_count(edges, n, "kclique", k) == cliques.get(k, 0)
        degrees = [d for _, d in graph.degree()]
        assert graphs.subgraph_count(edges, n, "kstar", 3) == sum(math.comb(d, 3) for d in degrees)
        assert graphs.subgraph_count(edges, n, "ktriangle", 1) == 3 * cliques[3]


def test_raw_edge_tables_are_counted_as_simple_graphs():
    """Digest 9.1: reversed duplicates, a self-loop and a repeated edge do not change the count."""
    e = karate()
    raw = np.concatenate([e, e[:10, ::-1], [[4, 4]], e[20:21]])
    assert graphs.subgraph_count(raw, 34, "triangle") == 45
    assert graphs.simple_edges(raw[:, 0], raw[:, 1]).shape == (78, 2)


def test_simple_edges():
    src = np.array([3, 1, 2, 2, 1, 0], dtype=np.int32)
    dst = np.array([1, 3, 2, 0, 3, 1], dtype=np.int32)
    out = graphs.simple_edges(src, dst)
    assert out.dtype == np.int64
    assert out.tolist() == [[0, 1], [0, 2], [1, 3]]
    assert graphs.simple_edges(np.array([], dtype=np.int64), np.array([], dtype=np.int64)).shape == (0, 2)
    assert graphs.simple_edges(np.array([5]), np.array([5])).shape == (0, 2)
    with pytest.raises(ValueError, match="integers"):
        graphs.simple_edges(np.array([0.5]), np.array([1.0]))


def test_isolated_nodes_of_the_universe_matter():
    """The same edges in a larger declared universe: same count, larger GS, other ladder."""
    path = np.array([[0, 1], [1, 2]])
    small = graphs.ladder_quantities(path, 3, "kstar", 2)
    large = graphs.ladder_quantities(path, 10, "kstar", 2)
    assert small.value == large.value == 1
    assert (small.global_sensitivity, large.global_sensitivity) == (2, 16)
    assert large.rungs[0] == 2  # adding (1, isolated node) creates two 2-stars


def test_sparse_and_chunked_paths_agree_with_the_dense_path(monkeypatch):
    edges, n = les_miserables(), 77
    dense = {v: graphs.ladder_quantities(edges, n, *v) for v in VARIANTS[:5] + VARIANTS[6:8]}
    monkeypatch.setattr(graphs, "DENSE_PAIR_LIMIT", 0)
    monkeypatch.setattr(graphs, "WEDGE_CHUNK", 97)
    for v, q in dense.items():
        assert graphs.ladder_quantities(edges, n, *v) == q


def test_gene_network_counts():
    """The counts stated in examples/data/README.md (networkx 3.6.1)."""
    import duckdb

    path = data_dir() / "wormnet_edges.parquet"
    rel = duckdb.sql(f"SELECT src, dst FROM read_parquet('{path}')").fetchnumpy()
    names, ids = np.unique(np.concatenate([rel["src"], rel["dst"]]), return_inverse=True)
    m = len(rel["src"])
    edges = graphs.simple_edges(ids[:m], ids[m:])
    assert (len(names), len(edges)) == (2445, 78736)
    assert graphs.subgraph_count(edges, 2445, "triangle") == 2_015_875
    assert graphs.subgraph_count(edges, 2445, "kstar", 2) == 8_386_693
    assert graphs.subgraph_count(edges, 2445, "kstar", 3) == 387_330_259


# -- validation ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "query, k, message",
    [
        ("square", None, "unknown subgraph query"),
        ("triangle", 4, "no k"),
        ("kstar", None, "needs an integer k"),
        ("kstar", 1, "k >= 2"),
        ("kclique", 2, "k >= 3"),
        ("ktriangle", 0, "k >= 1"),
        ("kstar", 2.0, "integer k"),
    ],
)
def test_bad_queries_are_refused(query, k, message):
    with pytest.raises(ValueError, match=message):
        graphs.global_sensitivity(query, k, 10)


def test_bad_universes_and_edges_are_refused():
    with pytest.raises(ValueError, match="universe"):
        graphs.subgraph_count(np.array([[0, 1]]), 1, "triangle")
    with pytest.raises(ValueError, match="universe 0..3"):
        graphs.subgraph_count(np.array([[0, 4]]), 4, "triangle")
    with pytest.raises(ValueError, match=r"\(m, 2\)"):
        graphs.subgraph_count(np.array([0, 1, 2]), 4, "triangle")


def test_tiny_universes_have_zero_global_sensitivity():
    assert graphs.global_sensitivity("triangle", None, 2) == 0
    q = graphs.ladder_quantities(np.array([[0, 1]]), 2, "triangle")
    assert (q.value, q.global_sensitivity, q.rungs) == (0, 0, ())
