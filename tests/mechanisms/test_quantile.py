"""The quantile mechanism: exact privacy on neighbouring cells, the sampler's law, the rank bound."""

from __future__ import annotations

import math

import numpy as np
import pytest

from conftest import TEST_SEED
from dpgate.mechanisms import quantile as Q
from dpgate.mechanisms.exponential import RATE_BITS, _rate

LO, HI = 0, 20


def _datasets(rng, count):
    for _ in range(count):
        n = int(rng.integers(0, 12))
        yield np.sort(rng.integers(LO, HI + 1, size=n))


@pytest.mark.parametrize("q", [0.0, 0.25, 0.5, 0.9, 1.0])
@pytest.mark.parametrize("delta", [1, 2])
def test_neighbouring_cells_change_every_probability_by_at_most_e_epsilon(q, delta):
    """Add Δ values (one subject's rows) to random small cells: the exact laws' log-ratio <= ε."""
    rng = np.random.default_rng(TEST_SEED)
    eps = 1.0
    worst = 0.0
    for x in _datasets(rng, 150):
        added = rng.integers(LO, HI + 1, size=delta)
        y = np.sort(np.concatenate([x, added]))
        p = Q.probabilities(x, LO, HI, q, eps, delta)
        r = Q.probabilities(y, LO, HI, q, eps, delta)
        worst = max(worst, float(np.abs(np.log(p) - np.log(r)).max()))
    assert worst <= eps + 1e-9
    assert worst >= 0.4 * eps  # not vacuous: the neighbours do move the law (the 2x-rate test below has teeth)


def test_the_test_would_catch_a_mechanism_with_twice_the_rate():
    """At twice the rate (the law of 2ε), some neighbours exceed ε = 1: the check has teeth."""
    rng = np.random.default_rng(TEST_SEED)
    worst = 0.0
    for x in _datasets(rng, 150):
        y = np.sort(np.append(x, rng.integers(LO, HI + 1)))
        p = Q.probabilities(x, LO, HI, 0.5, 2.0, 1)
        r = Q.probabilities(y, LO, HI, 0.5, 2.0, 1)
        worst = max(worst, float(np.abs(np.log(p) - np.log(r)).max()))
    assert worst > 1.0


@pytest.mark.parametrize("q, spread", [(0.5, 0.5), (0.9, 0.9), (0.1, 0.9), (0.0, 1.0)])
def test_the_rate_is_epsilon_over_twice_the_range_of_a_score_change(q, spread):
    rate = Q._quantile_rate(1.0, 3, q)
    lam = rate / 2**RATE_BITS * (1 << Q.LEVEL_BITS)  # per rank unit
    assert math.isclose(lam, (1.0 - 1e-10) / (2 * 3 * spread), rel_tol=1e-5)
    assert _rate  # the sampler's own rounding (exponential._rate) is used


@pytest.mark.statistical
@pytest.mark.parametrize("x, q", [(np.array([2, 5, 5, 9, 13]), 0.5), (np.array([], dtype=np.int64), 0.3),
                                  (np.array([7] * 6), 0.8), (np.array([0, 0, 20]), 0.0)])  # fmt: skip
def test_the_sampler_follows_the_law(x, q):
    """Chi-square of 20,000 draws against ``probabilities``; the critical value for 20 degrees of
    freedom at 0.999 is 45.3 (a failing seed would be a 1-in-1000 event, not a tolerance to tune)."""
    rng = np.random.default_rng(TEST_SEED)
    draws = 20_000
    law = Q.probabilities(x, LO, HI, q, 1.0, 1)
    got = np.bincount([Q.quantile(x, LO, HI, q, 1.0, 1, rng) - LO for _ in range(draws)], minlength=HI - LO + 1)
    expected = law * draws
    chi2 = float(((got - expected) ** 2 / expected).sum())
    assert chi2 < 45.3


@pytest.mark.statistical
def test_the_rank_bound_covers_at_its_level():
    """2,000 medians of 2,001 values at ε = 0.5: misses of the 95% rank bound ~ Binomial(2000, <= 0.05);
    fail above 130 (P(Binomial(2000, 0.05) > 130) < 1e-4). The bound is also not vacuous: at least
    one run has a rank error above a third of it."""
    rng = np.random.default_rng(TEST_SEED)
    x = np.sort(rng.integers(0, 1 << 12, size=2001))
    grid = (1 << 12) + 1
    t = Q.rank_error_bound(0.5, 1, grid, 0.05)
    rho = 0.5 * x.size
    misses, errors = 0, []
    for _ in range(2000):
        v = Q.quantile(x, 0, 1 << 12, 0.5, 0.5, 1, rng)
        below, upto = int((x < v).sum()), int((x <= v).sum())
        err = max(below - rho, rho - upto, 0)
        errors.append(err)
        misses += err > t
    assert misses <= 130
    assert max(errors) > t / 3


@pytest.mark.parametrize(
    "x, q, expect",
    [
        (np.array([5] * 1000), 0.5, 5),  # ties: the tied value scores 0
        (np.arange(0, 1001), 0.0, None),  # q = 0: near the minimum
        (np.arange(0, 1001), 1.0, None),  # q = 1: near the maximum
        (np.array([0] * 500 + [1000] * 500), 0.5, None),  # even n between two values
    ],
)
def test_edge_cases_land_where_they_should(x, q, expect):
    rng = np.random.default_rng(TEST_SEED)
    vals = [Q.quantile(x, 0, 1000, q, 5.0, 1, rng) for _ in range(50)]
    if expect is not None:
        assert all(v == expect for v in vals)
    elif q == 0.0:
        assert max(vals) <= 5
    elif q == 1.0:
        assert min(vals) >= 995
    else:
        assert all(v in (0, 1000) or 0 < v < 1000 for v in vals)
        assert all((x < v).sum() <= 500 + 2 and (x <= v).sum() >= 500 - 2 for v in vals)


def test_an_empty_cell_is_uniform_on_the_bounds():
    p = Q.probabilities(np.array([], dtype=np.int64), 3, 9, 0.5, 1.0, 1)
    assert np.allclose(p, 1 / 7)


def test_values_outside_the_bounds_are_refused():
    with pytest.raises(ValueError):
        Q.quantile(np.array([1, 50]), 0, 10, 0.5, 1.0, 1, np.random.default_rng(0))


def test_a_million_values_in_one_call():
    rng = np.random.default_rng(TEST_SEED)
    x = np.sort(rng.integers(0, 1 << 20, size=1_000_000))
    v = Q.quantile(x, 0, 1 << 20, 0.5, 1.0, 1, rng)
    assert abs(int((x < v).sum()) - 500_000) <= Q.rank_error_bound(1.0, 1, (1 << 20) + 1, 1e-6)
