"""All of dpgate's randomness: OS-keyed ChaCha20 generators and exact discrete samplers.

Noise is never drawn in SQL. Each release gets a ``Randomness``: two independent numpy
``Generator`` objects, each driven by ChaCha20 (``randomgen.ChaCha``, 20 rounds, a
cryptographically secure stream cipher) under its own 256-bit key from ``secrets`` (the OS
CSPRNG) [csprng]. ``rng`` draws everything privacy depends on (noise, exponential-mechanism
choices, keyed-sampling salts); ``sampling`` is for post-processing only, such as drawing
the rows of a synthetic table from an already noisy model, so the amount of post-processing
never changes the noise stream. The keys are independent, so one stream's output says
nothing about the other (ChaCha20 is a pseudorandom function of its key). A fixed seed
exists only for tests, has to be enabled by the data owner and asked for at connect time:
both keys are then SHA-256 hashes of the seed (one per stream, domain-separated), and every
result is marked as not private.

All samplers consume fair bits through the ``Generator`` API (``integers``), so their
exactness arguments only assume uniform bits; the exponential mechanism is in
``dpgate.mechanisms.exponential`` (exact, see there).

Discrete Laplace (two-sided geometric) sampler
----------------------------------------------
``Z = G1 - G2`` with ``G1, G2`` i.i.d. geometric, ``P(G = g) = (1 - a) a^g`` and
``a = exp(-c)``. The binary digits of a geometric variable are independent [geom-bits]:
bit ``j`` is 1 with probability ``q_j = a^(2^j) / (1 + a^(2^j))`` because
``prod_j (1 + a^(2^j)) = 1 / (1 - a)``. Each ``q_j`` is a double ``m * 2^e``; the
Bernoulli draw compares an exact uniform against it bit by bit (``-e`` fair bits all
zero, then 53 bits below the integer ``m * 2^53``), so the draw is exact for the double
``q_j`` [exact-bern]. The doubles ``q_j`` carry a relative error below ``1e-13`` each,
which changes ``ln P(z) / P(z')`` by less than ``2 * 64 * 1e-13`` whatever ``|z - z'|``
is, because two outputs differ in at most 64 binary digits of each geometric. Bits with
``q_j`` below the smallest double are never set, which truncates probability mass below
``1e-300``. dpgate runs the sampler at ``epsilon - 1e-10`` [margin], which absorbs both
effects, so the released value is ``epsilon``-DP for the requested ``epsilon``.

Unlike the textbook ``x + b * sign(u) * ln(1 - 2|u|)``, outputs are integers (or
multiples of a power-of-two grid for real-valued statistics), so Mironov's
floating-point attack does not apply.
"""

from __future__ import annotations

import hashlib
import math
import secrets
from dataclasses import dataclass

import numpy as np
import randomgen

#: Absolute ε margin subtracted before sampling, see [margin] in the module docstring.
EPSILON_MARGIN = 1e-10
_TWO53 = float(2**53)
#: ChaCha rounds: 20 is the standard, cryptographically secure variant [csprng].
CHACHA_ROUNDS = 20


@dataclass(frozen=True)
class Randomness:
    """The generators of one release, and whether they came from the OS (private) or a test seed.

    Attributes:
        rng: the noise stream: every draw the privacy guarantee depends on.
        sampling: an independent stream for post-processing of DP outputs (e.g. synthetic rows).
        private: False when both streams come from a test seed.
    """

    rng: np.random.Generator
    sampling: np.random.Generator
    private: bool


def chacha(key: int) -> np.random.Generator:
    """A numpy ``Generator`` over ChaCha20 with a 256-bit ``key`` (counter starting at 0)."""
    if not 0 <= key < 2**256:
        raise ValueError("a ChaCha key has 256 bits")
    return np.random.Generator(randomgen.ChaCha(key=key, rounds=CHACHA_ROUNDS))


def _test_key(test_seed: int, stream: str) -> int:
    """The 256-bit key of ``stream`` for a test seed: SHA-256, domain-separated per stream."""
    data = f"dpgate test seed/{stream}/{int(test_seed)}".encode()
    return int.from_bytes(hashlib.sha256(data).digest(), "big")


def fresh(test_seed: int | None = None) -> Randomness:
    """Two new ChaCha20 generators keyed with 256 OS-random bits each, or derived from the
    test seed (results then marked not private) [csprng]."""
    if test_seed is None:
        return Randomness(chacha(secrets.randbits(256)), chacha(secrets.randbits(256)), True)
    return Randomness(chacha(_test_key(test_seed, "noise")), chacha(_test_key(test_seed, "sampling")), False)


def os_salt() -> int:
    """A 62-bit secret salt from the OS, for keyed hashing inside DuckDB (row sampling)."""
    return secrets.randbits(62)


def _bernoulli_dyadic(q: float, size: int, rng: np.random.Generator) -> np.ndarray:
    """Exact Bernoulli(q) draws for a double ``0 <= q < 1`` [exact-bern]."""
    if q <= 0.0:
        return np.zeros(size, dtype=bool)
    mant, exp = math.frexp(q)  # q = mant * 2**exp, 0.5 <= mant < 1, exp <= 0
    zeros_needed = -exp
    mant_int = np.uint64(int(mant * _TWO53))
    alive = np.ones(size, dtype=bool)
    # ``zeros_needed`` fair bits must all be 0, taken 64 at a time.
    remaining = zeros_needed
    while remaining > 0 and alive.any():
        take = min(remaining, 64)
        idx = np.flatnonzero(alive)
        words = rng.integers(0, 2**64, size=idx.size, dtype=np.uint64, endpoint=False)
        if take < 64:
            ok = (words >> np.uint64(64 - take)) == 0
        else:
            ok = words == 0
        alive[idx[~ok]] = False
        remaining -= take
    idx = np.flatnonzero(alive)
    if idx.size:
        words = rng.integers(0, 2**64, size=idx.size, dtype=np.uint64, endpoint=False)
        alive[idx] = (words >> np.uint64(11)) < mant_int
    return alive


def _geometric_bit_probabilities(c: float) -> list[float]:
    """``q_j`` for every binary digit that can be set, for ``a = exp(-c)`` [geom-bits]."""
    probs = []
    j = 0
    while j < 64:
        x = math.ldexp(c, j)  # 2^j * c, exact
        if x > 745.0:  # exp(-x) underflows to 0: the bit is never set
            break
        beta = math.exp(-x)
        probs.append(beta / (1.0 + beta))
        j += 1
    return probs


def geometric(c: float, size: int, rng: np.random.Generator) -> np.ndarray:
    """Exact samples of ``P(G = g) = (1 - e^-c) e^(-c g)``, g = 0, 1, 2, ..."""
    if not c > 0 or not math.isfinite(c):
        raise ValueError(f"geometric parameter must be positive and finite, got {c}")
    out = np.zeros(size, dtype=np.int64)
    fast, slow = [], []
    for j, q in enumerate(_geometric_bit_probabilities(c)):
        if q <= 0.0:
            continue
        mant, exp = math.frexp(q)
        (fast if -exp < 64 else slow).append((j, q, mant, -exp))
    if fast and size:
        # All bits whose zero-run fits in one 64-bit word at once: [exact-bern], vectorised.
        shifts = np.array([64 - k for _, _, _, k in fast], dtype=np.uint64)[:, None]
        mants = np.array([int(m * _TWO53) for _, _, m, _ in fast], dtype=np.uint64)[:, None]
        zero_words = rng.integers(0, 2**64, size=(len(fast), size), dtype=np.uint64, endpoint=False)
        mant_words = rng.integers(0, 2**64, size=(len(fast), size), dtype=np.uint64, endpoint=False)
        bits = ((zero_words >> shifts) == 0) & ((mant_words >> np.uint64(11)) < mants)
        weights = np.array([1 << j for j, _, _, _ in fast], dtype=np.int64)
        out += weights @ bits.astype(np.int64)
    for j, q, _, _ in slow:
        bits = _bernoulli_dyadic(q, size, rng)
        if bits.any():
            out[bits] += np.int64(1) << np.int64(j)
    return out


def discrete_laplace(
    epsilon: float, sensitivity: int, size: int, rng: np.random.Generator
) -> np.ndarray:
    """Integer noise with ``P(z) ∝ exp(-epsilon |z| / sensitivity)``: epsilon-DP for
    integer statistics of L1 sensitivity ``sensitivity`` [margin]."""
    c = _run_parameter(epsilon, sensitivity)
    return geometric(c, size, rng) - geometric(c, size, rng)


def _run_parameter(epsilon: float, sensitivity: int | float) -> float:
    if not (epsilon > EPSILON_MARGIN and math.isfinite(epsilon)):
        raise ValueError(f"epsilon must be finite and > {EPSILON_MARGIN}, got {epsilon}")
    if not sensitivity > 0:
        raise ValueError(f"sensitivity must be positive, got {sensitivity}")
    c = (epsilon - EPSILON_MARGIN) / sensitivity
    if c < 2.0**-53:
        # beyond this the geometric's bits no longer fit in 63 bits, and exp(-c) rounds to 1
        raise ValueError(f"noise scale {sensitivity / epsilon:.3g} is too large")
    return c


def discrete_laplace_alpha(epsilon: float, sensitivity: int | float) -> float:
    """The ratio ``a`` of consecutive probabilities of the sampler actually run."""
    return math.exp(-_run_parameter(epsilon, sensitivity))


def discrete_laplace_tail(epsilon: float, sensitivity: int | float, m: int) -> float:
    """``P(Z >= m)`` for ``m >= 1``: ``a^m / (1 + a)``."""
    a = discrete_laplace_alpha(epsilon, sensitivity)
    if m <= 0:
        raise ValueError("m must be >= 1")
    return a**m / (1.0 + a)


def discrete_laplace_half_width(epsilon: float, sensitivity: int | float, alpha: float) -> int:
    """Smallest integer ``w`` with ``P(|Z| <= w) >= 1 - alpha``.

    ``P(|Z| > w) = 2 a^(w+1) / (1 + a)``.
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    a = discrete_laplace_alpha(epsilon, sensitivity)
    if a == 0.0:
        return 0
    target = alpha * (1.0 + a) / 2.0
    # a^(w+1) <= target  <=>  w + 1 >= log(target) / log(a)
    w = max(0, math.ceil(math.log(target) / math.log(a)) - 1)
    while w > 0 and 2 * a**w / (1 + a) <= alpha:  # guard against rounding: take the smallest
        w -= 1
    while 2 * a ** (w + 1) / (1 + a) > alpha:
        w += 1
    return w


def discrete_laplace_pmf(epsilon: float, sensitivity: int | float, z: np.ndarray) -> np.ndarray:
    """The exact pmf of the sampler actually run (for tests and EXPLAIN)."""
    a = discrete_laplace_alpha(epsilon, sensitivity)
    return (1 - a) / (1 + a) * a ** np.abs(np.asarray(z, dtype=float))


def discrete_laplace_logpmf(epsilon: float, sensitivity: int | float, z: np.ndarray) -> np.ndarray:
    """``log P(Z = z)`` of the sampler actually run, in log space (no underflow)."""
    c = _run_parameter(epsilon, sensitivity)
    a = math.exp(-c)
    return math.log((1 - a) / (1 + a)) - c * np.abs(np.asarray(z, dtype=float))


def discrete_laplace_std(epsilon: float, sensitivity: int | float) -> float:
    """Standard deviation: ``sqrt(2a) / (1 - a)``."""
    a = discrete_laplace_alpha(epsilon, sensitivity)
    return math.sqrt(2 * a) / (1 - a)
