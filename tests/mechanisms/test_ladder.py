"""The ladder mechanism for subgraph counts (thesis chapter 5).

(a) sensitivity and ladder quantities exactly (karate club, Les Misérables, digest 9.5);
(b) the sampler against its exact distribution (DKW and binomial bounds) and the float
analysis of the rung choice in exact decimal arithmetic; (c) an exact neighbouring-graph
audit of the output distributions; (d) soundness and coverage of the DP error bars;
(e) utility against the global-sensitivity Laplace baseline.

Statistical checks use TEST_SEED and tolerances derived from a stated false-alarm rate.
"""

from __future__ import annotations

import decimal
import math
from statistics import NormalDist

import networkx as nx
import numpy as np
import pytest

from conftest import TEST_SEED
from dpgate import noise
from dpgate.mechanisms import graphs
from dpgate.mechanisms import ladder, ladder_widths
from dpgate.mechanisms.ladder import (
    GlobalSensitivityLaplace,
    LadderFunction,
    LadderMechanism,
    SmoothSensitivityCauchy,
    global_sensitivity,
    interval_half_width,
    ladder_function,
    release_interval,
    release_with_interval,
    sampling_epsilon,
)

FALSE_ALARM = 1e-6
MECH = LadderMechanism()


def dkw(n: int, false_alarm: float = FALSE_ALARM) -> float:
    """Dvoretzky-Kiefer-Wolfowitz: P(sup |F_n - F| > t) <= 2 exp(-2 n t^2)."""
    return math.sqrt(math.log(2 / false_alarm) / (2 * n))


def binomial_bound(n: int, p: float, cells: int) -> float:
    """Half-width (in counts) of a two-sided normal bound per cell, Bonferroni over ``cells``."""
    z = NormalDist().inv_cdf(1 - FALSE_ALARM / (2 * cells))
    return z * math.sqrt(n * p * (1 - p)) + 1


@pytest.fixture(scope="module")
def karate() -> np.ndarray:
    return np.array(nx.karate_club_graph().edges(), dtype=np.int64)


@pytest.fixture(scope="module")
def lesmis() -> np.ndarray:
    return np.array(nx.convert_node_labels_to_integers(nx.les_miserables_graph()).edges(), dtype=np.int64)


# -- (a) ladder quantities ----------------------------------------------------------------------

KARATE = {  # digest 9.5 A.2: f, GS, I_0..I_5, M
    ("triangle", None): (45, 32, (10, 11, 12, 13, 14, 15), 31),
    ("kstar", 3): (1764, 992, (256, 273, 291, 310, 330, 351), 31),
    ("kclique", 4): (11, 496, (6, 16, 27, 39, 52, 66), 24),
    ("ktriangle", 2): (151, 2480, (57, 97, 141, 189, 241, 297), 27),
}


@pytest.mark.parametrize("query, k", list(KARATE))
def test_karate_club_ladders(karate, query, k):
    lf = ladder_function(karate, 34, query, k)
    f, gs, first, m = KARATE[(query, k)]
    assert (lf.value, lf.global_sensitivity, lf.rungs[:6], lf.M) == (f, gs, first, m)
    assert gs == global_sensitivity(query, k, 34)
    # a_m = 10; for 3-stars c_k = 24: I_0 = C(17, 2) + C(16, 2) = 256 <= C(24, 2), the binding rung
    assert lf.width_statistic == (24 if query == "kstar" else 10)
    assert all(isinstance(w, int) for w in lf.rungs) and len(lf.rungs) == lf.M
    assert lf.width(lf.M) == gs and lf.width(lf.M - 1) < gs


def test_les_miserables_ladders(lesmis):
    """Digest 9.5 A.3: N = 77, m = 254, a_m = 16."""
    expected = {
        ("triangle", None): (467, 16),
        ("kstar", 3): (15177, 805),
        ("kclique", 4): (639, 49),
        ("ktriangle", 2): (4544, 285),
    }
    for (query, k), (f, i0) in expected.items():
        lf = ladder_function(lesmis, 77, query, k)
        assert (lf.value, lf.rungs[0]) == (f, i0)


KARATE_MEDIANS = {  # digest 9.5 A.2: exact median |X - f| at ε = 0.05, 0.1, 0.2, 0.4, 0.8, 1.6
    ("triangle", None): [846, 370, 143, 55, 22, 10],
    ("kstar", 3): [26144, 11279, 4061, 1394, 546, 246],
    ("kclique", 4): [13485, 6335, 2413, 589, 114, 22],
    ("ktriangle", 2): [66948, 30711, 10691, 2338, 459, 116],
}


@pytest.mark.parametrize("query, k", list(KARATE_MEDIANS))
def test_exact_median_errors_reproduce_the_digest(karate, query, k):
    lf = ladder_function(karate, 34, query, k)
    got = [MECH.error_quantile(lf, e, 0.5) for e in (0.05, 0.1, 0.2, 0.4, 0.8, 1.6)]
    assert got == KARATE_MEDIANS[(query, k)]


def test_probability_of_the_exact_answer(karate):
    """Digest 6.3 and 9.5 B.1: P(X = f) = 1/Z is 0.02015 at ε = 0.8 and 5.36% at ε = 1.6."""
    lf = ladder_function(karate, 34, "triangle")
    assert MECH.output_distribution(lf, 0.8, np.array([45]))[0] == pytest.approx(0.02015, abs=5e-6)
    assert MECH.output_distribution(lf, 1.6, np.array([45]))[0] == pytest.approx(0.0536, abs=5e-5)


def test_the_pmf_is_equation_5_3(karate):
    lf = ladder_function(karate, 34, "kclique", 4)
    eps = 0.7
    h = sampling_epsilon(eps, 34) / 2
    d = lf.offsets()
    support = np.arange(lf.value - d[-1] - 400 * 496, lf.value + d[-1] + 400 * 496 + 1)
    pmf = MECH.output_distribution(lf, eps, support)
    assert pmf.sum() == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(pmf, pmf[::-1], rtol=1e-12)  # symmetric about f
    logp = MECH.log_output_distribution(lf, eps, support)
    for u in range(1, lf.M + 1):  # every integer of rung u has weight e^{-hu}
        for r in (d[u - 1] + 1, d[u]):
            assert logp[support == lf.value + r][0] - logp[support == lf.value][0] == pytest.approx(-h * u, abs=1e-9)
    for m in (0, 3, d[5], d[-1] - 1, d[-1] + 1000, d[-1] + 7 * 496):  # the tail sums agree with the pmf
        assert exact_miss(lf, eps, m) == pytest.approx(pmf[np.abs(support - lf.value) > m].sum(), rel=1e-9)
    rungs = MECH.rung_probabilities(lf, eps)
    assert rungs.sum() == pytest.approx(1.0, abs=1e-12)
    assert rungs[0] == pytest.approx(pmf[support == lf.value][0], rel=1e-12)
    assert rungs[1] == pytest.approx(pmf[(support > lf.value) & (support <= lf.value + d[1])].sum() * 2, rel=1e-9)


def test_ladder_function_validates_itself():
    lf = LadderFunction("triangle", None, 6, 2, 4, (1, 2, 3), 3)
    assert lf.offsets() == [0, 1, 3, 6]
    with pytest.raises(ValueError, match="M must equal"):
        LadderFunction("triangle", None, 6, 2, 4, (1, 2, 3), 2)
    with pytest.raises(ValueError, match="global_sensitivity"):
        LadderFunction("triangle", None, 6, 2, 5, (1, 2, 3), 3)
    with pytest.raises(ValueError, match=r"\[0, GS\)"):
        LadderFunction("triangle", None, 6, 2, 4, (1, 4), 2)
    with pytest.raises(ValueError, match="k >= 2"):
        LadderFunction("kstar", 1, 6, 2, 2, (), 0)


# -- (b) the sampler ----------------------------------------------------------------------------


class Words:
    """A fake generator that hands out given 64-bit words."""

    def __init__(self, words):
        self.words = list(words)

    def integers(self, low, high, size, dtype, endpoint):
        out = np.array(self.words[:size], dtype=np.uint64)
        self.words = self.words[size:]
        return out


def test_exact_bernoulli_compares_bits():
    q = np.array([0.75 * 2.0**-70])  # top word of q is 0, the next word starts 0b11...
    assert ladder._bernoulli_exact(q, 1, Words([0, 0]))[0, 0]  # 0 ... then 0 < 0.11b
    assert not ladder._bernoulli_exact(q, 1, Words([1]))[0, 0]
    assert not ladder._bernoulli_exact(q, 1, Words([0, (3 << 62) + 1]))[0, 0]
    assert ladder._bernoulli_exact(np.array([0.5]), 1, Words([(1 << 63) - 1]))[0, 0]
    assert not ladder._bernoulli_exact(np.array([0.5]), 1, Words([1 << 63]))[0, 0]  # V >= q exactly
    assert ladder._bernoulli_exact(np.array([1.0, 0.0]), 1, Words([]))[0].tolist() == [True, False]


@pytest.mark.statistical
def test_exact_bernoulli_frequencies():
    rng = np.random.default_rng(TEST_SEED)
    q = np.array([0.3, 1e-3, 0.5, 0.999, 1 / 3])
    n = 200_000
    hits = ladder._bernoulli_exact(q, n, rng).sum(axis=0)
    for count, p in zip(hits, q):
        assert abs(count - n * p) <= binomial_bound(n, p, q.size)


def test_randbelow_handles_big_integers():
    rng = np.random.default_rng(TEST_SEED)
    n = 3 * 2**100 + 7
    draws = [ladder._randbelow(n, rng) for _ in range(2000)]
    assert all(0 <= x < n for x in draws)
    assert 0.4 < sum(x < n // 2 for x in draws) / 2000 < 0.6  # 10 sd


@pytest.mark.statistical
@pytest.mark.parametrize("query, k, epsilon", [("triangle", None, 0.8), ("kstar", 3, 0.1), ("kclique", 4, 1.6)])
def test_sampler_matches_the_exact_distribution(karate, query, k, epsilon):
    """The empirical CDF of the released value against the exact pmf (DKW), plus the rung
    frequencies (binomial bounds, Bonferroni over rungs) and the sign balance."""
    lf = ladder_function(karate, 34, query, k)
    n = 40_000
    x = MECH.sample(lf, epsilon, n, rng=np.random.default_rng(TEST_SEED))
    lo, hi = int(x.min()), int(x.max())
    grid = np.arange(lo, hi + 1)
    cdf = np.cumsum(MECH.output_distribution(lf, epsilon, grid))
    left = MECH.output_distribution(lf, epsilon, np.arange(lo - 200 * lf.global_sensitivity, lo)).sum()
    emp = np.searchsorted(np.sort(x), grid, side="right") / n
    assert np.max(np.abs(emp - (left + cdf))) <= dkw(n)
    rung = ladder._rung_index(lf, x).astype(np.int64)
    probs = MECH.rung_probabilities(lf, epsilon)
    counts = np.bincount(np.minimum(rung, lf.M + 1), minlength=lf.M + 2)
    for c, p in zip(counts, probs):
        assert abs(c - n * p) <= binomial_bound(n, p, probs.size)
    off = x[x != lf.value] - lf.value
    assert abs((off > 0).sum() - off.size / 2) <= binomial_bound(off.size, 0.5, 1)


@pytest.mark.statistical
def test_sampler_with_widths_beyond_int64(lesmis):
    """30-stars on 77 nodes: GS = 2 C(75, 29) > 2^63, so offsets are Python ints."""
    lf = ladder_function(lesmis, 77, "kstar", 30)
    assert lf.global_sensitivity > 2**63
    n = 3000
    x = MECH.sample(lf, 0.5, n, rng=np.random.default_rng(TEST_SEED))
    assert x.dtype == object
    rung = ladder._rung_index(lf, x).astype(np.int64)
    probs = np.cumsum(MECH.rung_probabilities(lf, 0.5))
    emp = np.array([(np.minimum(rung, lf.M + 1) <= t).mean() for t in range(lf.M + 2)])
    assert np.max(np.abs(emp - probs)) <= dkw(n)
    d = lf.offsets()
    inner = [(abs(int(v) - lf.value), int(r)) for v, r in zip(x, rung) if 1 <= r <= lf.M]
    assert all(d[r - 1] < dist <= d[r] for dist, r in inner)


@pytest.mark.parametrize("n_nodes, rungs", [(34, None), (2000, tuple(range(1, 1998)))])
def test_rung_choice_is_the_ideal_law_up_to_the_float_margin(karate, n_nodes, rungs):
    """[float]: the product of the exact stop/continue doubles, evaluated in 60-digit decimal
    arithmetic, is within 10u(M + 2) of w_t â^t / Z for every rung and for "past M"."""
    if rungs is None:
        lf = ladder_function(karate, 34, "triangle")
    else:
        lf = LadderFunction("triangle", None, n_nodes, 10**6, n_nodes - 2, rungs, len(rungs))
    eps = 0.3
    h = sampling_epsilon(eps, n_nodes) / 2
    q, stop_side = ladder._rung_decisions(lf, h)
    ctx = decimal.Context(prec=60)
    one = decimal.Decimal(1)
    a = ctx.create_decimal(math.exp(-h))  # the â the sampler uses
    c = lf.global_sensitivity
    weights = [one] + [decimal.Decimal(2 * w) * a ** (t + 1) for t, w in enumerate(lf.rungs)]
    # past M: rung M + 1 + i has weight 2C â^{M+1} e^{-hi} (the geometric runs at the exact h)
    weights.append(decimal.Decimal(2 * c) * a ** (lf.M + 1) / (one - ctx.exp(decimal.Decimal(-h))))
    total = sum(weights)
    bound = 10 * 2.0**-53 * (lf.M + 2)
    reach = one
    worst = 0.0
    for s in range(lf.M + 1):
        p = decimal.Decimal(float(q[s]))
        stop, cont = (p, one - p) if stop_side[s] else (one - p, p)
        realised = reach * stop
        reach *= cont
        ideal = weights[s] / total
        if ideal > 0:
            worst = max(worst, abs(float(ctx.divide(realised, ideal)) - 1))
    worst = max(worst, abs(float(ctx.divide(reach, weights[-1] / total)) - 1))
    assert worst <= bound


def test_sampler_uses_only_the_given_generator(karate):
    lf = ladder_function(karate, 34, "ktriangle", 2)
    a = MECH.sample(lf, 0.4, 50, rng=np.random.default_rng(7))
    b = MECH.sample(lf, 0.4, 50, rng=np.random.default_rng(7))
    assert a.tolist() == b.tolist()
    assert isinstance(MECH.release(lf, 0.4, rng=np.random.default_rng(7)), int)


def test_constant_counts_are_released_exactly():
    """On 2 nodes there are no triangles to hide: GS = 0 and the release is f."""
    lf = ladder_function(np.array([[0, 1]]), 2, "triangle")
    assert (lf.global_sensitivity, lf.M) == (0, 0)
    assert MECH.release(lf, 1.0, rng=np.random.default_rng(0)) == 0
    assert MECH.output_distribution(lf, 1.0, np.array([-1, 0, 1])).tolist() == [0.0, 1.0, 0.0]


def test_sampling_epsilon_margin():
    assert 1.0 - 2e-10 < sampling_epsilon(1.0, 2445) < 1.0 - noise.EPSILON_MARGIN
    for bad in (0.0, -1.0, math.inf, math.nan, 1e-11):
        with pytest.raises(ValueError, match="epsilon"):
            sampling_epsilon(bad, 34)


# -- (c) exact neighbouring-graph audit ---------------------------------------------------------

SMALL = np.array([[0, 1], [0, 2], [1, 2], [1, 3], [2, 3], [3, 4], [4, 5], [2, 5], [5, 6], [1, 4]])


def neighbours(edges: np.ndarray, n: int):
    present = {tuple(e) for e in edges.tolist()}
    for u in range(n):
        for v in range(u + 1, n):
            yield np.array(sorted(present ^ {(u, v)}), dtype=np.int64).reshape(-1, 2)


@pytest.mark.parametrize(
    "query, k", [("triangle", None), ("kstar", 2), ("kstar", 3), ("kclique", 4), ("ktriangle", 1), ("ktriangle", 2)]
)
@pytest.mark.parametrize("epsilon", [0.3, 1.0])
def test_exact_privacy_on_every_neighbour(query, k, epsilon):
    """|log P_g(k) - log P_g'(k)| <= ε' <= ε and |q(g, k) - q(g', k)| <= 1 for all 21
    neighbours g' (one edge added or removed) of a 7-node graph, on every integer of a window.

    Why the window suffices: for k > K0 = max(f + D_M(g), f' + D_M(g')) both outputs lie in
    the constant-width tails, where q(·, k) = -(M + ceil((k - f - D_M) / GS)) and GS is the
    same for g and g' (it depends only on N). Moving k by GS lowers both qualities by exactly
    1, so the log-ratio is periodic with period GS beyond K0 (and likewise below the mirror
    point). The window holds K0 plus many full periods, hence every value the log-ratio takes
    anywhere; it also holds all but < 1e-12 of the mass of both distributions.
    """
    n = 7
    run = sampling_epsilon(epsilon, n)
    g = ladder_function(SMALL, n, query, k)
    c = g.global_sensitivity
    periods = math.ceil(60 / run)  # e^{-run/2 * periods} < 1e-12
    worst = 0.0
    for other in neighbours(SMALL, n):
        h = ladder_function(other, n, query, k)
        assert h.global_sensitivity == c
        reach = max(g.offsets()[-1], h.offsets()[-1]) + abs(g.value - h.value) + c * periods
        support = np.arange(min(g.value, h.value) - reach, max(g.value, h.value) + reach + 1)
        lg = MECH.log_output_distribution(g, epsilon, support)
        lh = MECH.log_output_distribution(h, epsilon, support)
        assert np.exp(lg).sum() > 1 - 1e-12 and np.exp(lh).sum() > 1 - 1e-12
        assert np.max(np.abs(ladder._rung_index(g, support) - ladder._rung_index(h, support))) <= 1
        worst = max(worst, float(np.max(np.abs(lg - lh))))
    assert worst <= run + 1e-12 <= epsilon
    assert worst > run / 2  # the audit is not vacuous: some neighbour comes close to the bound


# -- (d) error bars -----------------------------------------------------------------------------


def exact_miss(lf: LadderFunction, epsilon: float, m: int) -> float:
    """P(|X - f| > m) from the exact distribution."""
    h = sampling_epsilon(epsilon, lf.n_nodes) / 2
    shape = ladder._Shape(list(lf.rungs), lf.global_sensitivity)
    return math.exp(shape.log_beyond(m, h) - shape.log_total(h))


@pytest.mark.parametrize("query, k", [("triangle", None), ("kstar", 3), ("kclique", 4), ("ktriangle", 2)])
def test_interval_bound_holds_for_every_five_node_graph(query, k):
    """For every 5-node graph and every statistic range that contains its width statistic,
    the exact miss probability at the public half-width is at most alpha."""
    import itertools

    pairs = list(itertools.combinations(range(5), 2))
    lo_pub, hi_pub = graphs.statistic_range(query, 5, k)
    for mask in range(1 << len(pairs)):
        edges = np.array([p for i, p in enumerate(pairs) if mask >> i & 1], dtype=np.int64).reshape(-1, 2)
        lf = ladder_function(edges, 5, query, k)
        s = lf.width_statistic
        for lo, hi in {(s, s), (max(lo_pub, s - 1), min(hi_pub, s + 2)), (lo_pub, hi_pub)}:
            for eps, alpha in ((0.5, 0.05), (2.0, 0.2)):
                m = interval_half_width(query, k, 5, eps, lo, hi, alpha)
                assert exact_miss(lf, eps, m) <= alpha


@pytest.mark.parametrize("query, k", [("triangle", None), ("kstar", 2), ("kstar", 3), ("kclique", 4), ("ktriangle", 2)])
def test_interval_bound_holds_on_real_graphs(karate, lesmis, query, k):
    for edges, n in ((karate, 34), (lesmis, 77)):
        lf = ladder_function(edges, n, query, k)
        s = lf.width_statistic
        lo_pub, hi_pub = graphs.statistic_range(query, n, k)
        for lo, hi in ((s, s), (max(lo_pub, s - 5), min(hi_pub, s + 5))):
            for eps in (0.1, 0.5, 1.6):
                m = interval_half_width(query, k, n, eps, lo, hi, 0.05)
                assert exact_miss(lf, eps, m) <= 0.05
                assert m >= MECH.error_quantile(lf, eps, 0.95)


def test_interval_reads_only_the_release_and_the_noisy_statistic(karate):
    """Two graphs with the same width statistic but different counts and ladders get the same
    interval around the same released value: nothing else private enters it."""
    a = ladder_function(karate, 34, "triangle")
    b = LadderFunction("triangle", None, 34, 3, 32, (0, 1, 2), 3, width_statistic=a.width_statistic)
    for eps_w in (0.0, 0.5):
        if eps_w:  # triangles release c_K, read from the rungs: b gets the public upper ladder of a's
            s = ladder.width_statistic(a, eps_w)
            knee = ladder.statistic_knee("triangle", None, 34, eps_w)
            _, (uw, _) = ladder_widths.width_bounds("triangle", None, 34, s, knee)
            b = LadderFunction("triangle", None, 34, 3, 32, tuple(uw), len(uw), width_statistic=a.width_statistic)
            assert ladder.width_statistic(b, eps_w) == s and b.rungs != a.rungs
        ia = release_interval(a, 100, 1.0, epsilon_width=eps_w, rng=np.random.default_rng(3))
        ib = release_interval(b, 100, 1.0, epsilon_width=eps_w, rng=np.random.default_rng(3))
        assert ia == ib


def test_public_interval_spends_nothing(karate):
    lf = ladder_function(karate, 34, "kstar", 3)
    rng = np.random.default_rng(1)
    state = rng.bit_generator.state
    iv = release_interval(lf, 2000, 1.0, epsilon_width=0.0, rng=rng)
    assert rng.bit_generator.state == state  # no randomness, no statistic read
    assert (iv.statistic, iv.statistic_low, iv.statistic_high, iv.epsilon_width) == ("c_k", 0, 33, 0.0)
    assert iv.half_width == interval_half_width("kstar", 3, 34, 1.0, 0, 33, 0.05)
    assert (iv.low, iv.high) == (2000 - iv.half_width, 2000 + iv.half_width)


def test_release_with_interval_splits_epsilon(karate):
    lf = ladder_function(karate, 34, "triangle")
    r = release_with_interval(lf, 1.0, width_share=0.2, rng=np.random.default_rng(2))
    assert r.epsilon == 1.0 and r.mechanism == "ladder"
    assert r.interval.epsilon + r.interval.epsilon_width == pytest.approx(1.0)
    assert r.interval.epsilon_width == pytest.approx(0.2)
    assert r.interval.low <= r.value <= r.interval.high
    with pytest.raises(ValueError, match="width_share"):
        release_with_interval(lf, 1.0, width_share=1.0, rng=np.random.default_rng(2))


@pytest.mark.statistical
@pytest.mark.parametrize("query, k, epsilon", [("triangle", None, 1.0), ("kstar", 3, 0.5), ("ktriangle", 2, 2.0)])
def test_interval_coverage(lesmis, query, k, epsilon):
    """Coverage of the 95% interval over 2,000 releases, one-sided binomial bound."""
    lf = ladder_function(lesmis, 77, query, k)
    rng = np.random.default_rng(TEST_SEED)
    n = 2000
    hits = 0
    for _ in range(n):
        r = release_with_interval(lf, epsilon, rng=rng)
        hits += r.interval.low <= lf.value <= r.interval.high
    z = NormalDist().inv_cdf(1 - FALSE_ALARM)
    assert hits / n >= 0.95 - z * math.sqrt(0.95 * 0.05 / n)


# -- (e) utility and baselines ------------------------------------------------------------------


@pytest.mark.parametrize("query, k", [("triangle", None), ("kstar", 2), ("kstar", 3), ("kclique", 4), ("ktriangle", 2)])
def test_ladder_beats_global_laplace_on_les_miserables(lesmis, query, k):
    """Exact median relative errors for ε >= 0.2 (digest 9.5 A.3: triangles 0.169 at 0.4 and
    0.0321 at 1.6)."""
    lf = ladder_function(lesmis, 77, query, k)
    for eps in (0.2, 0.4, 0.8, 1.6):
        ladder_re = MECH.error_quantile(lf, eps, 0.5) / lf.value
        laplace_re = GlobalSensitivityLaplace().half_width(lf, eps, 0.5) / lf.value
        assert ladder_re < laplace_re
    if query == "triangle":
        assert MECH.error_quantile(lf, 0.4, 0.5) / lf.value == pytest.approx(0.169, rel=5e-3)
        assert MECH.error_quantile(lf, 1.6, 0.5) / lf.value == pytest.approx(0.0321, rel=5e-3)


def test_global_laplace_wins_on_a_small_graph_at_tiny_epsilon(lesmis):
    """The ladder is an exponential mechanism: far from f its weights fall by e^{-ε/2} per GS,
    Laplace's by e^{-ε}. When ε is so small that the error is many GS wide, Laplace wins
    (digest: triangles 3.28 at ε = 0.05, here against 2.23 for Laplace)."""
    lf = ladder_function(lesmis, 77, "triangle")
    assert MECH.error_quantile(lf, 0.05, 0.5) / lf.value == pytest.approx(3.28, rel=5e-3)
    assert GlobalSensitivityLaplace().half_width(lf, 0.05, 0.5) < MECH.error_quantile(lf, 0.05, 0.5)


def binomial_cdf(n: int, p: float, j_max: int) -> float:
    """P(Bin(n, p) <= j_max), summed in log space."""
    if p <= 0.0:
        return 1.0
    if p >= 1.0:
        return float(j_max >= n)
    log_n = math.lgamma(n + 1)
    terms = [
        log_n - math.lgamma(j + 1) - math.lgamma(n - j + 1) + j * math.log(p) + (n - j) * math.log1p(-p)
        for j in range(j_max + 1)
    ]
    top = max(terms)
    return math.exp(top) * sum(math.exp(t - top) for t in terms)


@pytest.mark.statistical
def test_sampled_median_error_beats_global_laplace(lesmis):
    """With m* halfway between the two exact medians, the sample median of the ladder's
    |error| exceeds m* (or Laplace's falls to m*) with probability P(Bin(n, p) <= n // 2);
    n is the smallest odd size making both below the false-alarm rate."""
    lf = ladder_function(lesmis, 77, "triangle")
    eps = 0.4
    lap = GlobalSensitivityLaplace()
    m_star = (MECH.error_quantile(lf, eps, 0.5) + lap.half_width(lf, eps, 0.5)) // 2
    p_ladder = 1 - exact_miss(lf, eps, m_star)  # P(|X - f| <= m*)
    a = noise.discrete_laplace_alpha(eps, lf.global_sensitivity)
    p_laplace = 2 * a ** (m_star + 1) / (1 + a)  # P(|Z| > m*)
    pairs = (p_ladder, p_laplace)
    n = next(n for n in range(101, 100_001, 100) if max(binomial_cdf(n, p, n // 2) for p in pairs) < FALSE_ALARM)
    rng = np.random.default_rng(TEST_SEED)
    ladder_err = np.abs(MECH.sample(lf, eps, n, rng=rng) - lf.value)
    laplace_err = np.abs(lap.sample(lf, eps, n, rng=rng) - lf.value)
    assert np.median(ladder_err) <= m_star < np.median(laplace_err)


def test_global_laplace_baseline(karate):
    lf = ladder_function(karate, 34, "triangle")
    lap = GlobalSensitivityLaplace()
    assert lap.VETTED and lap.NAME == "laplace_global"
    z = np.arange(-2000, 2001)
    pmf = lap.output_distribution(lf, 0.5, lf.value + z)
    assert pmf.sum() == pytest.approx(1.0, abs=1e-9)
    assert pmf[2000] == pytest.approx(noise.discrete_laplace_pmf(0.5, 32, np.array([0]))[0])
    assert isinstance(lap.release(lf, 0.5, rng=np.random.default_rng(0)), int)


def test_smooth_baseline_is_gated(karate):
    smooth = SmoothSensitivityCauchy()
    assert not smooth.VETTED
    lf = ladder_function(karate, 34, "triangle")
    ss = smooth.smooth_sensitivity(lf, 0.1)
    assert ss == max(w * math.exp(-0.1 * t) for t, w in enumerate(list(lf.rungs) + [32]))
    assert ss >= lf.rungs[0]
    assert isinstance(smooth.release(lf, 1.0, rng=np.random.default_rng(0)), float)
    with pytest.raises(ValueError, match="triangles and k-stars"):
        smooth.smooth_sensitivity(ladder_function(karate, 34, "kclique", 4), 0.1)
