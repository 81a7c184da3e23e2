"""The exact exponential-mechanism sampler: its coins, its law, its privacy ratio, its grid.

Statistical checks use the fixed TEST_SEED and tolerances derived from the number of draws and
a total false-alarm rate of 1e-4 per test (binomial standard deviations with a Bonferroni
correction; chi-square at its 1e-4 quantile), never tuned by hand.
"""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from fractions import Fraction
from statistics import NormalDist

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from conftest import TEST_SEED
from dpgate import errors, noise
from dpgate.mechanisms import exponential as ex

FALSE_ALARM = 1e-4


def _z(cells: int) -> float:
    """Two-sided normal quantile for a Bonferroni split of FALSE_ALARM over ``cells``."""
    return NormalDist().inv_cdf(1 - FALSE_ALARM / (2 * cells))


def _chi2_quantile(dof: int, alpha: float = FALSE_ALARM) -> float:
    """Upper ``alpha`` quantile of chi-square (Wilson-Hilferty)."""
    z = NormalDist().inv_cdf(1 - alpha)
    return dof * (1 - 2 / (9 * dof) + z * math.sqrt(2 / (9 * dof))) ** 3


def _assert_matches_law(draws: np.ndarray, p: np.ndarray) -> None:
    """Per-cell binomial check (Bonferroni) and a chi-square over the cells with np >= 5."""
    n = draws.size
    counts = np.bincount(draws, minlength=p.size)
    sd = np.sqrt(n * p * (1 - p))
    assert np.all(np.abs(counts - n * p) <= _z(p.size) * sd + 1e-9), (counts, n * p)
    big = n * p >= 5
    rest = ~big
    obs = np.append(counts[big], counts[rest].sum())
    exp = np.append(n * p[big], n * p[rest].sum())
    keep = exp > 0
    stat = float((((obs - exp) ** 2)[keep] / exp[keep]).sum())
    assert stat <= _chi2_quantile(int(keep.sum()) - 1), stat


class Bits:
    """A mocked generator: ``integers`` returns the given values in order and counts the calls."""

    def __init__(self, values):
        self.values = list(values)
        self.calls = 0

    def integers(self, low, high=None, size=None, dtype=np.int64, endpoint=False):
        self.calls += 1
        return np.uint64(self.values.pop(0)) if dtype == np.uint64 else np.int64(self.values.pop(0))


# -- exact brackets and coins ---------------------------------------------------------------------
def _exp_reference(x: Fraction, q: int) -> Decimal:
    """``2^q e^-x`` to 300 significant digits (Decimal's exp is correctly rounded)."""
    with localcontext() as ctx:
        ctx.prec = 300
        return (Decimal(x.numerator) / Decimal(x.denominator)).__neg__().exp() * (Decimal(2) ** q)


@pytest.mark.parametrize("q", [64, 131, 300])
@pytest.mark.parametrize(
    "x",
    [Fraction(0), Fraction(1, 3), Fraction(1), Fraction(5, 2), Fraction(7), Fraction(44), Fraction(123, 7),
     Fraction(2**61 - 1, 2**62), Fraction(3 * 2**62 + 12345, 2**62), Fraction(200), Fraction(10**9, 3)],
)  # fmt: skip
def test_exp_brackets_are_rigorous_and_tight(x, q):
    lo, hi = ex._exp_neg_bounds(x.numerator, x.denominator, q)
    ref = _exp_reference(x, q)
    assert Decimal(lo) <= ref <= Decimal(hi)
    if 10 * x < 7 * q + 10:  # below the shortcut: within a couple of units
        assert hi - lo <= 2
    else:  # the shortcut [0, 1] is only taken where 2^q e^-x < 1
        assert (lo, hi) == (0, 1) and ref < 1


def test_bernoulli_exp_200_takes_the_exact_path():
    """P = e^-200 ≈ 2^-288.5 cannot be sampled empirically; follow the algorithm instead.

    The uniform ``V`` is read 64 bits at a time. All-zero words leave ``V < 2^-p``, which is
    below e^-200 only once ``p >= 289``: the coin must read exactly 5 words and return 1. A
    non-zero first word puts ``V`` above the bracket at once: 0 after one word. Zeros then a
    non-zero fifth word: 0 after five words. (A 53-bit Gumbel-max can never produce this
    outcome: the largest Gumbel it draws is about 36.7.)
    """
    zeros = Bits([0] * 10)
    assert ex.bernoulli_exp(Fraction(200), zeros) is True
    assert zeros.calls == 5
    one = Bits([1])
    assert ex.bernoulli_exp(Fraction(200), one) is False and one.calls == 1
    late = Bits([0, 0, 0, 0, 1 << 40])
    assert ex.bernoulli_exp(Fraction(200), late) is False and late.calls == 5


def test_a_far_candidate_can_be_chosen():
    """Scores [0, 200] at ε = 1: the far candidate has probability e^-100 / (1 + e^-100) > 0
    under the law, weight 1 in the proposal, and is returned when the bits say so."""
    logp = ex.log_probabilities(np.array([0, 200]), 1.0, 1.0)
    assert logp[0] == pytest.approx(-100.0, abs=1e-6) and np.exp(logp[0]) > 0
    # proposal: the uniform integer 0 selects candidate 0 (M_0 = 1 comes first); then the
    # acceptance coin 2^59 e^-100 ≈ 2^-85 needs a uniform below it: two zero words suffice
    bits = Bits([0] + [0] * 4)
    assert ex.exponential_mechanism(np.array([0, 200]), 1.0, 1.0, rng=bits) == 0
    assert bits.calls == 3
    # the same proposal with a non-zero uniform is rejected, and the next proposal (top) accepted
    bits = Bits([0, 1 << 63, 5, 0])
    assert ex.exponential_mechanism(np.array([0, 200]), 1.0, 1.0, rng=bits) == 1


def test_an_acceptance_probability_above_one_is_refused():
    """The proposal must dominate the target; the exact comparison checks it on every draw."""
    with pytest.raises(errors.InternalError):
        ex._bernoulli_scaled_exp(4, 1, 1, 10, np.random.default_rng(0))  # 4 e^-0.1 > 1


@pytest.mark.statistical
@pytest.mark.parametrize(
    "a, b, x", [(1, 1, Fraction(1, 3)), (3, 2, Fraction(1)), (1, 1, Fraction(3)), (5, 7, Fraction(0))]
)
def test_scaled_exponential_coins_have_the_right_bias(a, b, x):
    rng = np.random.default_rng(TEST_SEED)
    n = 20_000
    p = a / b * math.exp(-x)
    heads = sum(ex._bernoulli_scaled_exp(a, b, x.numerator, x.denominator, rng) for _ in range(n))
    assert abs(heads - n * p) <= _z(1) * math.sqrt(n * p * (1 - p)) + 1e-9


# -- the law ----------------------------------------------------------------------------------------
LAWS = [
    (np.array([0, 3, 5, 5, 1, 9, 14, -60]), 0.8, 1.0, False),  # integer scores, a far candidate
    (np.array([0.25, 3.1, 5.0, 5.0, -1.7, 2.2]), 0.6, 2.0 + 2.0**-20, False),  # PrivBayes-like R scores
    (np.array([12, 11, 11, 7, 0]), 1.3, 1.0, True),  # monotone counts
]


@pytest.mark.statistical
@pytest.mark.parametrize("scores, epsilon, sensitivity, monotonic", LAWS)
def test_draws_follow_the_exact_law(scores, epsilon, sensitivity, monotonic):
    p = ex.probabilities(scores, epsilon, sensitivity, monotonic=monotonic)
    scale = (epsilon - noise.EPSILON_MARGIN) / (sensitivity if monotonic else 2 * sensitivity)
    ideal = np.exp(scale * (scores - scores.max()))
    assert np.allclose(p, ideal / ideal.sum(), rtol=1e-6)  # the law is the mechanism (grid: 2^-30 of Δ)
    rng = np.random.default_rng(TEST_SEED)
    draws = np.array([ex.exponential_mechanism(scores, epsilon, sensitivity, rng=rng, monotonic=monotonic)
                      for _ in range(20_000)])  # fmt: skip
    _assert_matches_law(draws, p)


@pytest.mark.statistical
def test_many_candidates_follow_the_exact_law():
    """200 candidates (the numpy path), grouped by score for the check."""
    rng = np.random.default_rng(TEST_SEED)
    scores = rng.integers(0, 31, size=200)
    p = ex.probabilities(scores, 0.5, 1.0)
    draws = np.array([ex.exponential_mechanism(scores, 0.5, 1.0, rng=rng) for _ in range(10_000)])
    _assert_matches_law(scores[draws], np.bincount(scores, weights=p, minlength=31))


@pytest.mark.statistical
def test_peeling_follows_the_plackett_luce_law():
    scores, k, epsilon = np.array([1.5, 0.0, 0.7, 2.2]), 2, 0.9
    p = ex.probabilities(scores, epsilon, 1.0)
    outcomes = [(i, j) for i in range(4) for j in range(4) if i != j]
    law = np.array([p[i] * p[j] / (1 - p[i]) for i, j in outcomes])
    rng = np.random.default_rng(TEST_SEED)
    index = {o: n for n, o in enumerate(outcomes)}
    draws = np.array([index[tuple(ex.peel(scores, k, epsilon, 1.0, rng=rng))] for _ in range(10_000)])
    _assert_matches_law(draws, law)


def test_one_candidate_and_all_candidates():
    rng = np.random.default_rng(0)
    assert ex.exponential_mechanism(np.array([3.0]), 1.0, 1.0, rng=rng) == 0
    assert sorted(ex.peel(np.array([5, 1, 3]), 3, 1.0, 1.0, rng=rng)) == [0, 1, 2]
    assert ex.peel(np.array([5, 1, 3]), 0, 1.0, 1.0, rng=rng) == []


def test_a_large_epsilon_picks_the_best_and_huge_gaps_stay_exact():
    rng = np.random.default_rng(TEST_SEED)
    scores = rng.integers(0, 10**7, size=20_000)
    best = int(np.argmax(scores))
    assert ex.exponential_mechanism(scores, 1e4, 1.0, rng=rng, monotonic=True) == best
    extreme = np.array([-(2**62), 2**62, 0], dtype=np.int64)  # gaps beyond int64 are capped at 2^61
    assert ex.exponential_mechanism(extreme, 1.0, 1.0, rng=rng) == 1
    assert ex.exponential_mechanism(np.array([-1e300, 1e300, 0.0]), 1.0, 1.0, rng=rng) == 1


@pytest.mark.parametrize(
    "scores, epsilon, sensitivity",
    [(np.array([]), 1.0, 1.0), (np.array([[1, 2]]), 1.0, 1.0), (np.array([1.0, np.nan]), 1.0, 1.0),
     (np.array([1, 2]), 1.0, 0.0), (np.array([1, 2]), 1.0, -1.0), (np.array([1, 2]), 1.0, math.inf),
     (np.array([1, 2]), 1e-11, 1.0), (np.array([1, 2]), math.nan, 1.0), (np.array([1, 2]), -1.0, 1.0)],
)  # fmt: skip
def test_bad_inputs_are_refused(scores, epsilon, sensitivity):
    with pytest.raises(ValueError):
        ex.exponential_mechanism(scores, epsilon, sensitivity, rng=np.random.default_rng(0))


# -- privacy ----------------------------------------------------------------------------------------
def _worst_log_ratio(u, v, epsilon, sensitivity, monotonic=False) -> float:
    lp = ex.log_probabilities(u, epsilon, sensitivity, monotonic=monotonic)
    lq = ex.log_probabilities(v, epsilon, sensitivity, monotonic=monotonic)
    return float(np.max(np.abs(lp - lq)))


@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(2, 12),
    sensitivity=st.sampled_from([1.0, 2.0 + 2.0**-20, 0.3, 17.25, 1e-3]),
    epsilon=st.sampled_from([0.01, 0.7, 5.0, 60.0]),
    integer=st.booleans(),
    monotonic=st.booleans(),
)
@settings(max_examples=200, deadline=None)
def test_neighbouring_scores_stay_within_e_to_the_epsilon(seed, n, sensitivity, epsilon, integer, monotonic):
    """Scores moved by at most Δ each (all in one direction when monotone): every output's
    probability changes by at most e^ε under the law the sampler draws from."""
    rng = np.random.default_rng(seed)
    if integer:
        sensitivity = float(max(1, round(sensitivity)))
        u = rng.integers(-50, 50, size=n) * int(sensitivity)
        shift = rng.integers(-int(sensitivity), int(sensitivity) + 1, size=n)
    else:
        u = rng.normal(0, 20 * sensitivity, size=n)
        shift = rng.uniform(-sensitivity, sensitivity, size=n)
        shift[rng.random(n) < 0.3] = sensitivity  # the extreme moves, exactly Δ
    if monotonic:
        shift = np.abs(shift) * (1 if rng.random() < 0.5 else -1)
    v = u + shift
    while np.any(np.abs(v - u) > sensitivity):  # rounding can overshoot Δ by ulps: step back towards u
        v = np.where(np.abs(v - u) > sensitivity, np.nextafter(v, u), v)
    assert _worst_log_ratio(u, v, epsilon, sensitivity, monotonic) <= epsilon + 1e-9


def test_the_privacy_audit_is_tight():
    """The extreme neighbours reach e^ε up to ``log(1 + e^ε / m)``, so the audit has power.

    General: candidate 0 gains Δ while the m - 1 others lose Δ. Monotone: candidate 0 gains Δ,
    the others stay.
    """
    m, epsilon = 100_000, 0.9
    slack = math.log(1 + math.exp(epsilon) / m)
    u, v = np.zeros(m), np.full(m, -1.0)
    v[0] = 1.0
    assert epsilon - slack <= _worst_log_ratio(u, v, epsilon, 1.0) <= epsilon
    u, v = np.zeros(m, dtype=np.int64), np.zeros(m, dtype=np.int64)
    v[0] = 1
    assert epsilon - slack <= _worst_log_ratio(u, v, epsilon, 1.0, monotonic=True) <= epsilon


def test_the_rate_is_rounded_down_below_epsilon_minus_the_margin():
    for epsilon, sens, monotonic in [(1.0, 1, False), (0.1, 3, True), (1e4, 1, True), (7e-9, 2**30 + 2**9, False)]:
        rate = ex._rate(epsilon, sens, monotonic)
        target = (Fraction(epsilon) - Fraction(noise.EPSILON_MARGIN)) / (sens if monotonic else 2 * sens)
        assert Fraction(rate, 2**ex.RATE_BITS) <= target < Fraction(rate + 1, 2**ex.RATE_BITS)


# -- the grid ---------------------------------------------------------------------------------------
@given(
    a=st.floats(-1e9, 1e9, allow_nan=False),
    t=st.floats(-1.0, 1.0),
    sensitivity=st.floats(1e-6, 1e6),
)
@example(a=-3.4216050519589656e-277, t=1.0, sensitivity=1.0)  # b - a rounds to the sensitivity
@settings(max_examples=200, deadline=None)
def test_snapping_keeps_the_sensitivity_in_grid_units(a, t, sensitivity):
    b = a + t * sensitivity
    if abs(Fraction(b) - Fraction(a)) > Fraction(sensitivity):
        # Rounding pushed the pair outside the neighbouring relation. Exactly: a float difference
        # rounds too (a = -3.4e-277, b = 1.0 differ by more than 1 though b - a == 1.0).
        return
    units, sens_units = ex._grid_units(np.array([a, b]), sensitivity)
    assert abs(int(units[0]) - int(units[1])) <= sens_units
    g = 2.0 ** (math.frexp(sensitivity)[1] - 1 - ex.GRID_BITS)
    assert sens_units <= sensitivity / g + 1 and sens_units * g <= sensitivity * (1 + 2.0**-29)


def test_the_path_depends_on_the_dtype_not_on_the_values():
    """Integral floats are snapped like any float: the dtype (code), not the data, chooses."""
    units_f, sens_f = ex._grid_units(np.array([3.0, 5.0]), 1.0)
    units_i, sens_i = ex._grid_units(np.array([3, 5]), 1.0)
    assert units_f.tolist() == [3 * 2**30, 5 * 2**30] and sens_f == 2**30
    assert units_i.tolist() == [3, 5] and sens_i == 1


def test_tiny_negative_scores_floor_to_minus_one_unit():
    units, _ = ex._grid_units(np.array([-1e-320, 0.0, 1e-320]), 2.0**60)  # the scaling underflows to ±0
    assert units.tolist() == [-1, 0, 0]
