"""The exponential mechanism, sampled exactly: no candidate's probability is rounded away.

``exponential_mechanism`` returns index ``i`` with probability proportional to
``exp(ε' u_i / (2Δ))`` (``exp(ε' u_i / Δ)`` for monotone utilities), where ``ε'`` is the
requested ε minus ``noise.EPSILON_MARGIN`` and ``u`` are the scores on the grid below.
``peel`` makes ``k`` such draws without replacement (sequential composition).

**Guarantee:** ε-DP under whatever neighbouring relation the caller's scores are computed for
(each caller states it: a subject's rows for top-k and quantiles, one tuple for PrivBayes and
MST), provided every score moves by at most ``Δ`` between neighbours [law].

**Sensitivity:** ``Δ``, given by the caller; on the grid below it becomes the integer ``Δ_g``.

**Why not Gumbel-max:** ``argmax(ε u / (2Δ) + Gumbel)`` on doubles draws the Gumbel as
``-log(-log U)`` from a 53-bit uniform, so it lies in about ``[-3.6, 36.7]`` and a candidate
whose scaled score is more than about 40.3 below the best one is never chosen: probability
exactly 0, and no finite privacy loss bounds the ratio to a neighbour where it has positive
probability.

**Scores on an integer grid** [grid]: integer arrays are used as they are, with the
sensitivity ``Δ`` given. Floating-point arrays are snapped down to the grid
``g = 2^(floor(log2 Δ) - GRID_BITS)``, ``U_i = floor(u_i / g)``, clipped to ``±2^62``. If
every score moves by at most ``Δ`` between neighbours, every ``U_i`` moves by at most
``Δ_g = ceil(Δ / g)`` (an integer, at most ``2^31``): ``|floor a - floor b|`` is an integer
below ``|a - b| + 1``, and clipping is 1-Lipschitz. The mechanism is the exponential mechanism
on ``U`` with sensitivity ``Δ_g``; in score units that is a sensitivity of at most ``Δ + g``,
i.e. ``Δ (1 + 2^-30)``. Floor and clipping are non-decreasing, so monotone scores stay
monotone. Which path is taken depends on the array's dtype (code), never on the values. Gaps
to the best score are capped at ``2^61`` grid units: ``max(U_i, U_max - 2^61)`` is again a
maximum of functions that move by at most ``Δ_g``, so the cap keeps the sensitivity.

**The law** [law]: with ``D_i = U_max - U_i`` (capped as above) the sampler returns ``i`` with
probability exactly ``w_i / Σ w``, ``w_i = exp(-λ D_i)``, where ``λ`` is
``ε' / (2 Δ_g)`` (``ε' / Δ_g`` when monotone) rounded *down* to a multiple of ``2^-62``, in
exact rational arithmetic (``ε'`` = the double ε minus the double margin, as fractions). So
the output is exactly that of the exponential mechanism at some ``ε'' <= ε - 1e-10`` (at most
``2^-61 Δ_g`` below ``ε'``): ε-DP with no floating-point caveat. Every ``w_i`` is positive, so
every candidate has positive probability.

**The sampler** [exact]: rejection sampling with a float-built proposal and an exact
acceptance test.

1. Proposal: integer weights ``M_i = floor(2^P ŵ_i (1 + 2^-20)) + 1`` where ``ŵ_i`` is
   ``exp(-λ D_i)`` in double precision and ``P = 61 - bitlength(n)``; ``i`` is drawn with
   probability ``M_i / Σ M`` from one exact uniform integer below ``Σ M < 2^62``.
2. Acceptance with probability ``a_i = 2^P w_i / M_i`` exactly: a uniform ``V`` in ``[0, 1)`` is
   read 64 bits at a time and compared with rigorous rational brackets of ``a_i``
   (``_exp_neg_bounds``: alternating Taylor series for ``e^-f``, powers of ``e^-1``, outward
   rounding at every step); a decision is made only when ``V``'s interval lies on one side of
   ``a_i``'s, so the test returns exactly ``[V < a_i]``, i.e. Bernoulli(``a_i``), and it stops
   with probability 1 because ``a_i`` is a fixed real and the brackets shrink.
3. ``P(propose i and accept) = (M_i / Σ M) · 2^P w_i / M_i = 2^P w_i / Σ M``, which is
   proportional to ``w_i``: the accepted index has the law [law] exactly, whatever the
   float errors in ``ŵ``. Those only have to keep ``a_i <= 1``, i.e. ``ŵ_i (1 + 2^-20) >= w_i``;
   ``ŵ`` is within ``2^-40`` of ``w`` (``λ D`` is capped at ``P ln 2 + 1`` before ``exp``, which
   leaves ``M_i = 1 > 2^P w_i`` above the cap), and the exact comparison raises
   ``InternalError`` whenever its bracket shows ``a_i > 1``. The expected number of proposals
   is ``Σ M / (2^P Σ w) <= 1 + 2^-20 + n 2^-P``, about 1.

Exactness assumes uniform random bits, which ``noise.fresh`` takes from ChaCha20 keyed by
the OS. Canonne, Kamath and Steinke's exact ``Bernoulli(exp(-γ))`` (NeurIPS 2020, Algorithm 1)
was the starting point; it is not used here because the proposal that makes rejection
cheap needs coins ``r · exp(-γ)`` with rational ``r > 1``, which that algorithm cannot flip,
while the bracket comparison flips any of them. Cost: one pass of numpy over the candidates
per draw (about 2 ms for 10^5 candidates) plus one exact comparison (tens of microseconds).

**References:** F. McSherry, K. Talwar, "Mechanism design via differential privacy", FOCS
2007 (the mechanism, ``exp(ε u / (2Δ))``); the monotone variant ``exp(ε u / Δ)``: ibid.
and M. Lyu, D. Su, N. Li, VLDB 2017; C. Canonne, G. Kamath, T. Steinke, "The Discrete
Gaussian for Differential Privacy", NeurIPS 2020 (exact Bernoulli sampling of exponentials);
C. Ilvento, "Implementing the Exponential Mechanism with Base-2 Differential Privacy", CCS
2020 (floating-point failures of the naive samplers).
"""

from __future__ import annotations

import bisect
import functools
import itertools
import math
from fractions import Fraction

import numpy as np

from dpgate import errors, noise

#: Floating-point scores are snapped to multiples of 2^(floor(log2 Δ) - GRID_BITS) [grid].
GRID_BITS = 30
#: λ is rounded down to a multiple of 2^-RATE_BITS [law].
RATE_BITS = 62
#: Gaps to the best score are capped here (in grid units) [grid].
MAX_GAP = 1 << 61
_CLIP = float(2**62)
_SLACK = 1.0 + 2.0**-20
_LN2 = math.log(2.0)
_SMALL = 48  # up to this many candidates the proposal is built in plain Python
_WORD = 1 << 64


# -- exact Bernoulli coins ------------------------------------------------------------------------
_E1_CACHE: dict[int, tuple[int, int]] = {}
_HALVINGS = 6  # e^-f is computed as (e^-(f / 2^6))^(2^6): short series, six squarings


def _mul(a: tuple[int, int], b: tuple[int, int], g: int) -> tuple[int, int]:
    """Product of two non-negative intervals at scale 2^g, rounded outwards."""
    return (a[0] * b[0]) >> g, -((-(a[1] * b[1])) >> g)


def _exp_series(yl: int, yh: int, g: int) -> tuple[int, int]:
    """``[L, H]`` with ``L <= e^-y 2^g <= H`` for ``y`` in ``[yl, yh] / 2^g``, ``0 <= y <= 1``.

    ``e^-y = Σ (-y)^k / k!`` alternates with decreasing terms, so a partial sum ending on an
    odd term is a lower bound and one ending on an even term an upper bound; each term is
    bracketed from ``yl`` (below) and ``yh`` (above), rounded outwards.
    """
    one = 1 << g
    lo_terms, hi_terms = [one], [one]
    tl = th = one
    k = 0
    while th > 1:
        k += 1
        tl = (tl * yl) // (k << g)
        th = -((-(th * yh)) // (k << g))
        lo_terms.append(tl)
        hi_terms.append(th)
    m = len(lo_terms) - 1
    m_odd = m if m % 2 else m - 1
    m_even = m if m % 2 == 0 else m - 1
    low = sum(lo_terms[j] if j % 2 == 0 else -hi_terms[j] for j in range(m_odd + 1))
    high = sum(hi_terms[j] if j % 2 == 0 else -lo_terms[j] for j in range(m_even + 1))
    return max(low, 0), min(high, one)


@functools.lru_cache(maxsize=8192)
def _exp_neg_bounds(num: int, den: int, q: int) -> tuple[int, int]:
    """Integers ``lo <= 2^q e^(-num/den) <= hi`` (``num >= 0``, ``den >= 1``), about 1 apart."""
    if 10 * num >= (7 * q + 10) * den:  # x >= 0.7 q + 1 > q ln 2: e^-x < 2^-q
        return 0, 1
    n, r = divmod(num, den)
    g = q + 40 + 2 * _HALVINGS  # guard bits for the outward roundings (a few thousand units)
    # e^-f, f = r / den in [0, 1): series at f / 2^HALVINGS, then square HALVINGS times
    shift = g - _HALVINGS
    yl, yh = (r << shift) // den, -((-(r << shift)) // den)
    acc = _exp_series(yl, yh, g)
    for _ in range(_HALVINGS):
        acc = _mul(acc, acc, g)
    if n:
        e1 = _E1_CACHE.get(g)
        if e1 is None:
            e1 = _E1_CACHE[g] = _exp_series(1 << g, 1 << g, g)
        power, base = (1 << g, 1 << g), e1
        while n:
            if n & 1:
                power = _mul(power, base, g)
            n >>= 1
            if n:
                base = _mul(base, base, g)
        acc = _mul(acc, power, g)
    drop = g - q
    return acc[0] >> drop, -((-acc[1]) >> drop)


def _word(rng) -> int:
    """64 fair bits from the generator."""
    return int(rng.integers(0, _WORD, dtype=np.uint64))


def _bernoulli_scaled_exp(a: int, b: int, num: int, den: int, rng) -> bool:
    """Exact Bernoulli(``(a / b) e^(-num/den)``) [exact]; the probability must be <= 1.

    ``V`` is uniform in [0, 1), read 64 bits at a time: after ``p`` bits it lies in
    ``[v, v + 1) / 2^p``. The target lies in ``[a lo, a hi] / (b 2^s)`` with
    ``lo <= 2^s e^-x <= hi``. Return 1 when ``V``'s interval is entirely below the target's,
    0 when it is entirely above, otherwise read more bits and tighten the brackets.
    """
    v, p = 0, 0
    extra = max(a.bit_length() - b.bit_length(), 0) + 3  # brackets a quarter of V's resolution wide
    while True:
        v = (v << 64) | _word(rng)
        p += 64
        s = p + extra
        lo, hi = _exp_neg_bounds(num, den, s)
        if a * lo > b << s:
            raise errors.InternalError("exponential mechanism: acceptance probability above 1")
        if ((v + 1) * b) << extra <= a * lo:
            return True
        if (v * b) << extra >= a * hi:
            return False


def bernoulli_exp(gamma: Fraction | int, rng) -> bool:
    """Exact Bernoulli(``exp(-gamma)``) for a rational ``gamma >= 0`` [exact].

    >>> bernoulli_exp(Fraction(0), np.random.default_rng(0))
    True
    """
    gamma = Fraction(gamma)
    if gamma < 0:
        raise ValueError(f"gamma must be >= 0, got {gamma}")
    if gamma == 0:
        return True
    return _bernoulli_scaled_exp(1, 1, gamma.numerator, gamma.denominator, rng)


# -- scores and rate -----------------------------------------------------------------------------
def _grid_units(utilities, sensitivity: float) -> tuple[np.ndarray, int | float]:
    """Integer scores ``U`` and their sensitivity (an int or a float, exact), per [grid]."""
    if isinstance(sensitivity, (bool, np.bool_)) or not isinstance(
        sensitivity, (int, float, np.integer, np.floating)
    ):
        raise ValueError(f"sensitivity must be a positive finite number, got {sensitivity!r}")
    if not (math.isfinite(sensitivity) and sensitivity > 0):
        raise ValueError(f"sensitivity must be a positive finite number, got {sensitivity!r}")
    u = np.asarray(utilities)
    if u.ndim != 1 or u.size == 0:
        raise ValueError("the exponential mechanism needs a non-empty 1-D array of scores")
    if u.dtype.kind in "iub":
        if u.dtype.kind == "u" and int(u.max()) >= 2**63:
            raise ValueError("integer scores must fit in int64")
        sens = int(sensitivity) if isinstance(sensitivity, (int, np.integer)) else float(sensitivity)
        return np.asarray(u, dtype=np.int64), sens
    f = np.asarray(u, dtype=np.float64)
    if not np.isfinite(f).all():
        raise ValueError("scores must be finite")
    e = math.frexp(float(sensitivity))[1] - 1 - GRID_BITS  # g = 2^e, e = floor(log2 Δ) - GRID_BITS
    with np.errstate(over="ignore"):
        units = f * math.ldexp(1.0, -e)  # exact unless it overflows (clipped below) or, for e > 0, underflows
    if e > 0:
        units[(units == 0) & (f < 0)] = -1.0  # a tiny negative score rounded to -0.0: its floor is -1
    np.floor(units, out=units)
    np.minimum(units, _CLIP, out=units)
    np.maximum(units, -_CLIP, out=units)
    return units.astype(np.int64), math.ceil(math.ldexp(float(sensitivity), -e))  # Δ_g, an int


@functools.lru_cache(maxsize=1024)
def _rate(epsilon: float, sensitivity: int | float, monotonic: bool) -> int:
    """``λ 2^RATE_BITS`` as an integer: ``ε' / (2Δ)`` or ``ε' / Δ`` rounded down, in exact
    rational arithmetic (``ε' = ε - EPSILON_MARGIN`` as fractions of the two doubles) [law]."""
    if isinstance(epsilon, (bool, np.bool_)) or not isinstance(epsilon, (int, float, np.integer, np.floating)):
        raise ValueError(f"epsilon must be a finite number, got {epsilon!r}")
    if not math.isfinite(epsilon):
        raise ValueError(f"epsilon must be finite, got {epsilon!r}")
    eps = Fraction(float(epsilon)) - Fraction(noise.EPSILON_MARGIN)
    if eps <= 0:
        raise ValueError(f"epsilon must exceed the safety margin {noise.EPSILON_MARGIN}, got {epsilon!r}")
    delta = Fraction(sensitivity)
    lam = eps / (delta if monotonic else 2 * delta)
    return (lam.numerator << RATE_BITS) // lam.denominator


def _gaps(units: np.ndarray) -> np.ndarray:
    """``min(U_max - U_i, MAX_GAP)`` exactly, as int64 [grid]."""
    top, bottom = int(units.max()), int(units.min())
    if top - bottom <= MAX_GAP:
        return top - units  # no overflow: every difference is at most 2^61
    d = np.uint64(top) - units.astype(np.uint64)  # exact modulo 2^64, and below 2^64
    return np.minimum(d, np.uint64(MAX_GAP)).astype(np.int64)


# -- the sampler ------------------------------------------------------------------------------------
class _Candidates:
    """The integer scores of the candidates still in play, and work buffers reused by every
    draw (allocating large arrays per draw costs more than the arithmetic)."""

    def __init__(self, units: np.ndarray, *, removals: bool = False):
        self.units = np.array(units, dtype=np.int64) if removals else np.asarray(units, dtype=np.int64)
        self.index = np.arange(self.units.size) if removals else None
        self.n = self.units.size
        self._x: np.ndarray | None = None
        self._m: np.ndarray | None = None

    def draw(self, rate: int, rng) -> int:
        """A position ``i < n`` with probability ∝ ``exp(-λ D_i)``, exactly [exact]."""
        n = self.n
        if n == 1:
            return 0
        u = self.units[:n]
        p_bits = 61 - n.bit_length()  # Σ M < n (2^P (1 + 2^-20) + 1) < 2^62
        lam = rate / float(1 << RATE_BITS)  # ≈ λ, for the proposal only
        cap, scale = p_bits * _LN2 + 1.0, math.ldexp(1.0, p_bits) * _SLACK
        if n <= _SMALL:  # the same computation in plain Python (numpy's per-call cost dominates)
            ul = u.tolist()
            top = max(ul)
            gaps = [min(top - v, MAX_GAP) for v in ul]
            cum = list(itertools.accumulate(int(math.exp(-min(lam * d, cap)) * scale) + 1 for d in gaps))

            def locate(t: int) -> tuple[int, int, int]:
                i = bisect.bisect_right(cum, t)
                return i, cum[i] - (cum[i - 1] if i else 0), gaps[i]

        else:
            if self._x is None:
                self._x, self._m = np.empty(n, dtype=np.float64), np.empty(n, dtype=np.int64)
            x, m = self._x[:n], self._m[:n]
            top = int(u.max())
            if top - int(u.min()) <= MAX_GAP:
                np.subtract(top, u, out=m)  # D_i, no overflow
                np.copyto(x, m, casting="unsafe")
            else:
                np.copyto(x, _gaps(u), casting="unsafe")
            x *= -lam
            # ŵ = exp(-λ D) where λ D < P ln 2 + 1; beyond, ŵ = 0 and M_i = 1 already exceeds 2^P w_i
            np.exp(x, out=x, where=x > -cap)  # ŵ: only the efficiency depends on its accuracy
            np.maximum(x, 0.0, out=x)  # the entries skipped above still hold -λ D < 0
            x *= scale
            np.copyto(m, x, casting="unsafe")  # floor (x >= 0)
            m += 1  # every candidate can be proposed
            np.cumsum(m, out=m)
            cum = m

            def locate(t: int) -> tuple[int, int, int]:
                i = int(np.searchsorted(m, t, side="right"))
                return i, int(m[i]) - (int(m[i - 1]) if i else 0), min(top - int(u[i]), MAX_GAP)

        total = int(cum[-1])
        a, den = 1 << p_bits, 1 << RATE_BITS
        while True:
            i, weight, gap = locate(int(rng.integers(0, total)))  # exact uniform below Σ M
            if _bernoulli_scaled_exp(a, weight, rate * gap, den, rng):  # a_i = 2^P w_i / M_i
                return i

    def take(self, i: int) -> int:
        """Remove the candidate at position ``i``; its original index."""
        if self.index is None:
            raise ValueError("built without removals")
        last = self.n - 1
        picked = int(self.index[i])
        self.units[i], self.index[i] = self.units[last], self.index[last]
        self.n = last
        return picked


def exponential_mechanism(
    utilities, epsilon: float, sensitivity: float, *, rng: np.random.Generator, monotonic: bool = False
) -> int:
    """Index ``i`` with probability ∝ ``exp(ε u_i / (2Δ))`` (``exp(ε u_i / Δ)`` when monotonic),
    sampled exactly [law] [exact]. Integer arrays are exact scores; float arrays are snapped to
    the grid [grid].

    >>> exponential_mechanism(np.array([0, 200]), 1.0, 1.0, rng=np.random.default_rng(0))
    1
    """
    units, sens = _grid_units(utilities, sensitivity)
    return _Candidates(units).draw(_rate(epsilon, sens, monotonic), rng)


def peel(
    utilities, k: int, epsilon: float, sensitivity: float, *, rng: np.random.Generator, monotonic: bool = False
) -> list[int]:
    """``k`` distinct indices: ``k`` exponential-mechanism draws without replacement, each at
    ``epsilon`` (``k ε`` in total by sequential composition), in the order drawn.

    Each draw is ``exponential_mechanism`` over the candidates not yet drawn (the gaps are to
    the best remaining score). The law of the sequence is the Plackett-Luce law with weights
    ``exp(-λ D_i)``.
    """
    units, sens = _grid_units(utilities, sensitivity)
    if not (isinstance(k, (int, np.integer)) and not isinstance(k, bool) and 0 <= k <= units.size):
        raise ValueError(f"k must be between 0 and {units.size}, got {k!r}")
    rate = _rate(epsilon, sens, monotonic)
    cands = _Candidates(units, removals=True)
    return [cands.take(cands.draw(rate, rng)) for _ in range(int(k))]


def log_probabilities(utilities, epsilon: float, sensitivity: float, *, monotonic: bool = False) -> np.ndarray:
    """``log P(i)`` of the law the sampler draws from [law], in log space (no underflow)."""
    units, sens = _grid_units(utilities, sensitivity)
    rate = _rate(epsilon, sens, monotonic)
    z = -(rate / float(1 << RATE_BITS)) * _gaps(units).astype(np.float64)
    top = z.max()
    return z - (top + math.log(float(np.exp(z - top).sum())))


def probabilities(utilities, epsilon: float, sensitivity: float, *, monotonic: bool = False) -> np.ndarray:
    """The choice probabilities of ``exponential_mechanism`` (for tests and EXPLAIN)."""
    return np.exp(log_probabilities(utilities, epsilon, sensitivity, monotonic=monotonic))
