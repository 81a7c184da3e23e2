"""PrivTree: a private spatial decomposition with no depth limit, and its noisy leaf counts.

Zhang, Xiao, Xie, "PrivTree: A Differentially Private Algorithm for Hierarchical
Decompositions", SIGMOD 2016 (thesis chapter 4, Algorithm 4.2 and Corollary 4.1).

**Guarantee.** ε-differential privacy (pure) for ``epsilon = ε_tree + ε_count`` (the thesis
splits ε in half). **Neighbouring relation.** Add or remove one subject, who contributes at
most ``x`` points (``max_rows``); the thesis's proof is for x = 1 and scales λ by x when one
tuple can touch x leaves (§4.2.5). **Sensitivity.** The tree: each point changes the counts of
the nodes on its root-to-leaf path by 1; the bias makes their privacy costs a geometric series
(below). The leaf counts: a subject's points lie in at most x leaves, L1 sensitivity x.

**Algorithm (4.2).** The domain Ω is the owner's declared bounds on 1–4 numeric columns (public:
never the data's own min/max); a node covers a half-open box and splits into β = 2^d equal
boxes (every dimension halved). Node v at depth d with count c(v) has the biased count
``b(v) = max(θ − δ, c(v) − d·δ)`` and splits iff ``b(v) + Z > θ``, Z discrete Laplace of scale λ
(``P(z) ∝ exp(−|z|/λ)``), with ``λ = (2β − 1)/(β − 1) · x/ε_tree``, ``δ = λ·ln β``, ``θ = 0``.
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

**Leaf counts.** ``c(leaf) + DLap(x/ε_count)``; internal counts are sums of leaves
(post-processing). Range counts from the synopsis assume points spread uniformly inside a
leaf; that assumption's error is unknown, so those answers carry no interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dpgate import noise
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


@dataclass
class Synopsis:
    """The leaves: boxes ``lo[i] ≤ x < hi[i]`` (the last box of a dimension closed at its max),
    their depth, and their noisy counts."""

    lo: np.ndarray  # (leaves, d)
    hi: np.ndarray
    depth: np.ndarray
    counts: np.ndarray  # noisy, integers (may be negative: unbiased range sums)
    stopped: bool = False  # growth stopped at MAX_NODES [cap]

    def range_count(self, qlo: np.ndarray, qhi: np.ndarray) -> float:
        """Σ noisy · |q ∩ leaf| / |leaf| over the leaves (uniform spreading inside a leaf)."""
        overlap = np.clip(np.minimum(self.hi, qhi) - np.maximum(self.lo, qlo), 0, None) / (self.hi - self.lo)
        return float((self.counts * overlap.prod(axis=1)).sum())


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
    n, d = points.shape
    if not 1 <= d <= MAX_DIMENSIONS:
        raise ValueError(f"PrivTree takes 1 to {MAX_DIMENSIONS} dimensions, got {d}")
    integer = np.zeros(d, dtype=bool) if integer is None else np.asarray(integer, dtype=bool)
    lam, delta, theta = parameters(epsilon_tree, 2**d, contributions)
    frontier = [(lower.astype(float), upper.astype(float), 0, np.arange(n))]
    leaves_lo, leaves_hi, leaves_depth, leaves_ids = [], [], [], []
    nodes, stopped = 1, False
    while frontier:
        if nodes + len(frontier) * 2**d > max_nodes:  # [cap]: reads the released tree only
            stopped = True
            for lo, hi, depth, ids in frontier:
                leaves_lo.append(lo), leaves_hi.append(hi), leaves_depth.append(depth), leaves_ids.append(ids)
            break
        # one level at a time: the split decisions of a level are drawn together
        b = np.array([max(theta - delta, len(ids) - depth * delta) for _, _, depth, ids in frontier])
        z = noise.discrete_laplace(1.0, lam, len(frontier), rng)
        can = [depth < MAX_DEPTH and bool((~integer | (hi - lo > 1)).any()) for lo, hi, depth, _ in frontier]
        split = (b + z > theta) & np.array(can)
        nxt = []
        for (lo, hi, depth, ids), s in zip(frontier, split.tolist()):
            if not s:
                leaves_lo.append(lo), leaves_hi.append(hi), leaves_depth.append(depth), leaves_ids.append(ids)
                continue
            dims = np.flatnonzero(~integer | (hi - lo > 1))
            mid = np.where(integer, lo + np.floor((hi - lo) / 2), (lo + hi) / 2)
            k = len(dims)
            bits = 1 << np.arange(k)
            code = ((points[ids][:, dims] >= mid[dims]) * bits).sum(axis=1) if len(ids) else np.zeros(0, dtype=np.int64)
            order = np.argsort(code, kind="stable")
            starts = np.searchsorted(code[order], np.arange(2**k + 1))
            for child in range(2**k):
                upper_half = np.zeros(d, dtype=bool)
                upper_half[dims] = (child & bits) > 0
                in_dims = np.zeros(d, dtype=bool)
                in_dims[dims] = True
                clo = np.where(in_dims & upper_half, mid, lo)
                chi = np.where(in_dims & ~upper_half, mid, hi)
                nxt.append((clo, chi, depth + 1, ids[order[starts[child] : starts[child + 1]]]))
        frontier = nxt
        nodes += len(nxt)
    return np.array(leaves_lo), np.array(leaves_hi), np.array(leaves_depth), leaves_ids, stopped


def release(points: np.ndarray, lower, upper, epsilon: float, *, rng: np.random.Generator, contributions: int = 1,
            tree_share: float = 0.5, integer=None) -> Synopsis:  # fmt: skip
    """PrivTree at ``tree_share·ε`` and discrete Laplace leaf counts at the rest.

    Integer dimensions take bounds [lo, hi + 1) from the caller and integer points (cell v is [v, v + 1)).
    """
    lower, upper = np.asarray(lower, dtype=float), np.asarray(upper, dtype=float)
    pts = np.asarray(points, dtype=float)
    if integer is not None:
        pts = np.where(np.asarray(integer, dtype=bool), np.floor(pts), pts)
    pts = np.clip(pts, lower, np.nextafter(upper, lower))  # the last cell is closed
    eps_tree, eps_count = epsilon * tree_share, epsilon * (1 - tree_share)
    lo, hi, depth, ids, stopped = grow(pts, lower, upper, eps_tree, rng=rng, contributions=contributions,
                                       integer=integer)  # fmt: skip
    exact = np.array([len(i) for i in ids], dtype=np.int64)
    noisy = exact + noise.discrete_laplace(eps_count, contributions, len(exact), rng)
    return Synopsis(lo, hi, depth, noisy, stopped)


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
                     rng: np.random.Generator, max_cells: int = MAX_MODEL_CELLS) -> SequenceModel:  # fmt: skip
    """Algorithm 4.3 on sequences of symbols 0..n−1, truncated to ``max_length`` (counting END).

    A split whose children would take the model past ``max_cells`` cells is not made (the node
    stays a leaf and the model says it stopped), a node at depth k costing ``(n_symbols + 1)(k + 1)``:
    its histogram and, in the model table, its context beside each next symbol [cap]. The test runs
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
    cells = n_symbols + 1  # the root's histogram
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
            if cells + cost > max_cells:  # [cap]: reads the released tree only
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

    Options: ``lower``, ``upper``, ``contributions``, ``tree_share``, ``integer``.
    """

    NAME = "privtree"

    def synthesize(self, data: np.ndarray, *, epsilon, delta=0.0, rng, options, progress=None) -> Synthesis:
        o = options
        syn = release(data, o["lower"], o["upper"], epsilon, rng=rng, contributions=o["contributions"],
                      tree_share=o["tree_share"], integer=o["integer"])  # fmt: skip
        return Synthesis(syn, epsilon, {"stopped": syn.stopped})


class PrivTreeMarkov(Synthesizer):
    """``USING privtree_markov``: ``sequence_release`` on sequences of symbol numbers.

    Options: ``n_symbols``, ``max_length``.
    """

    NAME = "privtree_markov"

    def synthesize(self, data: list, *, epsilon, delta=0.0, rng, options, progress=None) -> Synthesis:
        model = sequence_release(data, options["n_symbols"], options["max_length"], epsilon, rng=rng)
        return Synthesis(model, epsilon, {"stopped": model.stopped})
