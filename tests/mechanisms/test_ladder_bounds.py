"""The ladder's error bars at small ε: bounded work, and coverage kept.

The band bound visits about ``(M + ln(1/β)/h) · ln(1/β)/h`` (rung, window) pairs per probe, so
at ``ε = 10^-6`` it would run for days after the debit; ``dpgate.mechanisms.ladder_bounds``
evaluates it on blocks of rungs below ``h = BLOCK_H`` and caps the pairs per probe at
``BAND_WORK`` from public numbers. Checked here: (a) the work per probe and the number of
probes at every ε down to the minimum, counted, not timed; (b) the blocked bound holds for
ladders across the band and stays within 0.5% of the unblocked one; (c) exact coverage of
the public error bar at ε down to 10^-6 and of the calibrated one at 10^-3 and 10^-4 (summed
over the statistic's noise); (d) sampled coverage at ε = 10^-3 through ``release_with_interval``.
"""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest

from conftest import TEST_SEED
from dpgate.mechanisms import graphs, ladder_bounds
from dpgate.mechanisms.ladder import ladder_function, release_with_interval, sampling_epsilon
from dpgate.queries.subgraph import clamped_interval
from ladder_exact import over_the_noise

ALPHA = 0.05
KARATE = np.array(sorted((min(u, v), max(u, v)) for u, v in nx.karate_club_graph().edges()), dtype=np.int64)


def exact_miss(lf, epsilon: float, m: int) -> float:
    h = sampling_epsilon(epsilon, lf.n_nodes) / 2
    shape = ladder_bounds._Shape(list(lf.rungs), lf.global_sensitivity)
    return math.exp(shape.log_beyond(m, h) - shape.log_total(h))


@pytest.fixture
def bands(monkeypatch):
    """Every band the error bars build, with the work of each of its probes."""
    built = []

    class Recorded(ladder_bounds._Band):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            built.append(self)

    class RecordedFamily(ladder_bounds._Family):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            built.append(self)

    monkeypatch.setattr(ladder_bounds, "_Band", Recorded)
    monkeypatch.setattr(ladder_bounds, "_Family", RecordedFamily)
    ladder_bounds._half_width.cache_clear()
    ladder_bounds._max_half_width.cache_clear()
    yield built
    ladder_bounds._half_width.cache_clear()
    ladder_bounds._max_half_width.cache_clear()


# -- (a) work ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "n_nodes, query, k",
    [(n, q, k) for n in (34, 2445) for q, k in (("triangle", None), ("kstar", 2), ("ktriangle", 2))]
    + [(34, "kclique", 4)],
)
def test_error_bar_work_is_bounded_down_to_the_minimum_epsilon(bands, n_nodes, query, k):
    """At every ε from 1 down to 10^-6 (the minimum a statement may ask), each probe of the band
    bound visits at most BAND_WORK pairs and each band is probed a bounded number of times: the
    work does not grow with 1/ε. (Before blocks, one probe at ε = 10^-3 on 34 nodes visited
    ~5·10^7 pairs and 10^-6 never finished.)"""
    for epsilon in (1.0, 1e-2, 1e-3, 1e-4, 1e-6):
        del bands[:]
        m, _, _ = ladder_bounds.calibrated_half_width(query, k, n_nodes, 0.9 * epsilon, 3, 0.1 * epsilon, ALPHA)
        assert m > 0
        probes = [v for band in bands for v in band.visits]
        limit = {ladder_bounds._Family: ladder_bounds.FAMILY_WORK}  # k-triangle cells whose ladders are few
        assert probes and all(max(b.visits, default=0) <= limit.get(type(b).__mro__[1], ladder_bounds.BAND_WORK)
                              for b in bands), (epsilon, max(probes))  # fmt: skip
        assert all(len(band.visits) <= 80 for band in bands), [len(b.visits) for b in bands]


def test_blocks_are_chosen_from_public_numbers_and_grow_as_epsilon_shrinks():
    lower, _ = ladder_bounds._width_bounds("triangle", None, 300, 5)
    _, upper = ladder_bounds._width_bounds("triangle", None, 300, 40)
    blocks = []
    for epsilon in (0.1, 1e-2, 1e-3, 1e-6):
        h = sampling_epsilon(epsilon, 300) / 2
        ceiling = ladder_bounds._sandwich(lower, upper, h, ALPHA)
        blocks.append(ladder_bounds._block(lower, h, ALPHA, ceiling))
    assert blocks[0] == 1 and blocks[1] < blocks[2] < blocks[3]
    assert blocks[3] >= ladder_bounds.BLOCK_H / (sampling_epsilon(1e-6, 300) / 2) - 1


def test_blocks_are_summed_without_listing_their_rungs():
    """At ε near the samplers' margin a block spans ~10^10 rungs: the tail is multiplied, not
    listed (listing it once took all the machine's memory)."""
    assert ladder_bounds._coarsen(([1, 2, 3], 5), 10**12) == ((6 + 5 * (10**12 - 3),), 5 * 10**12)
    assert ladder_bounds._coarsen(([1, 2, 3, 4, 5], 9), 2) == ((3, 7, 14), 18)


def test_a_tiny_work_budget_falls_back_to_the_sandwich(monkeypatch):
    lower, _ = ladder_bounds._width_bounds("triangle", None, 300, 0)
    _, upper = ladder_bounds._width_bounds("triangle", None, 300, 298)
    h = sampling_epsilon(0.5, 300) / 2
    sandwich = ladder_bounds._sandwich(lower, upper, h, ALPHA)
    assert ladder_bounds._band_half_width(lower, upper, h, ALPHA) < sandwich / 2
    monkeypatch.setattr(ladder_bounds, "BAND_WORK", 1)
    assert ladder_bounds._band_half_width(lower, upper, h, ALPHA) == sandwich


# -- (b) the blocked bound ------------------------------------------------------------------------
def _miss_of(widths, tail, h: float, m: int) -> float:
    shape = ladder_bounds._Shape(list(widths), tail)
    return math.exp(shape.log_beyond(m, h) - shape.log_total(h))


@pytest.mark.parametrize("epsilon", [1e-2, 3e-3])
@pytest.mark.parametrize("s_lo, s_hi", [(5, 40), (0, 298)])
def test_blocked_bound_holds_across_the_band_and_is_near_the_unblocked_one(monkeypatch, epsilon, s_lo, s_hi):
    """Ladders that follow L up to a rung and U after it (or the reverse), and random ladders
    between L and U, miss with probability at most beta at the blocked half-width; the worst of
    them comes within 2% of beta (the bound is tight), and the unblocked band bound, computed
    here with blocks switched off, is at most 0.5% narrower."""
    n, beta = 300, ALPHA
    h = sampling_epsilon(epsilon, n) / 2
    lower, _ = ladder_bounds._width_bounds("triangle", None, n, s_lo)
    _, upper = ladder_bounds._width_bounds("triangle", None, n, s_hi)
    m = ladder_bounds._band_half_width(lower, upper, h, beta)
    size = max(len(lower[0]), len(upper[0])) + 1
    low = (list(lower[0]) + [lower[1]] * size)[:size]
    high = (list(upper[0]) + [upper[1]] * size)[:size]
    ladders = [a[:cut] + b[cut:] for cut in range(0, size + 1, 5) for a, b in ((low, high), (high, low))]
    rng = np.random.default_rng(TEST_SEED)
    ladders += [[int(rng.integers(x, y + 1)) for x, y in zip(low, high)] for _ in range(20)]
    worst = max(_miss_of(w, upper[1], h, m) for w in ladders)
    assert worst <= beta
    assert worst >= 0.98 * beta
    monkeypatch.setattr(ladder_bounds, "BLOCK_H", 0.0)
    monkeypatch.setattr(ladder_bounds, "BAND_WORK", 1 << 60)
    fine = ladder_bounds._band_half_width(lower, upper, h, beta)
    assert fine <= m <= 1.005 * fine


@pytest.mark.parametrize("b", [2, 7, 40])
def test_the_coarse_band_holds_every_fine_ladder(b):
    """Block sums of every fine ladder lie in the coarse band, and the coarse miss is the one
    the module docstring derives: c T / (H + c T) = beta when T / (H + T) = beta'."""
    lower, upper = ([1, 2, 3, 5, 8], 9), ([2, 4, 6, 9], 12)
    (cl, clt), (cu, cut) = ladder_bounds._coarsen(lower, b), ladder_bounds._coarsen(upper, b)
    assert clt == 9 * b and cut == 12 * b
    padded_l, padded_u = lower[0] + [9] * (b * len(cl) - 5), upper[0] + [12] * (b * len(cu) - 4)
    assert list(cl) == [sum(padded_l[i : i + b]) for i in range(0, len(padded_l), b)]
    assert list(cu) == [sum(padded_u[i : i + b]) for i in range(0, len(padded_u), b)]
    h, beta = 0.003, 0.05
    coarse = ladder_bounds._block_miss(beta, h, b)
    c = math.exp(h * (b - 1))
    t_over_h = coarse / (1 - coarse)  # the coarse certificate T / H at its limit
    assert c * t_over_h / (1 + c * t_over_h) == pytest.approx(beta, rel=1e-12)


# -- (c) exact coverage ---------------------------------------------------------------------------
@pytest.mark.parametrize("query, k", [("triangle", None), ("kstar", 3), ("ktriangle", 2), ("kclique", 4)])
@pytest.mark.parametrize("epsilon", [1e-2, 1e-3, 1e-4, 1e-6])
def test_public_error_bar_covers_exactly_at_small_epsilon(query, k, epsilon):
    """width_share = 0: one half-width from the public range, P(miss) from the sampler's exact
    law on karate. It stays at most alpha and not far below it (the bound is not vacuous)."""
    lf = ladder_function(KARATE, 34, query, k)
    lo, hi = graphs.statistic_range(query, 34, k)
    m = ladder_bounds.interval_half_width(query, k, 34, epsilon, lo, hi, ALPHA)
    miss = exact_miss(lf, epsilon, m)
    assert miss <= ALPHA
    assert miss >= 0.9 * ALPHA


@pytest.mark.parametrize("query, k, epsilon", [("triangle", None, 1e-3), ("kstar", 2, 1e-3), ("triangle", None, 1e-4)])
def test_calibrated_error_bar_covers_exactly_at_small_epsilon(query, k, epsilon):
    """Karate's first 16 nodes: the statistic's noise (scale 5·10^3 to 5·10^4) dwarfs its public
    range [0, 15], so every cell of the calibration sees all of it, and the cells at z >= 0 (half
    of the noise's mass, at beta = alpha / 2) decide: the miss is about alpha / 2."""
    lf = ladder_function(KARATE[KARATE[:, 1] < 16], 16, query, k)
    miss, _ = over_the_noise(lf, epsilon, 0.2, ALPHA)
    assert miss <= ALPHA
    assert miss >= 0.3 * ALPHA


# -- (d) sampled coverage -------------------------------------------------------------------------
@pytest.mark.statistical
def test_sampled_coverage_at_small_epsilon():
    """200 releases as the SQL answer makes them (clamped at zero) at ε = 10^-3: coverage at
    least 0.95 minus three binomial standard errors."""
    runs = 200
    lf = ladder_function(KARATE, 34, "triangle")
    rng = np.random.default_rng(TEST_SEED)
    hits = 0
    for _ in range(runs):
        r = release_with_interval(lf, 1e-3, rng=rng)
        _, low, high = clamped_interval(r.value, r.interval.half_width, True)
        hits += low <= lf.value <= high
    assert hits / runs >= 0.95 - 3 * math.sqrt(0.95 * 0.05 / runs)


@pytest.mark.parametrize("alpha", [1e-3, 1e-6])
def test_calibrated_error_bar_covers_exactly_at_a_small_alpha(alpha):
    """Below alpha ≈ 0.02 the cells reach further above the noisy statistic (else the noise beyond
    the first cell alone used up alpha, and the calibration failed); the miss summed over both
    laws stays within alpha."""
    assert len(ladder_bounds.statistic_cells(0.2, alpha)) > len(ladder_bounds.statistic_cells(0.2, 0.05))
    for query, k in (("triangle", None), ("ktriangle", 2)):
        lf = ladder_function(KARATE, 34, query, k)
        miss, _ = over_the_noise(lf, 1.0, 0.2, alpha, tail=alpha * 1e-3)
        assert miss <= alpha, (query, miss)


def test_statistic_cells_at_an_epsilon_whose_noise_underflows():
    """exp(-ε) is 0.0 in doubles from ε ≈ 745 on (a math domain error, then a range error, once
    raised from planning TRIANGLE_COUNT at ε = 10,000): the noise is 0, every cell but the one
    holding 0 has probability 0, and that one gets all of alpha."""
    cells = ladder_bounds.statistic_cells(1000.0, 0.05)
    assert [(lo, hi) for lo, hi, _ in cells] == [(-1, -1), (0, None)]
    assert cells[-1][2] == pytest.approx(0.05, rel=1e-6)
