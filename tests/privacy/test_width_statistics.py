"""The error bars' width statistics move by at most 1 between neighbouring graphs.

A subgraph count's error bar spends part of its ε on one statistic with discrete Laplace noise
of sensitivity 1: ``a_m`` for triangles and k-cliques, the shift statistics ``c_k`` for k-stars
and k-triangles (``dpgate.mechanisms.graphs``). The neighbour-differential harness checks them on
the demo's graphs for two edits each; here every statistic is checked on real and sparse graphs
for edits chosen to move it (around the busiest nodes and pairs) and for random ones, together
with the public ladders that bound each graph's ladder given its statistic (the sandwich the
error bar rests on).
"""

from __future__ import annotations

import itertools

import networkx as nx
import numpy as np
import pytest

from dpgate.mechanisms import graphs, ladder_widths, width_statistics

QUERIES = [("triangle", None), ("kstar", 2), ("kstar", 3), ("ktriangle", 1), ("ktriangle", 2), ("kclique", 4)]


def _road() -> tuple[np.ndarray, int]:
    g = nx.grid_2d_graph(12, 12)
    rng = np.random.default_rng(3)
    for i, j in itertools.product(range(11), repeat=2):
        if rng.random() < 0.15:
            g.add_edge((i, j), (i + 1, j + 1))
    g = nx.convert_node_labels_to_integers(g, ordering="sorted")
    return graphs.simple_edges(*np.array(g.edges()).T), 144


def _karate() -> tuple[np.ndarray, int]:
    return graphs.simple_edges(*np.array(nx.karate_club_graph().edges()).T), 34


def _lesmis() -> tuple[np.ndarray, int]:
    g = nx.convert_node_labels_to_integers(nx.les_miserables_graph())
    return graphs.simple_edges(*np.array(g.edges()).T), 77


def _edits(edges: np.ndarray, n: int, rng: np.random.Generator, count: int) -> list[tuple[int, int]]:
    """Pairs to toggle: around the top-degree nodes and the pair with most common neighbours,
    then random pairs."""
    g = graphs.Graph(edges, n)
    keys, support = g.common_neighbour_pairs()
    top = np.argsort(-g.deg)[:4].tolist()
    pairs = [tuple(sorted(p)) for p in itertools.combinations(top, 2)]
    if keys.size:
        best = int(keys[np.argmax(support)])
        i, j = divmod(best, n)
        pairs.append((i, j))
        pairs += [tuple(sorted((i, int(v)))) for v in g.neighbours(j)[:3] if v != i]
    pairs += [tuple(sorted((top[0], int(v)))) for v in rng.choice(n, size=4, replace=False) if v != top[0]]
    while len(pairs) < count:
        u, v = sorted(rng.choice(n, size=2, replace=False).tolist())
        pairs.append((u, v))
    return pairs


def _toggle(edges: np.ndarray, pair: tuple[int, int]) -> np.ndarray:
    present = {tuple(e) for e in edges.tolist()}
    return np.array(sorted(present ^ {pair}), dtype=np.int64).reshape(-1, 2)


@pytest.mark.parametrize("query, k", QUERIES)
def test_width_statistic_moves_by_at_most_one(query, k):
    moved = 0
    for graph in (_road, _karate, _lesmis):
        edges, n = graph()
        if query == "kclique" and n > 71:
            continue  # served on up to 71 nodes without the owner's allow_kclique
        base = graphs.ladder_quantities(edges, n, query, k)
        rng = np.random.default_rng(7)
        lo, hi = graphs.statistic_range(query, n, k)
        t_max = graphs.convergence_cap(n) + 1
        for pair in _edits(edges, n, rng, 24):
            other = graphs.ladder_quantities(_toggle(edges, pair), n, query, k)
            assert abs(other.statistic - base.statistic) <= 1, (graph.__name__, pair, base.statistic, other.statistic)
            assert lo <= other.statistic <= hi
            moved += other.statistic != base.statistic
            ladder = np.array(list(other.rungs) + [other.global_sensitivity] * (t_max - len(other.rungs)), dtype=object)
            (lw, lt), (uw, ut) = ladder_widths.width_bounds(query, k, n, other.statistic)
            lower = np.array((lw + [lt] * t_max)[:t_max], dtype=object)
            upper = np.array((uw + [ut] * t_max)[:t_max], dtype=object)
            assert np.all(lower <= ladder) and np.all(ladder <= upper)
    assert moved, "some edit moves the statistic: the check is not vacuous"


@pytest.mark.parametrize("knee", [0, 3, 12, 60, 200])
def test_triangle_shift_statistic_moves_by_at_most_one(knee):
    """The triangle statistic c_K (``width_statistics.triangle_shift_statistic``) at public knees from
    ``a_m``'s (0) to pure halves (>= N - 2): targeted and random edits move it by at most 1, and
    the public ladders of its value sandwich every neighbour's ladder."""
    moved = 0
    for graph in (_road, _karate, _lesmis):
        edges, n = graph()
        base = graphs.ladder_quantities(edges, n, "triangle")
        c = width_statistics.triangle_shift_statistic(base.rungs, n, knee)
        lo, hi = graphs.statistic_range("triangle", n, None, knee)
        t_max = graphs.convergence_cap(n) + 1
        for pair in _edits(edges, n, np.random.default_rng(7), 24):
            other = graphs.ladder_quantities(_toggle(edges, pair), n, "triangle")
            c2 = width_statistics.triangle_shift_statistic(other.rungs, n, knee)
            assert abs(c2 - c) <= 1, (graph.__name__, pair, c, c2)
            assert lo <= c2 <= hi
            moved += c2 != c
            ladder = np.array(list(other.rungs) + [other.global_sensitivity] * (t_max - len(other.rungs)))
            (lw, lt), (uw, ut) = ladder_widths.width_bounds("triangle", None, n, c2, knee)
            assert np.all(np.array((lw + [lt] * t_max)[:t_max]) <= ladder)
            assert np.all(ladder <= np.array((uw + [ut] * t_max)[:t_max]))
    assert moved, "some edit moves the statistic: the check is not vacuous"


@pytest.mark.parametrize("knee", [0, 2, 5, 12])
def test_kclique_shift_statistic_moves_by_at_most_one(knee):
    """The 4-clique statistic c_K (``width_statistics.kclique_shift_statistic``) on karate and Les
    Misérables' first 60 nodes: targeted and random edits move it by at most 1, and the public
    ladders of its value sandwich every neighbour's ladder."""
    moved = 0
    lesmis, _ = _lesmis()
    for edges, n in (_karate(), (lesmis[lesmis.max(axis=1) < 60], 60)):
        base = graphs.ladder_quantities(edges, n, "kclique", 4)
        c = width_statistics.kclique_shift_statistic(base.rungs, n, 4, knee)
        lo, hi = graphs.statistic_range("kclique", n, 4, knee)
        t_max = graphs.convergence_cap(n) + 1
        for pair in _edits(edges, n, np.random.default_rng(7), 24):
            other = graphs.ladder_quantities(_toggle(edges, pair), n, "kclique", 4)
            c2 = width_statistics.kclique_shift_statistic(other.rungs, n, 4, knee)
            assert abs(c2 - c) <= 1, (n, pair, c, c2)
            assert lo <= c2 <= hi
            moved += c2 != c
            ladder = np.array(list(other.rungs) + [other.global_sensitivity] * (t_max - len(other.rungs)))
            (lw, lt), (uw, ut) = ladder_widths.width_bounds("kclique", 4, n, c2, knee)
            assert np.all(np.array((lw + [lt] * t_max)[:t_max]) <= ladder)
            assert np.all(ladder <= np.array((uw + [ut] * t_max)[:t_max]))
    assert moved, "some edit moves the statistic: the check is not vacuous"
