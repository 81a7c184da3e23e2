"""PrivTree's node counts: the families measured, the refinement plan, consistency, how close range
answers are to the truth, and the nodes' intervals, on full releases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpgate.mechanisms import privtree
from dpgate.mechanisms.privtree import COUNT_SHARES, MAX_DEPTH, middle_depth, prepare, refinement_depths, release

LOWER, UPPER = np.zeros(2), np.ones(2)


def _points(rng: np.random.Generator, n: int) -> np.ndarray:
    """Clustered points in the unit square: two tight clusters, a line, a uniform background."""
    parts = [rng.normal([0.3, 0.7], 0.02, (n // 3, 2)), rng.normal([0.8, 0.2], 0.08, (n // 3, 2)),
             np.column_stack([rng.uniform(0, 1, n // 6), np.full(n // 6, 0.41)])]  # fmt: skip
    parts.append(rng.uniform(0, 1, (n - sum(len(p) for p in parts), 2)))
    return prepare(np.concatenate(parts), LOWER, UPPER)


def _exact(syn: privtree.Synopsis, pts: np.ndarray) -> np.ndarray:
    """Each node's true number of points: the leaves' summed up the tree."""
    counts = np.bincount(syn.locate(pts), minlength=len(syn.counts)).astype(float)
    for k in range(int(syn.depth.max()), 0, -1):
        at = np.flatnonzero(syn.depth == k)
        np.add.at(counts, syn.parent[at], counts[at])
    return counts


@pytest.mark.parametrize("eps, middle", [(2.0, False), (4.0, True)])
def test_each_family_tiles_the_domain_so_a_point_is_in_one_of_its_boxes(eps, middle):
    """The sensitivity argument: every family measured is a set of disjoint boxes covering Ω, so a
    point changes one count of each family by 1 (a subject with x points, at most x). At ε = 2 the
    middle cut (about n'·ε/160 = 75 boxes) is too close to the upper cut's 16 and is not measured;
    at ε = 4 (150 boxes: depth 4) it is."""
    rng = np.random.default_rng(1)
    pts = _points(rng, 6000)
    syn = release(pts, LOWER, UPPER, eps, rng=rng)
    assert set(syn.families) == set(COUNT_SHARES) - ({"middle"} if not middle else set())
    if middle:
        assert (syn.depth[syn.families["middle"]] <= 4).all() and (syn.depth[syn.families["middle"]] == 4).any()
    for name, family in syn.families.items():
        lo, hi = syn.lo[family], syn.hi[family]
        assert np.isclose((hi - lo).prod(axis=1).sum(), 1.0), name
        inside = ((pts[None] >= lo[:, None]) & (pts[None] < hi[:, None])).all(axis=2)
        assert (inside.sum(axis=0) == 1).all(), name
    held = syn.locate(pts)
    assert syn.leaf[held].all() and ((pts >= syn.lo[held]) & (pts < syn.hi[held])).all()
    assert np.array_equal(syn.families["refined"], np.flatnonzero(syn.leaf))
    refined_below = np.setdiff1d(np.flatnonzero(syn.leaf), syn.families["leaves"])
    assert len(refined_below) > 100  # the dense leaves were split further
    kids = np.zeros(len(syn.counts))
    np.add.at(kids, syn.parent[1:], syn.counts[1:])
    assert np.abs(kids[~syn.leaf] - syn.counts[~syn.leaf]).max() < 1e-6  # consistent
    # a child lies inside its parent, one level deeper
    p = syn.parent[1:]
    assert (syn.lo[1:] >= syn.lo[p]).all() and (syn.hi[1:] <= syn.hi[p]).all() and (syn.depth[1:] == syn.depth[p] + 1).all()


def test_the_refinement_plan_reads_noisy_counts_and_stays_within_the_cap():
    # cells ≈ N'·ε/(x·5): 4^r of them for a 2-D leaf; none at most one cell; negative counts none
    eps = 1.0
    levels = refinement_depths(np.array([-30, 0, 5, 5.1, 20, 21, 80, 81, 1e6]), np.zeros(9, int), eps, 1, 4, 10**9)
    assert levels.tolist() == [0, 0, 0, 1, 1, 2, 2, 3, 9]
    assert refinement_depths(np.array([20.0]), np.zeros(1, int), eps, 2, 4, 10**9).tolist() == [1]  # x = 2 halves it
    assert refinement_depths(np.array([1e6]), np.array([MAX_DEPTH - 2]), eps, 1, 4, 10**9).tolist() == [2]
    capped = refinement_depths(np.array([1e6, 1e6, 50.0]), np.zeros(3, int), eps, 1, 4, 1000)
    assert sum(4 * (4 ** int(r) - 1) // 3 for r in capped) <= 1000 and capped.tolist() == [4, 4, 2]
    rng = np.random.default_rng(2)
    syn = release(_points(rng, 20000), LOWER, UPPER, 50.0, rng=rng, max_nodes=3000)
    assert len(syn.counts) <= 3000 and syn.stopped  # the synopsis says it was cut short


@pytest.mark.statistical
def test_range_answers_are_close_to_unbiased_and_far_better_than_the_thesis_release_on_a_large_range():
    """150 releases of 2,000 clustered points at ε = 1, the range [0, 0.5) × [0.5, 1) (a node of
    every tree that reaches depth 1, so no spreading error; it holds the tight cluster, many leaves). The refinement plan is made from the leaf counts
    the fit also uses, a selection that biases the estimate slightly (module docstring); the mean
    error stays within a quarter of the noise's standard deviation plus 3 standard errors. The
    thesis's release (half of ε on the tree, leaf counts only) sums many more noisy counts."""
    rng = np.random.default_rng(3)
    pts = _points(rng, 2000)
    qlo, qhi = np.array([0, 0.5]), np.array([0.5, 1.0])  # the quadrant of the tight cluster
    true = ((pts >= qlo) & (pts < qhi)).all(axis=1).sum()
    new = np.array([release(pts, LOWER, UPPER, 1.0, rng=rng).range_count(qlo, qhi) - true for _ in range(150)])
    old = np.array([release(pts, LOWER, UPPER, 1.0, rng=rng, tree_share=0.5, shares={"leaves": 1}).range_count(qlo, qhi)
                    - true for _ in range(150)])  # fmt: skip
    print(f"true {true}: new mean {new.mean():.2f} sd {new.std():.2f}; thesis mean {old.mean():.2f} sd {old.std():.2f}")
    assert abs(new.mean()) < 0.25 * new.std() + 3 * new.std() / math.sqrt(len(new))
    assert abs(old.mean()) < 3 * old.std() / math.sqrt(len(old))  # one measurement per leaf: no selection
    assert new.std() < 0.5 * old.std()


@pytest.mark.statistical
def test_node_intervals_cover_the_true_counts():
    """Over 40 releases (the refinement plan redrawn each time), the share of nodes whose 95%
    interval holds the node's true count is at least 95% (it is far above: the bound is
    conservative), at the root, at the leaves and overall."""
    rng = np.random.default_rng(4)
    pts = _points(rng, 3000)
    covered = {"root": [], "leaves": [], "all": []}
    for _ in range(40):
        syn = release(pts, LOWER, UPPER, 1.0, rng=rng)
        ok = np.abs(syn.counts - _exact(syn, pts)) <= syn.half_widths(0.05)
        covered["root"].append(ok[0]), covered["leaves"].extend(ok[syn.leaf]), covered["all"].extend(ok)
    rates = {k: float(np.mean(v)) for k, v in covered.items()}
    print("coverage", rates)
    assert rates["root"] >= 0.95 - 3 * math.sqrt(0.05 * 0.95 / 40)
    assert rates["leaves"] >= 0.95 and rates["all"] >= 0.95


@pytest.mark.parametrize("eps, middle", [(0.5, False), (4.0, True)])
def test_the_epsilons_spent_add_up_to_the_release_whether_or_not_the_middle_cut_is_measured(eps, middle):
    """[budget]: the tree's ε and each measured family's add up to ε; an unmeasured middle cut's
    share is split evenly between the leaves and the refined leaves (0.25 and 0.55 of the counts' ε)."""
    rng = np.random.default_rng(4)
    syn = release(_points(rng, 6000), LOWER, UPPER, eps, rng=rng)
    assert math.isclose(sum(syn.epsilons.values()), eps)
    assert math.isclose(syn.epsilons["tree"], eps * privtree.TREE_SHARE)
    assert ("middle" in syn.epsilons) == middle
    counts = eps * (1 - privtree.TREE_SHARE)
    assert math.isclose(syn.epsilons["upper"], counts * COUNT_SHARES["upper"])
    if not middle:
        assert math.isclose(syn.epsilons["leaves"], counts * 0.25)
        assert math.isclose(syn.epsilons["refined"], counts * 0.55)
    else:
        assert all(math.isclose(syn.epsilons[k], counts * v) for k, v in COUNT_SHARES.items())
    # with the thesis's shares (no upper cut) nothing else is measured
    syn = release(_points(rng, 2000), LOWER, UPPER, eps, rng=rng, tree_share=0.5, shares={"leaves": 1})
    assert set(syn.families) == {"leaves"} and math.isclose(sum(syn.epsilons.values()), eps)


def test_the_middle_cut_depth_is_read_from_the_noisy_total_and_public_facts():
    # about n'·ε/(x·160) boxes, 4^k in 2-D (nearest geometrically), only at least 16 times the upper cut's 16
    assert middle_depth(170_000, 1.0, 1, 2) == 5  # 1,062 boxes: 4^5 = 1,024
    assert middle_depth(170_000, 0.5, 1, 2) == 5  # 531: log4 = 4.53
    assert middle_depth(170_000, 0.1, 1, 2) is None  # 106: depth 3, only 4 times the upper cut's boxes
    assert middle_depth(170_000, 1.0, 4, 2) == 4  # four points a subject: a quarter of the boxes
    assert middle_depth(2_600, 1.0, 1, 2) is None and middle_depth(-50, 1.0, 1, 2) is None
    assert middle_depth(1e40, 1.0, 1, 2) == MAX_DEPTH
    assert middle_depth(170_000, 1.0, 1, 1) == 10  # 1-D: the upper cut is depth 4 (16 intervals)


@pytest.mark.parametrize("kwargs", [
    {"shares": {"upper": 1.0}},  # neither leaves nor refined
    {"shares": {"leaves": 1.0, "middle": -0.1}},
    {"shares": {"leaves": float("nan")}},
    {"shares": {"leaves": 1.0, "root": 0.5}},
    {"tree_share": 0.0}, {"tree_share": 1.0}, {"epsilon": 0.0}, {"epsilon": float("inf")},
])  # fmt: skip
def test_bad_options_are_refused_before_anything_is_read(kwargs):
    kwargs = {"epsilon": 1.0} | kwargs
    with pytest.raises(ValueError):
        eps = kwargs.pop("epsilon")
        release(_points(np.random.default_rng(5), 100), LOWER, UPPER, eps, rng=np.random.default_rng(5), **kwargs)
