"""PrivBayes: a differentially private Bayesian network, sampled into a synthetic table.

This is the core of the algorithm on integer-coded tables (network selection in
``privbayes_network``, the model, its noisy conditionals and sampling in ``privbayes_model``): attribute ``j`` takes codes
``0 .. sizes[j] - 1``, rows are tuples. Reading tables, discretising numeric columns, the
ledger and the release registry live elsewhere; this module only needs the codes, the
public domain sizes, ε and a generator.

**Reference:** Jun Zhang, "Algorithms for Synthetic Data Release under Differential
Privacy", PhD thesis, Nanyang Technological University, 2016, chapter 3 (PrivBayes; also
Zhang, Cormode, Procopiuc, Srivastava, Xiao, SIGMOD 2014, DOI 10.1145/2588555.2588573, and
ACM TODS 42(4), 2017, DOI 10.1145/3134428).

**Input:** the rows one per tuple, or weighted (``weights``: how many tuples each row stands for,
the distinct coded rows and their counts of ``CodedRows``). Every count below is then the
weighted one, the same integers as over the rows repeated, so the model, noise included, is the
same for the same generator, and everything here holds unchanged; memory and work follow the
rows read, not the tuples.

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

import math
import numbers
from collections.abc import Callable, Sequence

import numpy as np

from dpgate import errors, noise
from dpgate.mechanisms.base import CodedRows, Synthesis, Synthesizer, checked_weights, tuple_counts
from dpgate.mechanisms.privbayes_model import (  # the model, its fitting and sampling
    DEFAULT_ENCODING,
    ENCODINGS,
    PrivBayesModel,
    _bit_width,
    _conditional,
    _encode,
    _noisy_conditionals,
    _noisy_counts,
    marginal_tables,
    marginal_tvd,
    norm_sub,
    sample,
    tvd_between,
)
from dpgate.mechanisms.privbayes_network import (  # network selection
    MAX_CANDIDATES,
    SCORES,
    _learn_network,
    _Plan,
    f_score,
    max_useful_cells,
    maximal_parent_sets,
    mi_sensitivity_substitution,
    mutual_information,
    r_score,
    score_sensitivity,
    useful_degree,
)

__all__ = [
    "DEFAULT_ENCODING", "ENCODINGS", "MAX_CANDIDATES", "MAX_CELLS", "MIN_CANDIDATES", "MODEL_CELLS", "PRIVBAYES_WORK",
    "ROWS_SHARE", "SCORES", "Independent", "PrivBayes", "PrivBayesModel", "f_score", "fit", "independent_baseline",
    "marginal_cap", "marginal_tables", "marginal_tvd", "max_useful_cells", "maximal_parent_sets",
    "mi_sensitivity_substitution", "mutual_information", "r_score", "sample", "score_sensitivity", "tvd_between",
    "useful_degree", "work_cap",
]  # fmt: skip

#: Share of ε spent on the noisy row count when the caller does not supply one.
ROWS_SHARE = 0.02
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
    weights: np.ndarray | None = None,
) -> PrivBayesModel:
    """Fit an ε-DP PrivBayes model to an integer-coded table.

    Args:
        codes: ``(rows, d)`` integer codes, column ``j`` in ``0 .. sizes[j] - 1``; at most one
            tuple per subject (neighbours add or remove one tuple).
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
        weights: how many tuples each row of ``codes`` stands for (``CodedRows.weights``: whole
            counts ≥ 0); the row count ``n`` is their sum and every count the weighted one, so the
            model and the generator's draws are those of the rows repeated.

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
    sizes_t, weights = _check_parameters(
        codes, sizes, epsilon, degree, theta, score, beta, encoding, noisy_rows, max_rows, weights
    )
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
            code="DP287", hint="use score R, or encoding 'binary' / 'gray'",
        )
    de = len(esizes)
    if degree is not None and degree > 0:
        biggest = sorted(esizes, reverse=True)[: degree + 1]
        if math.prod(biggest) > marginal_cap(de):
            raise errors.DataError(
                f"Degree {degree} allows marginals of {math.prod(biggest)} cells, more than the limit "
                f"{marginal_cap(de)} for {de} attributes", code="DP287",
                hint="use a smaller degree, or degree=None to choose it by θ-usefulness",
            )
    smallest_share = epsilon * min(ROWS_SHARE, (1 - ROWS_SHARE) * min(beta, 1 - beta) / max(de, 1))
    if smallest_share < 1e-8:
        raise errors.DataError(
            f"epsilon={epsilon:g} is too small to split over {de} attributes (a step would get {smallest_share:.3g})",
            code="DP275", hint="use a larger epsilon",
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
    if weights is not None and not weights.all():  # a row of weight 0 stands for no tuple
        codes, weights = codes[weights > 0], weights[weights > 0]
    n = codes.shape[0] if weights is None else int(weights.sum())  # exact: checked_weights
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
    network = _learn_network(cols, plan, rng, progress, weights=weights)

    noisy_from = k if (k is not None and not skip) else 0  # Algorithm 3.1 vs 3.3
    m = de - noisy_from
    epsilon_each = epsilon_conditionals / max(m, 1)
    charges += [(f"noisy marginal {i + 1}", epsilon_each) for i in range(noisy_from, de)]
    if progress is not None:
        progress(0.85, f"noisy conditionals: {m} marginals")
    rows_variance = noise.discrete_laplace_std(epsilon_rows, 1) ** 2 if epsilon_rows > 0 else None
    conds, rows_estimate = _noisy_conditionals(
        cols, esizes, network, noisy_from, epsilon_each, float(noisy_rows), rows_variance, rng, weights
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
    codes, sizes, epsilon, degree, theta, score, beta, encoding, noisy_rows, max_rows, weights=None
) -> tuple[tuple[int, ...], np.ndarray | None]:
    """Refusals that depend only on public parameters and the table's shape (never on values),
    and the caller's slips: codes outside their domains, bad ``weights`` (``base.checked_weights``).

    Returns the sizes and the weights as ``checked_weights`` returns them."""
    if not (isinstance(epsilon, numbers.Real) and math.isfinite(epsilon) and epsilon > 0):
        raise errors.DataError(f"epsilon must be a positive finite number, got {epsilon!r}", code="DP275")
    if not (isinstance(beta, numbers.Real) and 0 < beta < 1):
        raise errors.DataError(f"beta (the network's share of ε) must be in (0, 1), got {beta!r}", code="DP287")
    if score not in SCORES:
        raise errors.InternalError(f"Unknown score {score!r}", hint=f"use one of {', '.join(SCORES)}")
    if encoding == "hierarchical":
        raise errors.InternalError(
            "Hierarchical encoding needs a taxonomy tree per attribute, which this core does not receive",
            hint="use encoding 'vanilla' (the thesis finds Vanilla-R ≈ Hierarchical-R on marginals)",
        )
    if encoding not in ENCODINGS:
        raise errors.InternalError(f"Unknown encoding {encoding!r}", hint=f"use one of {', '.join(ENCODINGS)}")
    if degree is None:
        if theta is None or not (isinstance(theta, numbers.Real) and math.isfinite(theta) and theta > 0):
            raise errors.InternalError(
                f"theta must be a positive number when degree is not given, got {theta!r}",
                hint="pass theta (the thesis uses 3; 2-4 works) or a fixed degree",
            )
    elif not (isinstance(degree, (int, np.integer)) and degree >= 0):
        raise errors.InternalError(f"degree must be a non-negative integer, got {degree!r}")
    if noisy_rows is not None and not (math.isfinite(noisy_rows)):
        raise errors.InternalError(f"noisy_rows must be finite, got {noisy_rows!r}")
    if max_rows is not None and not (isinstance(max_rows, (int, np.integer)) and max_rows >= 1):
        raise errors.InternalError(f"max_rows must be a positive integer, got {max_rows!r}")
    sizes_t = tuple(int(s) for s in sizes)
    if not sizes_t or any(s < 1 for s in sizes_t):
        raise errors.InternalError("every attribute needs a domain of at least one value", details_sizes=sizes_t)
    if max(sizes_t) > MAX_CELLS:
        raise errors.UnsupportedQueryError(
            f"A domain of {max(sizes_t)} values is larger than the limit of {MAX_CELLS} cells per marginal",
            code="DP266", hint="coarsen the attribute (bins or a taxonomy level) before synthesis",
        )
    if sum(sizes_t) > MODEL_CELLS:
        raise errors.UnsupportedQueryError(
            f"The attributes' domains hold {sum(sizes_t):,} values in all, more than the limit of {MODEL_CELLS:,} "
            "cells per model", code="DP266", hint="synthesize fewer or coarser columns (the columns and bins options)",
        )  # fmt: skip
    arr = np.asarray(codes)
    if arr.ndim != 2 or arr.shape[1] != len(sizes_t) or not np.issubdtype(arr.dtype, np.integer):
        raise errors.InternalError(
            f"codes must be an integer array of shape (rows, {len(sizes_t)}), got {arr.dtype} {arr.shape[1:]}"
        )
    w = checked_weights(weights, arr.shape[0])
    if arr.shape[0] and (arr.min() < 0 or np.any(arr.max(axis=0) >= np.array(sizes_t))):
        # the caller encodes to declared domains; a code outside them is a caller bug
        raise errors.InternalError("PrivBayes received a code outside its declared domain")
    if max_rows is not None and (arr.shape[0] if w is None else int(w.sum())) > max_rows:
        raise errors.InternalError("PrivBayes received more rows than the declared bound max_rows")
    return sizes_t, w


def independent_baseline(
    codes: np.ndarray, sizes: Sequence[int], epsilon: float, *, rng: np.random.Generator,
    weights: np.ndarray | None = None,
) -> PrivBayesModel:
    """The empty network: each attribute's noisy 1-way marginal at ``ε / d`` (sensitivity 1).

    Post-processing as in ``fit``: the noisy row count is the inverse-variance mean of the
    noisy marginals' totals, and each marginal is made non-negative by Norm-Sub to that total.
    ``weights``: how many tuples each row of ``codes`` stands for (``CodedRows.weights``); the
    marginals are then the weighted counts, the same as over the rows repeated.
    """
    sizes_t, weights = _check_parameters(codes, sizes, epsilon, None, 1.0, "R", 0.5, "vanilla", None, None, weights)
    d = len(sizes_t)
    cols, layout = _encode(np.asarray(codes), sizes_t, "vanilla")
    each = epsilon / d
    # each attribute's counts over its full domain, a tuple adding 1 to one cell [sens-counts]
    counts = [tuple_counts(cols[j].astype(np.int64), sizes_t[j], weights).reshape(-1, 1) for j in range(d)]
    noisy = [_noisy_counts(c, each, rng) for c in counts]  # [noise]
    cell_var = noise.discrete_laplace_std(each, 1) ** 2
    w = [1.0 / max(v.size * cell_var, 1e-12) for v in noisy]
    total = sum(wi * float(v.sum()) for wi, v in zip(w, noisy)) / sum(w)
    conds = []
    for v in noisy:
        c = _conditional(norm_sub(v, total))  # [post]
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


class PrivBayes(Synthesizer):
    """``USING privbayes``: ``fit`` on ``CodedRows``, weighted rows read as they are (not repeated);
    options are ``fit``'s keyword arguments."""

    NAME = "privbayes"

    def synthesize(self, data: CodedRows, *, epsilon, delta=0.0, rng, options, progress=None) -> Synthesis:
        model = fit(data.codes, list(data.sizes), epsilon, rng=rng, progress=progress, weights=data.weights,
                    **options)  # fmt: skip
        return Synthesis(model, epsilon)


class Independent(Synthesizer):
    """``USING independent``: ``independent_baseline`` on ``CodedRows`` (no options)."""

    NAME = "independent"

    def synthesize(self, data: CodedRows, *, epsilon, delta=0.0, rng, options, progress=None) -> Synthesis:
        model = independent_baseline(data.codes, list(data.sizes), epsilon, rng=rng, weights=data.weights)
        return Synthesis(model, epsilon)
