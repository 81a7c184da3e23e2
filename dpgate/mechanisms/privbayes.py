"""PrivBayes: a differentially private Bayesian network, sampled into a synthetic table.

This is the core of the algorithm on integer-coded tables: attribute ``j`` takes codes
``0 .. sizes[j] - 1``, rows are tuples. Reading tables, discretising numeric columns, the
ledger and the release registry live elsewhere; this module only needs the codes, the
public domain sizes, ε and a generator.

**Reference:** Jun Zhang, "Algorithms for Synthetic Data Release under Differential
Privacy", PhD thesis, Nanyang Technological University, 2016, chapter 3 (PrivBayes; also
Zhang, Cormode, Procopiuc, Srivastava, Xiao, SIGMOD 2014, DOI 10.1145/2588555.2588573, and
ACM TODS 42(4), 2017, DOI 10.1145/3134428).

**Guarantee:** ε-DP for neighbouring tables that differ by adding or removing one tuple (the
gateway hands over at most one row per subject, so this is dpgate's "all rows of one
subject"). The number of rows ``n`` is *not* public: it is released with noise [rows] or
supplied by the caller as an already paid-for noisy count (``noisy_rows``). The model
(network and noisy conditionals) is the DP output; sampling is post-processing.

The budget ``ε`` is split [split] into ``ε_rows = 0.02 ε`` (only when ``noisy_rows`` is not
supplied), ``ε_network = β (ε - ε_rows)`` shared evenly by the ``d - 1`` exponential-mechanism
steps [em], and ``ε_conditionals = (1 - β)(ε - ε_rows)`` shared evenly by the ``m`` noisy
marginals [noise] (``m = d`` for Algorithm 3.3, ``d - k`` for Algorithm 3.1). The thesis fixes
``β = 1/2``; the default here is 0.3 (the TODS version's parameterisation). When no attribute
can have a parent (``k = 0``, or no pair passes θ-usefulness) the network order is irrelevant
and the whole ``ε - ε_rows`` goes to the marginals (a pitfall of the thesis's text). ``model.charges``
lists every step with its ε; they add up to ``ε``.

**Sensitivity:** the thesis proves all its constants for *substitution* neighbours with a
public ``n``: Pr[X, Π] moves by 2/n, S(I) by Lemma 3.1, S(F) = 1/n, S(R) ≤ 3/n
+ 2/n². dpgate's neighbours add or remove a tuple, and ``n`` is private, so every statistic
here is in *count units* (``n`` times the thesis's probability-unit quantity), where the
add/remove sensitivity needs no ``n``:

- marginal counts of (X, Π) over the full public domain: adding a tuple raises exactly one
  cell by 1, so the L1 sensitivity is 1 [sens-counts] (the thesis's 2/n is substitution).
- ``n·R(X, Π) = ½ Σ |c[x,π] - a[x] b[π] / n|`` (``a``, ``b`` the marginal counts):
  sensitivity **2** [sens-R]. Add a tuple at cell (x₀, π₀); write ``P = a/n``, ``Q = b/n``,
  ``p = P[x₀]``, ``q = Q[π₀]``. Cell by cell, ``c - a b / n`` changes by ``n(1-p)(1-q)/(n+1)``
  at (x₀, π₀), by ``n P[x](1-q)/(n+1)`` elsewhere in column π₀, by ``n Q[π](1-p)/(n+1)``
  elsewhere in row x₀ and by ``-n P[x] Q[π]/(n+1)`` in every other cell; each of the four
  groups has absolute sum ``n(1-p)(1-q)/(n+1)``. By the triangle inequality ``n·R`` moves by
  at most half the total, ``2n(1-p)(1-q)/(n+1) < 2`` (removal is the same pair read
  backwards). A substitution is a removal plus an addition (≤ 4 here; the thesis proves
  3 + 2/n directly); the test searches all neighbours of small tables.
- ``n·F`` (binary X and parents): for a fixed assignment of the 2^k columns, each term
  ``(n/2 - a)₊``, ``(n/2 - b)₊`` moves by at most ½ when ``n`` grows by one and one count by
  at most one, so the minimum moves by at most **1** [sens-F] (the thesis's S(F) = 1/n).
- ``n·I`` (bits): ``n·I = Σ f(c) + f(n) - Σ f(a) - Σ f(b)`` with ``f(t) = t log₂ t``; adding a
  tuple changes it by ``g(c) + g(n) - g(a) - g(b)`` with ``g(t) = f(t+1) - f(t)`` increasing and
  ``c ≤ a, b ≤ n``, hence by at most ``g(n) = log₂(n+1) + n log₂(1 + 1/n)`` — unbounded in
  ``n`` [sens-MI]. Score ``"MI"`` therefore needs a public upper bound ``max_rows`` on ``n``
  (e.g. the subject roster) and uses ``g(max_rows - 1)``; it exists for ablation only, as in
  the thesis.

Network candidates depend only on public facts (sizes, ε, θ, β, the encoding), on earlier DP
outputs (the attributes already placed, the noisy row count) and on fresh randomness: the
first attribute is uniform [first], θ-usefulness uses the noisy count, and oversized
candidate sets are cut to ``MAX_CANDIDATES`` by a random subset drawn without looking at
the data [cap], so Ω never depends on the data [candidates]. [work] Scoring a candidate reads
every row, so the search runs after the debit for about ``(d - 1) · candidates · rows ·
(2 + parents)`` steps (40 attributes, 20,000 rows at ε = 10^6: 2,000 candidates of 5 parents a
step, 117 s); given a public bound on the rows (the gateway's roster × ``max_rows``), the cap is
lowered so that this stays below ``PRIVBAYES_WORK``: a smaller random subset, chosen from public
numbers, so [candidates] still holds.

**Accuracy:** every noisy marginal cell carries discrete Laplace noise with
``P(z) ∝ exp(-ε_i |z|)``, ``ε_i = ε_conditionals / m``, i.e. standard deviation about
``√2 m / ε_conditionals`` tuples; θ-usefulness (Definition 3.3, with the noise actually
added) keeps each marginal to at most ``n̂ ε_conditionals / (m θ)`` cells, so the average
cell holds at least θ times the noise scale. There are no per-value error bars: the error
of a marginal of the synthetic table combines noise, the network's approximation and
sampling, and is measured empirically (``marginal_tvd``; tests/benchmarks/bench_privbayes.py:
on Adult at ε = 1 the average 2-way TVD is about 0.048, against 0.080 for independent
columns).

**Proof sketch:** [rows] is the discrete Laplace mechanism on a count (sensitivity 1) at
``ε_rows``. Network learning runs ``d - 1`` exponential mechanisms [em], each on a candidate
set fixed by public facts and earlier outputs [candidates] with a count-unit score of
add/remove sensitivity ``Δ`` ([sens-R], [sens-F], [sens-MI]), at ``ε_network / (d - 1)``
each; ``exponential.exponential_mechanism`` samples ``exp(ε u / (2Δ))`` exactly (every
candidate with positive probability, rational arithmetic, see [float] for the scores). Each
noisy marginal is a full-domain count vector [full-domain] (sensitivity 1 [sens-counts])
plus exact discrete Laplace noise at ``ε_conditionals / m`` [noise]. By sequential
composition the model is ``ε_rows + ε_network + ε_conditionals = ε``-DP [split]. Everything
after that reads only DP outputs [post]: the row estimate (inverse-variance mean of the noisy
count and the noisy marginals' totals), Norm-Sub (non-negative cells summing to that
estimate), conditioning, deriving the first k conditionals from the (k+1)-th noisy marginal
(Algorithm 3.1), and sampling.

Floating point [float]: scores enter the exponential mechanism as doubles. ``n·R`` is
computed from integers and rounded once, so its computed change is at most
``2 - 2/(n+1) + 2^-52 n ≤ 2 + 2^-20`` for ``n ≤ 2^32``, the Δ used; ``n·F`` is exact;
``n·I`` (logarithms) uses ``g(max_rows - 1)`` inflated by ``2^-10`` relative. The exponential
mechanism snaps the doubles down to a grid of ``2^(floor(log2 Δ) - 30)`` and runs on the
integer grid scores with sensitivity ``ceil(Δ / grid)`` grid units, which bounds how far a
snapped score can move when the double moves by ``Δ`` (for R: ``2^30 + 2^9`` units of
``2^-29``); the choice is then exact at ``ε_network / (d - 1)`` minus ``noise.EPSILON_MARGIN``
(``dpgate.mechanisms.exponential``).

**Readings of the thesis** (where the text has a problem or is open):

- Neighbours and units: add/remove in count units, as above ("count
  units"), with ``n·R`` at sensitivity 2 (derived here; a triangle-inequality bound gives 3).
- θ-usefulness is Definition 3.3 applied to the noise actually added: Lemma 3.3 becomes
  ``n̂ ε₂ / ((d-k) 2^(k+1)) ≥ θ`` and Algorithm 3.4's cell budget ``n̂ ε₂ / (d θ)``; with the
  thesis's units (``ε₂ = ε/2``, sensitivity 2) these are its formulas exactly (tested).
- General domains follow Algorithms 3.4 + 3.3 (``m = d``); a fixed ``degree``, or all-binary
  attributes, follow Algorithms 3.2 + 3.1 (``m = d - k``). MaximalParentSets is Algorithm 3.5;
  ``(X, ∅)`` joins Ω only when no parent set is θ-useful, as in Lines 8-9.
- F is the corrected formula ``-min[(½ - a/n)₊ + (½ - b/n)₊]``, 0 when
  Π = ∅, and is refused unless every (encoded) attribute is binary (Theorem 3.3).
- Non-negativity: the thesis clips and normalises; Norm-Sub is used instead (clipping turns
  the noise of empty cells into mass; on Adult at ε = 1 it lowers the 2-way TVD from about
  0.066 to 0.048). A parent value with no mass falls back to the noisy marginal of X.
- Encodings: vanilla (default), binary and gray; hierarchical is refused (no taxonomies
  reach this core). Decoded bit codes outside a domain are redrawn.
"""

from __future__ import annotations

import functools
import itertools
import math
import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from dpgate import errors, noise
from dpgate.mechanisms import exponential
from dpgate.mechanisms.base import CodedRows, Synthesis, Synthesizer

#: Score functions (Definition 3.1 / Equations 3.2, 3.4, 3.7).
SCORES = ("R", "F", "MI")
#: Encodings of non-binary attributes (§3.4.1) that this core implements.
ENCODINGS = ("vanilla", "binary", "gray")
#: Vanilla keeps each attribute whole (semantics preserved, works with R); the thesis finds
#: Vanilla-R ≈ Hierarchical-R on marginals and hierarchical needs taxonomies the core does
#: not receive. Binary / gray multiply the attributes (Adult: 15 → 53) and the candidates.
DEFAULT_ENCODING = "vanilla"
#: Share of ε spent on the noisy row count when the caller does not supply one.
ROWS_SHARE = 0.02
#: Public compute cap: at most this many candidates per exponential-mechanism step; larger
#: candidate sets are cut to a uniformly random subset (data-independent) [cap].
MAX_CANDIDATES = 2000
#: Public work cap of the network search [work]: at most this many (row, attribute) touches in
#: all (about 30 ns each: ~8 s), counted with a public bound on the rows (``row_bound``): each
#: step keeps at most ``PRIVBAYES_WORK / ((d - 1) · row_bound · (2 + parents))`` candidates,
#: at least ``MIN_CANDIDATES``, ``parents`` the most a candidate may have.
PRIVBAYES_WORK = 1 << 28
MIN_CANDIDATES = 16
#: Public compute cap on the cells of one noisy marginal.
MAX_CELLS = 1 << 22
#: Public cap on a model's cells, all its marginals together (8 bytes each, and sampling copies
#: them): a marginal holds at most ``MODEL_CELLS / d`` cells (``marginal_cap``). 40 attributes
#: at ε = 10^6 held 40 marginals of up to 4 million cells, 1.2 GB after the debit.
MODEL_CELLS = 1 << 25
#: Add/remove sensitivity of n·R: 2, plus 2^-20 for the final rounding of the exact score
#: (covers every n ≤ 2^32) [float].
_R_SENSITIVITY = 2.0 + 2.0**-20
#: Up to this many rows, Σ |c n - a b| ≤ 2 n² fits in int64.
_EXACT_ROWS = 2_000_000_000
_NOISE_CHUNK = 1 << 16


# --------------------------------------------------------------------------------------------
# the model
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class PrivBayesModel:
    """A fitted PrivBayes model: every field is public (a DP output or a public parameter).

    Attributes:
        sizes: domain size of each original attribute (codes ``0 .. size - 1``).
        network: ``(attribute, parents)`` pairs in sampling order, over the *encoded*
            attributes (the original ones for ``vanilla``; bit attributes for ``binary`` /
            ``gray``, see ``columns``); parents are sorted.
        conditionals: one array per network entry, shape ``(|dom Π|, |dom X|)``: row ``π``
            (mixed radix over the sorted parents, first parent most significant) is the noisy
            distribution ``P*[X | Π = π]``.
        epsilon: the total ε; ``epsilon_rows + epsilon_network + epsilon_conditionals``.
        epsilon_network / epsilon_conditionals / epsilon_rows: the shares.
        degree: the largest parent set in the network.
        score: ``"R"``, ``"F"``, ``"MI"`` (or ``"none"`` for the independent baseline).
        noisy_rows: a DP estimate of the number of rows (what ``sample`` should usually emit).
        theta, beta, encoding: the parameters used.
        columns: for each encoded attribute, ``(original attribute, bit)``; bit ``-1`` means
            the whole attribute (vanilla), otherwise bit ``b`` of the (gray) code, MSB first.
        charges: every privacy-consuming step with its ε (they add up to ``epsilon``).
    """

    sizes: tuple[int, ...]
    network: tuple[tuple[int, tuple[int, ...]], ...]
    conditionals: tuple[np.ndarray, ...]
    epsilon: float
    epsilon_network: float
    epsilon_conditionals: float
    degree: int
    score: str
    epsilon_rows: float = 0.0
    noisy_rows: int = 0
    theta: float | None = None
    beta: float = 0.3
    encoding: str = DEFAULT_ENCODING
    columns: tuple[tuple[int, int], ...] = ()
    charges: tuple[tuple[str, float], ...] = field(default=())
    kind: str = "PrivBayes"  # or "MST" (mechanisms.mst: a tree, same sampler)

    @property
    def encoded_sizes(self) -> tuple[int, ...]:
        """Domain sizes of the network's attributes."""
        if not self.columns:
            return self.sizes
        return tuple(self.sizes[a] if b < 0 else 2 for a, b in self.columns)

    def describe(self, names: Sequence[str] | None = None) -> list[str]:
        """The network and parameters, one line each (only DP outputs and public parameters).

        >>> rng = np.random.default_rng(0)
        >>> codes = rng.integers(0, 2, size=(500, 3))
        >>> m = fit(codes, [2, 2, 2], 1.0, degree=1, rng=rng)
        >>> m.describe()[0]
        'PrivBayes: 3 attributes, encoding vanilla, score R, degree 1, β=0.3'
        """
        label = _labeller(self, names)
        esizes = self.encoded_sizes
        th = "" if self.theta is None else f", θ={self.theta:g}"
        if self.kind == "MST":
            pairs = sum(1 for _, p in self.network if p)
            lines = [
                f"MST: {len(self.sizes)} attributes, {pairs} measured pair(s)",
                f"ε={self.epsilon:g}: rows {self.epsilon_rows:.4g} + choosing pairs {self.epsilon_network:.4g} "
                f"+ marginals {self.epsilon_conditionals:.4g} ({len(self.charges)} charged steps)",
                f"noisy row count: {self.noisy_rows}",
            ]
            for i, (x, parents) in enumerate(self.network, 1):
                ps = label(parents[0]) if parents else "∅ (a root)"
                lines.append(f"{i:3d}. {label(x)} ← {ps}")
            return lines
        lines = [
            f"{self.kind}: {len(self.sizes)} attributes, encoding {self.encoding}, score {self.score}, "
            f"degree {self.degree}{th}, β={self.beta:g}",
            f"ε={self.epsilon:g}: rows {self.epsilon_rows:.4g} + network {self.epsilon_network:.4g} "
            f"+ conditionals {self.epsilon_conditionals:.4g} ({len(self.charges)} charged steps)",
            f"noisy row count: {self.noisy_rows}",
        ]
        for i, (x, parents) in enumerate(self.network, 1):
            cells = esizes[x] * math.prod(esizes[p] for p in parents)
            ps = ", ".join(label(p) for p in parents) if parents else "∅"
            lines.append(f"{i:3d}. {label(x)} ← {ps}  [{cells} cells]")
        return lines


def _labeller(model: PrivBayesModel, names: Sequence[str] | None) -> Callable[[int], str]:
    def label(j: int) -> str:
        a, b = model.columns[j] if model.columns else (j, -1)
        base = names[a] if names is not None else f"a{a}"
        return base if b < 0 else f"{base}.b{b}"

    return label


# --------------------------------------------------------------------------------------------
# score functions on contingency tables joint[x, π]
# --------------------------------------------------------------------------------------------
def mutual_information(joint: np.ndarray) -> float:
    """``I(X, Π)`` in bits (Equation 3.2) of a 2-D table of counts or probabilities ``[x, π]``.

    >>> mutual_information(np.array([[5, 0], [0, 5]]))
    1.0
    """
    j = np.asarray(joint, dtype=np.float64)
    total = j.sum()
    if total <= 0:
        return 0.0
    return float(_mi_counts(j) / total)


def r_score(joint: np.ndarray) -> float:
    """``R(X, Π) = ½ ||Pr[X, Π] - Pr[X] Pr[Π]||₁`` (Equation 3.7).

    >>> r_score(np.array([[1, 0], [0, 1]]))
    0.5
    """
    j = np.asarray(joint, dtype=np.float64)
    total = j.sum()
    return 0.0 if total <= 0 else float(_r_counts(j) / total)


def f_score(joint: np.ndarray) -> float:
    """``F(X, Π)`` (Equation 3.4) for binary X: ``joint`` holds integer counts, shape (2, 2^k).

    Computed by the dominated-state dynamic program of §3.3.4 (corrected brackets;
    §6 item 5), on a capped array; ``F = 0`` when Π is empty.

    >>> f_score(np.array([[6, 0, 0, 0], [1, 1, 1, 1]]))  # Table 3.3
    -0.2
    """
    c = np.asarray(joint)
    if c.ndim != 2 or c.shape[0] != 2:
        raise ValueError("F is defined for a binary attribute X: joint must have shape (2, m)")
    total = int(c.sum())
    return 0.0 if total == 0 else _f_counts(c) / total


def _r_counts(c: np.ndarray) -> float:
    """``n·R``: ½ Σ |c - a b / n| in count units [sens-R].

    Integer counts are scored exactly, ``Σ |c n - a b| / (2n)`` with one rounding at the end
    [float]; other inputs (probabilities) in floating point.
    """
    if np.issubdtype(np.asarray(c).dtype, np.integer):
        c = np.asarray(c, dtype=np.int64)
        n = int(c.sum())
        if n == 0:
            return 0.0
        a, b = c.sum(axis=1), c.sum(axis=0)
        if n <= _EXACT_ROWS:
            return int(np.abs(c * n - np.outer(a, b)).sum()) / (2 * n)
        total = sum(abs(int(ci) * n - int(ai) * int(bi)) for ci, ai, bi in
                    zip(c.ravel(), np.repeat(a, c.shape[1]), np.tile(b, c.shape[0])))  # fmt: skip
        return total / (2 * n)
    n = c.sum()
    if n <= 0:
        return 0.0
    a = c.sum(axis=1)
    b = c.sum(axis=0)
    return 0.5 * float(np.abs(c - np.outer(a, b) / n).sum())


def _mi_counts(c: np.ndarray) -> float:
    """``n·I`` in bits [sens-MI]."""
    n = float(c.sum())
    if n <= 0:
        return 0.0
    a = c.sum(axis=1)
    b = c.sum(axis=0)
    nz = c > 0
    ratio = c[nz] * n / np.outer(a, b)[nz]
    return max(0.0, float((c[nz] * np.log2(ratio)).sum()))


def _f_counts(c: np.ndarray) -> float:
    """``n·F`` (≤ 0) for binary X: ``-min [(n/2 - a)₊ + (n/2 - b)₊]`` over column assignments
    [sens-F].

    The reachable ``(a, b)`` are kept as a Pareto frontier (Definition 3.2 drops dominated
    states), both capped at ``⌈n/2⌉`` where their terms vanish; each column either adds its
    ``X = 0`` count to ``a`` or its ``X = 1`` count to ``b`` (Equation 3.6).
    """
    c = np.asarray(c, dtype=np.int64)
    if c.shape[1] == 1:  # Π = ∅: every distribution maximises I (= 0), so F = 0
        return 0.0
    n = int(c.sum())
    if n == 0:
        return 0.0
    cap = (n + 1) // 2
    a = np.zeros(1, dtype=np.int64)
    b = np.zeros(1, dtype=np.int64)
    for c0, c1 in zip(c[0].tolist(), c[1].tolist()):
        if c0 == 0 and c1 == 0:  # an empty column changes no state
            continue
        a2 = np.concatenate([np.minimum(a + c0, cap), a])
        b2 = np.concatenate([b, np.minimum(b + c1, cap)])
        order = np.lexsort((-b2, -a2))  # a descending, then b descending
        a2, b2 = a2[order], b2[order]
        keep = np.empty(a2.size, dtype=bool)
        keep[0] = True
        keep[1:] = b2[1:] > np.maximum.accumulate(b2)[:-1]  # not dominated by a larger a
        a, b = a2[keep], b2[keep]
    half = n / 2.0
    return -float((np.maximum(0.0, half - a) + np.maximum(0.0, half - b)).min())


def score_sensitivity(score: str, *, max_rows: int | None = None) -> float:
    """Add/remove sensitivity of the count-unit score (``n`` times the thesis's score).

    ``R``: 2 [sens-R]; ``F``: 1 [sens-F]; ``MI``: ``g(max_rows - 1)`` bits [sens-MI]; R and MI
    are rounded up to cover floating-point error [float].

    >>> score_sensitivity("R") == 2 + 2**-20, score_sensitivity("F")
    (True, 1.0)
    """
    if score == "R":
        return _R_SENSITIVITY
    if score == "F":
        return 1.0
    if score == "MI":
        if max_rows is None or max_rows < 1:
            raise errors.DataError(
                "Score MI has no add/remove sensitivity without a public bound on the row count",
                hint="pass max_rows (e.g. the number of subjects), or use score R",
            )
        m = max(max_rows - 1, 1)  # g is increasing; g(1) = 2 also covers max_rows = 1
        return (math.log2(m + 1) + m * math.log2(1 + 1 / m)) * (1 + 2.0**-10)  # [float]
    raise errors.DataError(f"Unknown score {score!r}", hint=f"use one of {', '.join(SCORES)}")


def mi_sensitivity_substitution(n: int, *, binary: bool) -> float:
    """The thesis's Lemma 3.1: S(I) for *substitution* neighbours of a table of ``n`` tuples.

    For reference and tests only (dpgate's neighbours add or remove a tuple).

    >>> round(mi_sensitivity_substitution(1000, binary=True), 10)
    0.0114077577
    """
    if binary:
        return math.log2(n) / n + (n - 1) / n * math.log2(n / (n - 1))
    return 2 / n * math.log2((n + 1) / 2) + (n - 1) / n * math.log2((n + 1) / (n - 1))


# --------------------------------------------------------------------------------------------
# θ-usefulness (§3.3.5, §3.4.2) and MaximalParentSets (Algorithm 3.5)
# --------------------------------------------------------------------------------------------
def useful_degree(n: float, d: int, epsilon_conditionals: float, theta: float, *, sensitivity: float = 1.0) -> int:
    """The degree k of Lemma 3.3 for ``d`` binary attributes: the largest ``1 ≤ k ≤ d-1`` whose
    ``d - k`` noisy marginals of ``2^(k+1)`` cells are θ-useful, else 0.

    Usefulness is (average cell probability) / (noise scale):
    ``n ε₂ / (sensitivity (d - k) 2^(k+1))``. The thesis's own numbers are ``ε₂ = ε/2`` and
    ``sensitivity = 2`` (substitution, probabilities), giving ``n ε / ((d - k) 2^(k+3))``;
    dpgate's counts have sensitivity 1.

    >>> [useful_degree(21574, 16, e / 2, 3, sensitivity=2) for e in (0.05, 0.1, 0.2, 0.4, 0.8, 1.6)]
    [1, 2, 3, 5, 6, 7]
    """
    best = 0
    for k in range(1, d):
        if n * epsilon_conditionals / (sensitivity * (d - k) * 2 ** (k + 1)) >= theta:
            best = k
        else:
            break  # usefulness does not increase with k
    return best


def max_useful_cells(n: float, m: int, epsilon_conditionals: float, theta: float, *, sensitivity: float = 1.0) -> float:
    """Largest number of cells of a θ-useful marginal when ``m`` marginals share ``ε₂``
    (§3.4.2: ``n ε / (4 d θ)`` with the thesis's ``ε₂ = ε/2``, ``sensitivity = 2``, ``m = d``).

    >>> round(max_useful_cells(45222, 15, 0.1 / 2, 3, sensitivity=2), 1)
    25.1
    """
    return n * epsilon_conditionals / (sensitivity * m * theta)


def maximal_parent_sets(attributes: Sequence[int], sizes: Sequence[int], tau: float) -> list[tuple[int, ...]]:
    """All maximal subsets of ``attributes`` whose domain size (product of sizes) is ≤ ``tau``
    (Algorithm 3.5, memoised); empty when ``tau < 1``; ``[()]`` when there are no attributes.

    >>> maximal_parent_sets([0, 1, 2], [2, 3, 4], 8)
    [(0, 1), (0, 2)]
    """
    attrs = tuple(attributes)

    @functools.lru_cache(maxsize=None)
    def rec(i: int, t: float) -> frozenset:
        if t < 1:
            return frozenset()
        if i == len(attrs):
            return frozenset({()})
        x = attrs[i]
        out = set(rec(i + 1, t))
        for z in rec(i + 1, t / sizes[x]):
            out.discard(z)  # z ∪ {x} is feasible, so z is not maximal
            out.add((x, *z))
        return frozenset(out)

    return sorted(tuple(sorted(s)) for s in rec(0, float(tau)))


# --------------------------------------------------------------------------------------------
# encodings (§3.4.1)
# --------------------------------------------------------------------------------------------
def _bit_width(size: int) -> int:
    return max(0, math.ceil(math.log2(size))) if size > 1 else 0


def _encode(codes: np.ndarray, sizes: Sequence[int], encoding: str) -> tuple[list[np.ndarray], tuple]:
    """Columns of the encoded table and ``columns`` (original attribute, bit) per column."""
    if encoding == "vanilla":
        cols = [np.ascontiguousarray(codes[:, j]) for j in range(codes.shape[1])]
        return cols, tuple((j, -1) for j in range(len(sizes)))
    cols, layout = [], []
    for j, size in enumerate(sizes):
        v = codes[:, j].astype(np.int64)
        if encoding == "gray":
            v = v ^ (v >> 1)
        w = _bit_width(size)
        for b in range(w - 1, -1, -1):  # most significant bit first (Figure 3.2)
            cols.append(((v >> b) & 1).astype(np.uint8))
            layout.append((j, b))
    return cols, tuple(layout)


def _decode(enc: np.ndarray, model: PrivBayesModel) -> np.ndarray:
    """Original codes from encoded columns; values ≥ size stay (the caller repairs them)."""
    if model.encoding == "vanilla":
        return enc
    out = np.zeros((enc.shape[0], len(model.sizes)), dtype=np.int64)
    for col, (a, b) in enumerate(model.columns):
        out[:, a] |= enc[:, col].astype(np.int64) << b
    if model.encoding == "gray":
        shift = 1
        while shift < 64:
            out ^= out >> shift
            shift <<= 1
    return out


# --------------------------------------------------------------------------------------------
# contingency tables
# --------------------------------------------------------------------------------------------
def _parent_code(cols: list[np.ndarray], sizes: Sequence[int], parents: Sequence[int]) -> tuple[np.ndarray | None, int]:
    """Mixed-radix code of the parent values (first parent most significant), and |dom Π|."""
    code = None
    cells = 1
    for p in parents:
        v = cols[p].astype(np.int64)
        code = v if code is None else code * sizes[p] + v
        cells *= sizes[p]
    return code, cells


def _joint(cols, sizes, x: int, parents: Sequence[int], pcode=None, pcells=None) -> np.ndarray:
    """Counts ``c[x, π]`` over the full public domain of (X, Π) [full-domain]."""
    if pcells is None:
        pcode, pcells = _parent_code(cols, sizes, parents)
    xv = cols[x].astype(np.int64)
    flat = xv if pcode is None else xv * pcells + pcode
    # one row adds exactly 1 to exactly one cell [sens-counts]
    return np.bincount(flat, minlength=sizes[x] * pcells).reshape(sizes[x], pcells)


def _score_counts(c: np.ndarray, score: str) -> float:
    if score == "R":
        return _r_counts(c)
    if score == "F":
        return _f_counts(c)
    return _mi_counts(c)


# --------------------------------------------------------------------------------------------
# network learning (Algorithms 3.2 and 3.4 with the exponential mechanism)
# --------------------------------------------------------------------------------------------
@dataclass
class _Plan:
    """Everything about network learning that is fixed before the data is read."""

    sizes: tuple[int, ...]  # encoded sizes
    score: str
    sensitivity: float
    epsilon_step: float  # ε of each exponential-mechanism step (0 when the network is skipped)
    k: int | None  # fixed degree (Algorithm 3.2), or None for θ-usefulness (Algorithm 3.4)
    max_cells: float | None  # θ-usefulness cell budget (Algorithm 3.4)
    cap: int = MAX_CANDIDATES


def _fixed_candidates(placed: list[int], rest: list[int], k: int, rng, cap: int) -> list[tuple[int, tuple]]:
    """Ω of Algorithm 3.2: every (X, Π) with X not placed, Π ⊆ placed, |Π| = min(k, |placed|).

    Above ``cap`` candidates, a uniformly random set of parent sets is kept, each paired
    with every remaining X (so every pair is equally likely to stay, and the contingency
    tables of one Π share its parent code) [cap].
    """
    m = min(k, len(placed))
    vs = sorted(placed)
    ncomb = math.comb(len(vs), m)
    if len(rest) * ncomb <= cap:
        return [(x, c) for x in rest for c in itertools.combinations(vs, m)]
    want = max(1, cap // len(rest))
    if ncomb <= 4 * want:
        combos = list(itertools.combinations(vs, m))
        picked = [combos[i] for i in np.sort(rng.choice(len(combos), size=want, replace=False))]
    else:  # rejection: distinct uniform m-subsets
        chosen: set[tuple] = set()
        while len(chosen) < want:
            chosen.add(tuple(sorted(vs[i] for i in rng.choice(len(vs), size=m, replace=False))))
        picked = sorted(chosen)
    return [(x, c) for c in picked for x in rest]


def _theta_candidates(placed: list[int], rest: list[int], plan: _Plan, rng) -> list[tuple[int, tuple]]:
    """Ω of Algorithm 3.4: (X, Π) for every maximal θ-useful parent set Π, or (X, ∅)."""
    by_size: dict[int, list[tuple[int, ...]]] = {}
    cands = []
    for x in rest:
        size = plan.sizes[x]
        if size not in by_size:
            by_size[size] = _parent_sets(sorted(placed), plan.sizes, plan.max_cells / size, plan.cap, rng)
        sets = by_size[size] or [()]  # T(X) = ∅: keep X independent (Lines 8-9)
        cands.extend((x, s) for s in sets)
    if len(cands) > plan.cap:  # [cap]
        keep = np.sort(rng.choice(len(cands), size=plan.cap, replace=False))
        cands = [cands[i] for i in keep]
    return cands


def _parent_sets(placed: list[int], sizes, tau: float, cap: int, rng) -> list[tuple[int, ...]]:
    """Algorithm 3.5 when its output is small enough to enumerate; otherwise up to ``cap``
    random maximal sets, each built by adding attributes in a random order while the domain
    stays ≤ τ (such a set is maximal: a skipped attribute never fits later) [cap]."""
    if tau < 1:
        return []
    smallest = sorted(sizes[a] for a in placed)
    depth, prod = 0, 1
    for s in smallest:
        if prod * s > tau:
            break
        prod *= s
        depth += 1
    bound = sum(math.comb(len(placed), j) for j in range(depth + 1))
    if bound <= 50 * cap:
        return maximal_parent_sets(placed, sizes, tau)
    found: set[tuple[int, ...]] = set()
    for _ in range(4 * cap):
        prod, chosen = 1, []
        for i in rng.permutation(len(placed)):
            a = placed[int(i)]
            if prod * sizes[a] <= tau:
                prod *= sizes[a]
                chosen.append(a)
        found.add(tuple(sorted(chosen)))
        if len(found) >= cap:
            break
    return sorted(found)


def _candidates(placed, rest, plan: _Plan, rng) -> list[tuple[int, tuple]]:
    """[candidates] depend only on the plan (public), ``placed`` (DP output) and ``rng``."""
    if plan.k is not None:
        return _fixed_candidates(placed, rest, plan.k, rng, plan.cap)
    return _theta_candidates(placed, rest, plan, rng)


def _score_candidates(cols, plan: _Plan, cands, cache: dict) -> np.ndarray:
    """Count-unit scores of the candidates, computed once per (X, Π) and cached."""
    todo: dict[tuple, list[int]] = {}
    for x, parents in cands:
        if (x, parents) not in cache:
            todo.setdefault(parents, []).append(x)
    n = cols[0].shape[0] if cols else 0
    for parents, xs in todo.items():
        pcode, pcells = _parent_code(cols, plan.sizes, parents)
        seen = None  # the parent values that occur, numbered 0..: computed once per parent set
        for x in xs:
            if plan.score == "F" or plan.sizes[x] * pcells <= 2 * n + 64:
                cache[(x, parents)] = _score_counts(_joint(cols, plan.sizes, x, parents, pcode, pcells), plan.score)
                continue
            if seen is None:
                seen = np.unique(pcode, return_inverse=True)[1].reshape(-1) if pcode is not None else None
                width = int(seen.max()) + 1 if seen is not None and seen.size else 1
            if plan.sizes[x] * width <= 32 * n + 1024:
                # the table without its empty parent columns: they add nothing to R or I
                flat = cols[x].astype(np.int64) * width + (0 if seen is None else seen)
                joint = np.bincount(flat, minlength=plan.sizes[x] * width).reshape(plan.sizes[x], width)
                cache[(x, parents)] = _score_counts(joint, plan.score)
            else:
                cache[(x, parents)] = _score_sparse(cols[x], pcode, pcells, plan.score)
    return np.array([cache[c] for c in cands], dtype=np.float64)


def _score_sparse(xcol: np.ndarray, pcode: np.ndarray | None, pcells: int, score: str) -> float:
    """``n·R`` or ``n·I`` from the non-empty cells only, for tables much larger than ``n``.

    Every cell's product term ``a[x] b[π] / n`` adds up to ``n``, so the empty cells of R
    contribute ``n - Σ_non-empty a b / n`` (a sparse identity).
    """
    n = xcol.shape[0]
    if n == 0:
        return 0.0
    flat = xcol.astype(np.int64) * pcells + (0 if pcode is None else pcode)
    cells, c = np.unique(flat, return_counts=True)
    xi = cells // pcells
    _, pinv = np.unique(cells % pcells, return_inverse=True)
    a = np.bincount(xi, weights=c).astype(np.int64)[xi]
    b = np.bincount(pinv, weights=c).astype(np.int64)[pinv]
    if score == "R" and n <= _EXACT_ROWS:  # exact: Σ_non-empty |c n - a b| + n² - Σ_non-empty a b
        ab = a * b
        return (int(np.abs(c * n - ab).sum()) + n * n - int(ab.sum())) / (2 * n)
    cf, af, bf = c.astype(np.float64), a.astype(np.float64), b.astype(np.float64)
    if score == "R":
        prod = af * bf / n
        return 0.5 * float(np.abs(cf - prod).sum() + n - prod.sum())
    return max(0.0, float((cf * np.log2(cf * n / (af * bf))).sum()))


def _learn_network(cols, plan: _Plan, rng, progress=None) -> list[tuple[int, tuple[int, ...]]]:
    """GreedyBayes with one exponential mechanism per step (Algorithms 3.2 / 3.4)."""
    d = len(plan.sizes)
    if d == 0:
        return []
    first = int(rng.integers(d))  # [first] uniform, data-independent
    network = [(first, ())]
    placed = [first]
    rest = [j for j in range(d) if j != first]
    if plan.epsilon_step == 0:  # no parent is possible: order irrelevant, nothing spent
        return network + [(x, ()) for x in rest]
    cache: dict = {}
    for step in range(1, d):
        cands = _candidates(placed, rest, plan, rng)
        scores = _score_candidates(cols, plan, cands, cache)
        pick = exponential.exponential_mechanism(scores, plan.epsilon_step, plan.sensitivity, rng=rng)  # [em]
        x, parents = cands[pick]
        network.append((x, parents))
        placed.append(x)
        rest.remove(x)
        if progress is not None:
            progress(0.8 * step / (d - 1), f"network: {step}/{d - 1} attributes placed")
    return network


# --------------------------------------------------------------------------------------------
# noisy conditionals (Algorithms 3.1 and 3.3)
# --------------------------------------------------------------------------------------------
def _noisy_counts(counts: np.ndarray, epsilon: float, rng) -> np.ndarray:
    """``counts + Z`` with exact discrete Laplace ``P(z) ∝ exp(-ε|z|)`` per cell [noise]."""
    flat = counts.reshape(-1)
    sizes = [min(_NOISE_CHUNK, flat.size - s) for s in range(0, flat.size, _NOISE_CHUNK)]
    z = np.concatenate([noise.discrete_laplace(epsilon, 1, size, rng) for size in sizes])
    return (flat + z).reshape(counts.shape)


def _conditional(joint: np.ndarray) -> np.ndarray:
    """``P*[X | Π]`` as rows ``π`` from a clipped noisy joint ``[x, π]`` [post].

    A parent value with no noisy mass falls back to the noisy marginal of X, and that to the
    uniform distribution (the thesis leaves this open).
    """
    j = np.asarray(joint, dtype=np.float64)
    fallback = j.sum(axis=1)
    fallback = fallback / fallback.sum() if fallback.sum() > 0 else np.full(j.shape[0], 1.0 / j.shape[0])
    col = j.sum(axis=0)
    out = np.where(col > 0, j / np.where(col > 0, col, 1.0), fallback[:, None])
    return np.ascontiguousarray(out.T)


def _marginalise(joint: np.ndarray, axes: list[int], sizes, keep: list[int]) -> np.ndarray:
    """Sum a joint over the attributes ``axes`` (its shape, in that order) down to ``keep``
    (first kept attribute as rows, the rest as mixed-radix columns)."""
    t = joint.reshape([sizes[a] for a in axes])
    drop = tuple(i for i, a in enumerate(axes) if a not in keep)
    t = t.sum(axis=drop)
    remaining = [a for a in axes if a in keep]
    t = np.transpose(t, [remaining.index(a) for a in keep])
    return t.reshape(sizes[keep[0]], -1)


def _norm_sub(noisy: np.ndarray, total: float) -> np.ndarray:
    """Norm-Sub: ``max(noisy - δ, 0)`` with δ chosen so the cells add up to ``total`` [post].

    Clipping alone turns the noise of every empty cell into positive mass (about a third
    of the noise scale per cell); subtracting a common δ removes that bias. This is the
    Euclidean projection onto ``{x ≥ 0, Σ x = total}`` (Wang et al., "Locally Differentially
    Private Frequency Estimation with Consistency", NDSS 2020, call it Norm-Sub).
    """
    y = np.asarray(noisy, dtype=np.float64).reshape(-1)
    if total <= 0:
        return np.zeros_like(y).reshape(np.shape(noisy))
    srt = np.sort(y)[::-1]
    cum = np.cumsum(srt)
    deltas = (cum - total) / np.arange(1, y.size + 1)
    j = int(np.flatnonzero(srt > deltas)[-1])
    return np.maximum(y - deltas[j], 0.0).reshape(np.shape(noisy))


def _combined_rows(
    noisy_rows: float, rows_variance: float | None, totals: list[float], variances: list[float]
) -> float:
    """Inverse-variance mean of the noisy row count and the noisy marginals' totals [post]."""
    if rows_variance is None:  # a caller-supplied count of unknown variance is used as it is
        return noisy_rows
    w = [1.0 / max(v, 1e-12) for v in [rows_variance, *variances]]  # zero variance: (nearly) exact
    x = [noisy_rows] + totals
    return sum(wi * xi for wi, xi in zip(w, x)) / sum(w)


def _noisy_conditionals(
    cols, sizes, network, noisy_from: int, epsilon_each: float, noisy_rows: float, rows_variance: float | None, rng
) -> tuple[list[np.ndarray], float]:
    """Noisy marginals for the entries ``noisy_from ..`` of the network; entries before it
    (Algorithm 3.1's first k) are derived from entry ``noisy_from``'s noisy marginal [post].

    Returns the conditionals and the combined row-count estimate used for Norm-Sub.
    """
    conds: list[np.ndarray | None] = [None] * len(network)
    if noisy_from >= len(network):
        return [], noisy_rows
    noisy = {}
    for i in range(noisy_from, len(network)):
        x, parents = network[i]
        counts = _joint(cols, sizes, x, parents)  # [full-domain]
        noisy[i] = _noisy_counts(counts, epsilon_each, rng)  # [noise]
    cell_var = noise.discrete_laplace_std(epsilon_each, 1) ** 2
    total = _combined_rows(
        noisy_rows, rows_variance, [float(v.sum()) for v in noisy.values()], [v.size * cell_var for v in noisy.values()]
    )
    joints = {i: _norm_sub(v, total) for i, v in noisy.items()}  # [post]
    for i, j in joints.items():
        conds[i] = _conditional(j)
    if noisy_from > 0:
        x, parents = network[noisy_from]
        axes = [x, *parents]
        for i in range(noisy_from):
            xi, pi = network[i]
            conds[i] = _conditional(_marginalise(joints[noisy_from], axes, sizes, [xi, *pi]))
    return conds, total  # type: ignore[return-value]


# --------------------------------------------------------------------------------------------
# public entry points
# --------------------------------------------------------------------------------------------
def fit(
    codes: np.ndarray,
    sizes: Sequence[int],
    epsilon: float,
    *,
    degree: int | None = None,
    theta: float | None = 4.0,
    score: str = "R",
    beta: float = 0.3,
    encoding: str = DEFAULT_ENCODING,
    noisy_rows: float | None = None,
    max_rows: int | None = None,
    row_bound: int | None = None,
    rng: np.random.Generator,
    progress: Callable[[float, str], None] | None = None,
) -> PrivBayesModel:
    """Fit an ε-DP PrivBayes model to an integer-coded table.

    Args:
        codes: ``(n, d)`` integer codes, column ``j`` in ``0 .. sizes[j] - 1``; at most one row
            per subject (neighbours add or remove one row).
        sizes: the public domain size of each attribute.
        epsilon: total ε of the model (all shares included).
        degree: a fixed degree k (Algorithm 3.2 + 3.1); ``None`` chooses by θ-usefulness
            (Lemma 3.3 when every encoded attribute is binary, else Algorithm 3.4 + 3.3).
        theta: θ of θ-usefulness (used only when ``degree`` is None).
        score: ``"R"`` (any domain), ``"F"`` (every encoded attribute binary) or ``"MI"``
            (needs ``max_rows``).
        beta: share of ``ε - ε_rows`` spent on the network.
        encoding: ``"vanilla"`` (default), ``"binary"`` or ``"gray"``.
        noisy_rows: an already paid-for noisy row count; if None, ``ROWS_SHARE`` of ε buys one.
        max_rows: a public upper bound on the row count (score ``"MI"`` only).
        row_bound: a public upper bound on the row count that bounds the network search's work
            [work]; None: no work cap beyond ``MAX_CANDIDATES``.
        rng: the release's noise generator (``noise.fresh().rng``).
        progress: called with (fraction done, message).

    Returns:
        The model; ``sample(model, model.noisy_rows, rng=sampling)`` draws a synthetic table
        (``sampling``: the release's post-processing stream, ``noise.fresh().sampling``).

    Raises:
        errors.DataError: a bad parameter (before any data is read).
        errors.NotSupportedError: a combination the thesis does not define (F on non-binary
            attributes, hierarchical encoding).

    >>> rng = np.random.default_rng(1)
    >>> x = rng.integers(0, 2, 2000)
    >>> codes = np.stack([x, x, rng.integers(0, 3, 2000)], axis=1)
    >>> m = fit(codes, [2, 2, 3], 2.0, rng=rng)
    >>> sample(m, 5, rng=rng).shape
    (5, 3)
    """
    sizes_t = _check_parameters(codes, sizes, epsilon, degree, theta, score, beta, encoding, noisy_rows, max_rows)
    d = len(sizes_t)
    sensitivity = score_sensitivity(score, max_rows=max_rows)
    if encoding != "vanilla":
        layout = tuple((a, b) for a, s in enumerate(sizes_t) for b in range(_bit_width(s) - 1, -1, -1))
        esizes = tuple(2 for _ in layout)
    else:
        layout = tuple((j, -1) for j in range(d))
        esizes = sizes_t
    if score == "F" and any(s != 2 for s in esizes):
        raise errors.NotSupportedError(
            "Score F is defined only when every attribute is binary (computing it is NP-hard otherwise, Theorem 3.3)",
            hint="use score R, or encoding 'binary' / 'gray'",
        )
    de = len(esizes)
    if degree is not None and degree > 0:
        biggest = sorted(esizes, reverse=True)[: degree + 1]
        if math.prod(biggest) > marginal_cap(de):
            raise errors.DataError(
                f"Degree {degree} allows marginals of {math.prod(biggest)} cells, more than the limit "
                f"{marginal_cap(de)} for {de} attributes",
                hint="use a smaller degree, or degree=None to choose it by θ-usefulness",
            )
    smallest_share = epsilon * min(ROWS_SHARE, (1 - ROWS_SHARE) * min(beta, 1 - beta) / max(de, 1))
    if smallest_share < 1e-8:
        raise errors.DataError(
            f"epsilon={epsilon:g} is too small to split over {de} attributes (a step would get {smallest_share:.3g})",
            hint="use a larger epsilon",
        )
    if progress is not None:
        progress(0.0, "noisy row count")

    # [split] the budget
    epsilon_rows = ROWS_SHARE * epsilon if noisy_rows is None else 0.0
    rest = epsilon - epsilon_rows
    epsilon_network = beta * rest
    epsilon_conditionals = rest - epsilon_network
    charges: list[tuple[str, float]] = []

    codes = np.asarray(codes)
    n = codes.shape[0]
    if noisy_rows is None:
        noisy_rows = n + int(noise.discrete_laplace(epsilon_rows, 1, 1, rng)[0])  # [rows]
        charges.append(("noisy row count", epsilon_rows))
    n_hat = max(float(noisy_rows), 1.0)

    plan, k, skip = _make_plan(esizes, score, sensitivity, epsilon_network, epsilon_conditionals, degree, theta, n_hat,
                               row_bound)  # fmt: skip
    if skip:  # no attribute can have a parent: all of (ε - ε_rows) goes to the marginals
        epsilon_network, epsilon_conditionals = 0.0, rest
    else:
        charges += [(f"network step {i}", plan.epsilon_step) for i in range(1, de)]

    cols, _ = _encode(codes, sizes_t, encoding)
    network = _learn_network(cols, plan, rng, progress)

    noisy_from = k if (k is not None and not skip) else 0  # Algorithm 3.1 vs 3.3
    m = de - noisy_from
    epsilon_each = epsilon_conditionals / max(m, 1)
    charges += [(f"noisy marginal {i + 1}", epsilon_each) for i in range(noisy_from, de)]
    if progress is not None:
        progress(0.85, f"noisy conditionals: {m} marginals")
    rows_variance = noise.discrete_laplace_std(epsilon_rows, 1) ** 2 if epsilon_rows > 0 else None
    conds, rows_estimate = _noisy_conditionals(
        cols, esizes, network, noisy_from, epsilon_each, float(noisy_rows), rows_variance, rng
    )
    for c in conds:
        c.setflags(write=False)
    if progress is not None:
        progress(1.0, "model ready")
    return PrivBayesModel(
        sizes=sizes_t,
        network=tuple((x, tuple(p)) for x, p in network),
        conditionals=tuple(conds),
        epsilon=float(epsilon),
        epsilon_network=float(epsilon_network),
        epsilon_conditionals=float(epsilon_conditionals),
        degree=max((len(p) for _, p in network), default=0),
        score=score,
        epsilon_rows=float(epsilon_rows),
        noisy_rows=max(0, int(round(rows_estimate))),
        theta=theta if degree is None else None,
        beta=beta,
        encoding=encoding,
        columns=layout,
        charges=tuple(charges),
    )


def _make_plan(
    esizes: tuple[int, ...],
    score: str,
    sensitivity: float,
    epsilon_network: float,
    epsilon_conditionals: float,
    degree: int | None,
    theta: float | None,
    n_hat: float,
    row_bound: int | None = None,
) -> tuple[_Plan, int | None, bool]:
    """The network-learning plan, from public facts and the noisy row count only.

    Returns the plan, the fixed degree (None under Algorithm 3.4) and whether the network
    phase is skipped because no attribute can have a parent.
    """
    de = len(esizes)
    max_cells = None
    if degree is not None:
        k: int | None = max(0, min(degree, de - 1))
    elif all(s == 2 for s in esizes):
        k = useful_degree(n_hat, de, epsilon_conditionals, theta)  # Lemma 3.3, count units
        k = min(k, marginal_cap(de).bit_length() - 2)  # 2^(k+1) cells stay within the public cap
    else:
        k = None  # Algorithm 3.4: d marginals share ε_conditionals
        max_cells = min(max_useful_cells(n_hat, de, epsilon_conditionals, theta), marginal_cap(de))
    skip = de <= 1 or k == 0 or (k is None and not _any_parent_fits(esizes, max_cells))
    plan = _Plan(
        sizes=esizes,
        score=score,
        sensitivity=sensitivity,
        epsilon_step=0.0 if skip else epsilon_network / (de - 1),
        k=k,
        max_cells=max_cells,
        cap=MAX_CANDIDATES if row_bound is None or skip else work_cap(esizes, k, max_cells, row_bound),
    )
    return plan, k, skip


def marginal_cap(d: int) -> int:
    """The most cells one of a ``d``-attribute model's marginals may hold (public)."""
    return max(4, min(MAX_CELLS, MODEL_CELLS // max(d, 1)))


def work_cap(esizes: Sequence[int], k: int | None, max_cells: float | None, row_bound: int) -> int:
    """Candidates per network step under ``PRIVBAYES_WORK`` [work], from public numbers and the
    plan: ``k`` parents when fixed, else the most attributes whose domains fit ``max_cells`` beside
    the smallest X."""
    if k is not None:
        parents = k
    else:
        s = sorted(esizes)
        parents, prod = 0, s[0]
        for size in s[1:]:
            if prod * size > max_cells:
                break
            prod *= size
            parents += 1
    per_step = PRIVBAYES_WORK // (max(len(esizes) - 1, 1) * max(int(row_bound), 1) * (2 + parents))
    return int(min(MAX_CANDIDATES, max(MIN_CANDIDATES, per_step)))


def _any_parent_fits(sizes: Sequence[int], max_cells: float) -> bool:
    s = sorted(sizes)
    return len(s) >= 2 and s[0] * s[1] <= max_cells


def _check_parameters(
    codes, sizes, epsilon, degree, theta, score, beta, encoding, noisy_rows, max_rows
) -> tuple[int, ...]:
    """Refusals that depend only on public parameters and the table's shape (never on values)."""
    if not (isinstance(epsilon, numbers.Real) and math.isfinite(epsilon) and epsilon > 0):
        raise errors.DataError(f"epsilon must be a positive finite number, got {epsilon!r}")
    if not (isinstance(beta, numbers.Real) and 0 < beta < 1):
        raise errors.DataError(f"beta (the network's share of ε) must be in (0, 1), got {beta!r}")
    if score not in SCORES:
        raise errors.DataError(f"Unknown score {score!r}", hint=f"use one of {', '.join(SCORES)}")
    if encoding == "hierarchical":
        raise errors.NotSupportedError(
            "Hierarchical encoding needs a taxonomy tree per attribute, which this core does not receive",
            hint="use encoding 'vanilla' (the thesis finds Vanilla-R ≈ Hierarchical-R on marginals)",
        )
    if encoding not in ENCODINGS:
        raise errors.DataError(f"Unknown encoding {encoding!r}", hint=f"use one of {', '.join(ENCODINGS)}")
    if degree is None:
        if theta is None or not (isinstance(theta, numbers.Real) and math.isfinite(theta) and theta > 0):
            raise errors.DataError(
                f"theta must be a positive number when degree is not given, got {theta!r}",
                hint="pass theta (the thesis uses 3; 2-4 works) or a fixed degree",
            )
    elif not (isinstance(degree, (int, np.integer)) and degree >= 0):
        raise errors.DataError(f"degree must be a non-negative integer, got {degree!r}")
    if noisy_rows is not None and not (math.isfinite(noisy_rows)):
        raise errors.DataError(f"noisy_rows must be finite, got {noisy_rows!r}")
    if max_rows is not None and not (isinstance(max_rows, (int, np.integer)) and max_rows >= 1):
        raise errors.DataError(f"max_rows must be a positive integer, got {max_rows!r}")
    sizes_t = tuple(int(s) for s in sizes)
    if not sizes_t or any(s < 1 for s in sizes_t):
        raise errors.DataError("every attribute needs a domain of at least one value", details_sizes=sizes_t)
    if max(sizes_t) > MAX_CELLS:
        raise errors.DataError(
            f"A domain of {max(sizes_t)} values is larger than the limit of {MAX_CELLS} cells per marginal",
            hint="coarsen the attribute (bins or a taxonomy level) before synthesis",
        )
    if sum(sizes_t) > MODEL_CELLS:
        raise errors.DataError(
            f"The attributes' domains hold {sum(sizes_t):,} values in all, more than the limit of {MODEL_CELLS:,} "
            "cells per model", hint="synthesize fewer or coarser columns (the columns and bins options)",
        )  # fmt: skip
    arr = np.asarray(codes)
    if arr.ndim != 2 or arr.shape[1] != len(sizes_t) or not np.issubdtype(arr.dtype, np.integer):
        raise errors.DataError(
            f"codes must be an integer array of shape (rows, {len(sizes_t)}), got {arr.dtype} {arr.shape[1:]}"
        )
    if arr.shape[0] and (arr.min() < 0 or np.any(arr.max(axis=0) >= np.array(sizes_t))):
        # the caller encodes to declared domains; a code outside them is a caller bug
        raise errors.InternalError("PrivBayes received a code outside its declared domain")
    if max_rows is not None and arr.shape[0] > max_rows:
        raise errors.InternalError("PrivBayes received more rows than the declared bound max_rows")
    return sizes_t


def sample(model: PrivBayesModel, n_rows: int, *, rng: np.random.Generator) -> np.ndarray:
    """Draw ``n_rows`` synthetic tuples from the model (post-processing: no data is read).

    Attributes are drawn in network order from ``P*[X | parents]`` by inverse CDF. For the
    binary and gray encodings a decoded code can fall outside its domain (e.g. 5 bits for 42
    values); such rows are redrawn (up to 50 rounds, i.e. the model conditioned on valid
    codes), and any value still invalid is replaced by a uniform valid one.

    ``rng`` only draws post-processing randomness: pass the release's ``sampling`` stream
    (``noise.Randomness.sampling``), not its noise stream.

    Returns:
        ``(n_rows, d)`` int64 codes.
    """
    if n_rows < 0:
        raise errors.DataError(f"n_rows must be non-negative, got {n_rows}")
    out = _decode(_sample_encoded(model, n_rows, rng), model)
    if model.encoding == "vanilla":
        return out
    limit = np.array(model.sizes)
    bad = np.flatnonzero((out >= limit).any(axis=1))
    rounds = 0
    while bad.size and rounds < 50:
        out[bad] = _decode(_sample_encoded(model, bad.size, rng), model)
        bad = bad[(out[bad] >= limit).any(axis=1)]
        rounds += 1
    for a, size in enumerate(model.sizes):
        wrong = out[:, a] >= size
        if wrong.any():
            out[wrong, a] = rng.integers(0, size, size=int(wrong.sum()))
    return out


def _sample_encoded(model: PrivBayesModel, n_rows: int, rng) -> np.ndarray:
    esizes = model.encoded_sizes
    out = np.zeros((n_rows, len(esizes)), dtype=np.int64)
    for (x, parents), cond in zip(model.network, model.conditionals):
        cdf = np.cumsum(cond, axis=1)
        cdf[:, -1] = 1.0  # rows sum to 1 up to rounding
        u = rng.random(n_rows)
        if not parents:
            out[:, x] = np.minimum(np.searchsorted(cdf[0], u, side="right"), esizes[x] - 1)
            continue
        code = np.zeros(n_rows, dtype=np.int64)
        for p in parents:
            code = code * esizes[p] + out[:, p]
        step = max(1, (1 << 22) // esizes[x])
        for s in range(0, n_rows, step):  # chunks bound the (rows × |dom X|) comparison
            sl = slice(s, s + step)
            out[sl, x] = np.minimum((u[sl, None] >= cdf[code[sl]]).sum(axis=1), esizes[x] - 1)
    return out


def independent_baseline(
    codes: np.ndarray, sizes: Sequence[int], epsilon: float, *, rng: np.random.Generator
) -> PrivBayesModel:
    """The empty network: each attribute's noisy 1-way marginal at ``ε / d`` (sensitivity 1).

    Post-processing as in ``fit``: the noisy row count is the inverse-variance mean of the
    noisy marginals' totals, and each marginal is made non-negative by Norm-Sub to that total.
    """
    sizes_t = _check_parameters(codes, sizes, epsilon, None, 1.0, "R", 0.5, "vanilla", None, None)
    d = len(sizes_t)
    cols, layout = _encode(np.asarray(codes), sizes_t, "vanilla")
    each = epsilon / d
    noisy = [_noisy_counts(_joint(cols, sizes_t, j, ()), each, rng) for j in range(d)]  # [noise]
    cell_var = noise.discrete_laplace_std(each, 1) ** 2
    w = [1.0 / max(v.size * cell_var, 1e-12) for v in noisy]
    total = sum(wi * float(v.sum()) for wi, v in zip(w, noisy)) / sum(w)
    conds = []
    for v in noisy:
        c = _conditional(_norm_sub(v, total))  # [post]
        c.setflags(write=False)
        conds.append(c)
    return PrivBayesModel(
        sizes=sizes_t,
        network=tuple((j, ()) for j in range(d)),
        conditionals=tuple(conds),
        epsilon=float(epsilon),
        epsilon_network=0.0,
        epsilon_conditionals=float(epsilon),
        degree=0,
        score="none",
        noisy_rows=max(0, int(round(total))),
        theta=None,
        beta=0.0,
        encoding="vanilla",
        columns=layout,
        charges=tuple((f"noisy marginal {j + 1}", each) for j in range(d)),
    )


# --------------------------------------------------------------------------------------------
# evaluation (offline only: reads the real table)
# --------------------------------------------------------------------------------------------
def marginal_tables(codes: np.ndarray, sizes: Sequence[int], way: int) -> list[np.ndarray]:
    """Normalised α-way marginals of ``codes`` for every α-subset of attributes (in
    ``itertools.combinations`` order). Offline evaluation only: never for release."""
    arr = np.asarray(codes)
    d = arr.shape[1]
    cols = [arr[:, j].astype(np.int64) for j in range(d)]
    n = arr.shape[0]
    out = []
    for subset in itertools.combinations(range(d), way):
        code, cells = _parent_code(cols, sizes, subset)
        counts = np.bincount(code, minlength=cells).astype(np.float64) if code is not None else np.array([n], float)
        out.append(counts / max(n, 1))
    return out


def marginal_tvd(real: np.ndarray, synth: np.ndarray, sizes: Sequence[int], way: int) -> float:
    """Average total variation distance (½ L1) over all α-way marginals (§3.5.1).

    >>> a = np.array([[0, 0], [1, 1]]); marginal_tvd(a, a, [2, 2], 2)
    0.0
    """
    if np.asarray(synth).shape[0] == 0 or np.asarray(real).shape[0] == 0:
        raise ValueError("marginal_tvd needs non-empty tables")
    return tvd_between(marginal_tables(real, sizes, way), marginal_tables(synth, sizes, way))


def tvd_between(tables_a: list[np.ndarray], tables_b: list[np.ndarray]) -> float:
    """Mean ½ L1 distance between two lists of normalised marginals (``marginal_tables``)."""
    return float(np.mean([0.5 * np.abs(p - q).sum() for p, q in zip(tables_a, tables_b)]))


class PrivBayes(Synthesizer):
    """``USING privbayes``: ``fit`` on ``CodedRows``; options are ``fit``'s keyword arguments."""

    NAME = "privbayes"

    def synthesize(self, data: CodedRows, *, epsilon, delta=0.0, rng, options, progress=None) -> Synthesis:
        model = fit(data.codes, list(data.sizes), epsilon, rng=rng, progress=progress, **options)
        return Synthesis(model, epsilon)


class Independent(Synthesizer):
    """``USING independent``: ``independent_baseline`` on ``CodedRows`` (no options)."""

    NAME = "independent"

    def synthesize(self, data: CodedRows, *, epsilon, delta=0.0, rng, options, progress=None) -> Synthesis:
        return Synthesis(independent_baseline(data.codes, list(data.sizes), epsilon, rng=rng), epsilon)
