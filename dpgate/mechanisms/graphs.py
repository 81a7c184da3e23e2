"""Exact subgraph counts and the ladder quantities of Zhang's thesis, chapter 5.

A graph is a simple undirected graph on the public node universe ``0 .. n_nodes - 1``
(the data owner declares ``n_nodes``; it is never counted from the data). Edges arrive as
integer arrays; :func:`simple_edges` maps them to the simple graph (``u < v``, self-loops
and duplicates dropped), and every function here canonicalises its input the same way, so
counts are counts of subgraphs of that simple graph. Neighbouring graphs differ in one edge.

**Guarantee:** none by itself: these are exact counts and sensitivities, private data that only
``ladder`` releases, with noise. Neighbouring graphs differ in one edge; the **sensitivity**
of each count is in the table below (``GS``) and its ladder in ``I_t``.

Counting conventions (thesis section 5.3):

=============  ====================================  ==============================
query          ``f(g)``                              global sensitivity ``GS``
=============  ====================================  ==============================
``triangle``   triangles                             ``N - 2``
``kstar``      ``sum_v C(d_v, k)`` (k >= 2)          ``2 C(N-2, k-1)``
``kclique``    k-cliques (k >= 3; 3 = triangles)     ``C(N-2, k-2)``
``ktriangle``  ``sum_{(u,v) in E} C(a_uv, k)``       ``C(N-2, k) + 2 (N-2) C(N-3, k-1)``
=============  ====================================  ==============================

``a_ij`` is the number of common neighbours of ``i`` and ``j``, ``a_m`` its maximum over
*all* pairs of the universe (adjacent or not), ``d_m`` the maximum degree. With ``k = 1``
the k-triangle count is three times the triangle count (each triangle is counted once per
edge); the thesis's remark that "the 1-triangle is the triangle" holds for the pattern, not
for this count.

Ladder functions (``I_t``, ``t = 0, 1, ...``; Definition 5.6):

- ``triangle``, ``kstar``: ``I_t = LS(g, t)``, the local sensitivity at distance ``t``, from
  the closed forms of Lemmas 5.2 and 5.3, maximised over an exact candidate set of pairs
  (below) rather than all ``C(N, 2)`` pairs.
- ``kclique`` (k >= 4): ``I_t = min(LS(g) + C(a_m + t, k-2) - C(a_m, k-2), GS)`` (Theorem 5.6).
- ``ktriangle``: ``I_t = min(LS(g) + sum_{i<t} U(a_m + i), GS)`` with
  ``U(a) = 3 C(a, k-1) + a C(a, k-2)`` (Theorem 5.7).

Exact candidate sets. ``LS_ij(g, t)`` of Lemma 5.2 is non-decreasing in ``a_ij`` and
``b_ij = d_i + d_j - 2 a_ij - 2 x_ij``, so the maximum over pairs only needs, for every value
``a`` of ``a_ij``, the largest ``b_ij`` among pairs with that ``a``. Pairs with ``a >= 1``
are the pairs joined by a path of length two (wedges); among pairs with ``a = 0`` the edges
are listed directly, and the best non-adjacent pair with no common neighbour is found per node
as the highest-degree node outside its distance-two neighbourhood (isolated nodes of the
universe included). Lemma 5.3 depends on ``(d_i - x_ij, d_j - x_ij)`` and is non-decreasing
in both, so per node the best adjacent partner (highest-degree neighbour) and the best
non-adjacent partner (highest-degree non-neighbour) suffice. Both reductions are checked
against the all-pairs formulas and against a search over edits in ``tests/test_graphs.py``.

Convergence. ``M`` is the first ``t`` with ``I_t = GS``; every function above reaches ``GS``
by ``t = 3 N`` (triangles by ``2 (N - 2)``, k-stars by ``2 (N - 2) + 1``, k-cliques by
``N - 2``, k-triangles by ``3 N`` since ``sum_{i<t} U(i) >= 3 C(t, k)`` and
``GS = (2k + 1) C(N-2, k)``). As a guard, ``I_t`` is set to ``GS`` from the public step
``convergence_cap(N) = 3 N + 3`` on: the maximum of a ladder function and a data-independent
non-decreasing step function that is at most ``GS`` is again a ladder function, so the guard
never weakens privacy, and for the functions above it changes nothing.

Width statistics (for the error bars, ``dpgate.mechanisms.ladder``). For each query there is a
statistic ``s`` of global sensitivity 1, ``a_m``, or a shift statistic: for k-stars
:func:`kstar_shift_statistic`, for k-triangles :func:`ktriangle_shift_statistic`, for triangles
and k-cliques with an error bar ``dpgate.mechanisms.width_statistics``;
``dpgate.mechanisms.ladder_widths`` gives public ladders with
``L_t(s) <= I_t(g) <= U_t(s)`` for every graph and every ``t``.

Cost. Triangles, k-triangles: ``O(sum_v d_v^2)`` over wedges, vectorised with numpy
(the common-neighbour counts are accumulated densely when ``N^2 <= 2^24``, else by sorting).
k-stars: ``O(m log m)``. k-cliques: enumerates the ``(k-2)``-cliques ``Q`` and the pairs of
their common neighbourhoods, ``O(sum_Q C(|CN(Q)|, 2))``, which explodes on graphs made of
large cliques; the caller should choose whether to serve k-cliques by a public rule (N, m),
never by timing the data.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

QUERIES = ("triangle", "kstar", "ktriangle", "kclique")

#: Common-neighbour counts are accumulated in a dense ``N x N`` table up to this many cells.
DENSE_PAIR_LIMIT = 1 << 24
#: Wedges handled per vectorised chunk (bounds peak memory to a few hundred MB).
WEDGE_CHUNK = 1 << 22
_INT64_SAFE = (1 << 62) - 1


# -- public helpers -----------------------------------------------------------------------------
def simple_edges(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """The simple undirected graph of an edge list: ``(m, 2)`` int64, ``u < v``, sorted.

    Self-loops are dropped, reversed and repeated edges are merged.

    >>> simple_edges(np.array([0, 1, 2, 2, 3]), np.array([1, 0, 2, 3, 2])).tolist()
    [[0, 1], [2, 3]]
    """
    s = np.asarray(src)
    d = np.asarray(dst)
    if s.shape != d.shape or s.ndim != 1:
        raise ValueError(f"src and dst must be 1-d arrays of the same length, got {s.shape} and {d.shape}")
    if s.size == 0:
        return np.zeros((0, 2), dtype=np.int64)
    if not (np.issubdtype(s.dtype, np.integer) and np.issubdtype(d.dtype, np.integer)):
        raise ValueError(f"node ids must be integers, got {s.dtype} and {d.dtype}")
    s = s.astype(np.int64)
    d = d.astype(np.int64)
    lo = np.minimum(s, d)
    hi = np.maximum(s, d)
    keep = lo != hi
    pairs = np.stack([lo[keep], hi[keep]], axis=1)
    if pairs.shape[0] == 0:
        return np.zeros((0, 2), dtype=np.int64)
    return np.unique(pairs, axis=0)


def check_query(query: str, k: int | None) -> int | None:
    """Validate ``(query, k)`` and return the normalised ``k`` (``None`` for triangles).

    Depends only on the request, never on data.
    """
    if query not in QUERIES:
        raise ValueError(f"unknown subgraph query {query!r}; expected one of {', '.join(QUERIES)}")
    if query == "triangle":
        if k not in (None, 3):
            raise ValueError(f"triangle counts take no k (got k={k})")
        return None
    if k is None or isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise ValueError(f"query {query!r} needs an integer k, got {k!r}")
    k = int(k)
    least = {"kstar": 2, "kclique": 3, "ktriangle": 1}[query]
    if k < least:
        raise ValueError(f"query {query!r} needs k >= {least}, got k={k}")
    return k


def check_universe(n_nodes: int) -> int:
    """Validate the public node-universe size (at least two nodes)."""
    if isinstance(n_nodes, bool) or not isinstance(n_nodes, (int, np.integer)) or n_nodes < 2:
        raise ValueError(f"the node universe must be a declared integer >= 2, got {n_nodes!r}")
    return int(n_nodes)


@functools.lru_cache(maxsize=1 << 16)
def binom(n: int, r: int) -> int:
    """``C(n, r)`` with ``C(n, r) = 0`` for ``r < 0`` or ``n < r`` (including ``n < 0``)."""
    if r < 0 or n < r:
        return 0
    return math.comb(n, r)


def global_sensitivity(query: str, k: int | None, n_nodes: int) -> int:
    """``GS`` of the count over graphs on ``n_nodes`` nodes, edge-level (Lemmas 5.2-5.5).

    >>> global_sensitivity("triangle", None, 34), global_sensitivity("kstar", 3, 34)
    (32, 992)
    """
    k = check_query(query, k)
    n = check_universe(n_nodes)
    if query == "triangle" or (query == "kclique" and k == 3):
        return n - 2
    if query == "kstar":
        return 2 * binom(n - 2, k - 1)
    if query == "kclique":
        return binom(n - 2, k - 2)
    return binom(n - 2, k) + 2 * (n - 2) * binom(n - 3, k - 1)


def max_count(query: str, k: int | None, n_nodes: int) -> int:
    """The largest count any graph on ``n_nodes`` nodes can have (the complete graph's): public.

    >>> max_count("triangle", None, 34), max_count("kstar", 2, 4)
    (5984, 12)
    """
    k = check_query(query, k)
    n = check_universe(n_nodes)
    if query == "triangle":
        return binom(n, 3)
    if query == "kclique":
        return binom(n, k)
    if query == "kstar":
        return n * binom(n - 1, k)
    return binom(n, 2) * binom(n - 2, k)  # every edge has N - 2 common neighbours


def convergence_cap(n_nodes: int) -> int:
    """The public step from which every ladder here is set to ``GS`` (module docstring)."""
    return 3 * int(n_nodes) + 3


def width_statistic_name(query: str) -> str:
    """Which sensitivity-1 statistic bounds the rung widths of ``query``: a shift statistic ``c_k``
    for k-stars and k-triangles (:func:`kstar_shift_statistic`, :func:`ktriangle_shift_statistic`),
    the most common neighbours ``a_m`` otherwise (triangles and k-cliques release ``c_K`` with an
    error bar, ``dpgate.mechanisms.ladder.release_interval``)."""
    return "c_k" if query in ("kstar", "ktriangle") else "a_m"


def statistic_range(query: str, n_nodes: int, k: int | None = None, knee: int | None = None) -> tuple[int, int]:
    """Public range of the width statistic: ``a_m <= N - 2``; ``c_k <= N - 1`` for k-stars,
    ``c_k <= X`` for k-triangles, ``X`` the first ``x`` with ``F(x) >= GS``; with a ``knee``, for
    triangles the first ``x`` with ``ψ_K(x) = N - 2``, for k-cliques the end of the path."""
    if knee is not None and (query == "triangle" or (query == "kclique" and k == 3)):
        return 0, min(2 * (n_nodes - 2), n_nodes - 2 + knee)
    if knee is not None and query == "kclique":
        return 0, len(kclique_path(k, n_nodes, knee)[0]) - 1
    if query == "kstar":
        return 0, n_nodes - 1
    if query == "ktriangle":
        return 0, len(ktriangle_steps_sum(check_query(query, k), n_nodes)) - 1
    return 0, n_nodes - 2


# -- the graph ----------------------------------------------------------------------------------
class Graph:
    """A canonical simple graph on ``0 .. n - 1`` with adjacency in CSR form and lazy statistics."""

    def __init__(self, edges: np.ndarray, n_nodes: int):
        n = check_universe(n_nodes)
        e = np.asarray(edges)
        if e.size == 0:
            e = np.zeros((0, 2), dtype=np.int64)
        if e.ndim != 2 or e.shape[1] != 2:
            raise ValueError(f"edges must be an (m, 2) array, got shape {e.shape}")
        e = simple_edges(e[:, 0], e[:, 1])
        if e.size and (e[:, 0].min() < 0 or e[:, 1].max() >= n):
            raise ValueError(f"node ids must lie in the declared universe 0..{n - 1}")
        self.n = n
        self.edges = e
        self.m = int(e.shape[0])
        self.deg = np.bincount(e.ravel(), minlength=n).astype(np.int64)
        rows = np.concatenate([e[:, 0], e[:, 1]])
        cols = np.concatenate([e[:, 1], e[:, 0]])
        order = np.lexsort((cols, rows))
        self.slot_row = rows[order]
        self.indices = cols[order]
        self.indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(self.deg, out=self.indptr[1:])
        self.edge_keys = e[:, 0] * n + e[:, 1]  # sorted, because ``e`` is sorted
        self._pairs: tuple[np.ndarray, np.ndarray] | None = None
        self._support: np.ndarray | None = None

    # adjacency ---------------------------------------------------------------------------------
    def neighbours(self, v: int) -> np.ndarray:
        return self.indices[self.indptr[v] : self.indptr[v + 1]]

    def is_edge(self, keys: np.ndarray) -> np.ndarray:
        """Whether each pair key ``i * n + j`` (``i < j``) is an edge."""
        if self.m == 0:
            return np.zeros(len(keys), dtype=bool)
        pos = np.minimum(np.searchsorted(self.edge_keys, keys), self.m - 1)
        return self.edge_keys[pos] == keys

    def wedges(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """All paths ``i - l - j`` (``i < j``) as pairs of CSR slots ``(p, q)`` in row ``l``, in chunks."""
        per_centre = self.deg * (self.deg - 1) // 2
        if per_centre.sum() == 0:
            return
        bounds = np.cumsum(per_centre)
        c0 = 0
        while c0 < self.n:
            start = bounds[c0] - per_centre[c0]
            c1 = int(np.searchsorted(bounds, start + WEDGE_CHUNK, side="right"))
            c1 = max(c1, c0 + 1)
            s0, s1 = self.indptr[c0], self.indptr[min(c1, self.n)]
            slots = np.arange(s0, s1, dtype=np.int64)
            cnt = self.indptr[self.slot_row[slots] + 1] - slots - 1
            total = int(cnt.sum())
            if total:
                first = np.repeat(slots, cnt)
                group_start = np.cumsum(cnt) - cnt
                second = first + 1 + (np.arange(total, dtype=np.int64) - np.repeat(group_start, cnt))
                yield first, second
            c0 = c1

    def wedge_keys(self, first: np.ndarray, second: np.ndarray) -> np.ndarray:
        return self.indices[first] * self.n + self.indices[second]

    # common neighbours -------------------------------------------------------------------------
    def common_neighbour_pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """Sorted keys ``i * n + j`` (``i < j``) of all pairs with ``a_ij >= 1``, and their ``a_ij``."""
        if self._pairs is None:
            n = self.n
            if n * n <= DENSE_PAIR_LIMIT:
                counts = np.zeros(n * n, dtype=np.int64)
                for first, second in self.wedges():
                    counts += np.bincount(self.wedge_keys(first, second), minlength=n * n)
                keys = np.flatnonzero(counts)
                self._pairs = (keys.astype(np.int64), counts[keys])
            else:
                acc = _KeyCounter()
                for first, second in self.wedges():
                    acc.add(self.wedge_keys(first, second))
                self._pairs = acc.result()
        return self._pairs

    def pair_support(self, keys: np.ndarray) -> np.ndarray:
        """``a_ij`` for pair keys ``i * n + j`` (0 for pairs without a common neighbour)."""
        pk, pa = self.common_neighbour_pairs()
        if pk.size == 0:
            return np.zeros(len(keys), dtype=np.int64)
        pos = np.minimum(np.searchsorted(pk, keys), pk.size - 1)
        return np.where(pk[pos] == keys, pa[pos], 0)

    def edge_support(self) -> np.ndarray:
        """``a_e`` (triangles through ``e``) for every edge, in the order of ``self.edges``."""
        if self._support is None:
            self._support = self.pair_support(self.edge_keys)
        return self._support

    def max_common_neighbours(self) -> int:
        """``a_m``: the most common neighbours of any pair of the universe."""
        _, pa = self.common_neighbour_pairs()
        return int(pa.max()) if pa.size else 0

    def max_degree(self) -> int:
        return int(self.deg.max())

    # partners ----------------------------------------------------------------------------------
    def degree_order(self) -> tuple[np.ndarray, np.ndarray]:
        order = np.argsort(-self.deg, kind="stable")
        rank = np.empty(self.n, dtype=np.int64)
        rank[order] = np.arange(self.n)
        return order, rank

    def best_free_partner(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """Per node ``i``: the highest-degree node ``j`` with ``(i, j)`` not among ``(rows, cols)``
        and ``j != i``; ``-1`` when there is none.

        The forbidden partners of ``i`` are mapped to their ranks in the degree order; the
        answer is the smallest rank missing from that set (its "mex"), found for all nodes at
        once by sorting.
        """
        n = self.n
        order, rank = self.degree_order()
        diag = np.arange(n, dtype=np.int64)
        r = np.concatenate([rows, diag])
        c = np.concatenate([cols, diag])
        keys = _sorted_unique(r * n + rank[c])
        kr = keys // n
        kc = keys % n
        start = np.searchsorted(kr, diag)  # every node has at least itself
        size = np.diff(np.append(start, keys.size))
        local = np.arange(keys.size) - start[kr]
        big = np.int64(n + 1)
        pos = np.where(kc != local, local, big)
        mex = np.minimum.reduceat(pos, start)
        mex = np.where(mex == big, size, mex)
        return np.where(mex < n, order[np.minimum(mex, n - 1)], -1)


class _KeyCounter:
    """Counts (or sums values per) int64 keys arriving in chunks, merging by sorting."""

    def __init__(self) -> None:
        self.keys: list[np.ndarray] = []
        self.vals: list[np.ndarray] = []
        self.pending = 0

    def add(self, keys: np.ndarray, values: np.ndarray | None = None) -> None:
        if values is None:
            k, v = np.unique(keys, return_counts=True)
            v = v.astype(np.int64)
        else:
            k, v = _sum_by_key(keys, values)
        self.keys.append(k)
        self.vals.append(v)
        self.pending += k.size
        if self.pending > 4 * WEDGE_CHUNK and len(self.keys) > 1:
            self._merge()

    def _merge(self) -> None:
        k, v = _sum_by_key(np.concatenate(self.keys), np.concatenate(self.vals))
        self.keys, self.vals, self.pending = [k], [v], k.size

    def result(self) -> tuple[np.ndarray, np.ndarray]:
        if not self.keys:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        self._merge()
        return self.keys[0], self.vals[0]


def _sorted_unique(x: np.ndarray) -> np.ndarray:
    """``np.unique`` by sorting (numpy 2.4's hash-based default is much slower on int64 keys)."""
    x = np.sort(x)
    if x.size:
        x = x[np.concatenate([[True], x[1:] != x[:-1]])]
    return x


def _sum_by_key(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(keys, kind="stable")
    k = keys[order]
    v = values[order]
    starts = np.flatnonzero(np.concatenate([[True], k[1:] != k[:-1]]))
    return k[starts], np.add.reduceat(v, starts) if v.size else v


def _binom_table(xmax: int, r: int) -> np.ndarray:
    """``C(x, r)`` for ``x = 0 .. xmax`` as int64, or as Python ints (object) when too large."""
    vals = [binom(x, r) for x in range(max(xmax, 0) + 1)]
    if vals and max(vals) > _INT64_SAFE:
        return np.array(vals, dtype=object)
    return np.array(vals, dtype=np.int64)


# -- counts -------------------------------------------------------------------------------------
def subgraph_count(edges: np.ndarray, n_nodes: int, query: str, k: int | None = None) -> int:
    """The exact count ``f(g)`` of the simple graph of ``edges`` (an exact Python int).

    >>> import networkx as nx
    >>> karate = np.array(nx.karate_club_graph().edges())
    >>> subgraph_count(karate, 34, "triangle"), subgraph_count(karate, 34, "kstar", 3)
    (45, 1764)
    """
    k = check_query(query, k)
    g = Graph(edges, n_nodes)
    return _count(g, query, k)


def _count(g: Graph, query: str, k: int | None) -> int:
    if query == "triangle" or (query == "kclique" and k == 3):
        return int(g.edge_support().sum()) // 3
    if query == "kstar":
        per_degree = np.bincount(g.deg, minlength=1)
        return sum(int(c) * binom(d, k) for d, c in enumerate(per_degree.tolist()) if c)
    if query == "ktriangle":
        per_support = np.bincount(g.edge_support(), minlength=1) if g.m else np.zeros(1, np.int64)
        return sum(int(c) * binom(a, k) for a, c in enumerate(per_support.tolist()) if c)
    return _clique_stats(g, k)[0]


# -- local sensitivity --------------------------------------------------------------------------
def local_sensitivity(edges: np.ndarray, n_nodes: int, query: str, k: int | None = None) -> int:
    """``LS(g)``: the largest change of the count from adding or removing one edge."""
    k = check_query(query, k)
    g = Graph(edges, n_nodes)
    return _local_sensitivity(g, query, k)


def _local_sensitivity(g: Graph, query: str, k: int | None) -> int:
    if query == "triangle" or (query == "kclique" and k == 3):
        return min(g.max_common_neighbours(), g.n - 2)
    if query == "kstar":
        return _kstar_rungs(g, k, t_max=0)[0]
    if query == "kclique":
        return _clique_stats(g, k)[1]
    return _ktriangle_ls(g, k)


def _ktriangle_ls(g: Graph, k: int) -> int:
    """Lemma 5.5: ``max_ij C(a_ij, k) + sum_{l in A_ij} C(a_il - x_ij, k-1) + C(a_lj - x_ij, k-1)``.

    One pass over wedges ``i - l - j``: the supports of the two wedge edges come from the
    per-slot support of the CSR rows, ``x_ij`` from the edge set.
    """
    if g.m == 0:
        return 0
    support = g.edge_support()
    slot_keys = np.minimum(g.slot_row, g.indices) * g.n + np.maximum(g.slot_row, g.indices)
    slot_support = support[np.searchsorted(g.edge_keys, slot_keys)]
    table = _binom_table(g.max_common_neighbours(), k - 1)
    acc = _KeyCounter()
    for first, second in g.wedges():
        keys = g.wedge_keys(first, second)
        x = g.is_edge(keys).astype(np.int64)
        contrib = table[slot_support[first] - x] + table[slot_support[second] - x]
        acc.add(keys, contrib)
    keys, sums = acc.result()
    if keys.size == 0:
        return 0
    a = g.pair_support(keys)
    own = _binom_table(int(a.max()), k)[a]
    return int(max((own + sums).tolist()))


def _clique_stats(g: Graph, k: int) -> tuple[int, int]:
    """``(number of k-cliques, LS(g))`` for k >= 4 (Lemma 5.4).

    Enumerates every ``(k-2)``-clique ``Q`` once (members in increasing id order) with its
    common neighbourhood ``CN(Q)``. A pair ``{i, j}`` has ``Q`` inside ``A_ij`` exactly when
    both lie in ``CN(Q)``, so ``LS = max`` over pairs of how many ``CN(Q)`` contain them; each
    k-clique is ``Q`` plus an edge inside ``CN(Q)``, in ``C(k, 2)`` ways.
    """
    r = k - 2
    nbrs = [set(g.neighbours(v).tolist()) for v in range(g.n)]
    higher = [{w for w in nbrs[v] if w > v} for v in range(g.n)]
    counter = _KeyCounter()
    buffer: list[np.ndarray] = []
    buffered = 0
    inside_edges = 0

    def flush() -> int:
        nonlocal buffer, buffered
        if not buffer:
            return 0
        keys = np.concatenate(buffer)
        buffer, buffered = [], 0
        counter.add(keys)
        return int(g.is_edge(keys).sum())

    stack = [(1, higher[v], nbrs[v]) for v in range(g.n - 1, -1, -1) if g.deg[v] >= r - 1]
    while stack:
        size, cand, common = stack.pop()
        if size == r:
            if len(common) >= 2:
                cn = np.fromiter(sorted(common), dtype=np.int64, count=len(common))
                iu, ju = np.triu_indices(cn.size, 1)
                buffer.append(cn[iu] * g.n + cn[ju])
                buffered += iu.size
                if buffered > WEDGE_CHUNK:
                    inside_edges += flush()
            continue
        for w in sorted(cand, reverse=True):
            stack.append((size + 1, cand & higher[w], common & nbrs[w]))
    inside_edges += flush()
    _, counts = counter.result()
    ls = int(counts.max()) if counts.size else 0
    per_clique = math.comb(k, 2)
    assert inside_edges % per_clique == 0
    return inside_edges // per_clique, ls


# -- ladder functions ---------------------------------------------------------------------------
@dataclass(frozen=True)
class LadderQuantities:
    """What the ladder mechanism needs from the private graph (all exact ints)."""

    value: int  # f(g)
    global_sensitivity: int  # GS on n_nodes nodes
    rungs: tuple[int, ...]  # I_0 .. I_{M-1}; I_t = GS for t >= M
    local_sensitivity: int  # LS(g)
    statistic: int  # the sensitivity-1 width statistic (a_m, or c_k for k-stars)


def ladder_quantities(edges: np.ndarray, n_nodes: int, query: str, k: int | None = None) -> LadderQuantities:
    """``f(g)``, ``GS``, the ladder ``I_0 .. I_{M-1}`` and the width statistic of one graph.

    >>> import networkx as nx
    >>> q = ladder_quantities(np.array(nx.karate_club_graph().edges()), 34, "triangle")
    >>> q.value, q.global_sensitivity, q.rungs[:3], len(q.rungs)
    (45, 32, (10, 11, 12), 31)
    """
    k = check_query(query, k)
    g = Graph(edges, n_nodes)
    gs = global_sensitivity(query, k, g.n)
    if query == "triangle" or (query == "kclique" and k == 3):
        value = _count(g, query, k)
        rungs = _triangle_rungs(g)
        ls = rungs[0] if rungs else gs
        stat = g.max_common_neighbours()
    elif query == "kstar":
        value = _count(g, query, k)
        rungs = _kstar_rungs(g, k)
        ls = rungs[0] if rungs else gs
        stat = kstar_shift_statistic(rungs, g.n, k)
    elif query == "kclique":
        value, ls = _clique_stats(g, k)
        stat = g.max_common_neighbours()
        rungs = _closed_rungs(gs, g.n, lambda t: ls + binom(stat + t, k - 2) - binom(stat, k - 2))
    else:
        value = _count(g, query, k)
        ls = _ktriangle_ls(g, k)
        rungs = _closed_rungs(gs, g.n, _ktriangle_ladder(ls, g.max_common_neighbours(), k))
        stat = ktriangle_shift_statistic(rungs, g.n, k)
    return LadderQuantities(value, gs, tuple(rungs), ls, stat)


def _closed_rungs(gs: int, n: int, ladder) -> list[int]:
    """``min(ladder(t), GS)`` for ``t = 0, 1, ...`` until it reaches ``GS`` (or the public cap)."""
    out = []
    for t in range(convergence_cap(n)):
        v = min(ladder(t), gs)
        if v >= gs:
            break
        out.append(v)
    return out


def _ktriangle_ladder(ls: int, a_m: int, k: int):
    """``t -> LS + sum_{i<t} U(a_m + i)`` with ``U(a) = 3 C(a, k-1) + a C(a, k-2)`` (Theorem 5.7)."""
    cache = [ls]

    def ladder(t: int) -> int:
        while len(cache) <= t:
            a = a_m + len(cache) - 1
            cache.append(cache[-1] + 3 * binom(a, k - 1) + a * binom(a, k - 2))
        return cache[t]

    return ladder


def _pareto(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The pairs ``(a, b)`` not dominated in both coordinates (keeps one of equal pairs)."""
    order = np.lexsort((-b, -a))  # a descending, then b descending
    a, b = a[order], b[order]
    best_b = np.maximum.accumulate(b)
    keep = np.ones(a.size, dtype=bool)
    keep[1:] = b[1:] > best_b[:-1]
    return a[keep], b[keep]


def _run_ladder(gs: int, n: int, block_values) -> list[int]:
    """Evaluate a vectorised ladder block by block until it reaches ``GS`` (or the public cap)."""
    out: list[int] = []
    cap = convergence_cap(n)
    t0, block = 0, 256
    while t0 < cap:
        t = np.arange(t0, min(t0 + block, cap), dtype=np.int64)
        vals = block_values(t)
        hit = np.flatnonzero(vals >= gs)
        if hit.size:
            out.extend(int(v) for v in vals[: hit[0]])
            return out
        out.extend(int(v) for v in vals)
        t0 += block
        block *= 2
    return out


def _triangle_rungs(g: Graph) -> list[int]:
    """``LS(g, t)`` of Lemma 5.2: ``max_ij min(a_ij + floor((t + min(t, b_ij)) / 2), N - 2)``."""
    n = g.n
    gs = n - 2
    keys, a = g.common_neighbour_pairs()
    a_m = int(a.max()) if a.size else 0
    best_b = np.full(a_m + 1, -1, dtype=np.int64)
    if keys.size:
        i, j = keys // n, keys % n
        b = g.deg[i] + g.deg[j] - 2 * a - 2 * g.is_edge(keys)
        np.maximum.at(best_b, a, b)
    # pairs with no common neighbour: edges with zero support ...
    if g.m:
        lonely = g.edge_support() == 0
        if lonely.any():
            e = g.edges[lonely]
            best_b[0] = max(best_b[0], int((g.deg[e[:, 0]] + g.deg[e[:, 1]] - 2).max()))
    # ... and non-adjacent pairs outside each other's distance-two neighbourhood
    rows = np.concatenate([g.slot_row, keys // n, keys % n])
    cols = np.concatenate([g.indices, keys % n, keys // n])
    partner = g.best_free_partner(rows, cols)
    ok = partner >= 0
    if ok.any():
        best_b[0] = max(best_b[0], int((g.deg[ok] + g.deg[partner[ok]]).max()))
    av = np.flatnonzero(best_b >= 0)
    fa, fb = _pareto(av.astype(np.int64), best_b[av])

    def values(t: np.ndarray) -> np.ndarray:
        tt = t[None, :]
        v = fa[:, None] + (tt + np.minimum(tt, fb[:, None])) // 2
        return np.minimum(v.max(axis=0), gs)

    return _run_ladder(gs, n, values)


def _kstar_rungs(g: Graph, k: int, t_max: int | None = None) -> list[int]:
    """``LS(g, t)`` of Lemma 5.3 over the candidate pairs (module docstring).

    With ``d'_i = d_i - x_ij >= d'_j = d_j - x_ij`` and ``B = N - 2 - d'``:
    ``C(d'_i + t, k-1) + C(d'_j, k-1)`` for ``t <= B_i``;
    ``C(N-2, k-1) + C(d'_j + t - B_i, k-1)`` for ``B_i < t <= B_i + B_j``; else ``2 C(N-2, k-1)``.
    """
    n = g.n
    top = n - 2
    gs = 2 * binom(top, k - 1)
    deg = g.deg
    cand_hi, cand_lo = [], []
    has = deg > 0
    if has.any():  # best adjacent partner: the highest-degree neighbour
        starts = g.indptr[:-1][has]
        best_nb = np.maximum.reduceat(deg[g.indices], starts)
        cand_hi.append(deg[has] - 1)
        cand_lo.append(best_nb - 1)
    partner = g.best_free_partner(g.slot_row, g.indices)  # best non-adjacent partner
    ok = partner >= 0
    cand_hi.append(deg[ok])
    cand_lo.append(deg[partner[ok]])
    x = np.concatenate(cand_hi)
    y = np.concatenate(cand_lo)
    hi, lo = _pareto(np.maximum(x, y), np.minimum(x, y))
    table = _binom_table(top, k - 1)
    big = table.dtype == object
    b_hi = (top - hi)[:, None]
    b_lo = (top - lo)[:, None]
    full = table[top]

    def values(t: np.ndarray) -> np.ndarray:
        tt = t[None, :]
        case1 = tt <= b_hi
        case2 = (~case1) & (tt <= b_hi + b_lo)
        i1 = np.where(case1, hi[:, None] + tt, 0)
        i2 = np.where(case2, lo[:, None] + tt - b_hi, 0)
        v1 = table[i1] + table[lo][:, None]
        v2 = full + table[i2]
        v = np.where(case1, v1, np.where(case2, v2, 2 * full))
        if big:
            return np.array([max(col) for col in v.T], dtype=object)
        return v.max(axis=0)

    if t_max is not None:
        return [int(x) for x in values(np.arange(t_max + 1, dtype=np.int64))]
    return _run_ladder(gs, n, values)


# -- the k-star width statistic ------------------------------------------------------------------
@functools.lru_cache(maxsize=64)
def binom_row(r: int, x_max: int) -> tuple[int, ...]:
    """``C(x, r)`` for ``x = 0 .. x_max``."""
    return tuple(binom(x, r) for x in range(max(x_max, 0) + 1))


def kstar_shift_statistic(rungs: tuple[int, ...] | list[int], n_nodes: int, k: int) -> int:
    """``c_k``: the smallest ``c >= 0`` with ``I_t <= C(c + t, k-1)`` at every ``t`` with
    ``c + t <= N - 2``, where ``I_t = LS(g, t)`` is the k-star ladder (``rungs``, then ``GS``).

    Its global sensitivity is 1: for a neighbour ``g'``, ``I_t(g') <= I_{t+1}(g) <= C(c + 1 + t, k-1)``
    whenever ``c + 1 + t <= N - 2`` (Definition 5.6 (b)), so ``c_k(g') <= c_k(g) + 1``, and the
    same the other way. It lies in ``[0, N - 1]`` (``c = N - 1`` constrains no ``t``). For
    ``k = 2`` it is ``LS(g)``, the largest ``d'_i + d'_j``. Unlike ``d_m``, it does not let a
    graph with one high-degree node look like one with two (``dpgate.mechanisms.ladder_widths``).

    >>> import networkx as nx
    >>> q = ladder_quantities(np.array(nx.karate_club_graph().edges()), 34, "kstar", 3)
    >>> q.rungs[0], kstar_shift_statistic(q.rungs, 34, 3)  # C(23, 2) = 253 < 256 <= C(24, 2)
    (256, 24)
    """
    top = n_nodes - 2
    row = binom_row(k - 1, top)  # C(x, k-1) for x = 0 .. N-2, non-decreasing
    c = max(0, n_nodes - 1 - len(rungs))  # I_t = GS > C(N-2, k-1) from t = len(rungs) on
    for t, width in enumerate(rungs):
        x = bisect.bisect_left(row, int(width))  # smallest x with C(x, k-1) >= I_t; N - 1 if none
        c = max(c, x - t)
    return c


@functools.lru_cache(maxsize=64)
def ktriangle_steps_sum(k: int, n_nodes: int) -> tuple[int, ...]:
    """Public: ``F(x) = sum_{i<x} U(i)``, ``U(a) = 3 C(a, k-1) + a C(a, k-2)`` (Theorem 5.7), for
    ``x = 0, 1, ..`` up to the first ``x`` with ``F(x) >= GS`` (about ``1.1 N``, within the
    public cap ``3 N + 3``: ``F(x) >= 3 C(x, k)``)."""
    gs = global_sensitivity("ktriangle", k, n_nodes)
    out = [0]
    while out[-1] < gs:
        a = len(out) - 1
        out.append(out[-1] + 3 * binom(a, k - 1) + a * binom(a, k - 2))
        if len(out) > convergence_cap(n_nodes):
            raise AssertionError("F must reach GS within the convergence cap: this is a bug in dpgate")
    return tuple(out)


def ktriangle_shift_statistic(rungs: tuple[int, ...] | list[int], n_nodes: int, k: int) -> int:
    """``c_k`` for k-triangles: the smallest ``c >= 0`` with ``I_t <= min(F(c + t), GS)`` at every
    ``t``, where ``I_t`` is Theorem 5.7's ladder (``rungs``, then ``GS``) and ``F`` is
    :func:`ktriangle_steps_sum`.

    Its global sensitivity is 1 for the reason :func:`kstar_shift_statistic` gives
    (``min(F(c + 1 + t), GS)`` is the ladder for ``c`` shifted by one rung). It lies in
    ``[0, X]``, ``F(X) >= GS``. Where ``a_m`` bounds ``LS`` by ``C(a_m, k) + 2 a_m C(a_m, k-1)``,
    which grows like the square of the statistic's noise, ``c_k`` pays for that noise once per rung
    (``dpgate.mechanisms.ladder_widths``).

    >>> import networkx as nx
    >>> q = ladder_quantities(np.array(nx.karate_club_graph().edges()), 34, "ktriangle", 2)
    >>> q.rungs[:2], ktriangle_shift_statistic(q.rungs, 34, 2)  # F(x) = 2x(x - 1); a_m = 10
    ((57, 97), 10)
    """
    f = ktriangle_steps_sum(k, n_nodes)
    c = max(0, len(f) - 1 - len(rungs))  # I_t = GS from t = len(rungs) on: F(c + t) >= GS
    for t, width in enumerate(rungs):
        c = max(c, bisect.bisect_left(f, int(width)) - t)  # the least x with F(x) >= I_t
    return c


# -- the triangle and k-clique paths -------------------------------------------------------------
@functools.lru_cache(maxsize=64)
def kclique_path(k: int, n_nodes: int, knee: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Public: ``(A(c), δ(c))`` of the k-clique statistic's ladders ``U_c(t) = min(C(A(c) + t, k-2)
    - δ(c), GS)`` [kclique], for ``c = 0 ..`` the first ``c`` with ``U_c(0) >= GS``: one rung per
    step (``A + 1``, ``δ`` kept) up to ``c = K``, then two (``A + 2``, ``δ + C(A + 1, k-3)``, the
    most that keeps ``U_{c+1}(t) >= U_c(t + 1)``)."""
    r, gs = k - 2, global_sensitivity("kclique", k, n_nodes)
    a, d = [0], [0]
    while binom(a[-1], r) - d[-1] < gs:
        if len(a) - 1 < knee:
            a.append(a[-1] + 1), d.append(d[-1])
        else:
            d.append(d[-1] + binom(a[-1] + 1, r - 1)), a.append(a[-1] + 2)
    return tuple(a), tuple(d)
