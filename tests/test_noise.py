"""The exact discrete Laplace sampler: its distribution, its privacy ratio, its intervals.

Statistical checks use the fixed TEST_SEED and tolerances derived from the sampling error
(binomial standard deviations with a Bonferroni correction), never tuned by hand.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import randomgen

from conftest import TEST_SEED
from dpgate import noise


def implemented_geometric_pmf(c: float, g: int) -> float:
    """The pmf the bit-by-bit sampler actually implements (product over independent bits)."""
    p = 1.0
    for j, q in enumerate(noise._geometric_bit_probabilities(c)):
        p *= q if (g >> j) & 1 else (1 - q)
    return p


@pytest.mark.parametrize("c", [0.01, 0.1, 0.5, 1.0, 3.0, 40.0])
def test_bit_decomposition_is_the_geometric_distribution(c):
    a = math.exp(-c)
    for g in [0, 1, 2, 3, 7, 100, 1023, 4096]:
        ideal = (1 - a) * a**g
        if ideal < 1e-250:
            continue
        assert implemented_geometric_pmf(c, g) == pytest.approx(ideal, rel=1e-11)


def test_bernoulli_is_exact_for_dyadic_probabilities():
    class Words:
        def __init__(self, words):
            self.words = list(words)

        def integers(self, low, high, size, dtype, endpoint):
            out = np.array(self.words[:size], dtype=np.uint64)
            self.words = self.words[size:]
            return out

    q = 0.75 * 2.0**-70  # needs 69 zero bits, then a 53-bit comparison
    # 64 zero bits, then 5 more zero bits (top of the next word), then mantissa test passes.
    assert noise._bernoulli_dyadic(q, 1, Words([0, 0, 0]))[0]
    assert not noise._bernoulli_dyadic(q, 1, Words([1]))[0]
    assert not noise._bernoulli_dyadic(q, 1, Words([0, 1 << 63]))[0]
    # 0.5 needs no zero bits: U < 0.5 iff the top mantissa bit is 0.
    assert noise._bernoulli_dyadic(0.5, 1, Words([0]))[0]
    assert not noise._bernoulli_dyadic(0.5, 1, Words([1 << 63]))[0]


@pytest.mark.statistical
@pytest.mark.parametrize("epsilon, sensitivity", [(0.5, 1), (1.0, 3), (0.1, 1)])
def test_sampler_matches_pmf(epsilon, sensitivity):
    rng = np.random.default_rng(TEST_SEED)
    n = 200_000
    z = noise.discrete_laplace(epsilon, sensitivity, n, rng)
    values = np.arange(-15, 16)
    pmf = noise.discrete_laplace_pmf(epsilon, sensitivity, values)
    counts = np.array([(z == v).sum() for v in values])
    # each bin within 5 binomial standard deviations (false alarm < 31 * 6e-7)
    sd = np.sqrt(n * pmf * (1 - pmf))
    assert np.all(np.abs(counts - n * pmf) <= 5 * sd + 1)
    # Kolmogorov-Smirnov distance to the exact CDF, at the 1% level
    grid = np.arange(z.min(), z.max() + 1)
    cdf = np.cumsum(noise.discrete_laplace_pmf(epsilon, sensitivity, grid))
    cdf /= cdf[-1]
    emp = np.searchsorted(np.sort(z), grid, side="right") / n
    assert np.max(np.abs(emp - cdf)) < 1.63 / math.sqrt(n)


@pytest.mark.parametrize("epsilon, sensitivity", [(0.1, 1), (0.5, 1), (1.0, 7), (2.0, 100)])
def test_exact_privacy_ratio(epsilon, sensitivity):
    """Neighbouring statistics x and x + Δ: every output's probability ratio is at most e^ε."""
    z = np.arange(-20_000, 20_001)
    log_p = noise.discrete_laplace_logpmf(epsilon, sensitivity, z)
    log_q = noise.discrete_laplace_logpmf(epsilon, sensitivity, z - sensitivity)
    assert np.max(np.abs(log_p - log_q)) <= epsilon


@pytest.mark.statistical
def test_sampled_privacy_ratio_on_neighbours():
    """Sampled outputs of x + Z and x + 1 + Z: histogram ratios stay below e^ε up to sampling error."""
    epsilon, n = 0.5, 400_000
    rng = np.random.default_rng(TEST_SEED)
    a = 10 + noise.discrete_laplace(epsilon, 1, n, rng)
    b = 11 + noise.discrete_laplace(epsilon, 1, n, rng)
    for v in range(0, 22):
        ca, cb = (a == v).sum(), (b == v).sum()
        if min(ca, cb) < 2000:
            continue
        # log-ratio of two binomial proportions: sd ≈ sqrt(1/ca + 1/cb); 5 sd slack
        slack = 5 * math.sqrt(1 / ca + 1 / cb)
        assert abs(math.log(ca / cb)) <= epsilon + slack


@pytest.mark.parametrize("epsilon, sensitivity, alpha", [(0.5, 1, 0.05), (0.1, 3, 0.05), (1.0, 1, 0.01), (50.0, 1, 0.05)])
def test_half_width_is_the_smallest_with_coverage(epsilon, sensitivity, alpha):
    w = noise.discrete_laplace_half_width(epsilon, sensitivity, alpha)
    a = noise.discrete_laplace_alpha(epsilon, sensitivity)

    def miss(width):
        return 2 * a ** (width + 1) / (1 + a)

    assert miss(w) <= alpha
    assert w == 0 or miss(w - 1) > alpha


@pytest.mark.statistical
def test_half_width_coverage_sampled():
    rng = np.random.default_rng(TEST_SEED)
    n = 100_000
    z = noise.discrete_laplace(0.3, 2, n, rng)
    w = noise.discrete_laplace_half_width(0.3, 2, 0.05)
    cover = np.mean(np.abs(z) <= w)
    a = noise.discrete_laplace_alpha(0.3, 2)
    p = 1 - 2 * a ** (w + 1) / (1 + a)
    assert abs(cover - p) <= 5 * math.sqrt(p * (1 - p) / n)


def test_std_formula():
    rng = np.random.default_rng(TEST_SEED)
    z = noise.discrete_laplace(0.2, 1, 200_000, rng)
    assert z.std() == pytest.approx(noise.discrete_laplace_std(0.2, 1), rel=0.02)


def test_margin_is_applied():
    """The sampler runs at ε - 1e-10, so floating-point error cannot push the loss above ε."""
    assert noise.discrete_laplace_alpha(1.0, 1) > math.exp(-1.0)
    with pytest.raises(ValueError):
        noise.discrete_laplace(0.0, 1, 1, np.random.default_rng(0))
    with pytest.raises(ValueError):
        noise.discrete_laplace(1.0, 0, 1, np.random.default_rng(0))


# -- the generators ------------------------------------------------------------------------------
def _key(generator: np.random.Generator) -> int:
    """The 256-bit ChaCha key of a generator, from randomgen's state (8 little-endian words)."""
    words = generator.bit_generator.state["state"]["keysetup"]
    return sum(int(w) << (32 * i) for i, w in enumerate(words))


def test_fresh_streams_are_chacha20_keyed_by_the_os(monkeypatch):
    """Each stream is ChaCha with 20 rounds under its own 256-bit key from ``secrets``."""
    keys = iter([(1 << 255) | 12345, (1 << 254) | 678])
    requested = []

    def randbits(k):
        requested.append(k)
        return next(keys)

    monkeypatch.setattr(noise.secrets, "randbits", randbits)
    r = noise.fresh()
    assert requested == [256, 256]
    for stream, key in ((r.rng, (1 << 255) | 12345), (r.sampling, (1 << 254) | 678)):
        assert isinstance(stream, np.random.Generator)
        assert isinstance(stream.bit_generator, randomgen.ChaCha)
        assert stream.bit_generator.state["state"]["rounds"] == 20
        assert _key(stream) == key
    assert r.private


def test_fresh_streams_differ_within_and_across_releases():
    a, b = noise.fresh(), noise.fresh()
    assert a.private and b.private
    words = [tuple(g.integers(0, 2**63, size=4).tolist()) for g in (a.rng, a.sampling, b.rng, b.sampling)]
    assert len(set(words)) == 4  # four independent keys: equal outputs would have probability 2^-250
    assert len({_key(g) for g in (a.rng, a.sampling, b.rng, b.sampling)}) == 4


def test_sampling_does_not_move_the_noise_stream():
    """Post-processing draws come from their own stream: the noise is the same however much
    is sampled."""
    r1, r2 = noise.fresh(7), noise.fresh(7)
    r2.sampling.random(10_000)
    assert np.array_equal(noise.discrete_laplace(1.0, 1, 50, r1.rng), noise.discrete_laplace(1.0, 1, 50, r2.rng))


def test_a_test_seed_is_deterministic_and_not_private():
    s1, s2, other = noise.fresh(7), noise.fresh(7), noise.fresh(8)
    assert not s1.private and not s2.private and not other.private
    assert _key(s1.rng) == _key(s2.rng) and _key(s1.sampling) == _key(s2.sampling)
    assert _key(s1.rng) != _key(s1.sampling)  # two streams, two keys
    assert {_key(s1.rng), _key(s1.sampling)}.isdisjoint({_key(other.rng), _key(other.sampling)})
    assert s1.rng.integers(0, 2**62, size=3).tolist() == s2.rng.integers(0, 2**62, size=3).tolist()
    assert s1.sampling.integers(0, 2**62, size=3).tolist() == s2.sampling.integers(0, 2**62, size=3).tolist()
    assert isinstance(s1.rng.bit_generator, randomgen.ChaCha)


def test_os_salt_has_62_bits():
    salts = {noise.os_salt() for _ in range(20)}
    assert all(0 <= s < 2**62 for s in salts) and len(salts) == 20
