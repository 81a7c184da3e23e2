"""Set-valued marginals: noisy supports of every item and of the pairs of frequent items.

DiffPart (``diffpart``) releases itemsets only where whole partitions of records survive its
thresholds; on a few thousand baskets of ~10 of ~100 items nothing does. This release measures
what such data can carry — how many records hold each item, each pair of the ``K`` most
frequent items, and how long records are — and corrects the bias of its contribution bound
with a model of record sizes. Records synthesized to match these supports are post-processing
(``records``).

**Reference:** fractional truncation: R. Day, N. Li, "Differentially private publishing of
high-dimensional data using sensitivity control" (DPSense), ASIACCS 2015. Releasing low-way
marginals and fitting records to them: W. Qardaji, W. Yang, N. Li, "PriView", SIGMOD 2014;
Z. Zhang et al., "PrivSyn", USENIX Security 2021 (records moved until they match the marginals).
Shrinkage towards a model: B. Efron, C. Morris, "Stein's estimation rule and its competitors",
JASA 1973.

**Guarantee:** ε-differential privacy (pure, δ = 0). **Neighbouring relation:** add or remove one
record: one subject's set of at most ``max_size`` items (its rows, truncated before this
mechanism to a keyed random ``max_rows`` of them). A record is a set of declared items, so it
holds at most ``longest(max_size, items)`` of them: the public range of record sizes.

**Sensitivity.** Four noisy statistics, run one after the other at the shares ``SHARES`` of ε
(sequential composition; each may be chosen from the noisy outputs before it):

1. *sizes* [sizes]: records per bin of record size (public bins ``size_bins(longest)``). A
   record is in one bin: L1 = 1.
2. *items* [items]: ``Σ_r w1(|r|)·[j ∈ r]`` for every declared item j (zeros included), in units
   of ``2^-GRID_BITS``, with ``w1(s) = ⌊2^GRID_BITS·min(1, m1/s)⌋``: one record moves its ``s``
   items by ``w1(s)`` each, ``s·w1(s) ≤ m1·2^GRID_BITS`` in L1. ``m1`` is chosen from the noisy
   sizes (``truncation``: post-processing of 1).
3. *kept sizes* [kept-sizes]: records per bin of the number of their items among the ``K``
   selected items (the ``K`` largest noisy supports of 2, post-processing): L1 = 1.
4. *pairs* [pairs]: ``Σ_r w2(k_r)·[a, b ∈ r]`` over the ``K(K−1)/2`` pairs of selected items,
   ``k_r`` the record's selected items and ``w2(k) = ⌊2^GRID_BITS·min(1, C(m2, 2)/C(k, 2))⌋``:
   L1 ≤ ``C(k, 2)·w2(k) ≤ C(m2, 2)·2^GRID_BITS``. ``m2`` is chosen from the noisy kept sizes.

Each vector gets discrete Laplace noise of its L1 bound at its share (``dpgate.noise``: exact,
integer); the shares add up to ε (``shares``). Everything after — the corrections, the
shrinkage, the records — reads only the noisy outputs and public facts.

**Accuracy.** An item's weighted count has noise of standard deviation ``√2·m1/ε_items`` (in
records); a pair's ``√2·C(m2, 2)/ε_pairs``. Both are divided by the mean weight the size model
gives the item (pair), so ``noise_sd`` is reported per support. Records longer than ``m1``
(``m2``) count less than 1; the correction assumes that a record of size s holds item j with
probability ``1 − (1 − π_j)^s`` (a pair: inclusion–exclusion of the two), which is exact when
sizes are independent of which items a record holds and biased otherwise (frequent items in
short records: over-corrected a little). So the supports have no interval: ``noise_sd``
describes the noise, not the bias. A pair's support is shrunk towards the size model's
independence prediction by ``τ²/(τ² + sd²)``, τ² the spread of the measured pairs around it
beyond the noise (Efron–Morris): pairs whose measurement is mostly noise come back near the
prediction, strong associations near their measurement.

**Proof sketch.** Steps 1–4 are the Laplace mechanism on integer vectors with the L1 bounds
above [sizes] [items] [kept-sizes] [pairs]; ``m1``, the selection, ``m2`` are functions of the
earlier noisy outputs, so adaptive sequential composition gives ``Σ shares = ε``. The per-
subject truncation to ``max_size`` items happens before (a keyed random choice per subject:
it depends on that subject's rows only). ``records`` and the tables written from them are
post-processing, drawn from the sampling stream.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from dpgate import noise
from dpgate.mechanisms.base import Synthesis, Synthesizer

#: Weights of the truncated statistics are multiples of 2^-GRID_BITS of a count.
GRID_BITS = 20
_GRID = 1 << GRID_BITS
#: Shares of ε: record sizes, item supports, sizes within the selected items, pair supports.
SHARES = (0.05, 0.45, 0.05, 0.45)
#: The selected items whose pairs are measured (the ``pair_items`` option): K(K−1)/2 pairs.
DEFAULT_PAIR_ITEMS = 32
MAX_PAIR_ITEMS = 128
#: Record-size bins grow by this ratio (1, 2, 3, 4, 5, 6-7, 8-9, 10-12, ...): few bins, each
#: with noise of scale 1/ε_sizes, whatever the longest record may be.
BIN_RATIO = 1.25
#: Records are moved towards the supports by this many proposals per record, in batches of at
#: most BATCH records, and at most MAX_PROPOSALS in all.
PROPOSALS_PER_RECORD = 24
MAX_PROPOSALS = 1 << 21
BATCH = 256
#: A batch scores every item for each of its records, and every pair of selected items: the fit
#: stops at FIT_WORK such cells (about 5 s), whatever the data.
FIT_WORK = 1 << 31
#: The size model's work: declared items × (longest record + 1) at most (``model_work``), 60 passes
#: of about 5 ns a cell (``_absent``): a few seconds. At 2^24 cells it took 30 s, and 2 minutes where
#: ``(1 − π) ** s`` took pow's slow path (π ≥ 0.5: noisy supports beyond what the sizes hold).
MODEL_CELLS = 1 << 22
#: Float copies of the record matrix are made this many cells at a time.
CHUNK_CELLS = 1 << 22
#: Records fitted at most, and record × item cells; a larger table repeats them (``records``).
FIT_RECORDS = 1 << 17
FIT_CELLS = 1 << 24
#: Rounds calibrating the first, independent draw of records to the item supports.
CALIBRATION_ROUNDS = 6


def size_bins(max_size: int) -> np.ndarray:
    """Edges of the record-size bins over 1..max_size: bin i holds sizes ``[e_i, e_{i+1})`` (public)."""
    edges = [1]
    while edges[-1] <= max_size:
        edges.append(max(edges[-1] + 1, int(edges[-1] * BIN_RATIO)))
    edges[-1] = max_size + 1
    return np.asarray(edges, dtype=np.int64)


def shares(epsilon: float, n_items: int) -> dict[str, float]:
    """The ε of each statistic; a single item has no pairs, and its items get their share."""
    s0, s1, s2, s3 = SHARES
    if n_items < 2:
        return {"sizes": epsilon * s0, "items": epsilon * (s1 + s2 + s3), "kept sizes": 0.0, "pairs": 0.0}
    return {"sizes": epsilon * s0, "items": epsilon * s1, "kept sizes": epsilon * s2, "pairs": epsilon * s3}


def model_work(n_items: int, max_size: int) -> int:
    """Cells of the size model (``_solve`` runs 60 passes over them): public, bounded before the debit."""
    return n_items * (max_size + 1)


def longest(max_size: int, n_items: int) -> int:
    """The most items a record holds: at most ``max_size`` (its rows are truncated to that many) and
    at most the declared items (a record is a set of them). Public; the size bins, the size model
    and the truncations range over 1..longest, so ``max_rows_contributed = 1000000`` over 16 items
    costs what 16 does."""
    return max(1, min(int(max_size), int(n_items)))


def check(epsilon: float, n_items: int, max_size: int, pair_items: int = DEFAULT_PAIR_ITEMS) -> None:
    """Raise ValueError where a run at these public facts could not draw its noise: the largest
    scales the truncations may take. ``measure`` checks this before any noise, and the free dry run
    runs it alone (over no records it would make the size model's work before the debit)."""
    if not (epsilon > 0 and math.isfinite(epsilon)):
        raise ValueError(f"epsilon must be positive and finite, got {epsilon}")
    if max_size < 1:
        raise ValueError("max_size must be at least 1")
    top = longest(max_size, n_items)
    eps = shares(epsilon, n_items)
    k = min(int(pair_items), n_items)
    noise.discrete_laplace_alpha(eps["sizes"], 1)
    noise.discrete_laplace_alpha(eps["items"], top << GRID_BITS)
    if k >= 2:
        noise.discrete_laplace_alpha(eps["kept sizes"], 1)
        noise.discrete_laplace_alpha(eps["pairs"], pair_count(max(2, min(k, top))) << GRID_BITS)


def pair_count(k: int) -> int:
    return k * (k - 1) // 2


# -- exact statistics (also what the neighbour harness compares) ---------------------------------
def size_counts(sizes: np.ndarray, max_size: int) -> np.ndarray:
    """Records per size bin [sizes]; sizes 0 (no item) are not records."""
    edges = size_bins(max_size)
    s = np.asarray(sizes, dtype=np.int64)
    s = s[s >= 1]
    return np.histogram(np.minimum(s, max_size), bins=edges)[0].astype(np.int64)


def item_weight(sizes: np.ndarray, m: int) -> np.ndarray:
    """``w1(s) = ⌊2^GRID_BITS·min(1, m/s)⌋`` per record [items]."""
    s = np.maximum(np.asarray(sizes, dtype=np.int64), 1)
    return np.minimum(np.int64(_GRID), (np.int64(m) << GRID_BITS) // s)


def pair_weight(kept: np.ndarray, m: int) -> np.ndarray:
    """``w2(k) = ⌊2^GRID_BITS·min(1, C(m, 2)/C(k, 2))⌋`` per record [pairs]."""
    k = np.asarray(kept, dtype=np.int64)
    c = np.maximum(k * (k - 1) // 2, 1)
    return np.minimum(np.int64(_GRID), (np.int64(pair_count(m)) << GRID_BITS) // c)


def _chunks(rows: int, width: int):
    """Slices of at most ``CHUNK_CELLS`` cells of a ``rows × width`` matrix (bounded float copies)."""
    step = max(1, CHUNK_CELLS // max(width, 1))
    for lo in range(0, rows, step):
        yield slice(lo, min(rows, lo + step))


def weighted_items(records: np.ndarray, m: int) -> np.ndarray:
    """Truncated item supports in grid units: ``Σ_r w1(|r|)·[j ∈ r]`` [items].

    Float64 sums of integers below 2^53 are exact (records × 2^GRID_BITS < 2^53)."""
    out = np.zeros(records.shape[1])
    for part in _chunks(len(records), records.shape[1]):
        x = records[part]
        out += item_weight(x.sum(axis=1), m).astype(np.float64) @ x
    return np.rint(out).astype(np.int64)


def weighted_pairs(records: np.ndarray, selected: np.ndarray, m: int) -> np.ndarray:
    """Truncated supports of the pairs of ``selected`` items, upper triangle in row order [pairs]."""
    full = np.zeros((len(selected), len(selected)))
    for part in _chunks(len(records), len(selected)):
        xf = records[part][:, selected].astype(np.float64)
        full += xf.T @ (xf * pair_weight(xf.sum(axis=1).astype(np.int64), m)[:, None])
    iu = np.triu_indices(len(selected), 1)
    return np.rint(full[iu]).astype(np.int64)


# -- the size model --------------------------------------------------------------------------------
def spread(bin_counts: np.ndarray, max_size: int) -> np.ndarray:
    """Records per size 0..max_size from noisy bin counts (clipped at 0, uniform within a bin)."""
    edges = size_bins(max_size)
    h = np.zeros(max_size + 1)
    for lo, hi, c in zip(edges[:-1], edges[1:], np.maximum(bin_counts, 0)):
        h[lo:hi] = c / (hi - lo)
    return h


#: The share of the truncated mass the size model is assumed to leave uncorrected, for the choice
#: of the truncation (``truncation``).
MODEL_BIAS = 0.2


def truncation(h: np.ndarray, epsilon: float, cells: int, mass) -> int:
    """The truncation m minimising ``noise_sd(m)² + (MODEL_BIAS·T(m)·mean support)²``: ``T(m)`` the
    share of the mass (``mass(s)`` per record of size s, nondecreasing) that truncation at m takes
    away — a record longer than m keeps ``mass(m)`` of it (``w1``, ``w2``) —, the mean support
    ``Σ h(s)·mass(s) / cells``. Post-processing of the noisy sizes ``h``; linear in ``len(h)``
    (suffix sums), where a loop over m of sums over s took ``len(h)²`` (hours at 10^6)."""
    s = np.arange(len(h), dtype=np.float64)
    per_size = mass(s)
    hm = h * per_size
    total = float(hm.sum())
    if total <= 0 or len(h) < 2:
        return 1
    m = np.arange(1, len(h))
    # Σ over s > m of h(s)·mass(s) and of h(s): suffix sums, 0 past the longest size
    above_mass = np.append(np.cumsum(hm[::-1])[::-1], 0.0)[m + 1]
    above = np.append(np.cumsum(h[::-1])[::-1], 0.0)[m + 1]
    lost = np.maximum(above_mass - per_size[m] * above, 0.0) / total
    err = (math.sqrt(2.0) * per_size[m] / epsilon) ** 2 + (MODEL_BIAS * lost * total / cells) ** 2
    return int(m[int(np.argmin(err))])  # the first of equal minima, as the loop took


#: ``log(1 − π)`` is taken at π ≤ 1 − 2^-53 (finite), and ``(1 − π)^s`` below e^-700 as e^-700: it adds
#: nothing a support can show, and no cell takes the slow path of a result that underflows.
_PI_TOP = 1.0 - 2.0**-53
_LOG_FLOOR = -700.0


def _absent(pi: np.ndarray, s: np.ndarray) -> np.ndarray:
    """``(1 − π)^s`` for every π (rows) and size s (columns): P(a record of size s lacks the item).

    ``exp(s·log(1 − π))`` floored at e^-700, about 4 ns a cell whatever the values: ``(1 − π) ** s``
    took 3 ns a cell, and about 100 where the result underflows (π ≥ 0.5 over records of thousands
    of items) — every bisection's first pass, and all 60 for an item whose noisy support is beyond
    what the sizes hold."""
    log_q = np.log1p(-np.minimum(np.asarray(pi, dtype=np.float64), _PI_TOP))
    return np.exp(np.maximum(np.multiply.outer(log_q, np.asarray(s, dtype=np.float64)), _LOG_FLOOR))


def _presence(pi: np.ndarray, s: np.ndarray) -> np.ndarray:
    """P(a record of size s holds an item) when each of its s places is the item w.p. π (π rows, s columns)."""
    return 1.0 - _absent(pi, s)


def _solve(target: np.ndarray, h: np.ndarray, w: np.ndarray) -> np.ndarray:
    """π with ``Σ_s h(s)·presence(π, s)·w(s) = target``, by bisection (increasing in π): 60 passes over
    the items × the sizes of positive weight (``MODEL_CELLS`` at most)."""
    hw = np.asarray(h, dtype=np.float64) * w
    sizes = np.flatnonzero(hw > 0)
    hw = hw[sizes]
    total = float(hw.sum())
    lo, hi = np.zeros(len(target)), np.ones(len(target))
    for _ in range(60):
        mid = (lo + hi) / 2
        val = total - _absent(mid, sizes) @ hw
        above = val > target
        hi, lo = np.where(above, mid, hi), np.where(above, lo, mid)
    return (lo + hi) / 2


def _both(pa: np.ndarray, pb: np.ndarray, s: np.ndarray) -> np.ndarray:
    """P(a record of size s holds both items), inclusion–exclusion over its s places."""
    rest = np.maximum(1.0 - pa - pb, 0.0)
    return np.maximum(1.0 - (1.0 - pa) ** s - (1.0 - pb) ** s + rest**s, 0.0)


# -- the release ---------------------------------------------------------------------------------
@dataclass
class Marginals:
    """The noisy release: sizes, item supports, pair supports, and how they were made.

    ``sizes[s]`` records of size s (noisy, spread within bins); ``items[j]`` the support of
    item j (corrected for truncation), ``item_measured`` the same before clipping at 0,
    ``item_sd`` its noise's standard deviation; ``selected`` the K items whose pairs were
    measured, ``pairs`` (a, b) index rows with ``pair_support`` (shrunk), ``pair_measured``
    and ``pair_sd``.
    """

    n_items: int
    max_size: int
    sizes: np.ndarray
    items: np.ndarray
    item_measured: np.ndarray
    item_sd: np.ndarray
    selected: np.ndarray
    pairs: np.ndarray
    pair_support: np.ndarray
    pair_measured: np.ndarray
    pair_sd: np.ndarray
    m1: int
    m2: int
    shrinkage: float
    epsilon: dict[str, float] = field(default_factory=dict)

    @property
    def records(self) -> int:
        return round(float(self.sizes.sum()))


def measure(records: np.ndarray, epsilon: float, *, rng: np.random.Generator, max_size: int,
            pair_items: int = DEFAULT_PAIR_ITEMS) -> Marginals:  # fmt: skip
    """The four noisy statistics and what post-processing makes of them (module docstring)."""
    if records.ndim != 2:
        raise ValueError("records must be a boolean matrix with one column per item")
    n_items = records.shape[1]
    check(epsilon, n_items, max_size, pair_items)
    max_size = longest(max_size, n_items)
    sizes = records.sum(axis=1)
    records, sizes = records[sizes > 0], sizes[sizes > 0]
    if (sizes > max_size).any():
        raise ValueError("a record holds more than max_size items")  # truncated before, in SQL
    eps = shares(epsilon, n_items)
    k = min(int(pair_items), n_items)
    bins = len(size_bins(max_size)) - 1
    noisy_bins = size_counts(sizes, max_size) + noise.discrete_laplace(eps["sizes"], 1, bins, rng)  # [sizes]
    h = spread(noisy_bins, max_size)
    m1 = truncation(h, eps["items"], n_items, lambda s: s)
    exact_items = weighted_items(records, m1)
    w_items = (exact_items + noise.discrete_laplace(eps["items"], m1 << GRID_BITS, n_items, rng)) / _GRID  # [items]
    weight1 = item_weight(np.arange(max_size + 1), m1) / _GRID
    pi = _solve(np.maximum(w_items, 0.0), h, weight1)
    s_all = np.arange(max_size + 1, dtype=np.float64)
    held = h[None, :] * _presence(pi, s_all)
    weighted = (held * weight1[None, :]).sum(axis=1)
    # the correction of a rare item (π → 0) where the noisy count is 0 or below
    rare = (h * s_all).sum() / max((h * s_all * weight1).sum(), 1e-12)
    factor = np.where(weighted > 1e-9, held.sum(axis=1) / np.maximum(weighted, 1e-12), rare)
    item_measured = w_items * factor
    items = np.maximum(item_measured, 0.0)
    item_sd = noise.discrete_laplace_std(eps["items"], m1 << GRID_BITS) / _GRID * factor

    if k < 2 or eps["pairs"] <= 0:
        empty = np.zeros(0)
        return Marginals(n_items, max_size, h, items, item_measured, item_sd, np.zeros(0, dtype=np.int64),
                         np.zeros((0, 2), dtype=np.int64), empty, empty, empty, m1, 0, 0.0, eps)  # fmt: skip
    order = np.lexsort((np.arange(n_items), -items))  # ties by declared order: post-processing
    selected = np.sort(order[:k])
    kept_max = min(k, max_size)
    kept = records[:, selected].sum(axis=1)
    noisy_kept = size_counts(kept, kept_max) + noise.discrete_laplace(
        eps["kept sizes"], 1, len(size_bins(kept_max)) - 1, rng)  # [kept-sizes]  # fmt: skip
    hk = spread(noisy_kept, kept_max)
    c2f = lambda s: s * (s - 1) / 2
    m2 = max(2, truncation(hk, eps["pairs"], pair_count(k), c2f))
    exact_pairs = weighted_pairs(records, selected, m2)
    n_pairs = pair_count(k)
    w_pairs = (exact_pairs + noise.discrete_laplace(eps["pairs"], pair_count(m2) << GRID_BITS, n_pairs, rng)) / _GRID  # [pairs]

    iu = np.triu_indices(k, 1)
    s_k = np.arange(kept_max + 1, dtype=np.float64)
    weight2 = pair_weight(np.arange(kept_max + 1), m2) / _GRID
    pk = _solve(items[selected], hk, np.ones(kept_max + 1))
    pa, pb = pk[iu[0]][:, None], pk[iu[1]][:, None]
    both = hk[None, :] * _both(pa, pb, s_k[None, :])
    predicted = both.sum(axis=1)  # the size model's pair supports if the two items were independent
    weighted2 = (both * weight2[None, :]).sum(axis=1)
    c2 = s_k * (s_k - 1) / 2
    rare2 = (hk * c2).sum() / max((hk * c2 * weight2).sum(), 1e-12)
    factor2 = np.where(weighted2 > 1e-9, predicted / np.maximum(weighted2, 1e-12), rare2)
    pair_measured = w_pairs * factor2
    pair_sd = noise.discrete_laplace_std(eps["pairs"], pair_count(m2) << GRID_BITS) / _GRID * factor2
    residual = pair_measured - predicted
    tau2 = max(0.0, float(np.mean(residual**2 - pair_sd**2)))
    lam = tau2 / (tau2 + pair_sd**2) if tau2 > 0 else np.zeros(n_pairs)
    upper = np.minimum(items[selected][iu[0]], items[selected][iu[1]])
    support = np.clip(predicted + lam * residual, 0.0, upper)
    pairs = np.stack([selected[iu[0]], selected[iu[1]]], axis=1)
    return Marginals(n_items, max_size, h, items, item_measured, item_sd, selected, pairs, support, pair_measured,
                     pair_sd, m1, m2, float(np.mean(lam)) if n_pairs else 0.0, eps)  # fmt: skip


# -- records fitted to the release (post-processing) ----------------------------------------------
def records(release: Marginals, *, rng: np.random.Generator, max_records: int | None = None) -> np.ndarray:
    """Synthetic records (a boolean matrix) whose item and pair supports approach the release's.

    Post-processing of ``release`` alone, drawn from ``rng`` (the sampling stream): sizes from the
    noisy size distribution, scaled so that the items' total matches; items drawn independently
    with weights calibrated to the item supports; then records are moved (one item swapped for
    another) while that lowers the supports' distance, weighted by their noise. ``max_records``
    (public: the records that paid) bounds the table. Beyond ``FIT_RECORDS`` records (or
    ``FIT_CELLS`` record × item cells), that many are fitted to the supports scaled down and then
    repeated: the fit's work stays bounded and each record still gets its share of moves.
    """
    d = release.n_items
    h = np.maximum(release.sizes, 0.0)
    n = release.records
    if max_records is not None:
        n = min(n, int(max_records))
    if n <= 0 or h.sum() <= 0 or d == 0:
        return np.zeros((0, d), dtype=bool)
    fitted = max(1, min(n, FIT_RECORDS, FIT_CELLS // d))
    scale = fitted / n
    target = release.items * scale
    sizes = rng.choice(len(h), size=fitted, p=h / h.sum())
    total = target.sum()
    if sizes.sum() > 0 and total > 0:
        sizes = np.floor(sizes * (total / sizes.sum()) + rng.random(fitted)).astype(np.int64)
    sizes = np.clip(sizes, 1, min(release.max_size, d))
    x = _fit(_independent(sizes, target, d, rng), release, scale, rng)
    if fitted == n:
        return x
    copies = np.repeat(np.arange(fitted), n // fitted)
    extra = rng.choice(fitted, size=n - len(copies), replace=False)
    return x[np.concatenate([copies, extra])]


def _independent(sizes: np.ndarray, target: np.ndarray, d: int, rng: np.random.Generator) -> np.ndarray:
    """Each record's items drawn without replacement with weights w (Efraimidis–Spirakis keys
    ``log(u)/w``), w calibrated over a few rounds so that the item counts approach ``target``."""
    n = len(sizes)
    goal = np.maximum(target, 0.0) + 0.5
    w = goal.copy()
    x = np.zeros((n, d), dtype=bool)
    for _ in range(CALIBRATION_ROUNDS):
        x = np.zeros((n, d), dtype=bool)
        for part in _chunks(n, d):
            keys = np.log(rng.random((part.stop - part.start, d))) / w
            size = sizes[part]
            for s in np.unique(size):
                rows = np.flatnonzero(size == s)
                top = np.argpartition(-keys[rows], s - 1, axis=1)[:, :s] if s < d else np.tile(np.arange(d), (len(rows), 1))
                x[part.start + rows[:, None], top] = True
        w = w * (goal / (x.sum(axis=0) + 0.5))
    return x


def _fit(x: np.ndarray, release: Marginals, scale: float, rng: np.random.Generator) -> np.ndarray:
    """Swap moves (remove a, add b in one record) that lower ``Σ|c − f|/sd_f + Σ|C − g|/sd_g``,
    the release's supports times ``scale``."""
    n, d = x.shape
    sel = release.selected
    k = len(sel)
    pos = np.full(d, -1)
    pos[sel] = np.arange(k)
    f = release.items * scale
    sd_f = max(float(np.median(release.item_sd)) * scale, 1.0)
    g = np.zeros((k, k))
    mask = np.zeros((k, k), dtype=bool)
    if k:
        a, b = pos[release.pairs[:, 0]], pos[release.pairs[:, 1]]
        g[a, b] = g[b, a] = release.pair_support * scale
        mask[a, b] = mask[b, a] = True
    sd_g = max(float(np.median(release.pair_sd)) * scale, 1.0) if k else 1.0
    c = x.sum(axis=0).astype(np.float64)
    xk = x[:, sel].astype(np.float64)
    cc = xk.T @ xk
    batch = min(BATCH, n)
    rounds = min(-(-PROPOSALS_PER_RECORD * n // batch), MAX_PROPOSALS // batch, FIT_WORK // (batch * (d + k * k)))
    rows = np.arange(batch)
    for _ in range(rounds):
        up = (np.abs(c + 1 - f) - np.abs(c - f)) / sd_f
        down = (np.abs(c - 1 - f) - np.abs(c - f)) / sd_f
        plus = np.where(mask, np.abs(cc + 1 - g) - np.abs(cc - g), 0.0) / sd_g
        minus = np.where(mask, np.abs(cc - 1 - g) - np.abs(cc - g), 0.0) / sd_g
        r = rng.choice(n, size=batch, replace=False)
        xr = x[r]
        add = np.broadcast_to(up, (batch, d)).copy()
        rem = np.broadcast_to(down, (batch, d)).copy()
        if k:
            xrk = xr[:, sel].astype(np.float64)
            add[:, sel] += xrk @ plus
            rem[:, sel] += xrk @ minus  # the diagonal of ``minus`` is 0: a with itself is no pair
        add[xr] = np.inf
        rem[~xr] = np.inf
        bb = np.argmin(add, axis=1)
        aa = np.argmin(rem, axis=1)
        # adding b after removing a: the pair (a, b) is not formed (no pairs without selected items:
        # ``plus`` is then 0 × 0, and indexing it failed every release of a one-item domain)
        cross = np.where((pos[aa] >= 0) & (pos[bb] >= 0), plus[np.maximum(pos[bb], 0), np.maximum(pos[aa], 0)],
                         0.0) if k else 0.0  # fmt: skip
        delta = add[rows, bb] + rem[rows, aa] - cross
        good = np.flatnonzero(np.isfinite(delta) & (delta < -1e-9))
        if not len(good):
            continue
        good = good[np.argsort(delta[good], kind="stable")]
        # one move per added and per removed item in a batch: moves scored on the same counts
        # must not all chase one deficit
        good = good[np.sort(np.unique(bb[good], return_index=True)[1])]
        good = good[np.sort(np.unique(aa[good], return_index=True)[1])]
        rr, ra, rb = r[good], aa[good], bb[good]
        x[rr, ra] = False
        if k:
            rest = x[rr][:, sel].astype(np.float64)  # the record after removing a, before adding b
            u = np.zeros((len(good), k))
            ka, kb = pos[ra], pos[rb]
            u[ka >= 0, ka[ka >= 0]] -= 1
            u[kb >= 0, kb[kb >= 0]] += 1
            change = u.T @ rest
            cc += change + change.T
        x[rr, rb] = True
        np.add.at(c, ra, -1)
        np.add.at(c, rb, 1)
    return x


class SetMarginals(Synthesizer):
    """The set-valued release's marginals path (``USING diffpart`` where partitions cannot survive).

    ``data`` is a records × items boolean matrix; options ``max_size`` and ``pair_items``.
    """

    NAME = "set_marginals"

    def synthesize(self, data: np.ndarray, *, epsilon, delta=0.0, rng, options, progress=None) -> Synthesis:
        out = measure(data, epsilon, rng=rng, max_size=options["max_size"],
                      pair_items=options.get("pair_items", DEFAULT_PAIR_ITEMS))  # fmt: skip
        return Synthesis(out, epsilon, {"m1": out.m1, "m2": out.m2, "shrinkage": out.shrinkage})
