"""PrivTree: a private spatial decomposition with no depth limit, and consistent noisy counts of
its nodes at several levels.

Zhang, Xiao, Xie, "PrivTree: A Differentially Private Algorithm for Hierarchical
Decompositions", SIGMOD 2016 (thesis chapter 4, Algorithm 4.2 and Corollary 4.1); the counts
follow Qardaji, Yang, Li, "Differentially private grids for geospatial data", ICDE 2013 (the
adaptive grid's refinement rule) and Hay, Rastogi, Miklau, Suciu, PVLDB 2010 (constrained
inference, ``mechanisms.hierarchy``).

**Guarantee.** ε-differential privacy (pure) for ``epsilon = ε_tree + ε_upper + ε_middle +
ε_leaves + ε_refined`` [budget] (sequential composition; each later step may depend on what the
earlier ones released, its ε included: when the middle cut is not measured, ε_middle = 0 and its
share is added to the leaves' and refined leaves' ε, so the sum is ε either way; the synopsis
records each step's ε in ``Synopsis.epsilons``). **Neighbouring relation.** Add or remove one
subject, who contributes at most ``x`` points (``max_rows``); the thesis's proof is for x = 1 and
scales λ by x when one tuple can touch x leaves (§4.2.5). **Sensitivity.** The tree: each point
changes the counts of the nodes on its root-to-leaf path by 1; the bias makes their privacy costs
a geometric series (below). Each count family (the upper cut, the middle cut, the leaves, the
refined leaves) is a set of disjoint boxes tiling Ω, so a subject's points lie in at most x of its
boxes: L1 sensitivity x per family [families]; which boxes a family holds is fixed by the tree and
by counts released before it, not by the data it measures.

**Algorithm (4.2).** The domain Ω is the owner's declared bounds on 1–4 numeric columns (public:
never the data's own min/max); a node covers a half-open box and splits into β = 2^d equal
boxes (every dimension halved). Node v at depth d with count c(v) has the biased count
``b(v) = max(θ − δ, c(v) − d·δ)`` [bias] and splits iff ``b(v) + Z > θ`` [split], Z discrete Laplace
of scale λ (``P(z) ∝ exp(−|z|/λ)``), with ``λ = (2β − 1)/(β − 1) · x/ε_tree``, ``δ = λ·ln β``, ``θ = 0``.
There is no depth limit for privacy: along a path the unclamped biased counts fall by δ per
level, so the log-ratios of the split decisions sum to at most
``(1/λ)·(1 + 1/(1 − e^{−δ/λ})) = (1/λ)(2β − 1)/(β − 1)``, and clamped nodes (b = θ − δ) cost
nothing; a clamped node splits with probability 1/(2β), so growth stops almost surely. A depth
cap (``MAX_DEPTH``, data-independent) only removes decisions and keeps float boxes distinct.
[cap] So does the node cap: the tree grows one level at a time, and before a level it stops —
the level's nodes become leaves, undecided — when splitting all of them could take the tree past
``MAX_NODES``. That test reads only the tree released so far (how many nodes it has and how many
wait), so stopping is as private as going on, and the work and memory of growth are bounded by
``MAX_NODES`` whatever ε and the data (the synopsis says when it stopped).

**Discrete noise (our reading).** dpgate draws integer noise everywhere (no floating-point
Laplace). With Z discrete Laplace the split test is ``Z ≥ ⌊θ − b⌋ + 1``; the thesis's proof is for
continuous Laplace, so ``tests/mechanisms/test_privtree.py`` computes the exact worst-case
log-ratio of the split decisions over every non-increasing count sequence on a path (a dynamic
program, depths up to 40, counts up to 400) and checks it is at most ε_tree for the fan-outs and
ε used here.

**Counts (ours).** The thesis spends half of ε on the tree and releases only the leaves' counts;
a range then sums many noisy leaves, and on ranges of 10–50% of the domain a uniform grid was
as good or better. Here the tree gets ``TREE_SHARE`` = 0.1 of ε, and the rest measures up to four
families with discrete Laplace noise of scale x/ε_family [families]:

1. *upper* (0.2 of the counts' ε): the cut of the tree at the depth with about 16 boxes
   (the nodes there, and the leaves above it): large ranges are mostly whole upper boxes;
2. *middle* (0.2): the cut of the tree at the depth whose β^k boxes are nearest n'·ε/(x·160)
   [middle], n' the sum of the upper cut's released noisy counts and ε the release's: the level
   of the adaptive grid's first grid (Qardaji, Yang and Li: about nε/160 cells, the right size
   for a range of about a tenth of the domain). It is measured only when it has at least 16
   times the upper cut's boxes (a measured level at most every two quadtree levels, the fan-out
   at which their analysis of hierarchies puts the best accuracy); otherwise its share is split
   evenly between the next two families (0.25 and 0.55 then). Its depth is a function of released
   counts and public facts (ε, x, d), so choosing it costs nothing, and the boxes of one depth
   tile Ω: sensitivity x;
3. *leaves* (0.15): the PrivTree leaves;
4. *refined* (0.45): each leaf split ``r`` more levels, completely, ``r = ⌈log_β(N'·ε_refined/(x·5))⌉``
   from its noisy leaf count N' (the adaptive grid's rule: cells of about 5/ε points where the
   noise allows; 0 levels re-measures the leaf) [refine], within ``MAX_DEPTH`` and the node cap.
   The plan reads only released counts.

The tree's share, the upper cut's and the leaves' and refined leaves' shares without a middle
cut were chosen on synthetic clustered points; the middle cut's rule (AG's level, the gap of 16)
and its share were chosen on the demo places (``examples/privtree_cities.py``), the data the
documentation's comparison uses, which flatters that comparison somewhat. The estimate of every
node is the least-squares fit of all measurements under parent = sum of children
(``hierarchy.consistent``) [gls]: consistent, and a range sums its leaves weighted by overlap —
the same as summing a minimal cover of nodes. For a fixed refinement plan (and middle depth) the
estimates are unbiased and their variances exact; the plan is made from the leaf counts that the
fit also uses, which leaves a small bias (measured in ``tests/mechanisms/test_privtree_counts.py``:
+1.8, standard error 0.8, on a 757-point range at ε = 1 whose noise has a standard deviation of
10.1; the adaptive grid shares this; the middle depth, read from the upper cut's noisy total, is
a selection of the same kind, not measured separately). Each node's interval (``Synopsis.half_widths``) holds for
the released plan [ci].

**Range counts.** Points are taken as spread uniformly inside a leaf; that assumption's error is
unknown, so range answers carry no interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dpgate import noise
from dpgate.mechanisms import hierarchy
from dpgate.mechanisms.base import Synthesis, Synthesizer
from dpgate.mechanisms.privbayes_model import norm_sub

MAX_DIMENSIONS = 4
MAX_DEPTH = 48
#: The most nodes a tree may have [cap]: growth runs after the debit, and at large ε every
#: non-empty node splits down to ``MAX_DEPTH`` (50,000 points in 4 dimensions at ε = 100: 70 s
#: and 4.7 GB). About 10-40 µs and a few hundred bytes a node: at most ~4 s (1 dimension).
MAX_NODES = 1 << 17
#: The most cells a sequence model may have [cap]: a node at depth k has a histogram of
#: ``symbols + 1`` counts and is written as that many rows with a context of k symbols.
MAX_MODEL_CELLS = 1 << 22


def parameters(epsilon_tree: float, beta: int, contributions: int = 1) -> tuple[float, float, float]:
    """(λ, δ, θ) of Corollary 4.1 for fan-out ``beta`` (λ scaled by the points one subject may add)."""
    lam = (2 * beta - 1) / (beta - 1) * contributions / epsilon_tree
    return lam, lam * math.log(beta), 0.0


def split_probability(b: float, lam: float, theta: float = 0.0) -> float:
    """P(b + Z > θ) for Z discrete Laplace of scale λ (the sampler actually run)."""
    return math.exp(log_split(b, lam, theta)[0])


def log_split(b: float, lam: float, theta: float = 0.0) -> tuple[float, float]:
    """(ln P(split), ln P(no split)) of a node with biased count b, in log space (no rounding to 1)."""
    c = math.log(1 / noise.discrete_laplace_alpha(1.0, lam))  # a = e^−c
    k = math.floor(theta - b) + 1  # split iff Z ≥ k
    log_tail = lambda m: -c * m - math.log1p(math.exp(-c))  # noqa: E731  ln P(Z ≥ m) = ln a^m/(1+a), m ≥ 1
    if k >= 1:
        t = log_tail(k)
        return t, math.log1p(-math.exp(t))
    t = log_tail(1 - k)  # P(Z < k) = P(Z ≥ 1 − k) by symmetry
    return math.log1p(-math.exp(t)), t


#: ε shares of a spatial release: the tree gets ``TREE_SHARE`` (the thesis: one half), the counts the
#: rest, divided among the four families of ``COUNT_SHARES`` (see the module docstring for why). When
#: the middle cut is not measured [middle], its share is split evenly between the leaves and the
#: refined leaves (0.25 and 0.55 then).
TREE_SHARE = 0.1
COUNT_SHARES = {"upper": 0.2, "middle": 0.2, "leaves": 0.15, "refined": 0.45}
#: The middle cut is the tree's depth with about n'·ε/(x·MIDDLE_C) boxes (the adaptive grid's first
#: level, Qardaji, Yang and Li: m₁² = nε/(c·16) with c = 10, cells of about 160/ε points), n' the
#: released noisy total of the upper cut [middle].
MIDDLE_C = 160.0
#: ... and is measured only when it has at least this many times the upper cut's boxes (a measured
#: level every two quadtree levels at most: Qardaji, Yang and Li's hierarchies fare best with a
#: fan-out of about 16 between measured levels).
MIDDLE_GAP = 16
#: A leaf with noisy count N' is refined into about N'·ε_refined/(x·REFINE_C) cells (Qardaji, Yang
#: and Li's adaptive grid: c₂ = c/2 = 5, cells of about 5/ε points, as many as the noise allows).
REFINE_C = 5.0
#: The upper cut is the tree's depth with about this many boxes (2^(d·k) at depth k): 16 in 2-D.
UPPER_BOXES = 16


@dataclass
class Synopsis:
    """Every node of the tree, parents before children: boxes ``lo[i] ≤ x < hi[i]`` (the last box of
    a dimension closed at its max), depth, parent (−1 for the root), whether it is a leaf, its
    consistent estimated count (fractional, may be negative: unbiased for the refinement plan as
    released, see the module docstring) and that estimate's variance. ``kappa`` bounds the noises'
    squared Laplace scale by their variance (intervals)."""

    lo: np.ndarray  # (nodes, d)
    hi: np.ndarray
    depth: np.ndarray
    parent: np.ndarray
    leaf: np.ndarray  # bool
    counts: np.ndarray  # float
    variance: np.ndarray
    kappa: float = 1.0
    stopped: bool = False  # growth or refinement stopped at MAX_NODES [cap]
    families: dict[str, np.ndarray] | None = None  # the nodes each family measured (public, as the tree)
    epsilons: dict[str, float] | None = None  # the ε each step spent: the tree and each family measured [budget]

    def range_count(self, qlo: np.ndarray, qhi: np.ndarray) -> float:
        """Σ count · |q ∩ leaf| / |leaf| over the leaves (uniform spreading inside a leaf); the
        estimates are consistent, so this equals the sum over a minimal cover of the range."""
        lo, hi = self.lo[self.leaf], self.hi[self.leaf]
        overlap = np.clip(np.minimum(hi, qhi) - np.maximum(lo, qlo), 0, None) / (hi - lo)
        return float((self.counts[self.leaf] * overlap.prod(axis=1)).sum())

    def locate(self, points: np.ndarray) -> np.ndarray:
        """The leaf holding each point (``prepare``-d into Ω), found down the tree: the children of a
        node are consecutive nodes and tile its box."""
        n = len(self.parent)
        first = np.full(n, n)
        np.minimum.at(first, self.parent[1:], np.arange(1, n))
        fanout = np.bincount(self.parent[1:], minlength=n)
        where = np.zeros(len(points), dtype=np.int64)
        for _ in range(int(self.depth.max())):
            down = np.flatnonzero(fanout[where] > 0)
            if not len(down):
                break
            at, found = where[down], np.full(len(down), -1)
            for j in range(int(fanout.max())):
                child = np.minimum(first[at] + j, n - 1)
                hit = (found < 0) & (j < fanout[at]) & ((points[down] >= self.lo[child]) & (points[down] < self.hi[child])).all(axis=1)
                found[hit] = child[hit]
            where[down] = found
        return where

    def half_widths(self, alpha: float) -> np.ndarray:
        """Per node: the estimate is within this of the true count with probability ≥ 1 − α, for the
        refinement plan as released [ci]."""
        return hierarchy.half_widths(self.variance, self.kappa, alpha)


class _Nodes:
    """A tree under construction, in arrays that grow as it does (parents before children), and the
    node each point lies in (``where``: a leaf of the tree so far)."""

    def __init__(self, lower: np.ndarray, upper: np.ndarray, points: np.ndarray, integer: np.ndarray, capacity: int = 64):
        d = len(lower)
        self.lo, self.hi = np.empty((capacity, d)), np.empty((capacity, d))
        self.depth, self.parent = np.zeros(capacity, dtype=np.int64), np.full(capacity, -1, dtype=np.int64)
        self.leaf = np.ones(capacity, dtype=bool)
        self.lo[0], self.hi[0], self.n = lower, upper, 1
        self.points, self.integer = points, integer
        self.where = np.zeros(len(points), dtype=np.int64)
        self._codes = (np.arange(2**d)[:, None] >> np.arange(d)) & 1 > 0  # child c: upper half where bit j is set

    def splittable(self, v: np.ndarray) -> np.ndarray:
        """(nodes, d): the dimensions each box can halve — all but integer ones one unit cell wide [cap]."""
        return ~self.integer | (self.hi[v] - self.lo[v] > 1)

    def can_split(self, v: np.ndarray) -> np.ndarray:
        """A box splits while above MAX_DEPTH with a dimension to halve: a fact of the box alone [cap]."""
        return (self.depth[v] < MAX_DEPTH) & self.splittable(v).any(axis=1)

    def split(self, v: np.ndarray) -> np.ndarray:
        """Split the boxes ``v`` (in order) into 2^k children each, every splittable dimension halved
        (integer ones at an integer midpoint, so a box stays a union of unit cells), and move their
        points down: the children's numbers, in order."""
        if not len(v):
            return v
        lo, hi, ok = self.lo[v], self.hi[v], self.splittable(v)
        mid = np.where(self.integer, lo + np.floor((hi - lo) / 2), (lo + hi) / 2)
        valid = ~(self._codes[None] & ~ok[:, None, :]).any(axis=2)  # (nodes, 2^d): no upper half of an unsplit dimension
        up = self._codes[None] & ok[:, None, :]
        number = np.cumsum(valid.ravel()).reshape(valid.shape) - 1 + self.n
        children = number[valid]
        self._reserve(self.n + len(children))
        self.lo[children] = np.where(up, mid[:, None], lo[:, None])[valid]
        self.hi[children] = np.where(ok[:, None] & ~up, mid[:, None], hi[:, None])[valid]
        self.depth[children] = np.repeat(self.depth[v] + 1, valid.sum(axis=1))
        self.parent[children] = np.repeat(v, valid.sum(axis=1))
        self.leaf[v] = False
        self.n += len(children)
        position = np.full(self.n, -1)
        position[v] = np.arange(len(v))
        moving = np.flatnonzero(position[self.where] >= 0)
        if len(moving):
            at = position[self.where[moving]]
            code = ((self.points[moving] >= mid[at]) & ok[at]) @ (1 << np.arange(mid.shape[1]))
            self.where[moving] = number[at, code]
        return children

    def _reserve(self, rows: int) -> None:
        if rows > len(self.depth):
            size = max(rows, 2 * len(self.depth))
            for name, fill in (("lo", 0.0), ("hi", 0.0), ("depth", 0), ("parent", -1), ("leaf", True)):
                old = getattr(self, name)
                new = np.full((size, *old.shape[1:]), fill, dtype=old.dtype)
                new[: len(old)] = old
                setattr(self, name, new)

    def counts(self) -> np.ndarray:
        """Each node's exact number of points: its leaves' summed up the tree."""
        counts = np.bincount(self.where, minlength=self.n).astype(float)
        depth, parent = self.depth[: self.n], self.parent[: self.n]
        for k in range(int(depth.max()), 0, -1):
            at = np.flatnonzero(depth == k)
            np.add.at(counts, parent[at], counts[at])
        return counts


def _grow(points: np.ndarray, lower: np.ndarray, upper: np.ndarray, epsilon_tree: float, *, rng: np.random.Generator,
          contributions: int, integer: np.ndarray, max_nodes: int) -> tuple[_Nodes, bool]:  # fmt: skip
    """Algorithm 4.2, one level at a time: the tree (room for ``max_nodes`` nodes) and whether growth
    stopped at the node cap [cap]."""
    d = points.shape[1]
    lam, delta, theta = parameters(epsilon_tree, 2**d, contributions)
    nodes = _Nodes(lower.astype(float), upper.astype(float), points, integer)
    frontier, stopped = np.zeros(1, dtype=np.int64), False
    while len(frontier):
        if nodes.n + len(frontier) * 2**d > max_nodes:  # [cap]: reads the released tree only
            stopped = True
            break
        # the split decisions of a level are drawn together
        c = np.bincount(nodes.where, minlength=nodes.n)[frontier]
        b = np.maximum(theta - delta, c - nodes.depth[frontier] * delta)  # [bias]
        z = noise.discrete_laplace(1.0, lam, len(frontier), rng)
        frontier = nodes.split(frontier[(b + z > theta) & nodes.can_split(frontier)])  # [split]
    return nodes, stopped


def grow(points: np.ndarray, lower: np.ndarray, upper: np.ndarray, epsilon_tree: float, *, rng: np.random.Generator,
         contributions: int = 1, integer: np.ndarray | None = None, max_nodes: int = MAX_NODES,
         ) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[np.ndarray], bool]:  # fmt: skip
    """Algorithm 4.2: the leaves' boxes, depths, the indices of their points (exact), and whether
    growth stopped at the node cap [cap].

    ``integer`` marks dimensions of unit cells (bounds and points integers): they split at
    integer midpoints and stop splitting at width 1, so a leaf is always a union of whole cells
    (a node with no dimension left to split is a leaf; that depends on its box alone, and the
    privacy argument does not depend on how many children a node has).
    """
    d = points.shape[1]
    if not 1 <= d <= MAX_DIMENSIONS:
        raise ValueError(f"PrivTree takes 1 to {MAX_DIMENSIONS} dimensions, got {d}")
    integer = np.zeros(d, dtype=bool) if integer is None else np.asarray(integer, dtype=bool)
    nodes, stopped = _grow(points, lower, upper, epsilon_tree, rng=rng, contributions=contributions,
                           integer=integer, max_nodes=max_nodes)  # fmt: skip
    leaves = np.flatnonzero(nodes.leaf[: nodes.n])
    order = np.argsort(nodes.where, kind="stable")
    ids = np.split(order, np.searchsorted(nodes.where[order], leaves[1:]))
    return nodes.lo[leaves], nodes.hi[leaves], nodes.depth[leaves], ids, stopped


def refinement_depths(noisy: np.ndarray, depth: np.ndarray, epsilon_refined: float, contributions: int, beta: int,
                      room: float) -> np.ndarray:  # fmt: skip
    """How many levels to split each leaf below its noisy count N': about N'·ε/(x·REFINE_C) cells,
    i.e. ⌈log_β(N'·ε/(x·c₂))⌉ levels (none when that is at most one cell), within MAX_DEPTH, and
    shallower for the deepest plans until the added nodes fit in ``room`` [refine] [cap]. A function
    of released values only."""
    cells = np.maximum(np.asarray(noisy, dtype=float), 0.0) * epsilon_refined / (contributions * REFINE_C)
    with np.errstate(divide="ignore"):
        levels = np.where(cells > 1, np.ceil(np.log(np.maximum(cells, 1.0)) / math.log(beta) - 1e-9), 0)
    levels = np.clip(levels, 0, np.maximum(MAX_DEPTH - depth, 0)).astype(int)

    def added(r: np.ndarray) -> int:  # a complete tree of r levels below a leaf: β + β² + … + β^r nodes
        return int(sum(beta * (beta ** int(x) - 1) // (beta - 1) for x in r))

    top = int(levels.max()) if len(levels) else 0
    while top > 0 and added(np.minimum(levels, top)) > room:
        top -= 1
    return np.minimum(levels, top)


def _refine(nodes: _Nodes, leaves: np.ndarray, levels: np.ndarray) -> None:
    """Split each leaf ``levels`` more times: every box below it down to that depth, as far as a box
    can split (so the shape below a leaf depends on its planned levels alone) [refine]."""
    stop = np.zeros(nodes.n, dtype=np.int64)  # the depth each planned subtree ends at
    frontier = leaves[levels > 0]
    stop[frontier] = nodes.depth[frontier] + levels[levels > 0]
    while len(frontier):
        frontier = frontier[nodes.can_split(frontier)]
        children = nodes.split(frontier)
        stop = np.concatenate([stop, np.zeros(nodes.n - len(stop), dtype=np.int64)])
        stop[children] = stop[nodes.parent[children]]
        frontier = children[nodes.depth[children] < stop[children]]


def middle_depth(noisy_total: float, epsilon: float, contributions: int, d: int) -> int | None:
    """The depth of the middle cut [middle]: the one whose β^k boxes are nearest (geometrically)
    n'·ε/(x·MIDDLE_C), or None when that is fewer than MIDDLE_GAP times the upper cut's boxes. A
    function of the released noisy total ``noisy_total`` and public facts (ε, x, d) only."""
    cells = max(float(noisy_total), 0.0) * epsilon / (contributions * MIDDLE_C)
    if cells <= 1:
        return None
    k = min(MAX_DEPTH, round(math.log(cells) / (d * math.log(2))))
    upper = upper_depth(d)
    return k if 2 ** (d * (k - upper)) >= MIDDLE_GAP else None


def upper_depth(d: int) -> int:
    """The depth of the upper cut: about UPPER_BOXES boxes (16 in 2-D)."""
    return max(1, round(math.log2(UPPER_BOXES) / d))


def release(points: np.ndarray, lower, upper, epsilon: float, *, rng: np.random.Generator, contributions: int = 1,
            tree_share: float = TREE_SHARE, integer=None, shares: dict[str, float] | None = None,
            max_nodes: int = MAX_NODES) -> Synopsis:  # fmt: skip
    """PrivTree at ``tree_share·ε``, then noisy counts of up to four families of disjoint boxes at the
    rest (``shares`` of it: the upper cut, the middle cut, the PrivTree leaves, their refinement),
    made consistent. The families' ε add up to ``(1 − tree_share)·ε`` whether or not the middle cut
    is measured [budget] [middle].

    Integer dimensions take bounds [lo, hi + 1) from the caller and integer points (cell v is [v, v + 1)).
    ``tree_share = 0.5`` with ``shares = {"leaves": 1}`` is the thesis's release (its leaf counts).
    """
    lower, upper = np.asarray(lower, dtype=float), np.asarray(upper, dtype=float)
    pts = prepare(points, lower, upper, integer)
    d = pts.shape[1]
    integer = np.zeros(d, dtype=bool) if integer is None else np.asarray(integer, dtype=bool)
    shares = dict(COUNT_SHARES if shares is None else shares)
    if (set(shares) - set(COUNT_SHARES) or not all(math.isfinite(v) and v >= 0 for v in shares.values())
            or not shares.get("leaves", 0) + shares.get("refined", 0) > 0):  # fmt: skip
        raise ValueError(f"count shares are among {sorted(COUNT_SHARES)}, non-negative, with leaves or refined > 0")
    if not (math.isfinite(epsilon) and epsilon > 0 and 0 < tree_share < 1):
        raise ValueError(f"PrivTree needs ε > 0 and 0 < tree_share < 1, got ε = {epsilon}, tree_share = {tree_share}")
    eps_tree = epsilon * tree_share
    eps_counts = epsilon * (1 - tree_share)
    eps = {k: eps_counts * v / sum(shares.values()) for k, v in shares.items() if v > 0}  # [budget]
    if not 1 <= d <= MAX_DIMENSIONS:
        raise ValueError(f"PrivTree takes 1 to {MAX_DIMENSIONS} dimensions, got {d}")
    nodes, stopped = _grow(pts, lower, upper, eps_tree, rng=rng, contributions=contributions, integer=integer,
                           max_nodes=max_nodes)  # fmt: skip
    n_tree = nodes.n
    tree_leaves = np.flatnonzero(nodes.leaf[:n_tree])
    tree_depth = nodes.depth[:n_tree]
    measured, families = [], {}

    def measure(family: np.ndarray, exact: np.ndarray, name: str) -> np.ndarray:  # [families]
        noisy = exact + noise.discrete_laplace(eps[name], contributions, len(family), rng)
        measured.append((family, noisy, noise.discrete_laplace_std(eps[name], contributions) ** 2))
        families[name] = family
        return noisy

    def cut(k: int) -> np.ndarray:  # the nodes at depth k and the leaves above it: boxes tiling Ω
        return np.flatnonzero((tree_depth == k) | (nodes.leaf[:n_tree] & (tree_depth < k)))

    counts = nodes.counts()
    noisy_total = None
    if "upper" in eps:
        k_up = cut(upper_depth(d))
        noisy_total = float(measure(k_up, counts[k_up], "upper").sum())
    if "middle" in eps:
        # [middle]: its depth is read from the upper cut's released counts; with no upper cut, or
        # when the cut would be too shallow to add anything, its ε goes to the finer families (an
        # adaptive choice of later ε's from released values: the sum stays fixed) [budget]
        k_mid = middle_depth(noisy_total, epsilon, contributions, d) if noisy_total is not None else None
        if k_mid is None:
            extra = eps.pop("middle")
            finer = [k for k in ("leaves", "refined") if k in eps]
            for k in finer:
                eps[k] += extra / len(finer)
        else:
            mid = cut(k_mid)
            measure(mid, counts[mid], "middle")
    noisy_leaves = measure(tree_leaves, counts[tree_leaves], "leaves") if "leaves" in eps else None
    if "refined" in eps:
        if noisy_leaves is not None:  # [refine]: planned from the released leaf counts only
            plan = [refinement_depths(noisy_leaves, tree_depth[tree_leaves], eps["refined"], contributions, 2**d, room)
                    for room in (max(0, max_nodes - n_tree), math.inf)]  # fmt: skip
            levels, stopped = plan[0], stopped or bool((plan[0] < plan[1]).any())  # [cap]
            _refine(nodes, tree_leaves, levels)
            counts = nodes.counts()
        final = np.flatnonzero(nodes.leaf[: nodes.n])
        measure(final, counts[final], "refined")
    n = nodes.n
    parent, depth = nodes.parent[:n].copy(), nodes.depth[:n].copy()
    y, var = hierarchy.merge(n, measured)
    estimate, variance = hierarchy.consistent(parent, depth, y, var)  # [gls]
    kappa = max(hierarchy.laplace_ratio(eps[k], contributions) for k in families)
    return Synopsis(nodes.lo[:n].copy(), nodes.hi[:n].copy(), depth, parent, nodes.leaf[:n].copy(), estimate, variance,
                    kappa, stopped, families, {k: eps[k] for k in families} | {"tree": eps_tree})  # fmt: skip


def prepare(points: np.ndarray, lower: np.ndarray, upper: np.ndarray, integer=None) -> np.ndarray:
    """The points as the tree reads them: integer dimensions floored to their unit cell, every
    value clamped into Ω with the last cell closed (so each point lies in exactly one box of a
    family of boxes that tiles Ω)."""
    pts = np.asarray(points, dtype=float)
    if integer is not None:
        pts = np.where(np.asarray(integer, dtype=bool), np.floor(pts), pts)
    return np.clip(pts, lower, np.nextafter(upper, lower))


# -- sequences: a private prediction suffix tree (thesis §4.3) ------------------------------------
START = -1  # '$', the begin marker in contexts


@dataclass
class SequenceModel:
    """A prediction suffix tree: each node's context (a tuple of symbols, oldest first, START for
    '$'), its children by the symbol prepended, and its noisy next-symbol histogram (length
    |I| + 1: the symbols, then END). Leaves' histograms are noisy and then made consistent
    (``norm_sub``: non-negative, each with its noisy total); internal ones are the sums of their
    children's (post-processing)."""

    n_symbols: int
    max_length: int
    contexts: list[tuple[int, ...]]
    children: dict[int, dict[int, int]]  # node -> {prepended symbol (START for '$'): child node}
    hist: np.ndarray  # (nodes, n_symbols + 1)
    leaf: np.ndarray  # (nodes,) bool
    estimate: float = 0.0  # noisy number of sequences, before negatives are set to 0 (unbiased)
    stopped: bool = False  # growth stopped at MAX_MODEL_CELLS [cap]

    @property
    def end(self) -> int:
        return self.n_symbols

    def node_for(self, history: list[int]) -> int:
        """The deepest node whose context is a suffix of ``history`` (which starts with START)."""
        v = 0
        for sym in reversed(history):
            child = self.children.get(v, {}).get(sym)
            if child is None:
                break
            v = child
        return v

    def sample(self, n: int, rng: np.random.Generator) -> list[list[int]]:
        """``n`` synthetic sequences (post-processing); a node with an empty histogram backs off
        to a shorter context."""
        parent = {c: p for p, kids in self.children.items() for c in kids.values()}
        cum = np.cumsum(self.hist, axis=1)
        usable = {}
        out = []
        for _ in range(n):
            history, seq = [START], []
            while len(seq) < self.max_length:
                v = self.node_for(history)
                if v not in usable:
                    u = v
                    while cum[u, -1] <= 0 and u in parent:
                        u = parent[u]
                    usable[v] = u
                v = usable[v]
                total = cum[v, -1]
                if total <= 0:
                    break
                x = int(np.searchsorted(cum[v], rng.random() * total, side="right"))
                if x >= self.end:
                    break
                seq.append(x)
                history.append(x)
            out.append(seq)
        return out

    def expected_sequences(self) -> int:
        """How many sequences to draw (free): the noisy count of occurrences right after '$' (every
        sequence has one), or of END when the tree has no '$' context (each finished sequence has one)."""
        return int(round(max(0.0, self.estimate)))


def sequence_parameters(epsilon: float, n_symbols: int, max_length: int) -> dict[str, float]:
    """Theorem 4.2 / 4.3 with the thesis's split: ε/β on the tree, the rest on the histograms."""
    beta = n_symbols + 1
    eps_tree = epsilon / beta
    lam, delta, theta = parameters(eps_tree, beta, max_length)
    return {"beta": beta, "epsilon_tree": eps_tree, "epsilon_hist": epsilon - eps_tree, "lambda": lam,
            "delta": delta, "theta": theta, "hist_scale": max_length / (epsilon - eps_tree)}  # fmt: skip


def sequence_release(sequences: list[np.ndarray], n_symbols: int, max_length: int, epsilon: float, *,
                     rng: np.random.Generator, max_cells: int = MAX_MODEL_CELLS,
                     max_rows: int | None = None) -> SequenceModel:  # fmt: skip
    """Algorithm 4.3 on sequences of symbols 0..n−1, truncated to ``max_length`` (counting END).

    A split whose children would take the model past ``max_cells`` cells is not made (the node
    stays a leaf and the model says it stopped), a node at depth k costing ``(n_symbols + 1)(k + 1)``:
    its histogram and, in the model table, its context beside each next symbol [cap]; nor one past
    ``max_rows`` model rows (``n_symbols + 1`` a node: the rows its release reserved). The test runs
    split by split, in the frontier's order (which the released tree fixes), and reads only the
    tree released so far, so stopping is as private as splitting. (A test of the whole level, as
    ``grow`` makes, would refuse every second level at 111 symbols or more: its worst case,
    every node splitting, is past the cap there.)

    **Neighbouring relation:** add or remove one sequence (a subject's). After truncation a sequence
    holds at most ``max_length`` predicted occurrences (its symbols and END when it fits), and
    inserting it one occurrence at a time changes the score ``c(v) = ‖hist(v)‖₁ − max hist(v)`` by 0
    or 1 along one path per step, so λ is scaled by ``max_length`` (Theorem 4.2); each occurrence
    lands in one leaf histogram, sensitivity ``max_length`` (Theorem 4.3).
    """
    p = sequence_parameters(epsilon, n_symbols, max_length)
    end = n_symbols
    cells = rows = n_symbols + 1  # the root's histogram
    max_rows = math.inf if max_rows is None else max_rows
    flat, nxt_index = [], []
    for s in sequences:
        s = [int(x) for x in s[:max_length]]
        padded = [START] + s + ([end] if len(s) < max_length else [])
        base = len(flat)
        flat.extend(padded)
        nxt_index.extend(range(base + 1, base + len(padded)))  # every predicted occurrence
    flat = np.array(flat, dtype=np.int64)
    occ = np.array(nxt_index, dtype=np.int64)
    contexts: list[tuple[int, ...]] = [()]
    children: dict[int, dict[int, int]] = {}
    occurrences = [occ]
    depth_of = [0]
    frontier = [0]
    lam, delta, theta = p["lambda"], p["delta"], p["theta"]
    symbols_and_start = list(range(n_symbols)) + [START]
    leaf_flags: dict[int, bool] = {}
    stopped = False
    while frontier:
        scores = []
        for v in frontier:
            h = np.bincount(flat[occurrences[v]], minlength=n_symbols + 1) if len(occurrences[v]) else np.zeros(n_symbols + 1)
            scores.append(float(h.sum() - h.max()))
        z = noise.discrete_laplace(1.0, lam, len(frontier), rng)
        nxt = []
        for v, c, zi in zip(frontier, scores, z.tolist()):
            ctx = contexts[v]
            if (ctx and ctx[0] == START) or depth_of[v] >= max_length:  # '$…' is never extended (data-independent)
                leaf_flags[v] = True
                continue
            b = max(theta - delta, c - depth_of[v] * delta)
            if not b + zi > theta:
                leaf_flags[v] = True
                continue
            cost = (n_symbols + 1) ** 2 * (depth_of[v] + 2)  # its children's histograms and contexts
            if cells + cost > max_cells or rows + (n_symbols + 1) ** 2 > max_rows:  # [cap]: reads the released tree only
                stopped = leaf_flags[v] = True
                continue
            leaf_flags[v] = False
            o = occurrences[v]
            before = flat[o - len(ctx) - 1]  # the symbol preceding the context (START at a sequence start)
            children[v] = {}
            for sym in symbols_and_start:
                u = len(contexts)
                contexts.append((sym, *ctx))
                occurrences.append(o[before == sym])
                depth_of.append(depth_of[v] + 1)
                children[v][sym] = u
                nxt.append(u)
            cells += cost
            rows += (n_symbols + 1) ** 2
        frontier = nxt
    n_nodes = len(contexts)
    leaf = np.array([leaf_flags[v] for v in range(n_nodes)])
    hist = np.zeros((n_nodes, n_symbols + 1))
    leaves = np.flatnonzero(leaf)
    for v in leaves:
        if len(occurrences[v]):
            hist[v] = np.bincount(flat[occurrences[v]], minlength=n_symbols + 1)
    hist[leaves] += noise.discrete_laplace(p["epsilon_hist"], max_length, len(leaves) * (n_symbols + 1), rng).reshape(
        len(leaves), n_symbols + 1
    )
    order = sorted(children, key=lambda x: -depth_of[x])  # parents after their children

    def sums() -> None:
        for v in order:
            hist[v] = sum(hist[u] for u in children[v].values())

    sums()
    start = children.get(0, {}).get(START)
    estimate = float(hist[start].sum()) if start is not None else float(hist[0][end])
    # Post-processing, on noisy counts only:
    # 1. Consistent leaves. Setting negatives to 0 (the thesis) adds the positive noise of every
    #    empty cell, and with ~100 symbols most cells of a leaf are empty: the model held several
    #    times the real mass, most of it on transitions never seen. Norm-Sub keeps each leaf's
    #    unbiased noisy total and gives it to its largest cells.
    # 2. A leaf whose noisy total is within two standard deviations of its noise is mostly noise:
    #    it takes its next-symbol shares from its parent (its siblings' sum, where noise averages
    #    out), scaled to its own total.
    noisy_totals = hist.sum(axis=1)
    for v in leaves:
        hist[v] = norm_sub(hist[v], noisy_totals[v])
    sums()
    floor = 2.0 * math.sqrt(n_symbols + 1) * noise.discrete_laplace_std(p["epsilon_hist"], max_length)
    parent = {u: v for v, kids in children.items() for u in kids.values()}
    for v in [v for v in leaves if v in parent and noisy_totals[v] < floor]:
        above = hist[parent[v]]
        if above.sum() > 0:
            hist[v] = above / above.sum() * hist[v].sum()
    sums()
    return SequenceModel(n_symbols, max_length, contexts, children, hist, leaf, estimate, stopped)


class PrivTree(Synthesizer):
    """``USING privtree``: ``release`` on points (rows × dimensions) inside the public box.

    Options: ``lower``, ``upper``, ``contributions``, ``tree_share``, ``integer``, ``max_nodes`` (at most
    ``MAX_NODES``: a release's rows as its caps allow [cap]).
    """

    NAME = "privtree"

    def synthesize(self, data: np.ndarray, *, epsilon, delta=0.0, rng, options, progress=None) -> Synthesis:
        o = options
        syn = release(data, o["lower"], o["upper"], epsilon, rng=rng, contributions=o["contributions"],
                      tree_share=o["tree_share"], integer=o["integer"],
                      max_nodes=min(MAX_NODES, int(o.get("max_nodes", MAX_NODES))))  # fmt: skip
        return Synthesis(syn, epsilon, {"stopped": syn.stopped})


class PrivTreeMarkov(Synthesizer):
    """``USING privtree_markov``: ``sequence_release`` on sequences of symbol numbers.

    Options: ``n_symbols``, ``max_length``, ``max_rows`` and ``max_cells`` (the model's rows, and rows and
    context symbols, as its release's caps allow; cells at most ``MAX_MODEL_CELLS``) [cap].
    """

    NAME = "privtree_markov"

    def synthesize(self, data: list, *, epsilon, delta=0.0, rng, options, progress=None) -> Synthesis:
        max_cells = min(MAX_MODEL_CELLS, options.get("max_cells") or MAX_MODEL_CELLS)
        model = sequence_release(data, options["n_symbols"], options["max_length"], epsilon, rng=rng,
                                 max_cells=max_cells, max_rows=options.get("max_rows"))
        return Synthesis(model, epsilon, {"stopped": model.stopped})
