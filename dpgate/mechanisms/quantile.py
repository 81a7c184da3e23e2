"""DP quantiles: the exponential mechanism over the grid points of the bounds, sampled exactly.

**Reference:** A. Smith, "Privacy-preserving statistical estimation with optimal convergence
rates", STOC 2011 (the exponential mechanism on the sorted data, a gap chosen with weight
length × exp(score)); the same form is used by OpenDP and Google's DP library. Tie-robust
score: the distance of the target rank to the rank interval of a point (below).

**Setting:** one cell's values, clamped to the public bounds and put on the integer grid
``lo .. hi`` (``G = hi - lo + 1`` points; ``dpgate.queries.analysis`` fixes the grid from the
bounds alone). For a grid point ``v`` let ``r(v) = #{x < v}`` and ``r⁺(v) = #{x <= v}``; the
target rank is ``ρ = q' n`` with ``q' = round(q 2^20) / 2^20`` (``q`` as a multiple of 2^-20,
so the scores are exact integers).

**Score** [score]: ``u(v) = -dist(ρ, [r(v), r⁺(v)])``, i.e. ``-max(r(v) - ρ, ρ - r⁺(v), 0)``.
A point holding the target order statistic scores 0, also when many values are tied (the
plain ``-|r(v) - ρ|`` would score every point of an all-equal cell alike).

**Guarantee:** ε-DP for the cell, under adding or removing one subject whose rows in the cell
are at most ``Δ`` (``max_rows``). Let ``m = max(q', 1 - q')``. Adding ``k <= Δ`` values moves
``r(v) - ρ`` by ``#{new < v} - k q'``, in ``[-k q', k(1 - q')]``, and ``ρ - r⁺(v)`` by
``k q' - #{new <= v}``, in ``[-k(1 - q'), k q']``; the maximum of these and 0 moves within the
hull of the moves, so every score moves by ``δ(v)`` in ``[-Δ m, Δ m]`` [sensitivity]. The output
is grid point ``v`` with probability ``∝ exp(λ u(v))``, ``λ = ε / (2 Δ m)``: the log-ratio of a
point's probability on neighbours is ``λ δ(v) - log(Z'/Z)`` with ``log(Z'/Z)`` in
``[λ min δ, λ max δ]``, so it is at most ``λ (max δ - min δ) <= λ 2 Δ m = ε``. (The score's
range of change, not its largest change, sets the rate: at the median ``m = 1/2`` and the rate is
twice the textbook ``ε / (2Δ)``.) This is the exponential mechanism over a public,
data-independent set of candidates (McSherry and Talwar 2007), sampled exactly as
``exponential.py`` samples [exact]:
the points of a gap share one score, so a gap is drawn with weight ``length × exp(...)``
(rejection sampling with an exact acceptance test of ``length · 2^P e^(-λ D) / M``), then a
uniform point inside it. The law is exactly that of the exponential mechanism at some
``ε'' <= ε - noise.EPSILON_MARGIN``. **GROUP BY:** each cell is independent; a subject with
``r_c`` rows in cell ``c`` changes cell ``c``'s scores by at most ``r_c``, so its privacy loss
there is at most ``ε r_c / Δ`` and in all cells ``ε Σ r_c / Δ <= ε`` [cells]. Several
quantiles of one query each get their share of ε (basic composition; the caller splits).

**Accuracy** [rank]: the point holding the ``⌈ρ⌉``-th order statistic (``lo`` when ``ρ = 0``)
scores 0, so the total weight is at least 1, while every point whose rank interval is more
than ``t`` from ``ρ`` weighs less than ``exp(-λ t)``; there are at most ``G``. Hence
``P(dist(ρ, [r(v), r⁺(v)]) > t) <= G exp(-ε'' t / (2Δm))``, and ``rank_error_bound`` is the
smallest whole ``t`` that makes this at most ``alpha``. It bounds the released value's rank,
not its distance in value units (which would need the data).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from dpgate import noise
from dpgate.mechanisms.base import spend
from dpgate.mechanisms.exponential import RATE_BITS, _bernoulli_scaled_exp, _rate

#: q is used as a multiple of 2^-LEVEL_BITS [score].
LEVEL_BITS = 20
_K = 1 << LEVEL_BITS
_LN2 = math.log(2.0)
_SLACK = 1.0 + 2.0**-20


def _candidates(x: np.ndarray, lo: int, hi: int, q: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(scores in 1/2^20 rank units, lengths, first grid point) of the runs of equal score [score].

    Runs: the points below the smallest value; each distinct value c_j; the open gap after
    it. Their lengths add up to ``hi - lo + 1``.
    """
    x = np.asarray(x, dtype=np.int64)
    if x.size and (int(x.min()) < lo or int(x.max()) > hi):
        raise ValueError("values must lie within [lo, hi]")
    n = int(x.size)
    rho = int(round(q * _K)) * n  # ρ 2^20, exact
    if n == 0:
        return np.zeros(1, dtype=np.int64), np.array([hi - lo + 1], dtype=np.int64), np.array([lo], dtype=np.int64)
    if n > 1 and bool((x[1:] < x[:-1]).any()):
        x = np.sort(x)
    first = np.flatnonzero(np.concatenate(([True], x[1:] != x[:-1])))  # the first of each run of equal values
    c = x[first]
    counts = np.diff(np.append(first, n))
    upto = np.cumsum(counts) * _K  # r⁺ at c_j, × 2^20
    before = upto - counts * _K  # r at c_j
    point_score = -np.maximum(np.maximum(before - rho, rho - upto), 0)
    gap_score = -np.abs(upto - rho)  # points strictly between c_j and c_{j+1}: r = r⁺ = C_j
    nxt = np.append(c[1:], hi + 1)
    gap_len = nxt - c - 1
    m = c.size
    scores = np.empty(2 * m + 1, dtype=np.int64)
    lengths = np.empty(2 * m + 1, dtype=np.int64)
    starts = np.empty(2 * m + 1, dtype=np.int64)
    scores[0], lengths[0], starts[0] = -rho, int(c[0]) - lo, lo  # below the smallest value: r = r⁺ = 0
    scores[1::2], lengths[1::2], starts[1::2] = point_score, 1, c
    scores[2::2], lengths[2::2], starts[2::2] = gap_score, gap_len, c + 1
    return scores, lengths, starts


def _draw(scores: np.ndarray, lengths: np.ndarray, rate: int, rng) -> int:
    """Run ``i`` with probability ∝ ``lengths_i exp(-λ D_i)``, ``D_i = max(scores) - scores_i``, exactly.

    Proposal ``M_i = floor(2^P L_i ŵ_i (1 + 2^-20)) + [L_i > 0]``; acceptance
    ``2^P L_i w_i / M_i`` tested exactly (``exponential._bernoulli_scaled_exp``). So
    ``P(i) ∝ 2^P L_i w_i``: exactly the law [exact]. ``ŵ`` is set to 0 where ``λ D`` exceeds
    ``cap = (P + bitlength(max L) + 1) ln 2 + 1``; there ``w < 2^-(P + bitlength(max L) + 1)``, so
    ``M_i = 1 > 2^P L_i w_i`` still. Elsewhere ``ŵ`` is within ~1e-14 of ``w`` (relative), far
    inside the 2^-20 slack. ``P = 60 - bitlength(Σ L)`` keeps ``Σ M`` below 2^62.
    """
    keep = lengths > 0
    idx = np.flatnonzero(keep)
    if idx.size == 1:
        return int(idx[0])
    s, L = scores[idx], lengths[idx]
    total_len = int(L.sum())
    p_bits = 60 - total_len.bit_length()
    gaps = int(s.max()) - s  # >= 0, below 2^62
    lam = rate / float(1 << RATE_BITS)
    cap = (p_bits + int(L.max()).bit_length() + 1) * _LN2 + 1.0
    z = gaps.astype(np.float64) * -lam
    w = np.exp(z, where=z > -cap, out=np.zeros_like(z))
    m = np.floor(w * L.astype(np.float64) * (math.ldexp(1.0, p_bits) * _SLACK)).astype(np.int64) + 1
    cum = np.cumsum(m)
    total = int(cum[-1])
    den = 1 << RATE_BITS
    while True:
        t = int(rng.integers(0, total))
        j = int(np.searchsorted(cum, t, side="right"))
        weight = int(m[j])
        if _bernoulli_scaled_exp(int(L[j]) << p_bits, weight, rate * int(gaps[j]), den, rng):
            return int(idx[j])


def quantile(x, lo: int, hi: int, q: float, epsilon: float, sensitivity: int, rng) -> int:
    """One DP ``q``-quantile of the sorted grid values ``x`` in ``[lo, hi]``: a grid point.

    >>> quantile(np.array([3, 3, 3]), 0, 10, 0.5, 50.0, 1, np.random.default_rng(0))
    3
    """
    if not (isinstance(sensitivity, (int, np.integer)) and sensitivity >= 1):
        raise ValueError(f"sensitivity must be a whole number >= 1, got {sensitivity!r}")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"q must be in [0, 1], got {q!r}")
    if hi < lo:
        raise ValueError("hi must be >= lo")
    scores, lengths, starts = _candidates(x, int(lo), int(hi), q)
    i = _draw(scores, lengths, _quantile_rate(epsilon, sensitivity, q), rng)
    return int(starts[i]) + int(rng.integers(0, int(lengths[i])))  # a uniform point of the run


def _spread(q: float) -> int:
    """``m 2^20 = max(q', 1 - q') 2^20``, an integer."""
    qk = int(round(q * _K))
    return max(qk, _K - qk)


def _quantile_rate(epsilon: float, sensitivity: int, q: float) -> int:
    """``λ 2^RATE_BITS`` for scores in 2^-20 rank units: ``ε' / (2 Δ m 2^20)`` [sensitivity]."""
    return _rate(float(epsilon), int(sensitivity) * _spread(q), False)


def quantiles(cells, lo: int, hi: int, qs, epsilon_each: float, sensitivity: int, rng) -> np.ndarray:
    """``quantile`` of every cell at every level: shape (cells, levels) [cells]."""
    out = np.empty((len(cells), len(qs)), dtype=np.int64)
    for q in qs:  # the cells hold disjoint rows (parallel); every level reads them all (sequential)
        spend(epsilon_each, what=f"quantile {q:g}")
    for a, x in enumerate(cells):
        x = np.asarray(x, dtype=np.int64)
        for b, q in enumerate(qs):
            out[a, b] = quantile(x, lo, hi, q, epsilon_each, sensitivity, rng)
    return out


def rank_error_bound(epsilon: float, sensitivity: int, grid_points: int, alpha: float, q: float = 0.5) -> int:
    """Smallest whole ``t`` with ``grid_points · exp(-ε'' t / (2Δm)) <= alpha`` [rank].

    ``ε''`` is taken as ``(ε - EPSILON_MARGIN)(1 - 2^-40)``, below the rate the sampler uses.
    """
    eff = (float(epsilon) - noise.EPSILON_MARGIN) * (1 - 2.0**-40)
    m = _spread(q) / _K
    return max(0, math.ceil(2 * sensitivity * m * math.log(grid_points / alpha) / eff))


def probabilities(x, lo: int, hi: int, q: float, epsilon: float, sensitivity: int) -> np.ndarray:
    """The exact law of ``quantile`` over the grid points ``lo .. hi`` (for tests), from the
    sampler's own rate."""
    scores, lengths, starts = _candidates(x, int(lo), int(hi), q)
    rate = Fraction(_quantile_rate(epsilon, sensitivity, q), 1 << RATE_BITS)
    per_point = np.repeat(scores, lengths)
    z = float(rate) * (per_point - per_point.max()).astype(np.float64)
    w = np.exp(z)
    return w / w.sum()
