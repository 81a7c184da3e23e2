"""The k-triangle error bar over the exact family of ladders a statistic allows [family].

Theorem 5.7's ladder is fixed by two numbers, ``a_m`` and ``LS``, so the graphs whose ``c_k``
lies in a cell's range have one of a known, often small, set of ladders. Where that set is small
``dpgate.mechanisms.ladder_bounds`` bounds each of them instead of every ladder between the
public lower and upper ladders (the band). Checked here: the closed-form statistic equals the
scalar one the release uses; the family is exactly the ladders with their statistic in range;
the bar holds for every ladder of the family, is never wider than the band's and is chosen
within a bounded work; coverage, summed over the exact laws, stays within alpha.
"""

from __future__ import annotations

import itertools
import math

import networkx as nx
import numpy as np
import pytest

from dpgate.mechanisms import graphs, ladder_bounds, ladder_widths
from dpgate.mechanisms.graphs import binom
from dpgate.mechanisms.ladder import ladder_function, sampling_epsilon
from ladder_exact import over_the_noise

ALPHA = 0.05


def scalar_statistic(k: int, n: int, a: int, ls: int) -> tuple[int, int]:
    """``c_k`` and the number of rungs below GS, as a graph's release computes them."""
    rungs = graphs._closed_rungs(graphs.global_sensitivity("ktriangle", k, n), n, graphs._ktriangle_ladder(ls, a, k))
    return graphs.ktriangle_shift_statistic(rungs, n, k), len(rungs)


def every_ladder(k: int, n: int) -> list[tuple[int, int]]:
    """Every ``(a_m, LS)`` Lemma 5.5 allows on ``n`` nodes."""
    return [(a, ls) for a in range(n - 1) for ls in range(binom(a, k), binom(a, k) + 2 * a * binom(a, k - 1) + 1)]


@pytest.mark.parametrize("n, k", [(5, 1), (8, 2), (13, 2), (13, 3), (30, 2), (40, 3), (9, 4)])
def test_the_closed_form_statistic_is_the_release_s(n, k):
    """Every (a_m, LS) on a small universe, including those whose ladder reaches GS at once and
    those with a_m past the first x with F(x) >= GS."""
    for a in range(n - 1):
        ls = np.arange(binom(a, k), binom(a, k) + 2 * a * binom(a, k - 1) + 1)
        stats, rungs = ladder_widths.ktriangle_statistics(k, n, a, ls)
        want = [scalar_statistic(k, n, a, int(v)) for v in ls]
        assert [(int(c), int(m)) for c, m in zip(stats, rungs)] == want, (n, k, a)


@pytest.mark.parametrize("n, k", [(8, 2), (13, 2), (13, 3), (30, 2)])
def test_the_family_is_every_ladder_whose_statistic_is_in_range(n, k):
    stats = {pair: scalar_statistic(k, n, *pair)[0] for pair in every_ladder(k, n)}
    top_stat = max(stats.values())
    for bottom, top in [(0, 0), (0, 3), (2, 5), (4, 4), (3, top_stat), (0, top_stat)]:
        family = ladder_widths.ktriangle_family(k, n, bottom, top, 10**6)
        got = {(a, ls) for a, lo, hi in family for ls in range(lo, hi + 1)}
        assert got == {pair for pair, c in stats.items() if bottom <= c <= top}, (bottom, top)
    assert ladder_widths.ktriangle_family(k, n, 0, top_stat, 3) is None  # past its limit: the band


def exact_miss(widths: list[int], gs: int, h: float, m: int) -> float:
    shape = ladder_bounds._Shape(widths, gs)
    return math.exp(shape.log_beyond(m, h) - shape.log_total(h))


def cell_bar(k, n, eps, bottom, top, beta):
    ladder_bounds._max_half_width.cache_clear()
    return ladder_bounds._max_half_width("ktriangle", k, n, eps, ((bottom, top, beta),))


@pytest.mark.parametrize("n, k, eps, bottom, top, beta", [(34, 2, 1.2, 5, 9, 0.03), (120, 2, 1.6, 0, 4, 0.02),
                                                         (60, 3, 0.8, 2, 6, 0.05), (400, 2, 0.4, 1, 3, 0.025)])  # fmt: skip
def test_the_bar_holds_for_each_ladder_and_is_never_wider_than_the_band(monkeypatch, n, k, eps, bottom, top, beta):
    """Each ladder of the cell, its miss computed exactly, misses with at most β at the bar; the
    band's bar (the family switched off) is at least as wide; and the bar is no narrower than the
    widest ladder's own quantile (within the search's precision)."""
    built = []

    class Recorded(ladder_bounds._Family):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            built.append(self)

    monkeypatch.setattr(ladder_bounds, "_Family", Recorded)
    m = cell_bar(k, n, eps, bottom, top, beta)
    assert built, "the cell's ladders are few: the family bound is used"
    gs = graphs.global_sensitivity("ktriangle", k, n)
    h = sampling_epsilon(eps, n) / 2
    worst = 0.0
    quantiles = []
    for a, lo, hi in ladder_widths.ktriangle_family(k, n, bottom, top, 10**6):
        for ls in range(lo, hi + 1):
            rungs = graphs._closed_rungs(gs, n, graphs._ktriangle_ladder(ls, a, k))
            worst = max(worst, exact_miss(rungs, gs, h, m))
            quantiles.append(ladder_bounds._quantile((rungs, gs), h, beta, 10**12))
    assert worst <= beta
    assert m >= max(quantiles)
    monkeypatch.setattr(ladder_bounds, "FAMILY_WORK", 0)
    assert cell_bar(k, n, eps, bottom, top, beta) >= m
    ladder_bounds._max_half_width.cache_clear()


def test_a_family_past_its_work_takes_the_band(monkeypatch):
    """The work is counted from public numbers before any ladder is built: a cell reaching the
    top of the public range on 400 nodes has too many ladders, and so does every cell at a small
    ε, whose window of rungs is long."""
    n = 400
    _, top = graphs.statistic_range("ktriangle", n, 2)
    h = sampling_epsilon(1.0, n) / 2
    assert ladder_bounds._Family.of(2, n, 0, top, h, 10**9, 0.05) is None
    assert ladder_bounds._Family.of(2, n, 0, 3, sampling_epsilon(1e-4, n) / 2, 10**9, 0.05) is None
    assert ladder_bounds._Family.of(2, n, 0, 3, h, 10**4, 0.05) is not None
    # one step of F past 2^62 although 2 GS is below it (k = 51 on 71 nodes): nothing is listed
    assert ladder_widths.ktriangle_family(51, 71, 0, 5, 10**6) is None


def road_like(side: int, seed: int) -> tuple[np.ndarray, int]:
    g = nx.grid_2d_graph(side, side)
    rng = np.random.default_rng(seed)
    for i, j in itertools.product(range(side - 1), repeat=2):
        if rng.random() < 0.1:
            g.add_edge((i, j), (i + 1, j + 1))
    g = nx.convert_node_labels_to_integers(g, ordering="sorted")
    return graphs.simple_edges(*np.array(g.edges()).T), side * side


@pytest.mark.parametrize("epsilon", [1.6, 4.0])
def test_exact_coverage_with_the_family(monkeypatch, epsilon):
    """P(miss) summed over the exact laws of the count and of the noisy statistic (all but 1e-6
    of the statistic's, counted as a miss), on a road-like graph whose cells near its statistic
    are bounded by the family."""
    built = []
    family = ladder_bounds._Family.of
    monkeypatch.setattr(ladder_bounds._Family, "of", lambda *args: built.append(family(*args)) or built[-1])
    edges, n = road_like(10, 3)
    lf = ladder_function(edges, n, "ktriangle", 2)
    assert lf.value > 0
    ladder_bounds._max_half_width.cache_clear()
    miss, _ = over_the_noise(lf, epsilon, 0.2, ALPHA, tail=1e-6)
    ladder_bounds._max_half_width.cache_clear()
    assert 1e-6 < miss <= ALPHA
    assert any(b is not None for b in built)


@pytest.mark.parametrize("seed", range(6))
def test_every_graph_s_ladder_is_a_member_of_its_statistic_s_family(seed):
    """The link from graphs to the family: a graph's ladder (as the release computes it) is the
    ladder of its (a_m, LS), with LS within Lemma 5.5's range, and it is listed in the family of
    its own statistic. Random graphs from sparse to dense, cliques and stars."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(6, 40))
    p = float(rng.choice([0.05, 0.2, 0.5, 0.9]))
    graphs_ = [nx.gnp_random_graph(n, p, seed=seed), nx.complete_graph(n), nx.star_graph(n - 1),
               nx.powerlaw_cluster_graph(n, 2, 0.6, seed=seed)]  # fmt: skip
    for g in graphs_:
        edges = graphs.simple_edges(*np.array(g.edges()).T)
        for k in (1, 2, 3):
            lf = ladder_function(edges, n, "ktriangle", k)
            a, ls = graphs.Graph(edges, n).max_common_neighbours(), graphs.local_sensitivity(edges, n, "ktriangle", k)
            assert binom(a, k) <= ls <= binom(a, k) + 2 * a * binom(a, k - 1)
            stat, rungs = (int(v[0]) for v in ladder_widths.ktriangle_statistics(k, n, a, np.array([ls])))
            assert (stat, rungs) == (lf.width_statistic, len(lf.rungs))
            family = ladder_widths.ktriangle_family(k, n, stat, stat, 10**6)
            assert any(x == a and lo <= ls <= hi for x, lo, hi in family)
