"""Error bars of the ladder mechanism (``dpgate.mechanisms.ladder``): public half-widths.

**Guarantee:** coverage, not privacy. For a ladder release ``X`` of a count ``f`` at ``ε``
(edge-level neighbours: graphs on the public universe ``0 .. N-1`` that differ in one edge),
:func:`interval_half_width` returns an ``m`` with ``P(|X - f| > m) <= β`` for every graph whose
width statistic lies in a given range, and :func:`calibrated_half_width` an ``m`` with
``P(|X - f| > m(ŝ)) <= alpha`` over the noise of both ``X`` and the noisy statistic ``ŝ``.
Everything here is a public function of ``(query, k, N, ε, alpha)`` and ``ŝ``: post-processing,
it spends nothing. **Sensitivity:** the width statistic ``s`` (a shift statistic: ``c_k`` for
k-stars and k-triangles, ``c_K`` for triangles and k-cliques, whose public knee
:func:`statistic_knee` is a function of ``epsilon_width``; ``a_m`` for public triangle and
k-clique bars) has global sensitivity 1; it is noised in ``dpgate.mechanisms.ladder``
(``[stat]`` there).

The law of ``X`` (``dpgate.mechanisms.ladder``, Eq 5.3 of Zhang's thesis): the exact answer
has weight 1, each integer on rung ``u`` (``I_{u-1}`` of them on each side) ``e^{-h u}``,
``h = ε'/2``.

- [bound] ``dpgate.mechanisms.ladder_widths.width_bounds`` gives public ladders with
  ``L_t(s) <= I_t(g) <= U_t(s)`` for every graph and every ``t``, non-decreasing in ``s``: a
  graph whose statistic lies in ``[lo, hi]`` has its ladder in the band ``L(lo) <= I <= U(hi)``.
  For ``c_K`` the knee is a public function of ``epsilon_width`` (:func:`statistic_knee`), fixed
  before the statistic is read, so the statistic, its ladders and its public range are fixed
  for the release and everything below holds as for any other statistic;
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
  pointwise is used, not monotonicity;
- [sandwich] a second bound for the same band: ``T_I(m) <= T_U(m)`` and ``H_I(m) >= H_L(m)``
  (a pointwise wider ladder puts every distance on an earlier rung, hence at a larger weight),
  so ``P(|X - f| > m) <= T_U(m) / (H_L(m) + T_U(m))``. It costs ``O(len(L) + len(U))`` per
  ``m`` whatever ``h`` (the constant tails are geometric series), but is up to 3.6 times as wide
  as [band] when ``L`` and ``U`` differ, because its tail and centre number the rungs of two
  different ladders. The half-width is the smaller of the two; the sandwich also bounds the
  search, so [band] is never evaluated at an ``m`` beyond it;
- [blocks] [band] visits, for every rung ``j`` that can hold ``m`` (about ``M + ln(1/β)/h``
  of them), a window of ``ln(1/β)/h`` rungs: its work grows like ``1/ε²`` (at ``ε = 10^-6``
  it would run for days). Below ``h = BLOCK_H`` it is therefore evaluated on blocks of ``b``
  consecutive rungs: block ``v`` (rungs ``vb .. vb + b - 1``) has width ``W_v = sum I_u``, in
  ``[sum L_u, sum U_u]``, and each of its integers has a weight in
  ``[e^{-h'(v+1)}, c e^{-h'(v+1)}]`` with ``h' = hb``, ``c = e^{h(b-1)}``. Against the coarse
  ladder ``W`` at ``h'`` (same centre): ``T_I <= c T_W`` and ``H_I >= H_W``, so
  ``P(miss) <= c T_W / (H_W + c T_W)``, which is ``<= β`` when ``T_W / (H_W + T_W) <= β'``
  with ``β' = β / (c (1 - β) + β)`` (then ``T_W / H_W <= β / (c (1 - β))``). [band] on the
  coarse band at ``(h', β')`` therefore bounds the fine one; ``b`` doubles until one evaluation
  visits at most ``BAND_WORK`` (rung, window) pairs, counted before the search from public
  numbers (the crossings at the [sandwich] half-width, the window ``ln(1/β')/h' + 2``). With
  ``b = 1`` nothing changes. The price: ``ln(1/β')`` exceeds ``ln(1/β)`` by about
  ``h(b - 1) <= BLOCK_H``, and the block sums relax the band;
- [family] k-triangles: Theorem 5.7's ladder is fixed by ``a = a_m`` and ``LS``, and
  ``C(a, k) <= LS <= C(a, k) + 2 a C(a, k-1)`` (Lemma 5.5), so the graphs whose ``c_k`` lies in
  a range have one of the ladders ``ladder_widths.ktriangle_family`` lists (the statistic of each
  in closed form, equal to the release's). Where they are few (at most ``FAMILY_WORK`` ladder
  rungs, counted from public numbers) the cell's ``m`` is the smallest at which *each* of them
  misses with at most ``β`` (:class:`_Family`): rungs ``1 .. R`` exactly, the rest at ``GS``
  each (an upper bound on the weight beyond ``m``; ``R`` reaches ``ln(GS / 10^-12 β)/h`` rungs
  past the narrowest ladder's rung at the [sandwich] bound), so each miss is bounded above.
  The band holds these ladders and many more (it mixes a narrow ladder's centre with a wide one's
  tail): on a sparse road-like graph the bar at ε = 1.6 was 17% wider;
- [cells] the calibration over ``ŝ``'s noise ``Z = ŝ - s``: public cells partition the
  integers ``z >= z_0`` into intervals ``[z_j, z_{j+1})`` with miss probabilities ``β_j``
  (:func:`statistic_cells`, edges ``CELL_EDGES`` in units of the scale of the noise the sampler
  runs, ``1/(epsilon_width - 1e-10)``);
  ``m = max_j band(ŝ - z_{j+1} + 1, ŝ - z_j, β_j)`` (ranges clamped to the public one; the last
  cell's range runs down to the public bottom). When ``Z`` lies in cell ``j``, ``s`` lies in cell
  ``j``'s range, so the count, independent of ``Z``, misses with probability at most ``β_j``;
  hence ``P(miss) <= P(Z < z_0) + sum_j P(Z in cell j) β_j <= alpha``, computed from the
  sampler's exact law, whatever the graph. Cells for ``Z < 0`` (graphs whose statistic lies
  above ``ŝ``) get miss probabilities growing like ``e^{CELL_TILT |z| epsilon_width}``: the
  farther above ``ŝ``, the rarer the case and the wider the ladders to cover, so the error bar
  pays for them in proportion. Each range is narrow (the band of ``L(bottom)`` and ``U(top)`` is
  tight), and ``m`` is searched once over all cells: a cell whose [sandwich] bound is already
  below the running ``m``, or whose [band] accepts it, costs one check (every cell is checked
  again at the final ``m``). With nested ranges and a few levels instead (0.25), every level had
  to cover the worst graph of a range reaching ``s + ln(8/alpha)/epsilon_width`` at a small
  miss probability; on sparse graphs, whose statistic is small next to its noise, that made the
  error bar 6 to 80 times the actual error.

**Cost:** bounded from public numbers, whatever ε and alpha: per cell (at most
``len(CELL_EDGES)``, and ``(ln(2/alpha) - 4.5)/CELL_STEP`` more below ``alpha`` ≈ 0.02: 37 at
``alpha`` = 10⁻⁹), ``O(len(L) + len(U))`` per probe of [sandwich] (``len <= 3N + 3``) and at
most ``BAND_WORK`` pairs per probe of [band] or ``FAMILY_WORK`` entries per probe of [family],
about 40 probes each (a binary search to 0.2%).
Floating point (float64, like :class:`_Shape`): the cells keep ``1e-9`` of alpha in reserve for
rounding.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import math
import numbers

import numpy as np

from dpgate import noise
from dpgate.mechanisms import graphs, ladder_widths
from dpgate.mechanisms.graphs import global_sensitivity

__all__ = [
    "BAND_WORK",
    "BLOCK_H",
    "calibrated_half_width",
    "interval_half_width",
    "largest_half_width",
    "sampling_epsilon",
    "sampling_margin",
    "statistic_cells",
    "statistic_knee",
]

_U = 2.0**-53
#: Below this ``h``, [band] is evaluated on blocks of ``floor(BLOCK_H / h)`` rungs [blocks].
BLOCK_H = 0.01
#: The most (crossing rung, window rung) pairs one evaluation of [band] visits (about 10 ns
#: each); blocks grow until it holds [blocks].
BAND_WORK = 1 << 21
#: [band] handles its (rung, window) pairs in chunks of this many (peak memory ~15 arrays of it).
_CHUNK = 1 << 17
#: The most (ladder, rung) entries the k-triangle [family] bound holds for one cell; beyond it,
#: the cell takes the band.
FAMILY_WORK = 1 << 20


def sampling_epsilon(epsilon: float, n_nodes: int) -> float:
    """The ε the ladder sampler actually runs at: ``ε - EPSILON_MARGIN - 32u(3N + 5)``, the
    margin that absorbs its rounding ([float] in ``dpgate.mechanisms.ladder``)."""
    margin = sampling_margin(n_nodes)
    real = isinstance(epsilon, numbers.Real) and not isinstance(epsilon, bool)
    if not (real and math.isfinite(epsilon) and epsilon > margin):
        raise ValueError(f"epsilon must be finite and > {margin:.3g}, got {epsilon!r}")
    return float(epsilon) - margin


def sampling_margin(n_nodes: int) -> float:
    """``EPSILON_MARGIN + 32u(3N + 5)``: what :func:`sampling_epsilon` takes off (ε must exceed it)."""
    return noise.EPSILON_MARGIN + 32 * _U * (graphs.convergence_cap(n_nodes) + 2)  # [float]


def _logsumexp(x: np.ndarray) -> float:
    top = float(np.max(x))
    if top == -math.inf:
        return top
    return top + math.log(float(np.sum(np.exp(x - top))))


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
        d = list(itertools.accumulate((int(w) for w in widths), initial=0))
        self.d = d
        self.lo = np.array(d[:-1], dtype=np.float64)
        self.hi = np.array(d[1:], dtype=np.float64)
        self.u = np.arange(1, self.k + 1, dtype=np.float64)

    def _terms(self, counts: np.ndarray, h: float) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return np.where(counts > 0, np.log(np.maximum(counts, 1.0)) + math.log(2) - h * self.u, -np.inf)

    def log_within(self, m: int, h: float) -> float:
        """``log`` of the weight of outputs at distance ``<= m`` (centre included)."""
        counts = np.clip(np.minimum(float(m), self.hi) - self.lo, 0.0, None)
        terms = [np.zeros(1), self._terms(counts, h)]
        past = m - self.d[-1]
        if past > 0 and self.tail > 0:
            full, rem = divmod(past, self.tail)
            if full:  # rungs K+1 .. K+full: 2C a^{K+1} (1 - a^full) / (1 - a)
                head = math.log(2 * self.tail) - h * (self.k + 1)
                terms.append([head + math.log(-math.expm1(-h * full)) - math.log(-math.expm1(-h))])
            if rem:
                terms.append([math.log(2 * rem) - h * (self.k + full + 1)])
        return _logsumexp(np.concatenate(terms))

    def log_beyond(self, m: int, h: float) -> float:
        """``log`` of the weight of outputs at distance ``> m``."""
        counts = np.clip(self.hi - np.maximum(float(m), self.lo), 0.0, None)
        terms = [self._terms(counts, h)]
        if self.tail > 0:
            past = max(m - self.d[-1], 0)
            full, rem = divmod(past, self.tail)
            u0 = self.k + full + 1  # first tail rung with points beyond m
            if rem:
                terms.append([math.log(2 * (self.tail - rem)) - h * u0])
                u0 += 1
            terms.append([math.log(2 * self.tail) - h * u0 - math.log(-math.expm1(-h))])
        flat = np.concatenate(terms)
        return _logsumexp(flat) if flat.size else -math.inf

    def log_total(self, h: float) -> float:
        return float(np.logaddexp(self.log_within(0, h), self.log_beyond(0, h)))


def _smallest(ok, rel: float = 0.0, hi: int | None = None, lo: int = 0) -> int:
    """The smallest integer ``m >= lo`` with ``ok(m)``, for a monotone predicate; with ``rel > 0``
    an ``m`` with ``ok(m)`` at most ``rel · m`` above the smallest. ``hi``: a known ``ok`` value;
    the returned ``m`` always passed ``ok``."""
    if ok(lo):
        return lo
    if hi is None:
        hi = max(1, 2 * lo)
        while not ok(hi):
            lo, hi = hi, 2 * hi
    while hi - lo > max(1, rel * hi):
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return hi

# -- error bars ---------------------------------------------------------------------------------
#: The cells of the error bar's calibration over the noisy width statistic [cells]: their edges
#: in units of the noise's scale, on ``Z = ŝ - s`` (negative: the graph's statistic lies above
#: ``ŝ``); ``Z`` below the first edge is left uncovered.
CELL_EDGES = (-4.5, -3.75, -3.0, -2.5, -2.0, -1.5, -1.0, -0.5, -0.25, 0.0, 0.25, 0.5, 1.0, 1.75, 2.75)
#: Below ``alpha`` ≈ 0.02, cells are added under the first edge, this many scales apart, until
#: the noise left uncovered is at most a quarter of ``alpha`` (:func:`_cell_edges`).
CELL_STEP = 0.75
#: A cell whose midpoint lies ``x < 0`` noise scales below 0 gets ``e^{CELL_TILT |x|}`` times the
#: miss probability of the cells at ``Z >= 0``. Public constants, chosen on road-like, random and
#: power-law graphs against the best calibration of the same noise (docs/queries/graphs.md).
CELL_TILT = 0.72
#: Error bars are searched to this relative precision (any ``m`` the bound accepts is valid).
SEARCH_PRECISION = 0.002
#: No cell gets a miss probability above this.
MAX_CELL_MISS = 0.9
#: The knee of the triangle statistic's public ladder ``ψ_K`` in scales of its noise: ``c_K`` is
#: about ``max`` over pairs of ``min(2a + b, a + K)``, so a knee a few noise scales wide keeps
#: half-rung steps for pairs with small ``b`` and costs a hub's pair at most ``K/2`` over ``a_m``.
#: Chosen on the benchmark graphs (2 and 2.5 within 5% of 3, 5 up to 40% wider on power laws).
TRIANGLE_KNEE = 3.0
#: The knee of the k-clique statistic's path (``graphs.kclique_path``) in scales of its noise:
#: below it ``c_K`` moves like ``a_m``, past it two rungs per step, twice the noise's cost, for
#: half of ``C(A, k-2)`` off the upper ladder. Ten scales keep the cells of a graph whose
#: ``a_m`` is within a few scales of its noise on ``a_m``'s ladders (5 widened the random
#: geometric graph's bars by 9% at ε = 1.6), while the gene network's ``a_m = 346`` passes it
#: from ε = 0.4 on.
KCLIQUE_KNEE = 10.0


@functools.lru_cache(maxsize=256)
def statistic_cells(epsilon_width: float, alpha: float) -> tuple[tuple[int, int | None, float], ...]:
    """Public: the calibration cells ``(z_lo, z_hi, β)`` for a statistic released with
    ``DLap(1/epsilon_width)`` [cells]: they partition the integers ``z >= z_lo`` of the first
    (``z_hi = None``: no end), and ``P(Z < z_lo of the first) + sum_j P(Z in cell j) β_j <= alpha``,
    from the sampler's exact law.

    >>> [(lo, hi, round(b, 3)) for lo, hi, b in statistic_cells(0.2, 0.05)][::4]
    [(-23, -20, 0.554), (-11, -9, 0.106), (-2, -1, 0.031), (5, 7, 0.025)]
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    a = noise.discrete_laplace_alpha(epsilon_width, 1)
    rate = -math.log(a) if a > 0.0 else float(epsilon_width)  # the noise the sampler runs, P(z) ∝ e^{-rate |z|}

    def at_most(z: int) -> float:  # P(Z <= z)
        return a ** (-z) / (1 + a) if z < 0 else 1 - a ** (z + 1) / (1 + a)

    edges = sorted({math.floor(x / rate) for x in _cell_edges(alpha)})
    cells, probs, weights = [], [], []
    for lo, nxt in zip(edges, edges[1:] + [None]):
        hi = None if nxt is None else nxt - 1
        probs.append((1.0 if hi is None else at_most(hi)) - at_most(lo - 1))
        mid = 0.0 if hi is None else (lo + hi) / 2 * rate
        weights.append(math.exp(min(-CELL_TILT * mid, 700.0)) if mid < 0 else 1.0)  # β is capped anyway
        cells.append((lo, hi))
    uncovered = at_most(edges[0] - 1)

    def total(lam: float) -> float:
        return uncovered + sum(p * min(MAX_CELL_MISS, lam * w * alpha) for p, w in zip(probs, weights))

    budget = alpha * (1 - 1e-9)  # covers rounding here and the sampler's 1e-11 deviation from its law
    if total(0.0) >= budget:
        raise ValueError("the calibration cells leave no miss probability for the noise")  # pragma: no cover
    lo, hi = 0.0, 1.0
    while total(hi) < budget and hi < 1e6:
        lo, hi = hi, 2 * hi
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if total(mid) <= budget else (lo, mid)
    return tuple((z_lo, z_hi, min(MAX_CELL_MISS, lo * w * alpha)) for (z_lo, z_hi), w in zip(cells, weights))


def _cell_edges(alpha: float) -> tuple[float, ...]:
    """``CELL_EDGES``, continued below in steps of ``CELL_STEP`` scales until the noise beyond the
    first edge (``P(Z < z) ≈ e^{-|z|}/2`` in scales) is at most a quarter of ``alpha``: a small
    ``alpha`` (below about 0.02) needs statistics further above ``ŝ`` covered, or no miss
    probability would be left for the cells."""
    edges = list(CELL_EDGES)
    while math.exp(edges[0]) / 2 > alpha / 4:
        edges.insert(0, edges[0] - CELL_STEP)
    return tuple(edges)


class _Band:
    """All ladders ``I`` with ``L_t <= I_t <= U_t`` for every ``t`` [band].

    ``ok(m, β)`` is True only if every such ladder has ``P(|X - f| > m) <= β`` at ``h``: the
    maximum of ``(1 - β) T_I(m) - β H_I(m)`` over the band is at most 0, bounded by a linear
    programme per crossing rung (module docstring). Float64, like :class:`_Shape`.
    """

    def __init__(self, lower: tuple[list[int], int], upper: tuple[list[int], int], h: float):
        (self.lw, self.lt), (self.uw, self.ut) = lower, upper
        self.h = h
        self.visits: list[int] = []  # (rung, window) pairs per evaluation: the work [blocks] bounds
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
        self.visits.append(crossings * window)
        log_b, log_2b, keep = math.log(beta), math.log(2 * beta), 1 - beta
        log_2m = math.log(2 * m) if m > 0 else -math.inf
        step = max(1, _CHUNK // window)
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
    lo_pub, hi_pub = graphs.statistic_range(query, graphs.check_universe(n_nodes), k)
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
    return _band_half_width(lower, upper, h, alpha)


def _band_half_width(lower, upper, h: float, beta: float) -> int:
    """The smaller of the [sandwich] and the [band] half-widths for ladders between ``lower``
    and ``upper`` at ``h``, [band] on blocks when its work would exceed ``BAND_WORK`` [blocks]."""
    ceiling = _sandwich(lower, upper, h, beta)  # [sandwich]
    b = _block(lower, h, beta, ceiling)  # [blocks]
    if b is None:
        return ceiling
    band = _Band(_coarsen(lower, b), _coarsen(upper, b), h * b)  # [band]
    coarse_beta = _block_miss(beta, h, b)
    return _smallest(lambda m: m >= ceiling or band.ok(m, coarse_beta), SEARCH_PRECISION)


# The widths of a few public ladders (tuples of up to 3N + 3 ints each): enough for the cells
# of a few statements; a larger cache would hold hundreds of MB on a large universe.
@functools.lru_cache(maxsize=128)
def _width_bounds(query: str, k: int | None, n_nodes: int, statistic: int, knee: int | None = None):
    (lw, lt), (uw, ut) = ladder_widths.width_bounds(query, k, n_nodes, statistic, knee)
    return (tuple(lw), lt), (tuple(uw), ut)


def _sandwich(lower, upper, h: float, beta: float) -> int:
    """The smallest ``m`` (to 0.2%) with ``T_U(m) / (H_L(m) + T_U(m)) <= β`` [sandwich]."""
    low, high = _Shape(list(lower[0]), lower[1]), _Shape(list(upper[0]), upper[1])
    log_beta = math.log(beta)

    def ok(m: int) -> bool:
        beyond = high.log_beyond(m, h)
        return beyond - float(np.logaddexp(low.log_within(m, h), beyond)) <= log_beta

    return _smallest(ok, SEARCH_PRECISION)


def _coarsen(widths, b: int):
    """The ladder of blocks of ``b`` rungs: block sums, the constant tail padding the last block
    and ``b`` times the tail after it [blocks]."""
    w, tail = widths
    if b == 1:
        return widths
    d = list(itertools.accumulate(w, initial=0))
    n = len(w)  # block i covers widths i .. i + b - 1; past n they are the tail
    return tuple(d[min(i + b, n)] - d[i] + tail * max(i + b - n, 0) for i in range(0, n, b)), tail * b


def _block_miss(beta: float, h: float, b: int) -> float:
    """``β' = β / (c (1 - β) + β)``, ``c = e^{h(b - 1)}``: the coarse band's miss [blocks]."""
    if b == 1:
        return beta
    return beta / (math.exp(h * (b - 1)) * (1 - beta) + beta)


def _crossings(lower, m: int) -> int:
    """How many rungs ``j >= 0`` have ``D^L_j <= m``: the rungs [band] visits at ``m``."""
    w, tail = lower
    d = list(itertools.accumulate(w, initial=0))  # D_0 .. D_len, non-decreasing
    return bisect.bisect_right(d, m) if d[-1] > m else len(w) + 1 + (m - d[-1]) // tail


def _block(lower, h: float, beta: float, ceiling: int) -> int | None:
    """The block length for [band], from public numbers only [blocks]: at least
    ``BLOCK_H / h``, doubled until one evaluation at an ``m`` below ``ceiling`` visits at most
    ``BAND_WORK`` pairs. None when even blocks this coarse cost more: [sandwich] alone."""
    b = max(1, int(BLOCK_H / h))
    while h * b <= 30:
        window = math.floor(math.log(1 / _block_miss(beta, h, b)) / (h * b)) + 2
        if _crossings(_coarsen(lower, b), ceiling) * window <= BAND_WORK:
            return b
        b *= 2
    return None


def calibrated_half_width(
    query: str, k: int | None, n_nodes: int, epsilon: float, noisy_statistic: int, epsilon_width: float, alpha: float
) -> tuple[int, int, int]:
    """Public given ``ŝ``: ``(m, lo, hi)`` with ``m`` the largest over the cells of
    :func:`statistic_cells` of the band half-width for the cell's range of the statistic at the
    cell's miss probability [cells]; ``[lo, hi]`` spans the ranges. Coverage
    ``P(|X - f| <= m) >= 1 - alpha`` over the noise of both ``X`` and ``ŝ``."""
    knee = statistic_knee(query, k, n_nodes, epsilon_width)
    ranges = cell_ranges(query, k, n_nodes, noisy_statistic, epsilon_width, alpha)
    m = _max_half_width(query, graphs.check_query(query, k), int(n_nodes), float(epsilon), ranges, knee)
    return m, min(r[0] for r in ranges), max(r[1] for r in ranges)


def largest_half_width(query: str, k: int | None, n_nodes: int, epsilon: float, epsilon_width: float,
                       alpha: float) -> int:  # fmt: skip
    """Public: an ``m`` no calibrated error bar exceeds, whatever ``ŝ`` (for EXPLAIN, before any
    release): the band of the whole public range at the strictest cell's ``β``. Every cell's band
    lies inside it (the public ladders grow with the statistic) and misses with at most a larger
    ``β``, so needs no wider ``m``; the searches are to ``SEARCH_PRECISION``, added once more."""
    knee = statistic_knee(query, k, n_nodes, epsilon_width)
    k = graphs.check_query(query, k)
    lo, hi = graphs.statistic_range(query, int(n_nodes), k, knee)
    beta = min(cell[2] for cell in statistic_cells(float(epsilon_width), float(alpha)))
    m = _max_half_width(query, k, int(n_nodes), float(epsilon), ((lo, hi, beta),), knee)
    return math.ceil(m * (1 + SEARCH_PRECISION))


def statistic_knee(query: str, k: int | None, n_nodes: int, epsilon_width: float) -> int | None:
    """Public: the knee ``K`` of the statistic ``c_K`` released at ``epsilon_width``: for triangles
    (``width_statistics.triangle_shift_statistic``) ``TRIANGLE_KNEE`` scales of its noise, at most ``N - 2``
    (pure halves); for k-cliques (``width_statistics.kclique_shift_statistic``) ``KCLIQUE_KNEE`` scales, at
    most ``N``; None for k-stars and k-triangles, whose statistic has none."""
    if query == "triangle" or (query == "kclique" and k == 3):
        return int(min(TRIANGLE_KNEE / float(epsilon_width), n_nodes - 2))
    if query == "kclique":
        return int(min(KCLIQUE_KNEE / float(epsilon_width), n_nodes))  # at N: one rung per step throughout
    return None


def cell_ranges(
    query: str, k: int | None, n_nodes: int, noisy_statistic: int, epsilon_width: float, alpha: float
) -> tuple[tuple[int, int, float], ...]:
    """Public given ``ŝ``: the statistic's range ``(bottom, top, β)`` of every cell [cells],
    clamped to the public range (a cell past it covers the public end instead: more than it
    needs); cells that clamp to the same range keep the smallest ``β``."""
    lo_pub, hi_pub = graphs.statistic_range(query, n_nodes, k, statistic_knee(query, k, n_nodes, epsilon_width))
    strictest: dict[tuple[int, int], float] = {}
    for z_lo, z_hi, beta in statistic_cells(float(epsilon_width), float(alpha)):
        top = min(max(noisy_statistic - z_lo, lo_pub), hi_pub)
        bot = lo_pub if z_hi is None else min(max(noisy_statistic - z_hi, lo_pub), top)
        strictest[(bot, top)] = min(beta, strictest.get((bot, top), 1.0))
    return tuple(sorted((bot, top, beta) for (bot, top), beta in strictest.items()))


@functools.lru_cache(maxsize=4096)
def _max_half_width(query: str, k: int | None, n_nodes: int, epsilon: float, ranges, knee: int | None = None) -> int:
    """The smallest ``m`` (to 0.2% per cell) at which every range's band misses with at most its
    ``β``. Each cell's answer lies between the exact quantile of its upper ladder (a ladder of
    the band) and its [sandwich] bound; cells whose sandwich bound is below the running ``m``, or
    whose [band] accepts it, cost one check, the others a search between the two."""
    h = sampling_epsilon(epsilon, n_nodes) / 2
    if global_sensitivity(query, k, n_nodes) == 0:
        return 0
    items = []
    m = 0  # a lower bound on the answer until the searches below
    for bot, top, beta in ranges:
        lower, _ = _width_bounds(query, k, n_nodes, bot, knee)
        _, upper = _width_bounds(query, k, n_nodes, top, knee)
        ceiling = _sandwich(lower, upper, h, beta)
        m = max(m, _quantile(upper, h, beta, ceiling))
        items.append((ceiling, lower, upper, beta, bot, top))
    items.sort(key=lambda item: -item[0])
    checks = []
    for ceiling, lower, upper, beta, bot, top in items:
        if ceiling <= m:
            continue
        family = _Family.of(k, n_nodes, bot, top, h, ceiling, beta) if query == "ktriangle" else None
        if family is not None:  # [family]: every ladder of the cell, not the band around them
            checks.append((ceiling, family, beta))
            m = _smallest(lambda x: x >= ceiling or family.ok(x, beta), SEARCH_PRECISION, hi=ceiling, lo=m)
            continue
        b = _block(lower, h, beta, ceiling)  # [blocks]
        if b is None:
            m = ceiling
            continue
        band = _Band(_coarsen(lower, b), _coarsen(upper, b), h * b)  # [band]
        coarse_beta = _block_miss(beta, h, b)
        checks.append((ceiling, band, coarse_beta))
        m = _smallest(lambda x: x >= ceiling or band.ok(x, coarse_beta), SEARCH_PRECISION, hi=ceiling, lo=m)
    # a cell accepted at a smaller m is checked again at the final one: the bound certifies each
    # m it accepts, and nothing here assumes it accepts every larger m
    settled = False
    while not settled:
        settled = True
        for ceiling, band, beta in checks:
            if m < ceiling and not band.ok(m, beta):
                m = _smallest(lambda x: x >= ceiling or band.ok(x, beta), SEARCH_PRECISION, hi=ceiling, lo=m)
                settled = False
    return m


class _Family:
    """Every k-triangle ladder whose statistic lies in a cell's range, each ladder apart [family]:
    ``ok(m, β)`` is True only if each misses with at most ``β`` at ``h``. Rungs past ``R`` are
    counted at ``GS`` (the widest a rung can be), so each miss is bounded above; ``R`` reaches
    past the narrowest ladder's rung at the cell's ceiling by ``ln(GS / (β 10^-12)) / h`` rungs."""

    @classmethod
    def of(cls, k: int, n: int, bottom: int, top: int, h: float, ceiling: int, beta: float) -> "_Family | None":
        """The bound for the cell, or None (use the band) when its (ladder, rung) entries would
        exceed ``FAMILY_WORK``, counted from public numbers before any is built."""
        gs = global_sensitivity("ktriangle", k, n)
        window = math.ceil((math.log(2 * gs) - math.log(-math.expm1(-h)) - math.log(beta * 1e-12)) / h)
        if window >= FAMILY_WORK or float(window) * gs >= 2.0**50:
            return None
        family = ladder_widths.ktriangle_family(k, n, bottom, top, FAMILY_WORK // window)
        if not family:
            return None
        reach = 0  # the rung at which the narrowest ladder passes the ceiling: each a's least LS
        for a, lo, _ in family:
            d = ladder_widths.ktriangle_offsets(k, n, a, FAMILY_WORK // window)
            widths = np.minimum(lo + d, gs)
            reach = max(reach, int(np.searchsorted(np.cumsum(widths), ceiling, side="left")) + 1)
        rungs = reach + window
        ladders = sum(hi - lo + 1 for _, lo, hi in family)
        if ladders * rungs > FAMILY_WORK or h * rungs > 600 or float(rungs) * gs >= 2.0**50:
            return None  # too much work, weights that would underflow, or sums past float64's integers
        return cls(k, n, family, h, rungs, gs)

    def __init__(self, k: int, n: int, family, h: float, rungs: int, gs: int):
        rows = []
        t = np.arange(rungs)
        for a, lo, hi in family:
            ls = np.arange(lo, hi + 1, dtype=np.int64)
            _, below = ladder_widths.ktriangle_statistics(k, n, a, ls)
            d = ladder_widths.ktriangle_offsets(k, n, a, rungs)
            rows.append(np.where(t[None, :] < below[:, None], np.minimum(ls[:, None] + d[None, :], gs), gs))
        widths = np.concatenate(rows).astype(np.float64)
        self.hi = np.cumsum(widths, axis=1)  # D_{u+1}: rung u + 1 holds (D_u, D_{u+1}]
        self.lo = self.hi - widths
        self.weight = np.exp(-h * np.arange(1, rungs + 1))
        self.past = 2 * gs * math.exp(-h * (rungs + 1)) / -math.expm1(-h)  # rungs past R at GS each
        self.visits: list[int] = []  # (ladder, rung) entries per evaluation: at most FAMILY_WORK

    def ok(self, m: int, beta: float) -> bool:
        self.visits.append(self.hi.size)
        step = max(1, _CHUNK // self.hi.shape[1])
        for r in range(0, self.hi.shape[0], step):
            lo, hi = self.lo[r : r + step], self.hi[r : r + step]
            beyond = 2 * (np.clip(hi - np.maximum(float(m), lo), 0.0, None) @ self.weight) + self.past
            within = 1 + 2 * (np.clip(np.minimum(float(m), hi) - lo, 0.0, None) @ self.weight)
            if np.any((1 - beta) * beyond > beta * within):
                return False
        return True


def _quantile(widths, h: float, beta: float, ceiling: int) -> int:
    """The smallest ``m`` (to 0.2%, rounded down) at which the ladder ``widths`` alone misses with
    at most ``β``: no ``m`` below it passes a band that holds this ladder."""
    shape = _Shape(list(widths[0]), widths[1])
    total = shape.log_total(h)
    log_beta = math.log(beta)
    lo, hi = 0, max(ceiling, 1)
    if shape.log_beyond(lo, h) - total <= log_beta:
        return 0
    while hi - lo > max(1, SEARCH_PRECISION * hi):
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if shape.log_beyond(mid, h) - total <= log_beta else (mid, hi)
    return lo
