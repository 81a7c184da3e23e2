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

- [stat] the width statistic ``s``, a shift statistic: the smallest ``c`` whose public ladder
  ``U_c`` lies above the graph's ladder, in a nested family with ``U_c(t + 1) <= U_{c+1}(t)``:
  ``U_c(t) = ψ(c + t)``, ``ψ(x) = C(x, k-1)`` while ``x <= N - 2`` for k-stars (``c_k``), the sum
  ``F(x)`` of Theorem 5.7's steps for k-triangles (``c_k``), ``ψ_K(x) = min(max(⌊x/2⌋, x - K),
  N-2)`` for triangles (``c_K``), and for k-cliques ``C(A(c) + t, k-2) - δ(c)`` along a public
  path (``c_K``, ``graphs.kclique_path``); ``K`` is the public knee of ``epsilon_width``
  (``ladder_bounds.statistic_knee``); global sensitivity 1. It is released once as
  ``ŝ = s + DLap(1/epsilon_width)``;
- [interval] ``m`` is computed in ``dpgate.mechanisms.ladder_bounds`` from public ladders that
  bound every graph's ladder given a range of ``s`` ([bound]), a bound on the miss probability
  of every ladder between them ([band], [sandwich], [blocks]) and a calibration over the
  noise of ``ŝ`` ([cells]); its cost is bounded from public numbers whatever ε and alpha.

With ``width_share = 0`` there is one range: the public range ``[0, N-2]`` (``[0, N-1]``)
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
statistic [stat] (discrete Laplace, sensitivity 1: one edge changes any ``a_ij`` by at most
1, so ``a_m`` moves by at most 1; a shift statistic moves by at most 1 because a neighbour's
ladder lies below the graph's shifted by one rung, Definition 5.6 (b), and ``U_c(t + 1) <=
U_{c+1}(t)``: ``graphs.kstar_shift_statistic``; the knee is public, so ``c_K`` is one such
statistic per ``epsilon_width``); the cells, the public ladders and the band are public
functions of ``(query, k, N, ε, alpha)`` and ``ŝ``; the budget split is [split].
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

import numpy as np

from dpgate import noise
from dpgate.mechanisms import graphs, width_statistics
from dpgate.mechanisms.graphs import QUERIES, global_sensitivity
from dpgate.mechanisms.base import Mechanism
from dpgate.mechanisms.ladder_bounds import (  # the error bars; re-exported for callers of 0.18
    CELL_EDGES,
    SEARCH_PRECISION,
    _Band,
    _logsumexp,
    _Shape,
    _smallest,
    calibrated_half_width,
    interval_half_width,
    largest_half_width,
    sampling_epsilon,
    sampling_margin,
    statistic_cells,
    statistic_knee,
)

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
    "largest_half_width",
    "release_interval",
    "release_with_interval",
    "sampling_epsilon",
    "statistic_cells",
    "width_statistic",
    "width_statistic_label",
]

_INT64_SAFE = (1 << 62) - 1


# -- the ladder function ------------------------------------------------------------------------
@dataclass(frozen=True)
class LadderFunction:
    """Everything the ladder sampler needs from one private graph (exact ints).

    ``rungs`` are ``I_0 .. I_{M-1}``; ``I_t = global_sensitivity`` for ``t >= M``.
    ``width_statistic`` (``a_m``, or ``c_k`` for k-stars and k-triangles) is private; only
    :func:`release_interval` reads it (and, for triangles and k-cliques, ``c_K`` from the rungs,
    :func:`width_statistic`), to add noise to it.
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


# -- error bars ---------------------------------------------------------------------------------
#: Default share of ε spent on the width statistic by :func:`release_with_interval`.
DEFAULT_WIDTH_SHARE = 0.2


@dataclass(frozen=True)
class LadderInterval:
    """A ``1 - alpha`` interval for the count, computed from DP and public inputs only."""

    low: int
    high: int
    half_width: int
    alpha: float
    epsilon: float  # ε of the released count the interval describes
    epsilon_width: float  # ε spent on the width statistic (0: public bound, nothing spent)
    statistic: str  # "c_K" (triangles, k-cliques), "c_k" (k-stars, k-triangles); "a_m" on public bars
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

    This (through :func:`width_statistic`) is the only reader of the statistic; it has global
    sensitivity 1.
    """
    if lf.width_statistic is None:
        raise ValueError("this LadderFunction carries no width statistic; use epsilon_width=0")
    return width_statistic(lf, epsilon_width) + int(noise.discrete_laplace(epsilon_width, 1, 1, rng)[0])  # [stat]


def width_statistic(lf: LadderFunction, epsilon_width: float) -> int:
    """The private statistic released at ``epsilon_width``: for triangles and k-cliques ``c_K`` with
    the public knee of ``epsilon_width`` (``width_statistics.triangle_shift_statistic``,
    ``width_statistics.kclique_shift_statistic``, read from the rungs), else ``lf.width_statistic``.
    Sensitivity 1 either way."""
    knee = statistic_knee(lf.query, lf.k, lf.n_nodes, epsilon_width)
    if knee is None:
        return lf.width_statistic
    if lf.query == "kclique" and lf.k >= 4:
        return width_statistics.kclique_shift_statistic(lf.rungs, lf.n_nodes, lf.k, knee)
    return width_statistics.triangle_shift_statistic(lf.rungs, lf.n_nodes, knee)


def width_statistic_label(query: str, k: int | None, n_nodes: int, epsilon_width: float) -> str:
    """The name of the statistic an error bar at ``epsilon_width`` releases: ``c_K`` for triangles and
    k-cliques (the shift statistic with the knee of ``epsilon_width``), else
    ``graphs.width_statistic_name`` (``a_m`` on public bars, ``epsilon_width = 0``)."""
    if epsilon_width and statistic_knee(query, k, n_nodes, epsilon_width) is not None:
        return "c_K"
    return graphs.width_statistic_name(query)


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

    Spends ``epsilon_width`` on the width statistic and calibrates over its noise [cells],
    or nothing with ``epsilon_width = 0`` (public range, all of ``alpha`` to the count's noise).
    """
    if epsilon_width < 0 or not math.isfinite(epsilon_width):
        raise ValueError(f"epsilon_width must be >= 0, got {epsilon_width}")
    name = width_statistic_label(lf.query, lf.k, lf.n_nodes, epsilon_width)
    if epsilon_width == 0:
        lo, hi = graphs.statistic_range(lf.query, lf.n_nodes, lf.k)
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
