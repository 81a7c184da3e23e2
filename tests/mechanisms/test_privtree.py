"""PrivTree: the exact privacy of the tree-growing decisions, leaf counts, range counts, termination."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpgate import noise
from dpgate.mechanisms.privtree import MAX_DEPTH, grow, log_split, parameters, release, split_probability


def worst_log_ratio(beta: int, eps_tree: float, depths: int = 40, counts: int = 400) -> tuple[float, float]:
    """max and min over every path and every non-increasing count sequence of ln P_D(T) / P_D'(T).

    D has the point (counts c on its path), D' does not (c − 1); off-path nodes cancel. Internal
    path nodes split, the leaf does not. A dynamic program over (depth, count) with a suffix max.
    """
    lam, delta, theta = parameters(eps_tree, beta)
    c = np.arange(1, counts + 1)

    def b(cnt, depth):
        return np.maximum(theta - delta, cnt - depth * delta)

    def logs(bv):
        out = np.array([log_split(x, lam, theta) for x in bv])
        return out[:, 0], out[:, 1]

    hi_best = lo_best = None
    top, bottom = -math.inf, math.inf
    for depth in range(depths + 1):
        (s1, n1), (s0, n0) = logs(b(c, depth)), logs(b(c - 1, depth))
        split, leaf = s1 - s0, n1 - n0
        if hi_best is None:
            prev_hi = prev_lo = np.zeros(counts)
        else:  # best over parents with a count ≥ c (suffix max / min)
            prev_hi = np.maximum.accumulate(hi_best[::-1])[::-1]
            prev_lo = np.minimum.accumulate(lo_best[::-1])[::-1]
        top = max(top, float((prev_hi + leaf).max()))
        bottom = min(bottom, float((prev_lo + leaf).min()))
        hi_best, lo_best = prev_hi + split, prev_lo + split
    return top, bottom


@pytest.mark.parametrize("beta", [2, 4, 16])
@pytest.mark.parametrize("eps_tree", [0.05, 0.5, 2.0])
def test_split_decisions_are_eps_tree_dp_with_discrete_noise(beta, eps_tree):
    top, bottom = worst_log_ratio(beta, eps_tree)
    assert top <= eps_tree and -bottom <= eps_tree
    assert top > 0.5 * eps_tree  # the bound is nearly reached: the test has teeth


def test_without_the_bias_the_same_check_fails():
    # δ = 0 (SimpleTree with no depth limit): the path costs grow with depth, far past ε
    lam, _, theta = parameters(0.5, 4)
    total = sum(math.log(split_probability(100 - 0, lam, theta) / split_probability(99, lam, theta)) for _ in range(1))
    per_level = math.log(split_probability(0, lam, theta) / split_probability(-1, lam, theta))
    assert per_level * 40 > 0.5 and total >= 0  # 40 levels at the unbiased rate: ≈ 40/λ ≫ ε_tree


def test_a_clamped_node_splits_with_probability_one_over_two_beta():
    for beta in (2, 4, 16):
        lam, delta, theta = parameters(1.0, beta)
        p = split_probability(theta - delta, lam, theta)
        assert p == pytest.approx(1 / (2 * beta), rel=0.35)  # discrete: the tail at ⌊δ⌋ + 1, close to 1/(2β)


def test_leaves_partition_the_domain_and_every_point_is_in_one_leaf():
    rng = np.random.default_rng(1)
    pts = np.concatenate([rng.normal(0.3, 0.05, (3000, 2)), rng.uniform(0, 1, (500, 2)), [[1.0, 1.0], [0.0, 0.0]]])
    pts = np.clip(pts, 0, np.nextafter(1.0, 0))
    lo, hi, depth, ids, stopped = grow(pts, np.zeros(2), np.ones(2), 1.0, rng=rng)
    assert not stopped
    assert np.isclose(((hi - lo).prod(axis=1)).sum(), 1.0)
    assert sorted(np.concatenate(ids).tolist()) == list(range(len(pts)))
    for box_lo, box_hi, i in zip(lo, hi, ids):
        assert ((pts[i] >= box_lo) & (pts[i] < box_hi)).all()
    assert depth.max() >= 4 and len(lo) > 20  # the dense cluster is refined


def test_duplicates_stop_and_the_tree_stays_small_on_empty_data():
    rng = np.random.default_rng(2)
    same = np.full((60, 2), 0.123)  # 60 identical points: clamped once depth·δ ≥ 60 + δ (δ = 3.2)
    lo, hi, depth, ids, _ = grow(same, np.zeros(2), np.ones(2), 1.0, rng=rng)
    assert depth.max() < MAX_DEPTH
    lo, hi, depth, ids, _ = grow(np.full((10000, 2), 0.123), np.zeros(2), np.ones(2), 1.0, rng=rng)
    assert depth.max() == MAX_DEPTH and len(lo) < 2000  # a heap too big to clamp in time: the cap ends it
    sizes = np.array([len(grow(np.zeros((0, 2)), np.zeros(2), np.ones(2), 1.0, rng=rng)[0]) for _ in range(4000)])
    # No points: the root has b = 0, every node below is clamped (b = −δ) and splits with p ≈ 1/(2β):
    # expected leaves below a clamped node L = (1 − p)/(1 − 4p), and the root's (1 − p0) + 4·p0·L.
    lam, delta, theta = parameters(1.0, 4)
    p0, p = split_probability(0.0, lam, theta), split_probability(-delta, lam, theta)
    expected = (1 - p0) + 4 * p0 * (1 - p) / (1 - 4 * p)
    assert abs(sizes.mean() - expected) < 4 * sizes.std() / math.sqrt(len(sizes))
    assert sizes.max() < 400


@pytest.mark.parametrize("d", [1, 2, 4])
def test_growth_stops_at_the_node_cap_whatever_epsilon(d):
    """At ε = 10^4 every point is isolated down to MAX_DEPTH (20,000 points in 4 dimensions: about
    4 million nodes before the cap; 50,000 took 70 s and 4.7 GB after the debit). The tree keeps
    at most MAX_NODES nodes, its leaves still partition the domain and hold every point once, and
    it says that it stopped; at ε = 1 the same points never reach the cap."""
    rng = np.random.default_rng(4)
    pts = rng.uniform(0, 1, (20_000, d))
    cap = 1 << 14
    lo, hi, depth, ids, stopped = grow(pts, np.zeros(d), np.ones(d), 1e4, rng=rng, max_nodes=cap)
    assert stopped and len(lo) <= cap
    assert np.isclose(((hi - lo).prod(axis=1)).sum(), 1.0)
    assert sorted(np.concatenate(ids).tolist()) == list(range(len(pts)))
    lo, _, _, _, stopped = grow(pts[:2000], np.zeros(d), np.ones(d), 1.0, rng=rng, max_nodes=cap)
    assert not stopped


def test_the_node_cap_is_decided_by_the_released_tree_only():
    """The stop happens before a level whose nodes could all split past the cap: on data that grow
    a full tree level by level (every node splits), the number of leaves is the same for any two
    data sets that produce the same levels, and the cap is never exceeded by a split level."""
    rng = np.random.default_rng(5)
    for cap in (5, 21, 85, 100, 341):
        pts = rng.uniform(0, 1, (50_000, 2))
        lo, _, depth, _, stopped = grow(pts, np.zeros(2), np.ones(2), 1e6, rng=rng, max_nodes=cap)
        # a full quadtree: levels of 1, 4, 16, 64 ... nodes; total after L levels (4^(L+1) - 1) / 3
        full = max(t for t in (1, 5, 21, 85, 341) if t <= cap)
        assert stopped and len(lo) == 4 ** int(depth.max()) and (4 * len(lo) - 1) // 3 == full


def test_a_sequence_model_stops_at_its_cell_cap_whatever_epsilon():
    """At ε = 10^4 the suffix tree extends every context seen (5,000 sequences of 20 over 60
    symbols: 61 children a split); its cells (histogram and context per node) stay within the cap
    and the model says it stopped; at ε = 1 the cap is not reached."""
    from dpgate.mechanisms.privtree import sequence_release

    rng = np.random.default_rng(6)
    seqs = [(s * 7 + np.arange(20) ** 2) % 60 for s in range(5000)]
    cap = 1 << 18  # the whole tree of every context seen would be 677,283 cells
    model = sequence_release(seqs, 60, 21, 1e4, rng=rng, max_cells=cap)
    cells = sum(61 * (len(c) + 1) for c in model.contexts)
    assert model.stopped and cells <= cap
    assert not sequence_release(seqs, 60, 21, 1.0, rng=rng, max_cells=cap).stopped


def test_range_counts_are_close_on_a_large_sample():
    rng = np.random.default_rng(3)
    pts = rng.uniform(0, 1, (200_000, 2)) ** 2  # skewed toward the origin
    syn = release(pts, [0, 0], [1, 1], 1.0, rng=rng)
    for qlo, qhi in (([0, 0], [0.5, 0.5]), ([0.1, 0.2], [0.9, 0.4]), ([0, 0], [1, 1])):
        true = ((pts >= qlo) & (pts < qhi)).all(axis=1).sum()
        est = syn.range_count(np.array(qlo, float), np.array(qhi, float))
        assert abs(est - true) < 0.02 * len(pts)


def test_the_thesis_release_is_leaf_counts_with_their_declared_noise():
    # tree_share = 0.5 and the leaves alone: each leaf's estimate is its noisy count (the fit has
    # nothing else to use), pooled over many leaves of an empty tree: its variance is the sampler's
    rng = np.random.default_rng(4)
    z = []
    for _ in range(3000):
        s = release(np.zeros((0, 1)), [0], [1], 1.0, rng=rng, tree_share=0.5, shares={"leaves": 1})
        z.extend(s.counts[s.leaf].tolist())
    std = noise.discrete_laplace_std(0.5, 1)
    assert abs(np.std(z) - std) < 4 * std / math.sqrt(2 * len(z)) * 3


# -- sequences ---------------------------------------------------------------------------------------
from dpgate.mechanisms.privtree import START, sequence_parameters, sequence_release  # noqa: E402


@pytest.mark.parametrize("n_symbols, max_length", [(6, 73), (17, 20)])
def test_sequence_tree_decisions_are_eps_tree_dp(n_symbols, max_length):
    # Theorem 4.2: one sequence is inserted one occurrence at a time (≤ l⊤ steps); each step moves the
    # scores by 0 or 1 along one path, so each step must cost ≤ ε_tree / l⊤ — the same exact path check
    p = sequence_parameters(1.0, n_symbols, max_length)
    beta, step = p["beta"], p["epsilon_tree"] / max_length
    lam, _, _ = parameters(step, beta)
    assert lam == pytest.approx(p["lambda"])
    top, bottom = worst_log_ratio(beta, step, depths=25, counts=300)
    assert top <= step and -bottom <= step


def test_leaf_histograms_move_by_at_most_l_top_and_the_model_recovers_a_markov_source():
    rng = np.random.default_rng(7)
    P = np.array([[0.7, 0.2, 0.05, 0.05], [0.1, 0.6, 0.2, 0.1], [0.3, 0.3, 0.3, 0.1]])  # 3 symbols + END
    seqs = []
    for _ in range(30000):
        s, prev = [], 0
        while len(s) < 40:
            x = rng.choice(4, p=P[prev])
            if x == 3:
                break
            s.append(int(x))
            prev = x
        seqs.append(np.array(s, dtype=np.int64))
    model = sequence_release(seqs, 3, 12, 4.0, rng=rng)
    v = model.node_for([START, 1])  # context ending in symbol 1
    h = model.hist[v] / model.hist[v].sum()
    assert np.abs(h - P[1]).max() < 0.05
    assert abs(model.expected_sequences() - 30000) < 2000
    syn = model.sample(3000, np.random.default_rng(1))
    assert all(len(s) <= 12 for s in syn) and 0.5 < np.mean([len(s) for s in syn]) / np.mean([min(len(s), 12) for s in seqs]) < 1.5


def test_one_sequence_moves_the_exact_histograms_by_at_most_l_top():
    # the leaf histograms of a fixed tree (huge ε: no noise, so the tree is the exact one) on D and
    # D + one sequence differ by at most l⊤ in L1: the sensitivity the histogram noise is scaled to
    rng = np.random.default_rng(3)
    base = [rng.integers(0, 3, rng.integers(0, 8)) for _ in range(300)]
    compared = 0
    for extra in (np.array([0, 0, 0, 0, 0, 0, 0, 0, 0, 0]), np.array([2]), np.array([], dtype=np.int64),
                  np.array([1, 2, 1, 2, 1])):  # fmt: skip
        m1 = sequence_release(base, 3, 6, 1e9, rng=np.random.default_rng(0))
        m2 = sequence_release(base + [extra], 3, 6, 1e9, rng=np.random.default_rng(0))
        if m1.contexts == m2.contexts:
            moved = np.abs(m2.hist[m2.leaf] - m1.hist[m1.leaf]).sum()
            assert 1 <= moved <= 6
            compared += 1
    assert compared >= 2


def test_sequence_histograms_are_consistent_and_empty_cells_add_no_mass():
    """Post-processing of the leaf histograms: all non-negative, every internal node the sum of its
    children, and the model's mass near the real number of transitions when most cells are empty.

    100 symbols, 2,000 sequences over 5 of them: each leaf has 101 cells, nearly all empty. Setting
    negatives to 0 would add E[max(0, X)] ≈ b/2 per empty cell, about 50·b a leaf; keeping each leaf's
    noisy total adds at most E[max(0, N)] for a leaf's total noise N (σ = √101 · std), about 6·b.
    The bound below, 2σ a leaf, lies between the two."""
    rng = np.random.default_rng(11)
    seqs = [rng.integers(0, 5, rng.integers(1, 3)) for _ in range(2000)]
    n_symbols, max_length, eps = 100, 3, 1.0
    model = sequence_release(seqs, n_symbols, max_length, eps, rng=rng)
    assert (model.hist >= 0).all()
    for v, kids in model.children.items():
        assert np.allclose(model.hist[v], sum(model.hist[u] for u in kids.values()))
    real = sum(len(s) + 1 for s in seqs)  # every symbol and the end (all fit l⊤)
    sigma = math.sqrt(n_symbols + 1) * noise.discrete_laplace_std(sequence_parameters(eps, n_symbols, max_length)["epsilon_hist"], max_length)
    leaves = int(model.leaf.sum())
    assert model.hist[model.leaf].sum() - real <= 2 * sigma * leaves, (model.hist[model.leaf].sum(), real, leaves)


def test_a_large_alphabet_still_grows_contexts_of_two_symbols():
    """The cap is tested split by split: at 256 symbols a level-wide test (every node splitting) is
    past the cap at depth 2, and would have kept every model first-order and said it stopped."""
    rng = np.random.default_rng(9)
    # a second-order source over 256 symbols: the next symbol is the one two back, plus 1
    seqs = []
    for _ in range(3000):
        a, b = (int(x) for x in rng.integers(0, 8, 2))
        s = [a, b]
        while len(s) < 12:
            s.append((s[-2] + 1) % 256)
        seqs.append(np.array(s))
    model = sequence_release(seqs, 256, 13, 50.0, rng=rng)
    assert max(len(c) for c in model.contexts) >= 2
    assert sum(257 * (len(c) + 1) for c in model.contexts) <= privtree_cells()
    iid = [rng.integers(0, 256, 10) for _ in range(2000)]
    assert not sequence_release(iid, 256, 11, 1.0, rng=rng).stopped  # nothing wanted to split past the cap


def privtree_cells() -> int:
    from dpgate.mechanisms.privtree import MAX_MODEL_CELLS

    return MAX_MODEL_CELLS
