"""Ladder functions: ε-DP subgraph counts (triangles, k-stars, k-triangles, k-cliques).

**Reference:** Jun Zhang, "Algorithms for Synthetic Data Release under Differential
Privacy", PhD thesis, Nanyang Technological University, 2016, chapter 5 and appendix B
(published as Zhang, Cormode, Procopiuc, Srivastava, Xiao, "Private Release of Graph
Statistics using Ladder Functions", SIGMOD 2015, DOI 10.1145/2723372.2737785). Baselines:
Dwork et al.
2006 (Laplace on GS); Nissim, Raskhodnikova, Smith, STOC 2007 and Karwa et al., VLDB 2011
(smooth sensitivity with Cauchy noise).

**Guarantee:** ε-DP for the released count, edge-level: neighbouring graphs on the public
node universe ``0 .. N-1`` differ in one edge (Definition 5.1). The error bar released with
:func:`release_with_interval` costs ``epsilon_width`` more (basic composition; the total is
the requested ε, split by ``width_share``: ``(1 - width_share) ε`` on the count,
``width_share · ε`` on the width statistic) or nothing when ``width_share = 0`` [split].

**Sensitivity:** the ladder quality ``q(g, k) = -(rung of k)`` has sensitivity 1
(Theorem 5.1) for any ladder function ``I_t(g)``: ``I_0(g) >= LS(g)`` and
``I_t(g') <= I_{t+1}(g)`` for neighbours (Definition 5.6). ``dpgate.mechanisms.graphs`` computes
``I_t`` [ladder]: ``LS(g, t)`` for triangles and k-stars (Lemmas 5.2, 5.3), Theorems 5.6 and
5.7 for k-cliques (k >= 4) and k-triangles; ``I_t = GS`` from ``t = M`` on (Property 5.1).
``GS`` is in :func:`global_sensitivity`. The counts are of the simple undirected graph
(duplicates, reversed edges and self-loops removed), so a row-level edit of an edge table
is at most one edge edit.

**Accuracy:** output ``k`` has probability ``exp(-h q) / Z`` with ``h = ε'/2`` (Eq 5.3,
``ε'`` below): the exact answer has weight 1, each integer on rung ``u`` (``I_{u-1}`` of
them on each side) ``e^{-h u}``. The ``1 - alpha`` interval is ``X ± m`` where ``m`` is
computed from public inputs and one DP statistic only:

- [stat] the width statistic ``s`` (``a_m``, or ``d_m`` for k-stars; global sensitivity 1)
  is released once as ``ŝ = s + DLap(1/epsilon_width)``;
- [bound] ``dpgate.mechanisms.graphs.width_bounds`` gives public ladders with
  ``L_t(s) <= I_t(g) <= U_t(s)`` for every graph and every ``t``, non-decreasing in ``s``: a
  graph whose statistic lies in ``[lo, hi]`` has its ladder in the band ``L(lo) <= I <= U(hi)``;
- [band] for one ladder, ``P(|X - f| > m) = T_I(m) / (H_I(m) + T_I(m))`` (``H`` the weight
  within ``m`` of ``f``, the centre's 1 included, ``T`` the weight beyond), which is
  ``<= β`` iff ``Φ(I) = (1 - β) T_I(m) - β H_I(m) <= 0``. With ``w_u = I_u`` (rung
  ``u + 1``: ``w_u`` integers each side at weight ``e^{-h(u+1)}``) and ``j`` the rung holding
  distance ``m`` (``D_j <= m < D_{j+1}``, ``D_j = w_0 + ... + w_{j-1}``),
  ``Φ = -β + 2 [sum_{u<j} w_u (e^{-h(j+1)} - β e^{-h(u+1)}) + e^{-h(j+1)} ((1 - β) w_j - m)
  + (1 - β) sum_{u>j} w_u e^{-h(u+1)}]``, linear in ``w`` for a fixed ``j``. Its maximum
  over the band subject to ``D_j <= m`` (the other half of "``j`` holds ``m``" is dropped:
  a relaxation, hence an upper bound) takes ``w_u = U_u`` for ``u >= j``; below ``j`` it
  takes ``L_u`` where the coefficient is negative (``u <= j - ln(1/β)/h``) and ``U_u`` where
  it is positive, lowered to ``L_u`` from the smallest positive coefficient up until
  ``D_j <= m`` (a fractional knapsack). ``m`` is the smallest integer (to 0.2%) at which
  this maximum is ``<= 0`` for every ``j`` with ``D^L_j <= m`` (:class:`_Band`): every
  ladder in the band then misses with probability at most ``β``. Only ``L <= I <= U``
  pointwise is used, not monotonicity. Against the sandwich ``T_U / (H_L + T_U)`` of 0.6.0
  (whose tail and centre use the rung numbering of two different ladders) it was never wider
  in any case tested, and about half as wide when ``L`` and ``U`` differ;
- [levels] the calibration over ``ŝ``'s noise ``Z``: public levels ``i = 0 .. K-1`` with
  nested ranges ``R_i = {-c_hi_i <= Z <= c_lo_i}`` and miss probabilities ``β_i``
  (:func:`statistic_levels`); ``m = max_i band(ŝ - c_lo_i, ŝ + c_hi_i, β_i)`` (ranges
  clamped to the public one). When ``Z`` is in ``R_i``, ``s`` lies in level ``i``'s range,
  so the count, independent of ``Z``, misses with probability at most ``β_i``; hence
  ``P(miss) <= sum_i P(Z in R_i minus R_{i-1}) β_i + P(Z outside R_{K-1}) <= alpha``, computed
  from the sampler's exact law. Wide ranges get large ``β_i`` (they are rarely needed), so a
  statistic that is small next to its noise (sparse graphs) no longer forces the interval to
  the worst case of ``s + ln(8/alpha)/epsilon_width``.

With ``width_share = 0`` there is one level: the public range ``[0, N-2]`` (``[0, N-1]``)
with all of ``alpha``. The interval never reads ``f``, the rungs, ``M`` or ``LS``: only
``X``, ``ŝ`` and public numbers. Clamping at zero (the SQL layer,
``dpgate.queries.subgraph.clamped_interval``) clamps ``X`` first and takes the interval around
the clamped value, which keeps every count the interval held. The GS-Laplace baseline's
interval is the usual discrete-Laplace one.

**Proof sketch:** (1) ``q`` has sensitivity 1 [quality] (Theorem 5.1), so the exponential
mechanism ``P(k) ∝ exp(ε' q(g, k) / 2)`` is ε'-DP (Theorem 5.3, appendix B): the numerator
moves by at most ``e^{ε'/2}``, and so does ``Z``. (2) The sampler draws exactly this law
(Algorithm 5.1, with its line 5 read as the half-open ``(dst, dst + I_{t-1}]``): rung ``t``
has total weight ``w_t e^{-ht}``, ``w_0 = 1``, ``w_t = 2 I_{t-1}``, ``w_t = 2 GS`` for
``t > M`` [weights]. Instead of a float categorical (whose 53-bit uniforms give far rungs
probability exactly 0, an infinite privacy loss), the rung is chosen sequentially [rung]:
at rung ``s`` stop with probability ``p_s = w_s / R_s`` where ``R_s = w_s + e^{-h} R_{s+1}``
and ``R_{M+1} = 2GS / (1 - e^{-h})``; each decision is an exact Bernoulli draw of the double
``min(p_s, 1 - p_s)`` (compared bit by bit with uniform 64-bit words). Past ``M`` the rung
is ``M + 1 + G`` with ``G`` geometric, ``P(G = i) ∝ e^{-hi}`` (``noise.geometric``) [tail];
within a rung the integer is uniform (exact integer draws, big ints beyond int64) and the
side a fair bit [uniform]. (3) [float] The product of the stop/continue probabilities
telescopes: the sampled law is ``P(k) ∝ φ(t(k)) (1 + η_k)`` with ``φ(t) = â^t`` for
``t <= M + 1`` and ``â^{M+1} e^{-h(t-M-1)}`` beyond, ``â = fl(e^{-h}) = e^{-h ± u}``
(``u = 2^-53``), and ``|ln(1 + η_k)| <= 10u (M + 2) + 1.3e-11``: one rounding factor within
``8u`` per decision, ``2u (M + 2)`` for the normaliser, ``1.3e-11`` for the geometric
(``noise`` docstring). For neighbours, ``t(k)`` moves by at most one rung and ``M`` by at
most ``cap``, so each of ``φ`` and the normaliser moves by at most ``e^{h + u (cap + 2)}``
and the log-ratio is at most ``2h + 22u (cap + 2) + 2.6e-11`` (``cap = 3N + 3 >= M``, public,
``graphs.convergence_cap``). The sampler runs at ``ε' = 2h = ε - EPSILON_MARGIN -
32u (cap + 2)``, which absorbs all of it, so the release is ε-DP for the requested ε.
Probabilities below ``1e-300`` (a double's range) are not represented, as in ``noise``.
(4) The interval is post-processing of ``X`` and of the ``epsilon_width``-DP
statistic [stat] (discrete Laplace, sensitivity 1: one edge changes any ``a_ij`` or any
degree by at most 1, so ``a_m`` and ``d_m`` move by at most 1); the levels, the public
ladders and the band are public functions of ``(query, k, N, ε, alpha)`` and ``ŝ``; the
budget split is [split].
"""

from __future__ import annotations

import bisect
import functools
import math
import numbers
from dataclasses import dataclass

import numpy as np

from dpgate import noise
from dpgate.mechanisms import graphs
from dpgate.mechanisms.graphs import QUERIES, global_sensitivity
from dpgate.mechanisms.base import Mechanism

__all__ = [
    "QUERIES",
    "GlobalSensitivityLaplace",
    "LadderFunction",
    "LadderInterval",
    "LadderMechanism",
    "LadderRelease",
    "SmoothSensitivityCauchy",
    "calibrated_half_width",
    "global_sensitivity",
    "interval_half_width",
    "ladder_function",
    "release_interval",
    "release_with_interval",
    "sampling_epsilon",
    "statistic_levels",
]

_U = 2.0**-53
_INT64_SAFE = (1 << 62) - 1


# -- the ladder function ------------------------------------------------------------------------
@dataclass(frozen=True)
class LadderFunction:
    """Everything the ladder sampler needs from one private graph (exact ints).

    ``rungs`` are ``I_0 .. I_{M-1}``; ``I_t = global_sensitivity`` for ``t >= M``.
    ``width_statistic`` (``a_m``, or ``d_m`` for k-stars) is private; only
    :func:`release_interval` reads it, to add noise to it.
    """

    query: str
    k: int | None
    n_nodes: int
    value: int
    global_sensitivity: int
    rungs: tuple[int, ...]
    M: int
    width_statistic: int | None = None

    def __post_init__(self) -> None:
        k = graphs.check_query(self.query, self.k)
        if k != self.k:
            raise ValueError(f"k must be given in normal form ({k!r}), got {self.k!r}")
        if self.global_sensitivity != global_sensitivity(self.query, self.k, self.n_nodes):
            raise ValueError("global_sensitivity does not match the query and the node universe")
        if self.M != len(self.rungs):
            raise ValueError(f"M must equal the number of rungs below GS ({len(self.rungs)}), got {self.M}")
        if any(not 0 <= w < self.global_sensitivity for w in self.rungs):
            raise ValueError("rung widths must lie in [0, GS)")
        if self.M > graphs.convergence_cap(self.n_nodes):
            raise ValueError("the ladder must reach GS within the public cap 3N + 3")

    def width(self, t: int) -> int:
        """``I_t`` for any ``t >= 0``."""
        return self.rungs[t] if t < self.M else self.global_sensitivity

    def offsets(self) -> list[int]:
        """``D_u = I_0 + ... + I_{u-1}`` for ``u = 0 .. M``: rung ``u`` is ``(D_{u-1}, D_u]`` away from ``f``."""
        out = [0]
        for w in self.rungs:
            out.append(out[-1] + w)
        return out


def ladder_function(edges: np.ndarray, n_nodes: int, query: str, k: int | None = None) -> LadderFunction:
    """The ladder of ``query`` on the simple graph of ``edges`` over the universe ``0 .. n_nodes-1``.

    >>> import networkx as nx
    >>> lf = ladder_function(np.array(nx.karate_club_graph().edges()), 34, "triangle")
    >>> lf.value, lf.global_sensitivity, lf.rungs[:6], lf.M
    (45, 32, (10, 11, 12, 13, 14, 15), 31)
    """
    k = graphs.check_query(query, k)
    q = graphs.ladder_quantities(edges, n_nodes, query, k)  # [ladder]
    return LadderFunction(query, k, int(n_nodes), q.value, q.global_sensitivity, q.rungs, len(q.rungs), q.statistic)


def sampling_epsilon(epsilon: float, n_nodes: int) -> float:
    """The ε the ladder sampler actually runs at: ``ε - EPSILON_MARGIN - 32u(3N + 5)`` [float]."""
    margin = noise.EPSILON_MARGIN + 32 * _U * (graphs.convergence_cap(n_nodes) + 2)  # [float]
    real = isinstance(epsilon, numbers.Real) and not isinstance(epsilon, bool)
    if not (real and math.isfinite(epsilon) and epsilon > margin):
        raise ValueError(f"epsilon must be finite and > {margin:.3g}, got {epsilon!r}")
    return float(epsilon) - margin


# -- exact discrete draws -----------------------------------------------------------------------
def _bernoulli_exact(q: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """``(n, len(q))`` booleans, True with probability exactly ``q[j]`` (doubles in ``[0, 1]``).

    A uniform ``V`` in ``[0, 1)`` is compared with ``q`` 64 bits at a time: ``V < q`` iff the
    first word is below the top 64 bits of ``q``, or equal to them and the rest of ``V`` is
    below the rest of ``q`` (then looked at 64 bits further, probability ``2^-64`` per step).
    """
    q = np.asarray(q, dtype=np.float64)
    x = np.broadcast_to(q, (n, q.size)).copy()
    out = x >= 1.0
    undecided = ~out & (x > 0.0)
    while undecided.any():
        idx = np.nonzero(undecided)
        scaled = np.ldexp(x[idx], 64)  # exact
        top_f = np.floor(scaled)
        top = top_f.astype(np.uint64)
        rem = scaled - top_f  # exact
        words = rng.integers(0, 2**64, size=top.size, dtype=np.uint64, endpoint=False)
        out[idx] = words < top
        tie = (words == top) & (rem > 0.0)
        undecided = np.zeros_like(undecided)
        tie_idx = tuple(i[tie] for i in idx)
        undecided[tie_idx] = True
        x[tie_idx] = rem[tie]
    return out


def _randbelow(n: int, rng: np.random.Generator) -> int:
    """A uniform integer in ``[0, n)`` for any Python int ``n >= 1`` (rejection on 64-bit words)."""
    if n <= np.iinfo(np.int64).max:
        return int(rng.integers(0, n))
    bits = n.bit_length()
    words = (bits + 63) // 64
    while True:
        x = 0
        for w in rng.integers(0, 2**64, size=words, dtype=np.uint64, endpoint=False).tolist():
            x = (x << 64) | int(w)
        x >>= words * 64 - bits
        if x < n:
            return x


# -- the mechanism ------------------------------------------------------------------------------
class LadderMechanism(Mechanism):
    """Algorithm 5.1 (NoiseSample) with exact rung choice; see the module docstring."""

    NAME = "ladder"
    VETTED = True

    def release(self, lf: LadderFunction, epsilon: float, *, rng: np.random.Generator) -> int:
        """One ε-DP release of ``lf.value``."""
        return int(self.sample(lf, epsilon, 1, rng=rng)[0])

    def sample(self, lf: LadderFunction, epsilon: float, size: int, *, rng: np.random.Generator) -> np.ndarray:
        """``size`` independent releases (int64 array, or Python ints when they may not fit)."""
        h = sampling_epsilon(epsilon, lf.n_nodes) / 2
        if lf.global_sensitivity == 0:  # f is constant on graphs with N nodes: nothing to hide
            return np.full(size, lf.value, dtype=object if abs(lf.value) > _INT64_SAFE else np.int64)
        rung = _sample_rungs(lf, h, size, rng)
        return _place(lf, rung, rng)

    def log_output_distribution(self, lf: LadderFunction, epsilon: float, support: np.ndarray) -> np.ndarray:
        """``log P(X = k)`` for each ``k`` in ``support``, in log space (no underflow)."""
        h = sampling_epsilon(epsilon, lf.n_nodes) / 2
        ks = np.asarray(support)
        if lf.global_sensitivity == 0:
            return np.where(ks == lf.value, 0.0, -np.inf)
        return -h * _rung_index(lf, ks) - _log_normaliser(lf, h)

    def output_distribution(self, lf: LadderFunction, epsilon: float, support: np.ndarray) -> np.ndarray:
        """The exact pmf of the sampler on integer outputs ``support`` (Eq 5.3 at the run ε)."""
        return np.exp(self.log_output_distribution(lf, epsilon, support))

    def rung_probabilities(self, lf: LadderFunction, epsilon: float) -> np.ndarray:
        """``P(rung = t)`` for ``t = 0 .. M``, then ``P(rung > M)`` (length ``M + 2``)."""
        h = sampling_epsilon(epsilon, lf.n_nodes) / 2
        terms = _log_rung_weights(lf, h)
        return np.exp(terms - _logsumexp(terms))

    def error_quantile(self, lf: LadderFunction, epsilon: float, q: float) -> int:
        """Smallest ``m`` with ``P(|X - f| <= m) >= q`` (the median error for ``q = 1/2``)."""
        if lf.global_sensitivity == 0:
            return 0
        h = sampling_epsilon(epsilon, lf.n_nodes) / 2
        shape = _Shape(list(lf.rungs), lf.global_sensitivity)
        total = shape.log_total(h)
        return _smallest(lambda m: shape.log_beyond(m, h) - total <= math.log(1 - q))


def _log_rung_weights(lf: LadderFunction, h: float) -> np.ndarray:
    """``log`` of the total weight of rungs ``0 .. M`` and of all rungs past ``M`` [weights]."""
    c = lf.global_sensitivity
    out = [0.0]
    for t, w in enumerate(lf.rungs, start=1):
        out.append(math.log(2 * w) - h * t if w else -math.inf)
    out.append(math.log(2 * c) - h * (lf.M + 1) - math.log(-math.expm1(-h)))
    return np.array(out)


def _logsumexp(x: np.ndarray) -> float:
    top = float(np.max(x))
    if top == -math.inf:
        return top
    return top + math.log(float(np.sum(np.exp(x - top))))


def _log_normaliser(lf: LadderFunction, h: float) -> float:
    return _logsumexp(_log_rung_weights(lf, h))


def _rung_index(lf: LadderFunction, ks: np.ndarray) -> np.ndarray:
    """``-q(g, k)`` [quality]: 0 at ``f``, ``u`` on ``f ± (D_{u-1}, D_u]``, and
    ``M + ceil((r - D_M) / GS)`` at distance ``r > D_M``."""
    d = lf.offsets()
    c = lf.global_sensitivity
    big = max(abs(int(np.max(ks, initial=0))), abs(int(np.min(ks, initial=0))), abs(lf.value), d[-1]) > _INT64_SAFE // 4
    if big or ks.dtype == object:
        out = []
        for k in ks.ravel().tolist():
            r = abs(int(k) - lf.value)
            if r == 0:
                out.append(0)
            elif r <= d[-1]:
                out.append(bisect.bisect_left(d, r, lo=1))
            else:
                out.append(lf.M + -(-(r - d[-1]) // c))
        return np.array(out, dtype=np.float64).reshape(ks.shape)
    r = np.abs(ks.astype(np.int64) - lf.value)
    dd = np.array(d, dtype=np.int64)
    inner = np.searchsorted(dd[1:], r, side="left") + 1
    outer = lf.M + (r - dd[-1] + c - 1) // c
    return np.where(r == 0, 0, np.where(r <= dd[-1], inner, outer)).astype(np.float64)  # [quality]


def _rung_decisions(lf: LadderFunction, h: float) -> tuple[np.ndarray, np.ndarray]:
    """Per rung ``s = 0 .. M``: the double drawn exactly, and whether a success means "stop here".

    Weights are normalised by ``2 GS`` (Python ints divide correctly rounded) [weights]:
    ``ŵ_0 = 1 / (2 GS)``, ``ŵ_t = I_{t-1} / GS``, ``ŵ = 1`` past ``M``.
    """
    c = lf.global_sensitivity
    a = math.exp(-h)
    w = [1 / (2 * c)] + [width / c for width in lf.rungs]  # [weights]
    rho = [0.0] * (lf.M + 2)
    rho[lf.M + 1] = 1 / -math.expm1(-h)
    for s in range(lf.M, -1, -1):
        rho[s] = w[s] + a * rho[s + 1]
    stop = np.array([w[s] / rho[s] for s in range(lf.M + 1)])
    go_on = np.array([a * rho[s + 1] / rho[s] for s in range(lf.M + 1)])
    stop_side = stop <= go_on
    return np.where(stop_side, stop, go_on), stop_side


def _sample_rungs(lf: LadderFunction, h: float, size: int, rng: np.random.Generator) -> np.ndarray:
    """The rung of each of ``size`` draws: sequential exact stop/continue decisions [rung]."""
    q, stop_side = _rung_decisions(lf, h)
    rung = np.full(size, -1, dtype=np.int64)
    pending = np.arange(size)
    s0, chunk = 0, 16
    while pending.size and s0 <= lf.M:
        s1 = min(lf.M + 1, s0 + chunk)
        hits = _bernoulli_exact(q[s0:s1], pending.size, rng)  # [rung]
        stops = np.where(stop_side[s0:s1], hits, ~hits)
        done = stops.any(axis=1)
        rung[pending[done]] = s0 + stops[done].argmax(axis=1)
        pending = pending[~done]
        s0 = s1
        chunk = min(2 * chunk, max(16, (1 << 23) // max(pending.size, 1)))
    if pending.size:
        rung[pending] = lf.M + 1 + noise.geometric(h, pending.size, rng)  # [tail]
    return rung


def _place(lf: LadderFunction, rung: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A uniform integer of each draw's rung, on a uniformly chosen side [uniform]."""
    d = lf.offsets()
    c = lf.global_sensitivity
    size = rung.size
    sign = 1 - 2 * rng.integers(0, 2, size=size)
    far = int(rung.max(initial=0))
    reach = d[-1] + max(far - lf.M, 0) * c
    if reach + abs(lf.value) <= _INT64_SAFE:
        dd = np.array(d, dtype=np.int64)
        widths = np.array(list(lf.rungs) + [c], dtype=np.int64)
        inner = (rung >= 1) & (rung <= lf.M)
        outer = rung > lf.M
        base = np.zeros(size, dtype=np.int64)
        width = np.ones(size, dtype=np.int64)
        base[inner] = dd[rung[inner] - 1]
        width[inner] = widths[rung[inner] - 1]
        base[outer] = dd[-1] + (rung[outer] - lf.M - 1) * c
        width[outer] = c
        offset = np.where(rung == 0, 0, base + 1 + rng.integers(0, width))  # [uniform]
        return lf.value + sign * offset
    out = []
    for t, s in zip(rung.tolist(), sign.tolist()):
        if t == 0:
            out.append(lf.value)
            continue
        if t <= lf.M:
            base, width = d[t - 1], lf.rungs[t - 1]
        else:
            base, width = d[-1] + (t - lf.M - 1) * c, c
        out.append(lf.value + s * (base + 1 + _randbelow(width, rng)))  # [uniform]
    return np.array(out, dtype=object)


# -- shapes of ladders: weight within and beyond a distance -------------------------------------
class _Shape:
    """A ladder given by its widths ``w_0 .. w_{K-1}`` and then a constant ``tail`` width.

    Distance ``r >= 1`` from the centre lies on rung ``u`` when ``D_{u-1} < r <= D_u``; every
    integer on rung ``u`` (both sides) has weight ``e^{-hu}``, the centre weight 1.
    Computed in float64: used for error bars and medians, not for sampling.
    """

    def __init__(self, widths: list[int], tail: int):
        self.k = len(widths)
        self.tail = int(tail)
        d = [0]
        for w in widths:
            d.append(d[-1] + int(w))
        self.d = d
        self.lo = np.array(d[:-1], dtype=np.float64)
        self.hi = np.array(d[1:], dtype=np.float64)
        self.u = np.arange(1, self.k + 1, dtype=np.float64)

    def _terms(self, counts: np.ndarray, h: float) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return np.where(counts > 0, np.log(np.maximum(counts, 1.0)) + math.log(2) - h * self.u, -np.inf)

    def log_within(self, m: int, h: float) -> float:
        """``log`` of the weight of outputs at distance ``<= m`` (centre included)."""
        terms = [0.0]
        counts = np.clip(np.minimum(float(m), self.hi) - self.lo, 0.0, None)
        terms.extend(self._terms(counts, h).tolist())
        past = m - self.d[-1]
        if past > 0 and self.tail > 0:
            full, rem = divmod(past, self.tail)
            if full:  # rungs K+1 .. K+full: 2C a^{K+1} (1 - a^full) / (1 - a)
                head = math.log(2 * self.tail) - h * (self.k + 1)
                terms.append(head + math.log(-math.expm1(-h * full)) - math.log(-math.expm1(-h)))
            if rem:
                terms.append(math.log(2 * rem) - h * (self.k + full + 1))
        return _logsumexp(np.array(terms))

    def log_beyond(self, m: int, h: float) -> float:
        """``log`` of the weight of outputs at distance ``> m``."""
        counts = np.clip(self.hi - np.maximum(float(m), self.lo), 0.0, None)
        terms = self._terms(counts, h).tolist()
        if self.tail > 0:
            past = max(m - self.d[-1], 0)
            full, rem = divmod(past, self.tail)
            u0 = self.k + full + 1  # first tail rung with points beyond m
            if rem:
                terms.append(math.log(2 * (self.tail - rem)) - h * u0)
                u0 += 1
            terms.append(math.log(2 * self.tail) - h * u0 - math.log(-math.expm1(-h)))
        return _logsumexp(np.array(terms)) if terms else -math.inf

    def log_total(self, h: float) -> float:
        return float(np.logaddexp(self.log_within(0, h), self.log_beyond(0, h)))


def _smallest(ok, rel: float = 0.0, hi: int | None = None) -> int:
    """The smallest integer ``m >= 0`` with ``ok(m)``, for a monotone predicate; with ``rel > 0``
    an ``m`` with ``ok(m)`` at most ``rel · m`` above the smallest. ``hi``: a known ``ok`` value."""
    if ok(0):
        return 0
    lo = 0
    if hi is None:
        hi = 1
        while not ok(hi):
            lo, hi = hi, 2 * hi
    while hi - lo > max(1, rel * hi):
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return hi


# -- error bars ---------------------------------------------------------------------------------
#: The levels of the error bar's calibration over the noisy width statistic [levels]. Level
#: ``i`` is ``(lower tail, upper tail, weight)``: the statistic's range at that level is
#: ``[ŝ - c_lo, ŝ + c_hi]`` with ``P(Z > c_lo)`` and ``P(Z < -c_hi)`` at most the two tails
#: (in units of alpha) and a miss probability ``β_i = λ · weight · alpha``, ``λ`` the largest
#: that keeps the total at alpha. Public constants, tuned on public graphs (karate, WormNet, a
#: random geometric graph) at ε = 0.5 for the narrowest error bars across them.
WIDTH_LEVELS = ((0.5, 4.0, 0.5), (0.1, 1.0, 1.5), (0.03, 0.3, 5.0), (0.01, 0.1, 14.0))
#: Error bars are searched to this relative precision (any ``m`` the bound accepts is valid).
SEARCH_PRECISION = 0.002
#: No level gets a miss probability above this.
MAX_LEVEL_MISS = 0.75
#: Default share of ε spent on the width statistic by :func:`release_with_interval`.
DEFAULT_WIDTH_SHARE = 0.1


@dataclass(frozen=True)
class LadderInterval:
    """A ``1 - alpha`` interval for the count, computed from DP and public inputs only."""

    low: int
    high: int
    half_width: int
    alpha: float
    epsilon: float  # ε of the released count the interval describes
    epsilon_width: float  # ε spent on the width statistic (0: public bound, nothing spent)
    statistic: str  # "a_m" or "d_m"
    statistic_low: int  # the widest range of the width statistic the bound allows for
    statistic_high: int
    noisy_statistic: int | None = None  # the released ŝ (None: public bound)


@dataclass(frozen=True)
class LadderRelease:
    """A released count with its interval; ``epsilon`` is the total spent."""

    value: int
    interval: LadderInterval
    epsilon: float
    mechanism: str = LadderMechanism.NAME


def noisy_width_statistic(lf: LadderFunction, epsilon_width: float, *, rng: np.random.Generator) -> int:
    """``ŝ = s + DLap(1/epsilon_width)``: the ``epsilon_width``-DP width statistic [stat].

    This is the only reader of ``lf.width_statistic``; it has global sensitivity 1.
    """
    if lf.width_statistic is None:
        raise ValueError("this LadderFunction carries no width statistic; use epsilon_width=0")
    return lf.width_statistic + int(noise.discrete_laplace(epsilon_width, 1, 1, rng)[0])  # [stat]


@functools.lru_cache(maxsize=256)
def statistic_levels(epsilon_width: float, alpha: float) -> tuple[tuple[int, int, float], ...]:
    """Public: the calibration levels ``(c_lo, c_hi, β)`` for a statistic released with
    ``DLap(1/epsilon_width)`` [levels]: ``sum_i P(Z in R_i \\ R_{i-1}) β_i + P(Z not in R_last)
    <= alpha`` with ``R_i = [-c_hi_i, c_lo_i]``, computed from the sampler's exact law.

    >>> [(c_lo, c_hi, round(b, 3)) for c_lo, c_hi, b in statistic_levels(0.05, 0.05)]
    [(60, 18, 0.023), (92, 46, 0.068), (116, 70, 0.227), (138, 92, 0.637)]
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    a = noise.discrete_laplace_alpha(epsilon_width, 1)

    def cut(p: float) -> int:  # smallest c >= 0 with P(Z > c) = a^(c+1) / (1 + a) <= p
        c = max(0, math.ceil(math.log(p * (1 + a)) / math.log(a)) - 1) if p * (1 + a) < 1 else 0
        while c > 0 and a**c / (1 + a) <= p:
            c -= 1
        while a ** (c + 1) / (1 + a) > p:
            c += 1
        return c

    cuts, outside = [], []
    for lo_tail, hi_tail, _ in WIDTH_LEVELS:
        c_lo, c_hi = cut(lo_tail * alpha), cut(hi_tail * alpha)
        if cuts:  # nested ranges
            c_lo, c_hi = max(c_lo, cuts[-1][0]), max(c_hi, cuts[-1][1])
        cuts.append((c_lo, c_hi))
        outside.append((a ** (c_lo + 1) + a ** (c_hi + 1)) / (1 + a))  # P(Z not in R_i)
    weights = [w for _, _, w in WIDTH_LEVELS]

    def total(lam: float) -> float:
        spent, before = 0.0, 1.0
        for out, w in zip(outside, weights):
            spent += (before - out) * min(MAX_LEVEL_MISS, lam * w * alpha)
            before = out
        return spent + before

    budget = alpha * (1 - 1e-9)  # covers rounding here and the sampler's 1e-11 deviation from its law
    if total(0.0) >= budget:
        raise ValueError("the calibration levels leave no miss probability for the noise")  # pragma: no cover
    lo, hi = 0.0, 1.0
    while total(hi) < budget and hi < 1e6:
        lo, hi = hi, 2 * hi
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if total(mid) <= budget else (lo, mid)
    return tuple((c_lo, c_hi, min(MAX_LEVEL_MISS, lo * w * alpha)) for (c_lo, c_hi), w in zip(cuts, weights))


class _Band:
    """All ladders ``I`` with ``L_t <= I_t <= U_t`` for every ``t`` [band].

    ``ok(m, β)`` is True only if every such ladder has ``P(|X - f| > m) <= β`` at ``h``: the
    maximum of ``(1 - β) T_I(m) - β H_I(m)`` over the band is at most 0, bounded by a linear
    programme per crossing rung (module docstring). Float64, like :class:`_Shape`.
    """

    def __init__(self, lower: tuple[list[int], int], upper: tuple[list[int], int], h: float):
        (self.lw, self.lt), (self.uw, self.ut) = lower, upper
        self.h = h
        self._build(max(len(self.lw), len(self.uw)) + 1)

    def _build(self, n: int) -> None:
        h = self.h
        self.n = n
        self.L = np.array([float(x) for x in (list(self.lw) + [self.lt] * n)[:n]])
        self.U = np.array([float(x) for x in (list(self.uw) + [self.ut] * n)[:n]])
        self.L = np.minimum(self.L, self.U)  # (never binding for width_bounds; only loosens)
        self.pre_l = np.concatenate([[0.0], np.cumsum(self.L)])  # D^L_j = L_0 + ... + L_{j-1}
        u = np.arange(n)
        with np.errstate(divide="ignore"):
            log_l = np.log(self.L) - h * (u + 1)
            log_u = np.log(self.U) - h * (u + 1)
        self.pre_log_l = np.concatenate([[-np.inf], np.logaddexp.accumulate(log_l)])
        tail = math.log(self.ut) - h * (n + 1) - math.log(-math.expm1(-h)) if self.ut > 0 else -math.inf
        # suf_log_u[i] = log sum_{u >= i} U_u e^{-h(u+1)}, the constant tail past n included
        self.suf_log_u = np.logaddexp.accumulate(np.concatenate([[tail], log_u[::-1]]))[::-1]

    def ok(self, m: int, beta: float) -> bool:
        h = self.h
        while self.pre_l[-1] <= m:  # every rung that can hold distance m must be listed
            if self.lt <= 0:  # only when GS = 0, which callers answer exactly
                raise ValueError("a lower ladder ending at width 0 never reaches distance m")
            self._build(self.n + max(self.n, int((m - self.pre_l[-1]) // self.lt) + 2))
        crossings = int(np.searchsorted(self.pre_l, m, side="right"))  # rungs j with D^L_j <= m
        reach = math.log(1 / beta) / h  # widths u <= j - reach count against the miss: L
        window = int(math.floor(reach)) + 2
        log_b, log_2b, keep = math.log(beta), math.log(2 * beta), 1 - beta
        log_2m = math.log(2 * m) if m > 0 else -math.inf
        step = max(1, (1 << 20) // window)
        for j0 in range(0, crossings, step):
            j = np.arange(j0, min(crossings, j0 + step))
            u0 = np.clip(np.floor(j - reach).astype(np.int64) + 1, 0, j)
            idx = u0[:, None] + np.arange(window)[None, :]
            inside = idx < j[:, None]
            at = np.minimum(idx, self.n - 1)
            up = np.where(inside, self.U[at], 0.0)
            gap = up - np.where(inside, self.L[at], 0.0)
            excess = np.maximum(self.pre_l[u0] + up.sum(axis=1) - m, 0.0)
            cut = np.clip(excess[:, None] - (np.cumsum(gap, axis=1) - gap), 0.0, gap)
            w = up - cut  # the window at U, lowered to L from its start until D_j <= m
            scaled = np.where(inside, np.exp(h * (j[:, None] - idx)), 0.0)  # <= e^{h(reach + 1)}
            covered = self.pre_l[u0] + w.sum(axis=1)  # D_j
            width_j = self.U[np.minimum(j, self.n - 1)]
            beyond = np.exp(h * (j + 1) + self.suf_log_u[np.minimum(j + 1, self.n)])
            lhs = np.log(2 * (covered + keep * width_j + keep * beyond))
            with np.errstate(divide="ignore"):
                rhs = np.logaddexp.reduce(
                    np.stack([
                        log_b + h * (j + 1),
                        log_2b + h * (j + 1) + self.pre_log_l[u0],
                        log_2b + np.log((w * scaled).sum(axis=1)),
                        np.full(j.size, log_2m),
                    ]),
                    axis=0,
                )  # fmt: skip
            if np.any(lhs > rhs):
                return False
        return True


def interval_half_width(
    query: str, k: int | None, n_nodes: int, epsilon: float, statistic_low: int, statistic_high: int, alpha: float
) -> int:
    """Public: an ``m`` with ``P(|X - f| > m) <= alpha`` for every graph on ``n_nodes`` nodes
    whose width statistic lies in ``[statistic_low, statistic_high]``, when ``X`` is the
    ladder release at ``epsilon`` [bound]: the band bound [band], within 0.2% of its smallest
    such ``m``.

    >>> interval_half_width("triangle", None, 34, 1.0, 0, 32, 0.05)  # public range: no data used
    192
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    k = graphs.check_query(query, k)
    lo_pub, hi_pub = graphs.statistic_range(query, graphs.check_universe(n_nodes))
    if not lo_pub <= statistic_low <= statistic_high <= hi_pub:
        raise ValueError(f"the statistic range must lie within [{lo_pub}, {hi_pub}]")
    return _half_width(query, k, int(n_nodes), float(epsilon), int(statistic_low), int(statistic_high), float(alpha))


@functools.lru_cache(maxsize=4096)
def _half_width(
    query: str, k: int | None, n_nodes: int, epsilon: float, statistic_low: int, statistic_high: int, alpha: float
) -> int:
    h = sampling_epsilon(epsilon, n_nodes) / 2
    if global_sensitivity(query, k, n_nodes) == 0:
        return 0
    lower, _ = _width_bounds(query, k, n_nodes, statistic_low)
    _, upper = _width_bounds(query, k, n_nodes, statistic_high)
    band = _Band(lower, upper, h)  # [band]
    return _smallest(lambda m: band.ok(m, alpha), SEARCH_PRECISION)


@functools.lru_cache(maxsize=1024)
def _width_bounds(query: str, k: int | None, n_nodes: int, statistic: int):
    (lw, lt), (uw, ut) = graphs.width_bounds(query, k, n_nodes, statistic)
    return (tuple(lw), lt), (tuple(uw), ut)


def calibrated_half_width(
    query: str, k: int | None, n_nodes: int, epsilon: float, noisy_statistic: int, epsilon_width: float, alpha: float
) -> tuple[int, int, int]:
    """Public given ``ŝ``: ``(m, lo, hi)`` with ``m = max_i interval_half_width(range_i, β_i)``
    over the levels of :func:`statistic_levels` [levels]; ``[lo, hi]`` is the widest range.
    Coverage ``P(|X - f| <= m) >= 1 - alpha`` over the noise of both ``X`` and ``ŝ``."""
    lo_pub, hi_pub = graphs.statistic_range(query, n_nodes)
    m, lo, hi = 0, lo_pub, hi_pub
    for c_lo, c_hi, beta in statistic_levels(float(epsilon_width), float(alpha)):
        lo = min(max(noisy_statistic - c_lo, lo_pub), hi_pub)
        hi = max(min(noisy_statistic + c_hi, hi_pub), lo)
        m = max(m, interval_half_width(query, k, n_nodes, epsilon, lo, hi, beta))
    return m, lo, hi


def release_interval(
    lf: LadderFunction,
    released: int,
    epsilon: float,
    *,
    epsilon_width: float,
    alpha: float = 0.05,
    rng: np.random.Generator,
) -> LadderInterval:
    """The ``1 - alpha`` interval of a ladder release ``released`` made at ``epsilon``.

    Spends ``epsilon_width`` on the width statistic and calibrates over its noise [levels],
    or nothing with ``epsilon_width = 0`` (public range, all of ``alpha`` to the count's noise).
    """
    if epsilon_width < 0 or not math.isfinite(epsilon_width):
        raise ValueError(f"epsilon_width must be >= 0, got {epsilon_width}")
    name = graphs.width_statistic_name(lf.query)
    if epsilon_width == 0:
        lo, hi = graphs.statistic_range(lf.query, lf.n_nodes)
        m = interval_half_width(lf.query, lf.k, lf.n_nodes, epsilon, lo, hi, alpha)  # [bound]
        noisy = None
    else:
        noisy = noisy_width_statistic(lf, epsilon_width, rng=rng)  # [stat]
        m, lo, hi = calibrated_half_width(lf.query, lf.k, lf.n_nodes, epsilon, noisy, epsilon_width, alpha)
    r = int(released)
    return LadderInterval(r - m, r + m, m, alpha, epsilon, epsilon_width, name, lo, hi, noisy)


def release_with_interval(
    lf: LadderFunction,
    epsilon: float,
    *,
    width_share: float = DEFAULT_WIDTH_SHARE,
    alpha: float = 0.05,
    rng: np.random.Generator,
) -> LadderRelease:
    """Release the count at ``(1 - width_share) ε`` and its interval with ``width_share · ε`` [split].

    The total is ε (basic composition). ``width_share = 0`` spends all of ε on the count and
    gives the wider interval from public quantities only.
    """
    if not 0 <= width_share < 1:
        raise ValueError(f"width_share must be in [0, 1), got {width_share}")
    epsilon_width = epsilon * width_share  # [split]
    epsilon_count = epsilon - epsilon_width
    value = LadderMechanism().release(lf, epsilon_count, rng=rng)
    interval = release_interval(lf, value, epsilon_count, epsilon_width=epsilon_width, alpha=alpha, rng=rng)
    return LadderRelease(value, interval, epsilon)


# -- baselines ----------------------------------------------------------------------------------
class GlobalSensitivityLaplace(Mechanism):
    """Discrete Laplace with scale ``GS / ε`` on the exact count: the thesis's "Laplace" baseline.

    ε-DP (``GS`` is the global sensitivity over graphs on the public universe); sound, but
    its noise is usually far larger than the ladder's.
    """

    NAME = "laplace_global"
    VETTED = True

    def sample(self, lf: LadderFunction, epsilon: float, size: int, *, rng: np.random.Generator) -> np.ndarray:
        if lf.global_sensitivity == 0:
            return np.full(size, lf.value, dtype=np.int64)
        return lf.value + noise.discrete_laplace(epsilon, lf.global_sensitivity, size, rng)

    def release(self, lf: LadderFunction, epsilon: float, *, rng: np.random.Generator) -> int:
        return int(self.sample(lf, epsilon, 1, rng=rng)[0])

    def output_distribution(self, lf: LadderFunction, epsilon: float, support: np.ndarray) -> np.ndarray:
        return noise.discrete_laplace_pmf(epsilon, lf.global_sensitivity, np.asarray(support) - lf.value)

    def half_width(self, lf: LadderFunction, epsilon: float, alpha: float = 0.05) -> int:
        """Public: smallest ``w`` with ``P(|X - f| <= w) >= 1 - alpha``."""
        return noise.discrete_laplace_half_width(epsilon, lf.global_sensitivity, alpha)


class SmoothSensitivityCauchy(Mechanism):
    """BASELINE ONLY, never offered to analysts: ``f + (6 SS_β / ε) · Cauchy`` with ``β = ε/6``.

    The thesis's "Smooth" comparison (Nissim et al. 2007 via Karwa et al.): ``SS_β(g) =
    max_t e^{-βt} LS(g, t)``, available where the ladder is ``LS(g, t)`` itself (triangles
    and k-stars). ``β = ε/6`` is our reading (the thesis prints only ``6 SS / ε``). Real-valued
    float noise (open to floating-point attacks), hence ``VETTED = False``.
    """

    NAME = "smooth_cauchy"
    VETTED = False

    def smooth_sensitivity(self, lf: LadderFunction, beta: float) -> float:
        if not (lf.query in ("triangle", "kstar") or (lf.query == "kclique" and lf.k == 3)):
            raise ValueError("smooth sensitivity needs I_t = LS(g, t): triangles and k-stars only")
        best = lf.global_sensitivity * math.exp(-beta * lf.M)
        for t, w in enumerate(lf.rungs):
            best = max(best, w * math.exp(-beta * t))
        return best

    def sample(self, lf: LadderFunction, epsilon: float, size: int, *, rng: np.random.Generator) -> np.ndarray:
        scale = 6 * self.smooth_sensitivity(lf, epsilon / 6) / epsilon
        return lf.value + scale * rng.standard_cauchy(size)

    def release(self, lf: LadderFunction, epsilon: float, *, rng: np.random.Generator) -> float:
        return float(self.sample(lf, epsilon, 1, rng=rng)[0])
