"""PrivBayes, network selection: the score functions, θ-usefulness and the greedy search.

Part of ``privbayes`` (whose docstring holds the proof; the ``[labels]`` here are its). On the
encoded columns, ``_learn_network`` places the attributes one at a time, each step choosing an
(attribute, parents) pair with the exponential mechanism [em] over a public candidate set [cap].

**Guarantee:** each step is ε_step-DP for neighbouring tables that add or remove one tuple;
the ``d - 1`` steps compose to ``ε_network`` (``privbayes``).

**Sensitivity:** of each score on count tables (``score_sensitivity``): R is computed as ``n·R``
at sensitivity ``2`` plus a rounding margin [float]; F at 1; MI at ``mi_sensitivity_substitution``
with a public bound on the rows.

Rows may come weighted (``weights``: how many tuples each row stands for, ``CodedRows.weights``):
every count is then the weighted one, the same integers as over the rows repeated, and each score
is the same number on every path (dense, empty columns dropped, non-empty cells only), so which
path runs may depend on the rows read (their work) without changing the search.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dpgate import errors
from dpgate.mechanisms import exponential
from dpgate.mechanisms.base import tuple_counts

#: Score functions (Definition 3.1 / Equations 3.2, 3.4, 3.7).
SCORES = ("R", "F", "MI")
#: Public compute cap: at most this many candidates per exponential-mechanism step; larger
#: candidate sets are cut to a uniformly random subset (data-independent) [cap].
MAX_CANDIDATES = 2000
#: Add/remove sensitivity of n·R: 2, plus 2^-20 for the final rounding of the exact score
#: (covers every n ≤ 2^32) [float].
_R_SENSITIVITY = 2.0 + 2.0**-20
#: Up to this many rows, Σ |c n - a b| ≤ 2 n² fits in int64.
_EXACT_ROWS = 2_000_000_000


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
    # a·b as one rounded double, as ``_score_sparse`` computes it (no int64 overflow either)
    ratio = c[nz] * n / np.outer(a.astype(np.float64), b.astype(np.float64))[nz]
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
            raise errors.InternalError(
                "Score MI has no add/remove sensitivity without a public bound on the row count",
                hint="pass max_rows (e.g. the number of subjects), or use score R",
            )
        m = max(max_rows - 1, 1)  # g is increasing; g(1) = 2 also covers max_rows = 1
        return (math.log2(m + 1) + m * math.log2(1 + 1 / m)) * (1 + 2.0**-10)  # [float]
    raise errors.InternalError(f"Unknown score {score!r}", hint=f"use one of {', '.join(SCORES)}")


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


def _joint(cols, sizes, x: int, parents: Sequence[int], pcode=None, pcells=None, weights=None) -> np.ndarray:
    """Counts ``c[x, π]`` over the full public domain of (X, Π) [full-domain], each row counted
    once or ``weights`` times (int64 either way)."""
    if pcells is None:
        pcode, pcells = _parent_code(cols, sizes, parents)
    xv = cols[x].astype(np.int64)
    flat = xv if pcode is None else xv * pcells + pcode
    # one tuple adds exactly 1 to exactly one cell [sens-counts]
    return tuple_counts(flat, sizes[x] * pcells, weights).reshape(sizes[x], pcells)


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


def _score_candidates(cols, plan: _Plan, cands, cache: dict, weights=None) -> np.ndarray:
    """Count-unit scores of the candidates, computed once per (X, Π) and cached.

    Each score is the same number on every path, so the path is chosen by the rows read
    (``rows``: the distinct rows when weighted) and the work follows them, not the tuples.
    """
    todo: dict[tuple, list[int]] = {}
    for x, parents in cands:
        if (x, parents) not in cache:
            todo.setdefault(parents, []).append(x)
    rows = cols[0].shape[0] if cols else 0
    for parents, xs in todo.items():
        pcode, pcells = _parent_code(cols, plan.sizes, parents)
        seen = None  # the parent values that occur, numbered 0..: computed once per parent set
        for x in xs:
            if plan.score == "F" or plan.sizes[x] * pcells <= 2 * rows + 64:
                joint = _joint(cols, plan.sizes, x, parents, pcode, pcells, weights)
                cache[(x, parents)] = _score_counts(joint, plan.score)
                continue
            if seen is None:
                seen = np.unique(pcode, return_inverse=True)[1].reshape(-1) if pcode is not None else None
                width = int(seen.max()) + 1 if seen is not None and seen.size else 1
            if plan.sizes[x] * width <= 32 * rows + 1024:
                # the table without its empty parent columns: they add nothing to R or I
                flat = cols[x].astype(np.int64) * width + (0 if seen is None else seen)
                joint = tuple_counts(flat, plan.sizes[x] * width, weights).reshape(plan.sizes[x], width)
                cache[(x, parents)] = _score_counts(joint, plan.score)
            else:
                cache[(x, parents)] = _score_sparse(cols[x], pcode, pcells, plan.score, weights)
    return np.array([cache[c] for c in cands], dtype=np.float64)


def _score_sparse(xcol: np.ndarray, pcode: np.ndarray | None, pcells: int, score: str, weights=None) -> float:
    """``n·R`` or ``n·I`` from the non-empty cells only, for tables much larger than the rows.

    Every cell's product term ``a[x] b[π] / n`` adds up to ``n``, so the empty cells of R
    contribute ``n - Σ_non-empty a b / n`` (a sparse identity). Both are the dense table's
    numbers exactly: R in integers, I with the same doubles in the same (row-major) order.
    """
    flat = xcol.astype(np.int64) * pcells + (0 if pcode is None else pcode)
    cells, inv = np.unique(flat, return_inverse=True)
    c = tuple_counts(inv.reshape(-1), cells.size, weights)
    cells, c = cells[c > 0], c[c > 0]  # a row of weight 0 fills no cell
    n = int(c.sum())
    if n == 0:
        return 0.0
    xi = cells // pcells
    _, pinv = np.unique(cells % pcells, return_inverse=True)
    a = np.bincount(xi, weights=c).astype(np.int64)[xi]
    b = np.bincount(pinv.reshape(-1), weights=c).astype(np.int64)[pinv.reshape(-1)]
    if score == "R":  # exact: Σ_non-empty |c n - a b| + n² - Σ_non-empty a b
        if n <= _EXACT_ROWS:
            ab = a * b
            return (int(np.abs(c * n - ab).sum()) + n * n - int(ab.sum())) / (2 * n)
        ab_all = [int(ai) * int(bi) for ai, bi in zip(a.tolist(), b.tolist())]
        total = sum(abs(int(ci) * n - ab) for ci, ab in zip(c.tolist(), ab_all))
        return (total + n * n - sum(ab_all)) / (2 * n)
    cf, af, bf = c.astype(np.float64), a.astype(np.float64), b.astype(np.float64)
    return max(0.0, float((cf * np.log2(cf * n / (af * bf))).sum()))


def _learn_network(cols, plan: _Plan, rng, progress=None, weights=None) -> list[tuple[int, tuple[int, ...]]]:
    """GreedyBayes with one exponential mechanism per step (Algorithms 3.2 / 3.4); ``weights``
    as in ``_joint`` (the scores, hence every draw, are those of the rows repeated)."""
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
        scores = _score_candidates(cols, plan, cands, cache, weights=weights)
        pick = exponential.exponential_mechanism(scores, plan.epsilon_step, plan.sensitivity, rng=rng)  # [em]
        x, parents = cands[pick]
        network.append((x, parents))
        placed.append(x)
        rest.remove(x)
        if progress is not None:
            progress(0.8 * step / (d - 1), f"network: {step}/{d - 1} attributes placed")
    return network
