"""Personalized differential privacy: which subjects a query uses, at what ε, and what each pays.

**Reference:** Li, Xiong, Ji, Jiang, "Partitioning-Based Mechanisms Under Personalized
Differential Privacy", PAKDD 2017 (its printed algorithms are
corrected here where they are wrong); Jorgensen, Yu, Cormode, "Conservative or Liberal? Personalized
Differential Privacy", ICDE 2015 (minimum, threshold and sample mechanisms).

**Guarantee:** ϕ-PDP: for every subject u and neighbouring databases differing in all the rows
of u (added or removed; the roster and budgets are public), the output distributions differ by
at most a factor ``exp(charge_u)``, where ``charge_u`` is what the ledger debits u [pdp]. Per
subject, charges compose sequentially across queries and never exceed the lifetime budget.

**Sensitivity:** none of its own: a rule decides from the roster (public) who takes part and at
what ε; the mechanism it wraps states the sensitivity of what it releases.

**Allowances.** For a query asking ε_q, subject u's allowance is ε_q if u has at least ε_q left,
and otherwise what u has left rounded *down* to the grid ``GRID`` (0.001) [allowance]; a zero
allowance excludes u. Allowances depend only on the roster (public), never on the rows.

**Rules** (every one plugs into the same ledger transaction; the charge table below):

- ``minimum``: everyone at the smallest allowance e; everyone pays e.
- ``threshold``: subjects whose allowance is ε_q are used at ε_q and pay ε_q; the others pay 0.
- ``sample``: subjects with allowance ε_q are used; a subject with a smaller allowance a_u is
  used with probability ``(e^{a_u} - 1) / (e^{ε_q} - 1)`` and pays a_u, sampled or not
  [sample]. The mechanism runs at ε_q on the sample; Poisson subsampling amplifies it to
  ``ln(1 + p (e^{ε_q} - 1)) = a_u`` for u (add/remove neighbours). Works for any ε-DP mechanism
  (``sample_probabilities`` and ``draw_sample`` are the generic wrapper).
- ``partition``: allowances sorted and cut into contiguous partitions (privacy-aware: least
  waste; utility-based: most combined precision), each run at its smallest allowance; each
  member pays that minimum [partition]. Parallel composition: a subject's rows are in one
  partition only, and the partition map is a function of public allowances.
- ``t_round``: partitioning repeated on what is left of the allowances; a subject pays the sum
  of its partitions' minima over the rounds (sequential composition) [rounds].

**Accuracy / combination.** A rule that uses a subset of the subjects with an allowance (threshold,
sample, partitions) answers for all of them by scaling with public sizes: partition i's noisy
total y_i estimates ``N / n_i · y_i``, and the estimates are averaged with inverse-variance
weights computed from public (n_i, ε_i) and a public prior [combine]. This is unbiased only if
budgets are independent of the data (the paper's assumption); the reported interval covers the
noise only, conservatively (a union bound over the partitions). With one partition and nobody
left out, nothing is scaled and the rules coincide.

**Proof sketch:** the plan (allowances, partitions, charges, sampling probabilities) is computed
from the roster only [allowance]; partitions are disjoint sets of subjects each handled by an
ε_i-DP mechanism with ε_i ≤ every member's charge [partition]; rounds compose [rounds];
Poisson sampling with the stated p gives u exactly a_u [sample]; the combination uses public
weights and the noisy outputs only [combine].
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal

import numpy as np

from dpgate import errors, noise

#: Allowances below the query's ε are rounded down to this grid (never up: no guarantee weakens).
GRID = Decimal("0.001")
RULES = ("minimum", "threshold", "sample", "partition", "t_round")
#: Default smallest partition (subjects), enforced inside the partitioning dynamic programs.
MIN_PARTITION_SIZE = 100
MAX_PARTITIONS = 16


@dataclass(frozen=True)
class Level:
    """All subjects with the same allowance."""

    allowance: Decimal
    count: int


@dataclass(frozen=True)
class Part:
    """A group of subjects run together at one ε: allowances in [low, high] of one round."""

    index: int
    round: int
    low: Decimal
    high: Decimal
    size: int
    epsilon: Decimal


@dataclass(frozen=True)
class SubjectPlan:
    """What a personalization rule does with the subjects of one query (all public)."""

    rule: str
    requested: Decimal
    levels: tuple[Level, ...]  # subjects with an allowance > 0, ascending
    parts: tuple[Part, ...]
    charges: dict[Decimal, Decimal]  # allowance -> total charge
    sample_probability: dict[Decimal, float] = field(default_factory=dict)  # allowance -> p (sample rule)
    excluded: int = 0  # subjects with nothing left
    left_out: int = 0  # subjects with an allowance that the rule does not use (threshold)
    assignment: dict[tuple[Decimal, int], int] = field(default_factory=dict)  # (allowance, round) -> part

    @property
    def used(self) -> int:
        return sum(lv.count for lv in self.levels if self.charges.get(lv.allowance, 0) > 0)

    @property
    def population(self) -> int:
        """Subjects the answer speaks for: everyone with an allowance."""
        return sum(lv.count for lv in self.levels)

    @property
    def max_charge(self) -> Decimal:
        return max(self.charges.values(), default=Decimal(0))

    @property
    def combined(self) -> bool:
        """Answers are combined or scaled: several partitions, subjects left out, or some sampled."""
        sampled = self.rule == "sample" and any(p < 1 for p in self.sample_probability.values())
        return len(self.parts) > 1 or self.left_out > 0 or sampled

    @property
    def uniform(self) -> bool:
        """Everyone with an allowance pays the same, and nobody is left out or sampled."""
        sampled = any(p < 1 for p in self.sample_probability.values())
        return len(set(self.charges.values())) <= 1 and not self.excluded and not self.left_out and not sampled

    def rows(self) -> list[tuple[Decimal, int, int, Decimal]]:
        """(allowance, round, part, total charge) for every level the rule uses: the SQL mapping."""
        out = []
        for (a, r), part in sorted(self.assignment.items()):
            out.append((a, r, part, self.charges[a]))
        return out

    def describe(self) -> list[str]:
        lines = []
        for p in self.parts:
            rng = _fmt(p.low) if p.low == p.high else f"[{_fmt(p.low)}, {_fmt(p.high)}]"
            rnd = f"round {p.round + 1}, " if self.rule == "t_round" else ""
            lines.append(f"{rnd}partition {p.index}: {p.size} subject(s) with allowance {rng}, run at ε={_fmt(p.epsilon)}")
        return lines

    def charge_distribution(self) -> list[tuple[Decimal, int]]:
        """(charge, number of subjects paying it), highest first — never an individual's identity."""
        by: dict[Decimal, int] = {}
        for lv in self.levels:
            c = self.charges[lv.allowance]
            by[c] = by.get(c, 0) + lv.count
        return sorted(by.items(), reverse=True)


def _fmt(d: Decimal) -> str:
    return f"{float(d):g}"


# -- allowances ----------------------------------------------------------------------------------
def allowance_levels(remaining: dict[Decimal, int], requested: Decimal) -> tuple[list[Level], int]:
    """Group subjects by allowance [allowance]: ``remaining`` maps a remaining budget (exact) to a count."""
    by: dict[Decimal, int] = {}
    excluded = 0
    for rem, count in remaining.items():
        a = allowance(rem, requested)
        if a <= 0:
            excluded += count
        else:
            by[a] = by.get(a, 0) + count
    return [Level(a, by[a]) for a in sorted(by)], excluded


def allowance(remaining: Decimal, requested: Decimal) -> Decimal:
    if remaining >= requested:
        return requested
    if remaining <= 0:
        return Decimal(0)
    return (remaining / GRID).to_integral_value(rounding="ROUND_FLOOR") * GRID


# -- the rules ---------------------------------------------------------------------------------------
def plan(
    rule: str,
    levels: Sequence[Level],
    requested: Decimal,
    *,
    excluded: int = 0,
    partitioning: str = "utility",
    partitions: int | None = None,
    rounds: int = 2,
    min_size: int = MIN_PARTITION_SIZE,
    unit_variance: float = 0.25,
    noise_factor: float = 2.0,
    strata: bool = False,
) -> SubjectPlan:
    """The subject plan of one query under ``rule`` (see the module docstring).

    ``unit_variance`` is the public prior on a subject's contribution variance (in units of the
    contribution range squared) and ``noise_factor`` the noise variance times ε² per unit of
    sensitivity (2 for Laplace); both only shape partition choices and weights. ``strata``
    (sample rule) splits the subjects into one part per inclusion probability, for mechanisms
    that aggregate per part (the counting class); others run on one part.
    """
    levels = [lv for lv in levels if lv.count > 0]
    if not levels:
        raise errors.BudgetExceededError(
            "No subject has any budget left for this query", code="DP403",
            hint="SHOW BUDGET shows how much subjects have left",
        )  # fmt: skip
    if rule == "minimum":
        e = levels[0].allowance
        return _single(rule, levels, requested, e, {lv.allowance: e for lv in levels}, excluded)
    if rule == "threshold":
        full = [lv for lv in levels if lv.allowance == requested]
        if not full:
            raise errors.BudgetExceededError(
                f"No subject has ε={requested:g} left", code="DP403",
                hint="ask with a smaller epsilon, or use personalization = 'sample' or 'partition'",
            )  # fmt: skip
        charges = {lv.allowance: (requested if lv.allowance == requested else Decimal(0)) for lv in levels}
        part = Part(0, 0, requested, requested, full[0].count, requested)
        left_out = sum(lv.count for lv in levels if lv.allowance != requested)
        assignment = {(requested, 0): 0}
        return SubjectPlan(rule, requested, tuple(levels), (part,), charges, {}, excluded, left_out, assignment)
    if rule == "sample":
        # The threshold ε_T is the requested ε, or the largest allowance when nobody has ε left:
        # the mechanism runs at ε_T, and a subject with allowance a < ε_T is kept with
        # probability (e^a - 1)/(e^ε_T - 1), so its data is used at exactly a [sample]. With
        # every allowance equal to a < ε this runs at a on everyone, nobody sampled.
        threshold = min(requested, levels[-1].allowance)
        charges = {lv.allowance: lv.allowance for lv in levels}  # allowance ≤ ε_T
        probs = {lv.allowance: sample_probability(lv.allowance, threshold) for lv in levels}
        if not strata:
            return _single(rule, levels, requested, threshold, charges, excluded, probs)
        # One part (stratum) per inclusion probability, all run at ε_T: each stratum's total is
        # scaled by 1/p (Horvitz-Thompson), so the estimate is unbiased for everyone with an
        # allowance whatever their values [ht]. Strata are disjoint: each subject is in one.
        by_p: dict[float, list[Level]] = {}
        for lv in levels:
            by_p.setdefault(probs[lv.allowance], []).append(lv)
        parts_s, assignment_s = [], {}
        for i, prob in enumerate(sorted(by_p, reverse=True)):
            lvs = by_p[prob]
            parts_s.append(Part(i, 0, lvs[0].allowance, lvs[-1].allowance, sum(lv.count for lv in lvs), threshold))
            for lv in lvs:
                assignment_s[(lv.allowance, 0)] = i
        return SubjectPlan(rule, requested, tuple(levels), tuple(parts_s), charges, probs, excluded, 0, assignment_s)
    if rule in ("partition", "t_round"):
        n_rounds = rounds if rule == "t_round" else 1
        parts: list[Part] = []
        assignment: dict[tuple[Decimal, int], int] = {}
        charges = {lv.allowance: Decimal(0) for lv in levels}
        left = {lv.allowance: lv.allowance for lv in levels}  # what each level still has in this query
        for r in range(n_rounds):
            cur = [(left[lv.allowance], lv.count, lv.allowance) for lv in levels if left[lv.allowance] > 0]
            if not cur:
                break
            # group original levels by their current leftover (levels with equal leftovers merge)
            merged: dict[Decimal, int] = {}
            for rem, cnt, _ in cur:
                merged[rem] = merged.get(rem, 0) + cnt
            eps = sorted(merged)
            counts = [merged[e] for e in eps]
            cuts = choose_partition(
                [float(e) for e in eps], counts, partitioning, partitions, min_size, unit_variance, noise_factor
            )
            start = 0
            for end in cuts:
                seg_eps, seg_n = eps[start:end], sum(counts[start:end])
                parts.append(Part(len(parts), r, seg_eps[0], seg_eps[-1], seg_n, seg_eps[0]))
                start = end
            for rem, _, orig in cur:
                p = next(p for p in parts if p.round == r and p.low <= rem <= p.high)
                charges[orig] += p.epsilon
                left[orig] = rem - p.epsilon
                assignment[(orig, r)] = p.index
            if rule == "partition":
                break
        return SubjectPlan(rule, requested, tuple(levels), tuple(parts), charges, {}, excluded, 0, assignment)
    raise errors.ProgrammingError(
        f"Unknown personalization {rule!r}", code="DP205", hint="one of " + ", ".join(RULES)
    )


def _single(rule, levels, requested, e, charges, excluded, probs=None) -> SubjectPlan:
    part = Part(0, 0, levels[0].allowance, levels[-1].allowance, sum(lv.count for lv in levels), e)
    assignment = {(lv.allowance, 0): 0 for lv in levels}
    return SubjectPlan(rule, requested, tuple(levels), (part,), charges, probs or {}, excluded, 0, assignment)


def used_epsilon(plan: SubjectPlan) -> dict[Decimal, float]:
    """The ε at which each allowance level's data is used by the mechanisms the plan runs.

    Read from the same fields the mechanisms read (the parts' ε, the assignment to parts, the
    sample probabilities): a subject in part P of every round it is assigned to is used at
    the sum of those parts' ε; under the sample rule a subject kept with probability p by a
    mechanism at ε_T is used at ln(1 + p (e^ε_T - 1)) [sample]; one that is left out, at 0.
    The contract is ``used_epsilon(plan)[a] <= plan.charges[a] <= a`` for every level.
    """
    used: dict[Decimal, float] = {lv.allowance: 0.0 for lv in plan.levels}
    for (allowance, _round), index in plan.assignment.items():
        if allowance not in used:
            continue
        eps = float(plan.parts[index].epsilon)
        p = plan.sample_probability.get(allowance, 1.0) if plan.rule == "sample" else 1.0
        used[allowance] += math.log1p(p * math.expm1(eps)) if p < 1 else eps
    return used


def sample_probability(a: Decimal, threshold: Decimal) -> float:
    """Inclusion probability of a subject with allowance a under Sample(ε_T) [sample].

    ``(e^a - 1) / (e^ε_T - 1)``, rounded *down* (a smaller p only lowers u's loss).
    """
    if a >= threshold:
        return 1.0
    p = math.expm1(float(a)) / math.expm1(float(threshold))
    return max(0.0, math.nextafter(p, 0.0))


def draw_sample(probabilities: np.ndarray, *, rng: np.random.Generator) -> np.ndarray:
    """Independent exact Bernoulli draws (one per subject) with the given probabilities."""
    out = np.ones(len(probabilities), dtype=bool)
    for p in np.unique(probabilities):
        idx = np.flatnonzero(probabilities == p)
        if p < 1.0:
            out[idx] = noise._bernoulli_dyadic(float(p), len(idx), rng)
    return out


# -- partitioning (the paper's, corrected) --------------------------------------------------
def waste(eps: Sequence[float], counts: Sequence[int], cuts: Sequence[int]) -> float:
    """Total waste Σ_i Σ_{j∈D_i} (ε_j - min ε in D_i) of contiguous partitions ending at ``cuts``."""
    total, start = 0.0, 0
    for end in cuts:
        m = eps[start]
        total += sum((e - m) * c for e, c in zip(eps[start:end], counts[start:end]))
        start = end
    return total


def privacy_aware(eps: Sequence[float], counts: Sequence[int], k: int, min_size: int) -> tuple[float, list[int]]:
    """Least-waste split of the sorted levels into exactly k contiguous parts of ≥ min_size subjects.

    F[c][j] = min_{i<j, n(i..j) ≥ T} F[c-1][i] + W(i+1..j), with W from prefix sums (O(k L²)).
    Returns (waste, cut positions); waste is inf when no split satisfies the sizes.
    """
    return _segment_dp(_waste_matrix(eps, counts, min_size), k)[k]


def _waste_matrix(eps: Sequence[float], counts: Sequence[int], min_size: int) -> np.ndarray:
    e = np.asarray(eps, dtype=float)
    n = np.asarray(counts, dtype=float)
    cum_n = np.concatenate([[0.0], np.cumsum(n)])
    cum_en = np.concatenate([[0.0], np.cumsum(e * n)])
    L = len(e)
    # W[i, j]: waste of levels i..j-1 (segment from i inclusive to j exclusive), min at level i
    i = np.arange(L)[:, None]
    j = np.arange(L + 1)[None, :]
    seg_n = cum_n[j] - cum_n[i]
    W = (cum_en[j] - cum_en[i]) - seg_n * e[i]
    ok = (j > i) & (seg_n >= min_size)
    return np.where(ok, W, np.inf)


def utility_based(
    eps: Sequence[float], counts: Sequence[int], k: int, min_size: int, utility: str = "square"
) -> tuple[float, list[int]]:
    """Most utility: max Σ_i U(n_i, ε_i) with U = (n ε)², the precision of a partition's noisy fraction.

    (With the linear U = nε — ``utility="linear"`` — the objective equals total budget minus
    waste, so utility-based reduces to privacy-aware partitioning; the square gives
    a real trade-off between partition size and budget.)
    """
    value, cuts = _segment_dp(-_utility_matrix(eps, counts, min_size, utility), k)[k]
    return -value, cuts


def _utility_matrix(eps: Sequence[float], counts: Sequence[int], min_size: int, utility: str = "square") -> np.ndarray:
    e = np.asarray(eps, dtype=float)
    n = np.asarray(counts, dtype=float)
    cum_n = np.concatenate([[0.0], np.cumsum(n)])
    L = len(e)
    i = np.arange(L)[:, None]
    j = np.arange(L + 1)[None, :]
    seg_n = cum_n[j] - cum_n[i]
    U = (seg_n * e[i]) ** 2 if utility == "square" else seg_n * e[i]
    ok = (j > i) & (seg_n >= min_size)
    return np.where(ok, U, -np.inf)


def _segment_dp(cost: np.ndarray, k: int) -> dict[int, tuple[float, list[int]]]:
    """For every c ≤ k: min over cuts 0 = c_0 < ... < c_c = L of Σ cost[c_{t-1}, c_t] (segment i..j-1).

    The corrected dynamic program: base case F[0][0] = 0, no empty segment, memoised, and
    the argmins are kept so every boundary (not only the last) is recovered.
    """
    L = cost.shape[0]
    F = np.full((k + 1, L + 1), np.inf)
    arg = np.zeros((k + 1, L + 1), dtype=np.int64)
    F[0, 0] = 0.0
    for c in range(1, k + 1):
        cand = F[c - 1][:L, None] + cost  # [i, j]
        best = np.argmin(cand, axis=0)
        F[c] = cand[best, np.arange(L + 1)]
        arg[c] = best
    out: dict[int, tuple[float, list[int]]] = {}
    for kk in range(1, k + 1):
        if not np.isfinite(F[kk, L]):
            out[kk] = (np.inf, [])
            continue
        cuts, j = [], L
        for c in range(kk, 0, -1):
            cuts.append(j)
            j = int(arg[c, j])
        out[kk] = (float(F[kk, L]), sorted(cuts))
    return out


def optimal_weights(sizes: Sequence[float], noise_variances: Sequence[float], unit_variance: float) -> np.ndarray:
    """Weights w (Σ w = 1) of T = Σ_i w_i (N/n_i) y_i minimising its mean squared error [combine].

    Model: partition i's true total is n_i μ + e_i with Var(e_i) = n_i τ² (τ² = ``unit_variance``,
    a public prior on one subject's contribution), and its noise has variance v_i. Then
    ``MSE(w) = Σ A_i (w_i - π_i)² + Σ B_i w_i²`` with π_i = n_i / N, A_i = N² τ² / n_i,
    B_i = N² v_i / n_i², minimised in closed form (Lagrange). Weights near π_i reproduce the
    exact total (no selection error, all the noise); weights near 1/B_i drop noisy partitions.
    """
    n = np.asarray(sizes, dtype=float)
    v = np.asarray(noise_variances, dtype=float)
    N = n.sum()
    pi = n / N
    A = N**2 * unit_variance / n
    B = N**2 * v / n**2
    lam = (1.0 - np.sum(A * pi / (A + B))) / np.sum(1.0 / (A + B))
    return (A * pi + lam) / (A + B)


def _split_mse(sizes: Sequence[float], noise_variances: Sequence[float], unit_variance: float) -> float:
    """MSE of the combined total of disjoint partitions with optimal weights (``optimal_weights``)."""
    n = np.asarray(sizes, dtype=float)
    v = np.asarray(noise_variances, dtype=float)
    N = n.sum()
    w = optimal_weights(n, v, unit_variance)
    return float(np.sum(N**2 * unit_variance / n * (w - n / N) ** 2) + np.sum(N**2 * v / n**2 * w**2))


def _split_stats(eps, counts, cuts, noise_factor):
    sizes, variances, start = [], [], 0
    for end in cuts:
        sizes.append(float(sum(counts[start:end])))
        variances.append(noise_factor / eps[start] ** 2)
        start = end
    return sizes, variances


def choose_partition(
    eps: Sequence[float], counts: Sequence[int], partitioning: str, partitions: int | None, min_size: int,
    unit_variance: float = 0.25, noise_factor: float = 2.0,
) -> list[int]:  # fmt: skip
    """Cut positions for the levels: k given, or the k whose split has the smallest predicted MSE.

    For each k the split itself comes from the chosen objective (least waste, or most Σ (n ε)²),
    computed by dynamic programming over the allowance levels with the minimum size enforced
    inside the program.
    """
    L = len(eps)
    total = sum(counts)
    size_floor = min_size if total >= 2 * min_size else 0
    k_max = max(1, min(L, MAX_PARTITIONS, total // max(min_size, 1)))
    ks = [min(partitions, L)] if partitions else list(range(1, k_max + 1))
    if partitioning == "privacy":
        splits = _segment_dp(_waste_matrix(eps, counts, size_floor), max(ks))
    elif partitioning == "utility":
        splits = _segment_dp(-_utility_matrix(eps, counts, size_floor), max(ks))
    else:
        raise errors.ProgrammingError(
            f"Unknown partitioning {partitioning!r}", code="DP205", hint="'privacy' or 'utility'"
        )
    best_cuts, best_mse = [L], math.inf
    for k in ks:
        _, cuts = splits[k]
        if not cuts:
            continue
        mse = _split_mse(*_split_stats(eps, counts, cuts, noise_factor), unit_variance)
        if mse < best_mse:
            best_cuts, best_mse = cuts, mse
    if partitions and best_mse == math.inf:
        raise errors.PolicyError(
            f"Cannot make {partitions} partitions of at least {min_size} subjects", code="DP306",
            hint="ask for fewer partitions, a smaller min_partition_size, or let dpgate choose",
        )  # fmt: skip
    return best_cuts


# -- combining the partitions' answers [combine] ---------------------------------------------------------
def atoms(plan: SubjectPlan) -> tuple[np.ndarray, np.ndarray]:
    """Subjects grouped by the parts they belong to, one per round: (membership parts × atoms, sizes).

    Subjects no part uses (left out by the threshold) form an atom of their own with no parts.
    """
    by: dict[tuple[int, ...], int] = {}
    rounds = 1 + max((p.round for p in plan.parts), default=0)
    for lv in plan.levels:
        key = tuple(plan.assignment.get((lv.allowance, r), -1) for r in range(rounds))
        by[key] = by.get(key, 0) + lv.count
    keys = sorted(by)
    D = np.zeros((len(plan.parts), len(keys)))
    for a, key in enumerate(keys):
        for part in key:
            if part >= 0:
                D[part, a] = 1.0
    return D, np.array([by[k] for k in keys], dtype=float)


def coefficients(plan: SubjectPlan, noise_variances: Sequence[float], unit_variance: float) -> np.ndarray:
    """Coefficients c of the estimate T = Σ_j c_j y_j of the total over everyone with an allowance.

    y_j is part j's noisy total. Model: one subject's contribution is μ + e_u with Var(e_u) = τ²
    (``unit_variance``, public). T is unbiased for μ (Σ_j c_j n_j = N), and c minimises
    ``τ² Σ_u (a_u - 1)² + Σ_j c_j² v_j`` where a_u = Σ_{j ∋ u} c_j: the selection error of
    extrapolating from some subjects to all, plus the noise. With Q = τ² D diag(m) Dᵀ + diag(v)
    over the atoms (``atoms``), the solution is ``c = N Q⁻¹ n / (nᵀ Q⁻¹ n)`` [combine]. For
    disjoint partitions it weighs partition i by n_i / (τ² n_i + v_i); with one part it is N / n.
    """
    if plan.rule == "sample":
        if len(plan.parts) > 1 or _strata(plan):  # Horvitz-Thompson per stratum [ht]
            return np.array([1.0 / _part_probability(plan, part.index) for part in plan.parts])
        # one part: the expected sample speaks for everyone (ratio; its bias is bounded in the
        # interval by ``extrapolation``)
        return np.array([plan.population / _expected_sample(plan)])
    if plan.rule in ("threshold", "minimum", "partition"):
        # Every subject of the answer's population is in exactly one part, used exactly: the sum
        # of the parts is the population's total, with no extrapolation.
        return np.ones(len(plan.parts))
    D, m = atoms(plan)
    n = D @ m
    Q = unit_variance * (D * m) @ D.T + np.diag(np.asarray(noise_variances, dtype=float))
    q = np.linalg.solve(Q, n)
    return plan.population * q / (n @ q)


def _expected_sample(plan: SubjectPlan) -> float:
    """Expected number of subjects the sample rule keeps (public: counts and probabilities)."""
    return sum(lv.count * plan.sample_probability[lv.allowance] for lv in plan.levels)


def _part_probability(plan: SubjectPlan, index: int) -> float:
    probs = {plan.sample_probability[a] for (a, _), j in plan.assignment.items() if j == index}
    if len(probs) != 1:
        raise errors.InternalError("a sampling stratum mixes inclusion probabilities")
    return probs.pop()


def _strata(plan: SubjectPlan) -> bool:
    """One part whose subjects share one inclusion probability."""
    return len({plan.sample_probability[lv.allowance] for lv in plan.levels}) <= 1


def answer_population(plan: SubjectPlan) -> int:
    """Subjects an answer is about: everyone the rule uses (or samples with a known probability).

    Subjects with no budget left, and those the threshold rule leaves out, are not in it.
    """
    used = {a for (a, _r) in plan.assignment}
    return sum(lv.count for lv in plan.levels if lv.allowance in used)


def extrapolation(plan: SubjectPlan, c: Sequence[float], y_abs_max: float, alpha: float) -> tuple[float, float]:
    """Error of ``Σ_j c_j (exact total of part j)`` as an estimate of the population's total.

    The estimate is ``Σ_u w_u B_u y_u`` with w_u the sum of c over u's parts, B_u ~ Bernoulli(p_u)
    (p_u < 1 only under the sample rule) and |y_u| ≤ ``y_abs_max`` one subject's contribution
    (public: its sensitivity). Returns (a, b): with probability ≥ 1 - alpha the sampling error
    Σ_u w_u (B_u - p_u) y_u is at most a (Bernstein: independent terms bounded by w_u y_max,
    variance Σ_u w_u² p_u (1 - p_u) y_max²), and the bias Σ_u (w_u p_u - 1) y_u is at most b
    in absolute value (deterministic). Both come from public quantities only; b is 0 for
    Horvitz-Thompson strata and for rules that sum exact parts.
    """
    rounds = 1 + max((p.round for p in plan.parts), default=0)
    variance = bias = 0.0
    bound = 0.0
    for lv in plan.levels:
        parts = [plan.assignment[(lv.allowance, r)] for r in range(rounds) if (lv.allowance, r) in plan.assignment]
        if not parts:
            continue  # left out: not in the population
        w = float(sum(c[j] for j in parts))
        p = plan.sample_probability.get(lv.allowance, 1.0) if plan.rule == "sample" else 1.0
        variance += lv.count * w * w * p * (1 - p)
        if p < 1:
            bound = max(bound, w)
        gap = abs(w * p - 1.0)
        bias += lv.count * (gap if gap > 1e-9 else 0.0)
    variance *= y_abs_max**2
    sampling = 0.0
    if variance > 0:
        big_l = math.log(2.0 / alpha)
        m = bound * y_abs_max * big_l / 3.0
        sampling = m + math.sqrt(m * m + 2.0 * variance * big_l)
    return sampling, bias * y_abs_max


def population_scale(plan: SubjectPlan | None, noise_variance: float, unit_variance: float) -> float:
    """The factor from one part's answer to everyone with budget (1 when nobody was left out or
    sampled); for mechanisms that run on a single part of subjects (top-k, synthetic releases)."""
    if plan is None or not plan.combined:
        return 1.0
    if plan.rule == "sample":
        return plan.population / _expected_sample(plan)
    return 1.0  # threshold: the answer is about the subjects it uses


def predicted_mse(plan: SubjectPlan, noise_variances: Sequence[float], unit_variance: float) -> float:
    """Mean squared error of ``coefficients``' estimate under its model."""
    c = coefficients(plan, noise_variances, unit_variance)
    if plan.rule == "sample":
        # Poisson sampling: Var(Σ_u w_u B_u x_u) ≤ Σ_u w_u² p_u (1 - p_u) x_max², with x_max = 2τ
        part_of = {a: j for (a, _), j in plan.assignment.items()}
        sampling = sum(
            lv.count * c[part_of[lv.allowance]] ** 2 * p * (1 - p)
            for lv in plan.levels for p in [plan.sample_probability[lv.allowance]]
        )  # fmt: skip
        return float(4 * unit_variance * sampling + np.sum(c**2 * np.asarray(noise_variances)))
    D, m = atoms(plan)
    a = D.T @ c
    return float(unit_variance * np.sum(m * (a - 1) ** 2) + np.sum(c**2 * np.asarray(noise_variances)))
