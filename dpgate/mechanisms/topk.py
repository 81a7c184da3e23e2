"""Top-k frequent items: Two-Phase Selection with the privacy-free block mechanism, and baselines.

A record is one subject's set of distinct items from a public universe ``0 .. n_items - 1``;
the frequency ``f_j`` of item ``j`` is the number of records that hold it. The release is the
identifiers of ``k`` items in noisy order (no counts: fresh counts for them are a separate,
paid release, ``noisy_counts``). Methods (``METHODS``):

``tps_pfm``
    Two-Phase Selection with the privacy-free mechanism (Wang et al., Algorithms 1 and 2, with
    the corrections listed at the end).
``tps_em``
    Two-Phase Selection whose second phase draws ``k_Δ`` times with the exponential mechanism.
``em``
    The paper's k-fold exponential-mechanism baseline: ``k`` draws without replacement, each at
    ``ε/k``, over the whole universe, with true frequencies.
``laplace``
    freFirst: truncated frequencies with discrete Laplace noise, then the ``k`` largest
    (``ε/10`` for the truncation length, ``9ε/10`` for the frequencies).
``oneshot``
    One-shot Gumbel top-k (Durfee & Rogers): Gumbel noise of scale ``k/ε`` added once, then the
    ``k`` largest. Its output law is exactly that of ``em`` (Durfee & Rogers; checked in the
    tests), so it is sampled as ``em`` is: ``k`` exact exponential-mechanism draws without
    replacement. (Gumbel noise from 53-bit uniforms, the former implementation, gives items far
    below the best probability exactly 0.) It needs no record lengths, so it costs one
    aggregation, like the non-private query.

``AUTO`` (the default) is ``default_method``: a choice among them from public facts only.

When TPS wins [default]: phase 1 pays for the truncation length ``l`` (noise ``l / ε_2`` on every
item) where one-shot pays ``k / ε``; the privacy accounting is the same (pure ε, add/remove, the
monotone exponent), so this is the whole difference. TPS and freFirst beat one-shot when records
are short compared with ``k`` (the paper's operating point: k = 100..200, average record 2.5..50
items); with records as long as ``k`` or longer (baskets of ~18 items, k <= 20) one-shot wins.
Within the length methods freFirst (``laplace``, 0.9 ε on phase 1) measured best at k <= 50 and
ε >= 0.1: TPS's phase 2 gets 0.3 ε, and PFM's threshold noise (scale ``4 k_Δ / ε_3``) makes its
labels follow phase-1 order when ``k_Δ`` is large. The paper's PFM > EM ordering holds at its
point (k = 200, ε <= 0.1; tested).

**Reference:** N. Wang, Z. Wang, Y. Gu, J. Xu, Z. Wei, G. Yu, "Differentially Private Top-k
Frequent Columns Publication for High-Dimensional Data", IEEE Access 7 (2019),
DOI 10.1109/ACCESS.2019.2957762 (TPS, PFM). Truncation:
R. Day, N. Li, "Differentially private publishing of high-dimensional data using sensitivity
control" (DPSense), ASIACCS 2015. Baselines: R. Bhaskar et al., KDD 2010 (k-fold EM);
D. Durfee, R. Rogers, "Practical differentially private top-k selection with
pay-what-you-get composition", NeurIPS 2019 (one-shot Gumbel); M. Lyu, D. Su, N. Li,
"Understanding the sparse vector technique", VLDB 2017 (monotone queries). The exact
exponential-mechanism sampler: ``dpgate.mechanisms.exponential``.

**Guarantee:** ε-DP for neighbouring databases that add or remove one subject's record (all the
rows of one subject), as in the paper. The item universe and ``n_items`` are public. The shares
(``TopKRelease.shares``) add up to the requested ε. A share that turns out not to be needed is
still charged: phase 2 when the unsafe zone holds exactly ``k_Δ`` items, and the rest of PFM's
budget when it stops early.

**Sensitivity:** under add/remove, every frequency moves by 0 or 1, all in the same direction
(*monotone*); each has sensitivity 1 [sens-freq]. Phase 1 uses DPSense's fractional
truncation on a power-of-two grid: a record of length ``L`` gives each of its items
``w(L) = floor(2^GRID_BITS * min(1, l / L))`` grid units. One record therefore moves the vector
of truncated frequencies by at most ``L * w(L) <= l * 2^GRID_BITS`` in L1, an exact integer
[sens-trunc]. The truncation length is chosen over the public candidates ``1 .. n_items`` with
quality ``q(l) = -(|#{records of length <= l} - γ n| + l / ε_f)``, ``γ = ε_f / (ε_f + 3)``,
``ε_f`` the frequency share (``truncation_level``: a public function of ε). Adding a record moves the count by 0 or 1 and ``γ n`` by ``γ``, so
``q`` has sensitivity ``max(γ, 1 - γ) <= 1`` [sens-trunc-q]. ``noisy_counts`` keeps at most
``m`` of the requested items per subject (a keyed random sample), so its vector has L1
sensitivity ``min(#items, m)`` [sens-counts]. The engine computes both statistics
(``dpgate.mechanisms.pairs``: DuckDB's SQL there, Spark's in ``dpgate.backends.spark.topk``);
each requires the pairs relation to be DISTINCT on ``(__unit, __item)`` and does not re-check it.

**Accuracy:** selection returns identifiers, so there are no error bars. Per step:

- the truncation length is within ``(2/ε_1) ln(n_items / β)`` of the best quality with
  probability ``1 - β``;
- each truncated frequency gets discrete Laplace noise of scale ``l / ε_2`` (in counts), and the
  unsafe zone is ``τ̂ ± 2 l / ε_2``;
- each EM draw at ``ε'`` picks an item within ``ln(d / β) / ε'`` of the best remaining frequency
  with probability ``1 - β``;
- PFM compares each unsafe item with a noisy threshold. The noise has scale ``1/ε_c`` on the
  item and ``1/ε_e`` on the threshold. ``ε_e`` is at most ``ε_c / 3`` (about a quarter), so
  the threshold noise dominates.

``noisy_counts`` has the interval ``noise.discrete_laplace_half_width``. Truncation biases
phase 1 low for items that mostly occur in long records.

**Proof sketch:**

1. Truncation length: exponential mechanism with a quality of sensitivity 1 at share ``ε_1``
   [trunc-em] (``exponential.exponential_mechanism``: the real-valued quality is snapped to a
   grid of ``2^-30`` counts, which keeps its sensitivity at ``2^30`` grid units, and the choice is
   sampled exactly, every length with positive probability).
2. Phase 1 (TPS and ``laplace``): discrete Laplace with L1 sensitivity ``l * 2^GRID_BITS`` grid
   units at ``ε_2`` [phase1] releases the whole noisy vector. Sorting (ties broken by a random
   permutation), the zones (strict ``>`` for the frequent safe zone, ``>=`` for the unsafe
   zone) and ``k_Δ`` are post-processing [zones].
3. Phase 2, EM: ``k_Δ`` draws without replacement at ``ε_3 / k_Δ`` each, with the monotone
   exponent ``exp(ε f)`` (valid because frequencies move together) [peel], each sampled
   exactly on the integer frequencies (``exponential.peel``). ``k_Δ`` and the candidates ``B``
   are outputs of step 2, so composition gives ``ε_3``. The ``em`` baseline is the same with
   ``B`` = universe and ``k_Δ = k``. ``oneshot`` is one-shot Gumbel top-k at the same scale,
   whose output law is that of the ``k`` draws [oneshot]; it is sampled by them.
4. Phase 2, PFM: per block, AboveThreshold with a data-dependent threshold. Comparisons run in
   half-counts: ``2 f + ν >= ρ₂ + η``. Here ``ρ₂`` is the sum of the ``k_Δ``-th and ``(k_Δ+1)``-th
   largest frequencies in ``B`` [pfm-rho], and ``ν``, ``η`` are discrete Laplace of sensitivity 2.
   Let ``D1 = D2 ∪ {t}``. Every ``2 f`` moves by 0 or +2, and ``ρ₂`` by 0, 1 or 2.
   - In a block whose agreeing labels are "frequent", shifting the noisy threshold by 2 costs
     ``e^{ε_e}`` [pfm-threshold] and makes every agreeing comparison at least as likely. That
     is free, whatever the comparison's noise scale [pfm-free]. The closing comparison costs
     ``e^{ε_c}`` [pfm-close].
   - Blocks of "infrequent" labels need no shift one way and a shift the other way.
   - Both directions hold for discrete Laplace: its pmf and tails change by at most ``e^ε``
     under a shift of one sensitivity.
   - Each block's ``ε_e`` is charged when its threshold is drawn, and its closing ``ε_c`` when
     it closes. Every charge is a function of the label transcript only, and ``_BlockScan``
     never charges more than what remains, so the total is at most ``ε_3`` [pfm-budget].
   - The scan stops before a draw whose ε would not exceed the sampler's margin. This is where
     the printed algorithm draws ``Lap(1/0)`` [pfm-stop].
   - Short outputs are filled from ``B`` using only phase-1 order and the labels [fill].
5. ``noisy_counts``: discrete Laplace with L1 sensitivity ``min(#items, m)`` [counts].

Every noise draw and every exponential-mechanism draw runs at its ε minus
``noise.EPSILON_MARGIN`` (the exponential mechanism exactly, in rational arithmetic). That margin
also absorbs the float rounding of the shares and of PFM's bookkeeping (a few ulps of ε).

**Readings of the paper** (where its text is ambiguous):

- The budget names follow Algorithm 1: ``ε_1`` truncation, ``ε_2`` frequencies, ``ε_3`` phase 2,
  split 0.1 / 0.6 / 0.3.
- The zone intervals do not overlap.
- The phase-2 EM exponent is ``ε_3 f / k_Δ``; the printed "e" is ``ε_3``.
- PFM's threshold is the midpoint between the ``k_Δ``-th and ``(k_Δ+1)``-th frequencies. With the
  printed ``ρ`` (the ``k_Δ``-th frequency itself) the ``k_Δ``-th item is labelled frequent only
  half the time.
- Ties in the integer comparisons count as frequent.
- PFM stops instead of drawing ``Lap(1/0)``.
- Short outputs are filled first with the unsafe items PFM never visited, then with those it
  labelled infrequent, each in phase-1 order.
- The truncation rule, which the paper leaves to DPSense, is the private ``γ``-quantile above,
  aimed at *ranking*, not at accurate counts: a low quantile at ordinary ε (``γ`` = 17% for TPS
  at ε = 1). DPSense's count-oriented rule (the median or above) made phase-1 noise ``l / ε_2``
  larger than it needs to be; on the baskets and Zipf sets the shorter ``l`` gained TPS up to
  0.3 F1 (``tests/benchmarks/bench_topk.py --utility``). Because ``γ`` tends to 1 as ε grows,
  large ε truncates nothing.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass, field

import duckdb
import numpy as np

from dpgate import errors, noise
from dpgate.mechanisms import exponential, pairs

METHODS = ("tps_pfm", "tps_em", "em", "laplace", "oneshot")
#: The default: ``default_method`` picks one of ``METHODS`` from public facts.
AUTO = "auto"
DEFAULT_METHOD = AUTO
#: ``default_method``: a length method when the longest possible record is at most this many
#: times k (measured: ``tests/benchmarks/bench_topk.py --utility``).
LENGTH_PER_K = 4
#: Power-of-two grid of phase-1 truncated weights: 2^-GRID_BITS of a count.
GRID_BITS = 20
#: TPS split (Algorithm 1 naming): truncation ε_1, phase-1 frequencies ε_2, phase 2 ε_3.
TPS_SPLIT = (0.1, 0.6, 0.3)
#: ε_f at which the truncation length aims at the median record length (``truncation_level``).
TRUNCATION_SCALE = 3.0
#: freFirst split: truncation, frequencies.
LAPLACE_SPLIT = (0.1, 0.9)
#: Half-width δ of the unsafe zone in units of the phase-1 noise scale l/ε_2 (the paper's 2).
ZONE_WIDTH = 2.0
#: No draw is made at an ε this small (the sampler subtracts EPSILON_MARGIN).
_MIN_DRAW_EPSILON = 4 * noise.EPSILON_MARGIN
_LENGTH_METHODS = ("tps_pfm", "tps_em", "laplace")
#: Public work caps of a selection, which runs after the debit [work]: ``oneshot`` and ``em``
#: make k passes over the universe (about 12 ns an item: 10^7 items × 100 draws, ~12 s);
#: the length methods noise every item's frequency (about 4 µs and 700 bytes an item: 10^7
#: items took 50 s and 7.7 GB). The planner refuses beyond them, before the debit.
SELECTION_WORK = 1 << 29
NOISED_ITEMS = 1 << 19


def default_method(k: int, epsilon: float, n_items: int | None, max_length: int | None = None) -> str:
    """The method used when the analyst names none, from public facts only [default].

    ``k``, the selection's ``epsilon``, the universe size ``n_items`` (None before key selection)
    and ``max_length``, a public bound on a record's length (the table's ``max_rows``; None:
    the universe). Never the rows: the same inputs give the same method on every database.

    One-shot's noise has scale ``k / ε`` whatever the records; the length methods' phase 1 has
    scale about ``l / ε`` with ``l`` at most the longest record. So: ``oneshot`` unless the
    longest possible record is at most ``LENGTH_PER_K * k``; then freFirst (``laplace``), the
    best length method at every ε measured: where the rule picks it, its mean F1 beat
    tps_pfm / tps_em by 0.08 / 0.11 at ε = 0.1 and by 0.01 / 0.01 at ε = 2 (phase 2's 0.3 ε
    buys less than phase 1 loses). A length method past its work cap or its smallest ε falls
    back to ``oneshot``. Measurements (F1, ``bench_topk.py --utility``, 224 cells): see
    ``docs/queries/top-k.md``.
    """
    longest = n_items if max_length is None else max_length
    if n_items is not None:
        longest = min(longest, n_items) if longest is not None else n_items
    if longest is None or longest > LENGTH_PER_K * k:
        return "oneshot"
    method = "laplace"
    universe = n_items if n_items is not None else NOISED_ITEMS
    try:
        _validate(universe, k, epsilon, method)
    except ValueError:
        return "oneshot"
    return method if work_limit(universe, k, method) is None else "oneshot"


def resolve_method(method: str, n_items: int, k: int, epsilon: float) -> str:
    """``method``; for ``AUTO``, ``default_method`` with no length bound but the universe."""
    if method != AUTO:
        return method
    try:
        return default_method(k, epsilon, n_items)
    except (TypeError, ValueError):  # bad public inputs: _validate says why, for oneshot
        return "oneshot"


def item_cap(k: int, method: str) -> int:
    """The most items a selection of ``k`` by ``method`` runs over [work]."""
    return NOISED_ITEMS if method in _LENGTH_METHODS else max(k, SELECTION_WORK // max(k, 1))


def work_limit(n_items: int, k: int, method: str) -> str | None:
    """Why a selection of ``k`` of ``n_items`` by ``method`` would pass its work cap, or None [work]."""
    if method in _LENGTH_METHODS and n_items > NOISED_ITEMS:
        return f"{method} noises every one of {n_items:,} items; it takes at most {NOISED_ITEMS:,}"
    if method not in _LENGTH_METHODS and n_items * k > SELECTION_WORK:
        return (f"{method} draws {k:,} times over {n_items:,} items ({n_items * k:,} steps); "
                f"a selection takes at most {SELECTION_WORK:,}")  # fmt: skip
    return None


@dataclass(frozen=True)
class TopKRelease:
    """The released top-k and what was spent on it.

    Attributes:
        items: ``k`` distinct item indices, in noisy order (best first).
        method: one of ``METHODS``.
        epsilon: the total ε charged; always the requested ε.
        shares: named ε shares adding up to ``epsilon``. TPS uses ``truncation``, ``phase1`` and
            ``phase2``; ``laplace`` uses ``truncation`` and ``counts``; the EM methods use
            ``selection``.
        truncation: the privately chosen record length ``l`` (None for ``em``, ``oneshot``).
        filled: how many items PFM's fill rule supplied.
    """

    items: tuple[int, ...]
    method: str
    epsilon: float
    shares: dict[str, float]
    truncation: int | None
    filled: int


# -- exact statistics ---------------------------------------------------------------------------
@dataclass(frozen=True)
class _Stats:
    """Exact statistics of one database; never leaves this module.

    ``counts[j]`` is the frequency of item ``j``. When lengths were computed, ``(item, length, n)``
    says that ``n`` records of length ``length`` hold ``item``.
    """

    n_items: int
    counts: np.ndarray
    item: np.ndarray | None = None
    length: np.ndarray | None = None
    n: np.ndarray | None = None

    def length_histogram(self) -> np.ndarray:
        """``h[L]`` = number of records of length ``L`` (``L = 0 .. n_items``)."""
        pairs = np.zeros(self.n_items + 1, dtype=np.int64)
        np.add.at(pairs, self.length, self.n)
        lengths = np.arange(self.n_items + 1)
        hist = np.zeros(self.n_items + 1, dtype=np.int64)
        hist[1:] = pairs[1:] // lengths[1:]  # a record of length L contributes L pairs
        return hist

    def truncated(self, theta: int) -> np.ndarray:
        """Truncated frequencies in grid units: ``sum_i w(L_i)`` over the records holding each item."""
        lengths = np.arange(self.n_items + 1, dtype=np.int64)
        lengths[0] = 1
        w = np.minimum(np.int64(1) << GRID_BITS, (np.int64(theta) << GRID_BITS) // lengths)  # [sens-trunc]
        out = np.zeros(self.n_items, dtype=np.int64)
        np.add.at(out, self.item, self.n * w[self.length])
        return out


def _stats_from(source: pairs.PairStatistics, n_items: int, lengths: bool) -> _Stats:
    """Per-item frequencies, and with ``lengths`` the (item, length) table, from the engine [sens-freq]."""
    item, length, n = source.frequencies(int(n_items), lengths)
    counts = np.zeros(n_items, dtype=np.int64)
    np.add.at(counts, item, n)  # [sens-freq] one per distinct (unit, item) row
    if not lengths:
        return _Stats(n_items, counts)
    return _Stats(n_items, counts, item, length, n)


def _stats_from_sql(
    con: duckdb.DuckDBPyConnection, pairs_sql: str, params: dict | None, n_items: int, lengths: bool
) -> _Stats:
    """``_stats_from`` a DuckDB pairs query (``pairs.SQLPairs``)."""
    return _stats_from(pairs.SQLPairs(con, pairs_sql, params), n_items, lengths)


def _stats_from_records(records, n_items: int) -> _Stats:
    """The same statistics as ``_stats_from_sql`` from in-memory records (deduplicated, in range)."""
    if hasattr(records, "indptr") and hasattr(records, "indices"):
        indptr, indices = np.asarray(records.indptr), np.asarray(records.indices)
    else:
        arrays = [np.asarray(r, dtype=np.int64).ravel() for r in records]
        indptr = np.zeros(len(arrays) + 1, dtype=np.int64)
        indptr[1:] = np.cumsum([a.size for a in arrays])
        indices = np.concatenate(arrays) if arrays else np.zeros(0, dtype=np.int64)
    indices = indices.astype(np.int64)
    rec = np.repeat(np.arange(len(indptr) - 1, dtype=np.int64), np.diff(indptr))
    keep = (indices >= 0) & (indices < n_items)
    key = np.unique(rec[keep] * np.int64(n_items) + indices[keep])  # distinct (record, item)
    rec, item = key // n_items, key % n_items
    length = np.bincount(rec, minlength=len(indptr) - 1)[rec] if rec.size else rec
    groups, n = np.unique(item * np.int64(n_items + 1) + length, return_counts=True)
    g_item, g_len = groups // (n_items + 1), groups % (n_items + 1)
    counts = np.bincount(item, minlength=n_items).astype(np.int64)
    return _Stats(n_items, counts, g_item.astype(np.int64), g_len.astype(np.int64), n.astype(np.int64))


# -- building blocks ----------------------------------------------------------------------------
def _validate(n_items: int, k: int, epsilon: float, method: str) -> None:
    """Checks on public inputs only, before any data is read."""
    if method not in METHODS:
        raise ValueError(f"unknown top-k method {method!r}; expected one of {', '.join(METHODS)}")
    if not isinstance(n_items, (int, np.integer)) or n_items < 1:
        raise ValueError(f"n_items must be a positive integer, got {n_items!r}")
    if not isinstance(k, (int, np.integer)) or isinstance(k, bool):
        raise ValueError(f"k must be an integer, got {k!r}")
    if k < 1 or k > n_items:
        raise ValueError(f"k must be between 1 and the universe size {n_items}, got k={k}")
    if not (isinstance(epsilon, numbers.Real) and math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"epsilon must be positive and finite, got {epsilon!r}")
    if method in ("em", "oneshot"):
        smallest = epsilon / k
    elif method == "laplace":
        smallest = epsilon * min(LAPLACE_SPLIT)
    else:
        smallest = epsilon * min(TPS_SPLIT[0], TPS_SPLIT[2] / (4 * k))
    if smallest <= 10 * _MIN_DRAW_EPSILON:
        raise ValueError(f"epsilon={epsilon} is too small for {method} with k={k}: a step would get ε={smallest:.3g}")
    if method in _LENGTH_METHODS:
        frequency_share = epsilon * (LAPLACE_SPLIT[1] if method == "laplace" else TPS_SPLIT[1])
        if frequency_share / (n_items * 2.0**GRID_BITS) < 2.0**-50:
            raise ValueError(
                f"epsilon={epsilon} is too small for {method} over {n_items} items: "
                "the phase-1 noise scale would exceed what the sampler supports"
            )


def check_public_inputs(n_items: int, k: int, epsilon: float, method: str) -> None:
    """Raise ValueError when ``top_k`` would refuse these public inputs (the planner asks first)."""
    _validate(n_items, k, epsilon, method)


def planned_shares(method: str, epsilon: float) -> dict[str, float]:
    """The named ε shares a method spends (``TopKRelease.shares``), for EXPLAIN."""
    return _shares(method, epsilon)


def _shares(method: str, epsilon: float) -> dict[str, float]:
    if method in ("tps_pfm", "tps_em"):
        e1, e2 = epsilon * TPS_SPLIT[0], epsilon * TPS_SPLIT[1]
        return {"truncation": e1, "phase1": e2, "phase2": epsilon - e1 - e2}
    if method == "laplace":
        e1 = epsilon * LAPLACE_SPLIT[0]
        return {"truncation": e1, "counts": epsilon - e1}
    return {"selection": float(epsilon)}


def truncation_level(epsilon_counts: float) -> float:
    """The quantile level ``γ = ε_f / (ε_f + TRUNCATION_SCALE)`` of record lengths that ``l`` aims at.

    Phase 1 only ranks, and for ranking a short ``l`` is better: truncation scales every
    item's signal by about ``E[min(L, l)] / E[L]`` while the noise grows like ``l``, so the
    signal-to-noise ratio falls as ``l`` grows whenever items do not depend on record lengths.
    What a short ``l`` costs is distortion: items held mostly in long records are weighted
    down, which only matters once the noise is small. So ``γ`` is 17% at ``ε_f = 0.6`` (TPS at
    ε = 1), 67% at 6, and tends to 1 (no truncation) as ε grows: at large ε the truncated
    frequencies are the true ones. The former ``1 - 1/(2 (1 + ε_f))``, DPSense's aim at
    accurate *counts*, truncated at the median or above. Scales 1, 3 and 10 were measured on
    224 cells of ``bench_topk.py --utility`` (20 runs each): against the former rule, 3 raised
    the mean F1 of tps_pfm / tps_em / laplace from 0.821 / 0.835 / 0.855 to 0.851 / 0.860 /
    0.885, and lowered it beyond 2 s.e. in 4 / 4 / 8 cells (by at most 0.05, at ε = 2).
    Any ``γ`` in ``[0, 1]`` keeps the quality's sensitivity at most 1 [sens-trunc-q].
    """
    return epsilon_counts / (epsilon_counts + TRUNCATION_SCALE)


def truncation_quality(hist: np.ndarray, epsilon_counts: float) -> np.ndarray:
    """``q(l)`` for the candidates ``l = 1 .. len(hist) - 1`` [sens-trunc-q].

    ``q(l) = -(|#{records of length <= l} - γ n| + l / ε_f)``: the first term is the usual
    quantile score (sensitivity ``max(γ, 1 - γ) <= 1`` under add/remove), the second the mean
    absolute phase-1 noise of one item, which is public and breaks ties towards short ``l``
    (all ``l`` at or above the longest record have the same first term).
    """
    h = np.asarray(hist, dtype=np.float64)
    below = np.cumsum(h)[1:]
    n = float(h.sum())
    theta = np.arange(1, h.size, dtype=np.float64)
    return -(np.abs(below - truncation_level(epsilon_counts) * n) + theta / epsilon_counts)  # [sens-trunc-q]


def _choose_truncation(stats: _Stats, epsilon_theta: float, epsilon_counts: float, rng) -> int:
    q = truncation_quality(stats.length_histogram(), epsilon_counts)
    return 1 + exponential.exponential_mechanism(q, epsilon_theta, 1.0, rng=rng)  # [trunc-em]


def _noisy_order(values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Indices by decreasing value; ties in a uniformly random order (post-processing)."""
    perm = rng.permutation(values.size)
    return perm[np.argsort(-values[perm], kind="stable")]


def _phase1(stats: _Stats, theta: int, epsilon: float, rng) -> np.ndarray:
    """Noisy truncated frequencies in grid units [phase1]."""
    sensitivity = theta << GRID_BITS
    return stats.truncated(theta) + noise.discrete_laplace(epsilon, sensitivity, stats.n_items, rng)  # [phase1]


def _zones(stats: _Stats, theta: int, epsilon: float, k: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """TPS phase 1: the frequent safe zone ``R1`` and the unsafe zone ``B``, in noisy order.

    Frequent safe zone: noisy value ``> τ̂ + δ``; unsafe zone: ``[τ̂ - δ, τ̂ + δ]`` (the printed
    intervals overlap at their ends); ``τ̂`` is the k-th largest noisy value and
    ``δ = ZONE_WIDTH * l / ε_2`` (in grid units) [zones].
    """
    noisy = _phase1(stats, theta, epsilon, rng)
    order = _noisy_order(noisy, rng)
    sorted_noisy = noisy[order].astype(np.float64)
    tau = sorted_noisy[k - 1]
    delta = ZONE_WIDTH * float(theta << GRID_BITS) / epsilon
    n_r1 = int(np.count_nonzero(sorted_noisy > tau + delta))  # [zones] post-processing from here on
    n_zone = int(np.count_nonzero(sorted_noisy >= tau - delta))
    return order[:n_r1], order[n_r1:n_zone]


def _peel(scores: np.ndarray, m: int, epsilon: float, rng) -> list[int]:
    """``m`` exponential-mechanism draws without replacement at ``epsilon / m`` each, with the
    monotone exponent ``exp(ε f)``, sampled exactly [peel]."""
    return exponential.peel(np.asarray(scores, dtype=np.int64), m, epsilon / m, 1.0, rng=rng, monotonic=True)


def _oneshot(scores: np.ndarray, m: int, epsilon: float, rng) -> list[int]:
    """One-shot Gumbel top-m at the per-draw scale of ``_peel``: its output law is that of
    ``_peel`` (Durfee & Rogers), so it is sampled by ``_peel``'s exact draws [oneshot].

    Adding double-precision Gumbel noise would give items more than about 40 / (ε/m) below the
    best probability exactly 0.
    """
    return _peel(scores, m, epsilon, rng)


@dataclass
class _BlockScan:
    """PFM's budget bookkeeping, a function of the label transcript only [pfm-budget].

    ``open_block`` charges a fresh threshold's ``ε_e = remaining / (4 m)``; ``comparison_epsilon``
    is ``remaining / m`` (``m`` = frequent items still missing, which bounds the blocks left);
    ``record`` charges that ε only when the label closes a block.
    """

    k_delta: int
    epsilon: float
    spent: float = 0.0
    found: int = 0
    flag: int = 0
    thresholds: int = 0
    closed: int = 0
    done: bool = False
    charges: list[float] = field(default_factory=list)

    @property
    def remaining(self) -> float:
        return self.epsilon - self.spent

    def _charge(self, eps: float) -> None:
        # every ε charged is at most what remains [pfm-budget]; the clamp only absorbs float rounding
        eps = min(eps, max(self.remaining, 0.0))
        self.spent += eps
        self.charges.append(eps)

    def _charge_close(self, eps_c: float) -> None:
        self._charge(eps_c)  # [pfm-close]

    def open_block(self) -> float | None:
        eps_e = self.remaining / (4 * (self.k_delta - self.found))
        if eps_e <= _MIN_DRAW_EPSILON:  # [pfm-stop]
            self.done = True
            return None
        self._charge(eps_e)
        self.thresholds += 1
        self.flag = 0
        return eps_e

    def comparison_epsilon(self) -> float | None:
        eps_c = self.remaining / (self.k_delta - self.found)
        if eps_c <= _MIN_DRAW_EPSILON:  # [pfm-stop]
            self.done = True
            return None
        return eps_c

    def record(self, frequent: bool, eps_c: float) -> bool:
        """Account for one label; True when it closed a block and the scan goes on."""
        label = 1 if frequent else -1
        if frequent:
            self.found += 1
        closes = self.flag != 0 and label != self.flag
        if self.flag == 0:
            self.flag = label
        if closes:
            self._charge_close(eps_c)
            self.closed += 1
            self.flag = 0
        if self.found >= self.k_delta:
            self.done = True
        return closes and not self.done


def _pfm(freqs: np.ndarray, k_delta: int, epsilon: float, rng) -> tuple[list[bool], _BlockScan]:
    """GetExtraColumns_PFM over ``B`` (true frequencies in phase-1 order): the visited labels.

    Comparisons run in half-count units: ``2 f + ν >= ρ₂ + η`` with ``ρ₂`` the sum of the
    ``k_Δ``-th and ``(k_Δ+1)``-th largest frequencies in ``B`` (twice the midpoint threshold) and
    noise of sensitivity 2, so the noise scale in counts is ``1/ε`` as in the paper.
    """
    top = np.sort(freqs)[::-1]
    rho2 = int(top[k_delta - 1]) + int(top[k_delta])  # [pfm-rho]
    doubled = 2 * freqs.astype(np.int64)
    scan = _BlockScan(k_delta, epsilon)
    labels: list[bool] = []
    eps_e = scan.open_block()
    if eps_e is None:
        return labels, scan
    rho_hat = rho2 + int(noise.discrete_laplace(eps_e, 2, 1, rng)[0])  # [pfm-threshold]
    buf, buf_eps, buf_pos = np.zeros(0, dtype=np.int64), None, 0
    for pos in range(freqs.size):
        if scan.done:
            break
        eps_c = scan.comparison_epsilon()
        if eps_c is None:
            break
        if eps_c != buf_eps or buf_pos >= buf.size:
            # noise for the next columns at this ε_c (it stays the same along a run of
            # infrequent labels); unused draws are discarded
            buf = noise.discrete_laplace(eps_c, 2, min(freqs.size - pos, 256), rng)
            buf_eps, buf_pos = eps_c, 0
        frequent = bool(doubled[pos] + buf[buf_pos] >= rho_hat)  # [pfm-free]
        buf_pos += 1
        labels.append(frequent)
        if scan.record(frequent, eps_c):
            eps_e = scan.open_block()
            if eps_e is None:
                break
            rho_hat = rho2 + int(noise.discrete_laplace(eps_e, 2, 1, rng)[0])  # [pfm-threshold]
    return labels, scan


@dataclass
class _Trace:
    """Intermediate DP outputs, for tests and diagnostics (never shown to analysts)."""

    theta: int | None = None
    r1: list[int] = field(default_factory=list)
    unsafe: list[int] = field(default_factory=list)
    k_delta: int = 0
    labels: list[bool] = field(default_factory=list)
    scan: _BlockScan | None = None


def _select(stats: _Stats, k: int, epsilon: float, method: str, rng) -> tuple[TopKRelease, _Trace]:
    shares = _shares(method, epsilon)
    trace = _Trace()
    counts = stats.counts
    if method in ("em", "oneshot"):
        pick = _peel if method == "em" else _oneshot
        items = pick(counts, k, shares["selection"], rng)
        return TopKRelease(tuple(items), method, float(epsilon), shares, None, 0), trace

    frequency_share = shares["counts"] if method == "laplace" else shares["phase1"]
    theta = _choose_truncation(stats, shares["truncation"], frequency_share, rng)
    trace.theta = theta
    if method == "laplace":
        order = _noisy_order(_phase1(stats, theta, frequency_share, rng), rng)
        return TopKRelease(tuple(int(j) for j in order[:k]), method, float(epsilon), shares, theta, 0), trace

    r1, unsafe = _zones(stats, theta, frequency_share, k, rng)
    k_delta = k - r1.size
    if not (1 <= k_delta <= unsafe.size):
        raise errors.InternalError(f"TPS zones are inconsistent (k={k}, |R1|={r1.size}, |B|={unsafe.size})")
    trace.r1, trace.unsafe, trace.k_delta = [int(j) for j in r1], [int(j) for j in unsafe], k_delta

    filled = 0
    if unsafe.size == k_delta:
        chosen = list(unsafe)  # nothing to decide; ε_3 is charged anyway
    elif method == "tps_em":
        chosen = [unsafe[j] for j in _peel(counts[unsafe], k_delta, shares["phase2"], rng)]
    else:
        labels, scan = _pfm(counts[unsafe], k_delta, shares["phase2"], rng)
        trace.labels, trace.scan = labels, scan
        chosen = [unsafe[i] for i, lab in enumerate(labels) if lab]
        if len(chosen) < k_delta:  # [fill]
            rejected = [unsafe[i] for i, lab in enumerate(labels) if not lab]
            unvisited = list(unsafe[len(labels) :])
            extra = (unvisited + rejected)[: k_delta - len(chosen)]
            filled = len(extra)
            chosen += extra
    items = tuple(int(j) for j in (*r1, *chosen))
    return TopKRelease(items, method, float(epsilon), shares, theta, filled), trace


# -- public API ---------------------------------------------------------------------------------
def top_k(
    con: duckdb.DuckDBPyConnection,
    pairs_sql: str,
    params: dict | None,
    n_items: int,
    k: int,
    epsilon: float,
    method: str = DEFAULT_METHOD,
    *,
    rng: np.random.Generator,
) -> TopKRelease:
    """The ``k`` most frequent items of the public universe ``0 .. n_items - 1``, ε-DP.

    Args:
        con: a DuckDB connection that can run ``pairs_sql``.
        pairs_sql: a SELECT producing DISTINCT ``(__unit, __item)`` rows, ``__item`` an integer;
            rows with a NULL unit or an item outside ``[0, n_items)`` are ignored.
        params: its named parameters (``$name``), or None.
        n_items: the size of the public universe.
        k: how many items to release, ``1 <= k <= n_items``.
        epsilon: the total ε, split as ``TopKRelease.shares`` says.
        method: one of ``METHODS``, or ``AUTO`` (``default_method`` with no length bound but the universe).
        rng: the generator of this release (``noise.fresh``).

    One DuckDB query: per-item frequencies, plus for the truncating methods the table of how
    many records of each length hold each item.

    >>> import duckdb, numpy as np
    >>> con = duckdb.connect()
    >>> _ = con.execute("CREATE TABLE b AS SELECT i // 3 AS u, (i % 3) * (i // 300) AS it FROM range(900) t(i)")
    >>> r = top_k(con, "SELECT DISTINCT u AS __unit, it AS __item FROM b", None, 5, 1, 1.0,
    ...           rng=np.random.default_rng(0))
    >>> r.items, r.shares
    ((0,), {'selection': 1.0})
    """
    return select_top_k(pairs.SQLPairs(con, pairs_sql, params), n_items, k, epsilon, method, rng=rng)


def select_top_k(
    source: pairs.PairStatistics, n_items: int, k: int, epsilon: float, method: str = DEFAULT_METHOD, *,
    rng: np.random.Generator,
) -> TopKRelease:
    """``top_k`` over the exact statistics of any engine's pairs relation (``pairs.PairStatistics``)."""
    return _top_k_stats(source, n_items, k, epsilon, method, rng)[0]


def _top_k_stats(source, n_items, k, epsilon, method, rng) -> tuple[TopKRelease, _Stats]:
    """``select_top_k``, also returning the exact statistics (for the counts; never released)."""
    method = resolve_method(method, n_items, k, epsilon)
    _validate(n_items, k, epsilon, method)
    stats = _stats_from(source, int(n_items), method in _LENGTH_METHODS)
    return _select(stats, int(k), float(epsilon), method, rng)[0], stats


def top_k_with_counts(
    con: duckdb.DuckDBPyConnection,
    pairs_sql: str,
    params: dict | None,
    n_items: int,
    k: int,
    epsilon: float,
    epsilon_counts: float,
    method: str = DEFAULT_METHOD,
    *,
    rng: np.random.Generator,
    max_items_per_subject: int,
) -> tuple[TopKRelease, list[int]]:
    """``top_k`` at ``epsilon``, then fresh ε-DP counts of the chosen items at ``epsilon_counts``.

    The counts are those of ``noisy_counts``. When a subject may keep every chosen item
    (``max_items_per_subject >= k``) they come from the frequencies the selection's query
    already computed, without a second pass: the same exact values, fresh noise [counts].
    """
    source = pairs.SQLPairs(con, pairs_sql, params)
    return select_top_k_with_counts(source, n_items, k, epsilon, epsilon_counts, method, rng=rng,
                                    max_items_per_subject=max_items_per_subject)  # fmt: skip


def select_top_k_with_counts(
    source: pairs.PairStatistics, n_items: int, k: int, epsilon: float, epsilon_counts: float,
    method: str = DEFAULT_METHOD, *, rng: np.random.Generator, max_items_per_subject: int,
) -> tuple[TopKRelease, list[int]]:
    """``top_k_with_counts`` over any engine's pairs relation (``pairs.PairStatistics``)."""
    release, stats = _top_k_stats(source, n_items, k, epsilon, method, rng)
    items = list(release.items)
    if int(max_items_per_subject) < len(items):
        return release, counts_of(source, items, epsilon_counts, rng=rng, max_items_per_subject=max_items_per_subject)
    if not (math.isfinite(epsilon_counts) and epsilon_counts > 10 * _MIN_DRAW_EPSILON):
        raise ValueError(f"epsilon_counts must be positive and finite, got {epsilon_counts!r}")
    z = noise.discrete_laplace(epsilon_counts, len(items), len(items), rng)  # [counts] sensitivity min(k, m) = k
    return release, [int(stats.counts[i]) + int(zi) for i, zi in zip(items, z)]


def top_k_from_records(
    records, n_items: int, k: int, epsilon: float, method: str = DEFAULT_METHOD, *, rng: np.random.Generator
) -> TopKRelease:
    """``top_k`` on in-memory records: a list of item arrays, or a CSR-like object with ``indptr``
    and ``indices`` (e.g. a scipy CSR matrix's arrays).

    Items are deduplicated within a record and items outside ``[0, n_items)`` are dropped, as in
    SQL. The mechanism code is shared with ``top_k``; with the same generator state both return
    the same release.

    >>> import numpy as np
    >>> recs = [np.array([0, 1]), np.array([1, 2]), np.array([1])]
    >>> top_k_from_records(recs, 3, 1, 50.0, "tps_pfm", rng=np.random.default_rng(1)).items
    (1,)
    """
    method = resolve_method(method, n_items, k, epsilon)
    _validate(n_items, k, epsilon, method)
    return _select(_stats_from_records(records, int(n_items)), int(k), float(epsilon), method, rng)[0]


def noisy_counts(
    con: duckdb.DuckDBPyConnection,
    pairs_sql: str,
    params: dict | None,
    items: Sequence[int],
    epsilon: float,
    *,
    rng: np.random.Generator,
    max_items_per_subject: int,
) -> list[int]:
    """Fresh ε-DP counts of ``items`` (aligned with them; may be negative, clamp as you like).

    Each subject keeps at most ``max_items_per_subject`` of the requested items, a uniform
    sample ranked by ``hash(hash(unit, item) XOR salt)`` with a 62-bit salt from ``rng``
    [sens-counts]. (``hash(unit, item, salt)`` would not do: DuckDB combines the salt's hash
    last with a XOR, which leaves the order of a subject's items far from uniform.) The noise
    is discrete Laplace with sensitivity ``min(len(items), max_items_per_subject)`` [counts].
    """
    return counts_of(pairs.SQLPairs(con, pairs_sql, params), items, epsilon, rng=rng,
                     max_items_per_subject=max_items_per_subject)  # fmt: skip


def counts_of(
    source: pairs.PairStatistics, items: Sequence[int], epsilon: float, *, rng: np.random.Generator,
    max_items_per_subject: int,
) -> list[int]:
    """``noisy_counts`` over any engine's pairs relation (``pairs.PairStatistics``)."""
    item_list = [int(i) for i in items]
    if not item_list:
        raise ValueError("noisy_counts needs at least one item")
    if len(set(item_list)) != len(item_list):
        raise ValueError("noisy_counts: items must be distinct")
    m = int(max_items_per_subject)
    if m < 1:
        raise ValueError(f"max_items_per_subject must be >= 1, got {max_items_per_subject!r}")
    if not (math.isfinite(epsilon) and epsilon > 10 * _MIN_DRAW_EPSILON):
        raise ValueError(f"epsilon must be positive and finite, got {epsilon!r}")
    sensitivity = min(len(item_list), m)
    salt = int(rng.integers(0, 2**62))
    exact = source.sampled_frequencies(item_list, m, salt)  # [sens-counts]
    z = noise.discrete_laplace(epsilon, sensitivity, len(item_list), rng)  # [counts]
    return [exact.get(i, 0) + int(zi) for i, zi in zip(item_list, z)]


def f1_score(items: Sequence[int], counts: np.ndarray, k: int) -> float:
    """F1 of ``items`` against the true top-k, counting any tie-consistent top-k as correct.

    Items above the k-th largest count are hits; items equal to it are hits up to the number
    of top-k places the tie fills.
    """
    counts = np.asarray(counts)
    kth = np.sort(counts)[::-1][k - 1]
    above = int(np.count_nonzero(counts > kth))
    chosen = np.asarray(list(items), dtype=np.int64)
    if chosen.size == 0:
        return 0.0
    hits = int(np.count_nonzero(counts[chosen] > kth)) + min(int(np.count_nonzero(counts[chosen] == kth)), k - above)
    precision, recall = hits / chosen.size, hits / k
    return 0.0 if hits == 0 else 2 * precision * recall / (precision + recall)
