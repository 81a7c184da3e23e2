"""DiffPart: set-valued (transaction) data released as noisy itemset multiplicities.

Chen, Mohammed, Fung, Desai, Xiong, "Publishing Set-Valued Data via Differential Privacy",
PVLDB 4(11), 2011 — Algorithm 1 with Procedure 1, in the "merged leaf" reading described below.

**Guarantee.** ε-differential privacy (pure, δ = 0) for the total budget ``B = epsilon``.
**Neighbouring relation.** Add or remove one record (one subject's whole transaction: the set
of its items). Under substitution the same argument gives 2ε.
**Sensitivity.** Every data access is the size of one partition (a count of records): adding
or removing a record changes exactly one sub-partition of each operation on its chain by 1
(sensitivity 1, discrete Laplace noise). Sub-partitions of one operation are disjoint, so
they compose in parallel.

**Algorithm.** A context-free taxonomy groups the declared items (sorted, as the owner declared
them: public, never ordered by the data) consecutively into a balanced ``fanout``-ary tree. All
records start in one partition whose hierarchy cut is the root. An operation on a partition p
picks an internal node u of maximal height in p's cut (at random: data-independent) and tests
*every* one of the 2^l − 1 ways to replace u by a non-empty subset of its l children — the
non-empty sub-partitions with their record counts, the empty ones with count 0 — by a noisy
count against a threshold; survivors are expanded further. Budget: B/2 for partitioning, spent
adaptively along each chain, ``α̃ = B̃ / |InternalNodes(cut)|`` and ``B̃_child = B̃ − α̃``; the
other B/2 goes to the leaves.

**Merged leaf level (our reading; the paper's pseudocode and examples disagree).** The printed
pseudocode tests a leaf sub-partition at α̃ and counts it again at B/2 (its unused B̃ is then
always 0); the paper's worked examples give leaves B/2 + the parent's unused B̃ in one count.
We follow the examples, which is consistent only if the partition-level test of leaf
candidates is skipped: when ``|InternalNodes(p.cut)| = 1`` (p's only internal node has
leaves as children), every one of the 2^l − 1 leaf candidates gets one noisy count at
``ε_leaf = B/2 + p.B̃`` and is released with that many copies when it reaches
``max(1, ⌈√2·C1/ε_leaf⌉)``.

**Proof of the budget (telescoping, paper App. F.4).** On a chain with m operations and
n_i = |InternalNodes(cut_i)| (n_i ≥ 1, n_m = 1 at the leaf level), operation i < m spends
``α_i = (B/2)·∏_{j<i}(1 − 1/n_j)·(1/n_i)`` and the leaf count spends ``B/2 + B̃_m``, where
``B̃_m = (B/2)·∏_{j<m}(1 − 1/n_j)``. The sum is ``B/2·(1 − ∏(1 − 1/n_j)) + B/2·∏(1 − 1/n_j) +
B/2 = B``: every chain spends exactly B (chains cut short spend less). A record lies on one
chain per run (its sub-partition at each operation), the candidate tests that do not hold it
do not depend on it, and so adding or removing it changes the output's probability by at most
e^B. The budgets are exact fractions (``fractions.Fraction``), converted to floats only for
the sampler, which runs at ε − 1e−10 (``dpgate.noise``).

**Thresholds.** Non-leaf: ``⌈√2·C2·h/α̃⌉`` with h the height of u; leaf: ``⌈√2·C1/ε_leaf⌉``
(at least 1 copy). An empty candidate passes with probability ``a^k/(1+a)`` (a = e^−ε), which
does not depend on B: fake partitions multiply unless ``(2^l − 1)·a^k/(1+a) < 1``. With
fan-out f this needs ``C2 > ln((2^f − 1)/2)/√2`` at h = 1 (4.41 for f = 10); the paper's
"slightly greater than 1" is supercritical for f ≥ 4, so C2 below that bound is refused
(``critical_c2``). Defaults are the authors' code's: C2 = 6.75, C1 = 2.75.

**Caps [cap].** The run stops (and releases what finished operations found) once the next
operation would take its work past ``max_work`` or its count past ``max_operations``; both are
counted from the transcript so far (an operation's cost is ``OPERATION_UNITS`` plus its 2^l − 1
candidates, public), so stopping is as private as finishing. The record matrix needs
``records × items`` bytes, bounded before the debit from the roster (``MAX_RECORD_CELLS``).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from dpgate import errors, noise
from dpgate.mechanisms.base import Synthesis, Synthesizer

DEFAULT_FANOUT = 10
DEFAULT_C1 = 2.75
DEFAULT_C2 = 6.75
MAX_FANOUT = 12  # 4,095 candidates per operation
#: Work cap of one release [cap]: an operation costs ``OPERATION_UNITS`` plus its candidates
#: (about 100 ns a unit: ~7 s in all). The operation count alone (1,000,000, of up to 4,095
#: candidates) allowed minutes after the debit.
MAX_WORK = 1 << 26
OPERATION_UNITS = 1000
#: The most cells (records × declared items) of the boolean record matrix a release builds.
MAX_RECORD_CELLS = 1 << 27
#: ``records_needed`` says at most this: far more records than any release reads (MAX_RECORD_CELLS).
NEEDED_CAP = 10**18
SQRT2 = math.sqrt(2.0)


def critical_c2(fanout: int) -> float:
    """The C2 below which fake partitions form a supercritical branching process (h = 1)."""
    return math.log((2**fanout - 1) / 2) / SQRT2 if fanout > 1 else 0.0


@dataclass(frozen=True)
class Taxonomy:
    """A balanced f-ary grouping of items 0..n−1 (consecutive), leaves at height 0.

    Node ``v`` covers items ``lo[v]..hi[v]−1``; leaves are nodes 0..n−1 (node i is item i).
    """

    n_items: int
    fanout: int
    lo: tuple[int, ...]
    hi: tuple[int, ...]
    height: tuple[int, ...]
    children: tuple[tuple[int, ...], ...]
    internal: tuple[int, ...]  # |InternalNodes(v)|: 1 + Σ over children (leaves 0)
    root: int

    @classmethod
    def build(cls, n_items: int, fanout: int) -> Taxonomy:
        if n_items < 1:
            raise errors.PolicyError("An item domain needs at least one item", code="DP330")
        lo, hi, height, children, internal = [], [], [], [], []
        for i in range(n_items):
            lo.append(i), hi.append(i + 1), height.append(0), children.append(()), internal.append(0)
        level = list(range(n_items))
        h = 0
        while len(level) > 1:
            h += 1
            nxt = []
            for s in range(0, len(level), fanout):
                group = tuple(level[s : s + fanout])
                v = len(lo)
                lo.append(lo[group[0]]), hi.append(hi[group[-1]]), height.append(h), children.append(group)
                internal.append(1 + sum(internal[c] for c in group))
                nxt.append(v)
            level = nxt
        return cls(n_items, fanout, tuple(lo), tuple(hi), tuple(height), tuple(children), tuple(internal), level[0])

    @property
    def n_internal(self) -> int:
        return self.internal[self.root]

    def describe(self) -> str:
        return (f"{self.n_items} items, fan-out {self.fanout}: height {self.height[self.root]}, "
                f"{self.n_internal} internal node(s)")  # fmt: skip


@dataclass
class Trace:
    """What each operation did (for EXPLAIN-like reports and tests): cut, ε, threshold, candidates, survivors."""

    operations: list[tuple[tuple[int, ...], float, int, int, int, bool]] = field(default_factory=list)
    stopped: bool = False  # the operation cap was reached (fake partitions multiplying)


def thresholds(h: int, eps: float, c: float) -> int:
    """``⌈√2·c·h/ε⌉`` (h = 1 for leaf counts, whose c is C1), at least 1."""
    return max(1, math.ceil(SQRT2 * c * h / eps))


def root_test(taxonomy: Taxonomy, epsilon: float, c1: float, c2: float) -> tuple[int, int]:
    """The first operation's threshold and number of candidates: public (the taxonomy, ε, C1, C2)."""
    tax = taxonomy
    if tax.internal[tax.root] == 0:
        return thresholds(1, epsilon, c1), 1
    l = len(tax.children[tax.root])
    if tax.n_internal == 1:  # the root's children are leaves: one leaf count at the whole ε
        return thresholds(1, epsilon, c1), 2**l - 1
    return thresholds(tax.height[tax.root], epsilon / 2 / tax.n_internal, c2), 2**l - 1


def passing_at_root(records: int, taxonomy: Taxonomy, epsilon: float, c1: float, c2: float) -> float:
    """An upper bound on the expected number of the first operation's candidates that pass when
    there are ``records`` records: each holds at most all of them, and passes when its discrete
    Laplace noise reaches the threshold minus its count (P(Z ≥ m) = a^m / (1 + a), a = e^−ε_op).
    Below a small value nothing real can be released: every chain starts there."""
    k, candidates = root_test(taxonomy, epsilon, c1, c2)
    tax = taxonomy
    if tax.internal[tax.root] == 0 or tax.n_internal == 1:
        eps_op = epsilon
    else:
        eps_op = epsilon / 2 / tax.n_internal
    gap = k - records
    if gap <= 0:
        return float(candidates)
    return candidates * noise.discrete_laplace_tail(eps_op, 1, gap)  # the sampler actually run


def records_needed(taxonomy: Taxonomy, epsilon: float, c1: float, c2: float, max_items: int) -> int:
    """Records DiffPart needs before its leaf partitions can survive, from public facts only.

    A record's chain ends in a leaf partition: one of the combinations of height-1 groups its
    items touch, then one of the itemsets within a group. Spread evenly over the combinations a
    record of at most ``max_items`` items can reach, times the itemsets of the largest group,
    each part would have to reach the threshold of a height-1 split at the root's α (the least
    any split of the chain needs). Below that, what survives is the few itemsets that hold far
    more than their share of the records. A taxonomy whose root's children are items is one
    noisy histogram of all itemsets (its threshold is the leaf's, at the whole ε): it needs
    no partition to survive, only records, and is always served.

    A need past ``NEEDED_CAP`` (no roster comes near) is ``NEEDED_CAP``: the sum of binomials stops
    there, after at most ~60 terms, where over 10^6 items and ``max_items = 10^6`` it summed
    ~10^5 binomials of thousands of digits (minutes), in EXPLAIN and under the debit's lock.
    """
    tax = taxonomy
    if tax.internal[tax.root] <= 1:
        return thresholds(1, epsilon, c1)
    groups = sum(1 for v in range(len(tax.height)) if tax.height[v] == 1)
    largest = max(len(tax.children[v]) for v in range(len(tax.height)) if tax.height[v] == 1)
    itemsets = sum(math.comb(largest, k) for k in range(1, min(largest, max_items) + 1))  # largest ≤ MAX_FANOUT
    each = itemsets * thresholds(1, epsilon / 2 / tax.n_internal, c2)
    combos = term = 0
    for k in range(1, min(groups, max_items) + 1):
        term = term * (groups - k + 1) // k if k > 1 else groups  # C(groups, k), exactly
        combos += term
        if combos * each >= NEEDED_CAP:
            return NEEDED_CAP
    return combos * each


def release(
    records: np.ndarray,
    taxonomy: Taxonomy,
    epsilon: float,
    *,
    rng: np.random.Generator,
    c1: float = DEFAULT_C1,
    c2: float = DEFAULT_C2,
    max_operations: int = 1_000_000,
    max_work: int = MAX_WORK,
    choose: Callable[[list[int], np.random.Generator], int] | None = None,
    trace: Trace | None = None,
) -> dict[tuple[int, ...], int]:
    """The released itemsets (tuples of item indices) and their noisy multiplicities (≥ 1).

    ``records`` is a boolean matrix, one row per record (a subject's items), one column per
    item; rows with no item are dropped (a record must hold an item to be routed, and dropping
    depends on that record alone). ``choose`` picks u among the cut's internal nodes of maximal
    height (default: uniformly at random); it must not look at the data.
    """
    if records.ndim != 2 or records.shape[1] != taxonomy.n_items:
        raise ValueError("records must be a boolean matrix with one column per item")
    if not (epsilon > 0 and math.isfinite(epsilon)):
        raise ValueError(f"epsilon must be positive and finite, got {epsilon}")
    records = records[records.any(axis=1)]
    tax = taxonomy
    B = Fraction(epsilon)
    half = B / 2
    out: dict[tuple[int, ...], int] = {}
    if tax.internal[tax.root] == 0:  # a single item: the root is a leaf, one count at the whole ε
        k = thresholds(1, float(B), c1)
        n = int(len(records)) + int(noise.discrete_laplace(float(B), 1, 1, rng)[0])
        if n >= k:
            out[(0,)] = n
        return out
    choose = choose or (lambda nodes, g: nodes[int(g.integers(len(nodes)))] if len(nodes) > 1 else nodes[0])
    queue = deque([((tax.root,), np.arange(len(records)), half)])  # (cut, record ids, unused partitioning budget)
    ops = work = 0
    while queue:
        cut, ids, spare = queue.popleft()
        ops += 1
        n_internal = sum(tax.internal[v] for v in cut)
        h = max(tax.height[v] for v in cut)
        u = choose(sorted(v for v in cut if tax.height[v] == h), rng)
        kids = tax.children[u]
        l = len(kids)
        work += OPERATION_UNITS + 2**l - 1
        if ops > max_operations or work > max_work:
            # Stop, and release what the finished operations found. Whether a cap is reached is a
            # function of the noisy transcript so far (post-processing), so stopping is as private as
            # finishing; raising instead would turn the cap into an error-or-answer signal [cap].
            if trace is not None:
                trace.stopped = True
            break
        # each record's mask: which of u's children hold one of its items (never 0: its cut covers u)
        mask = np.zeros(len(ids), dtype=np.int64)
        sub = records[ids]
        for k, c in enumerate(kids):
            mask |= sub[:, tax.lo[c] : tax.hi[c]].any(axis=1).astype(np.int64) << k
        n_cand = 2**l - 1
        counts = np.bincount(mask, minlength=n_cand + 1)[1:]  # candidate m (1..2^l−1) at m−1
        leaf_level = n_internal == 1
        if leaf_level:
            eps = half + spare
            k_min = thresholds(1, float(eps), c1)
        else:
            eps = spare / n_internal
            k_min = thresholds(h, float(eps), c2)
        noisy = counts + noise.discrete_laplace(float(eps), 1, n_cand, rng)
        passed = np.flatnonzero(noisy >= k_min) + 1
        if trace is not None:
            trace.operations.append((cut, float(eps), k_min, n_cand, len(passed), leaf_level))
        rest = tuple(v for v in cut if v != u)
        if len(passed) == 0:
            continue
        order = np.argsort(mask, kind="stable") if not leaf_level else None
        starts = np.searchsorted(mask[order], np.arange(n_cand + 2)) if order is not None else None
        for m in passed.tolist():
            new_cut = tuple(sorted(rest + tuple(kids[k] for k in range(l) if m >> k & 1)))
            if leaf_level:
                out[tuple(tax.lo[v] for v in new_cut)] = int(noisy[m - 1])
            else:
                child_ids = ids[order[starts[m] : starts[m + 1]]]
                queue.append((new_cut, child_ids, spare - eps))
    return out


def chain_budgets(taxonomy: Taxonomy, epsilon: float, path: list[tuple[int, ...]]) -> list[Fraction]:
    """The ε of each operation along a chain of cuts (the last one the leaf count), exactly."""
    B = Fraction(epsilon)
    spare = B / 2
    out = []
    for cut in path:
        n_internal = sum(taxonomy.internal[v] for v in cut)
        if n_internal == 1:
            out.append(B / 2 + spare)
            return out
        eps = spare / n_internal
        out.append(eps)
        spare -= eps
    return out


class DiffPart(Synthesizer):
    """``USING diffpart``: ``release`` on set-valued records (a records × items boolean matrix).

    Options: ``taxonomy``, ``c1``, ``c2``. Quality: the partitioning's ``trace``.
    """

    NAME = "diffpart"

    def synthesize(self, data: np.ndarray, *, epsilon, delta=0.0, rng, options, progress=None) -> Synthesis:
        trace = Trace()
        itemsets = release(data, options["taxonomy"], epsilon, rng=rng, c1=options["c1"], c2=options["c2"],
                           trace=trace)  # fmt: skip
        return Synthesis(itemsets, epsilon, {"trace": trace})
