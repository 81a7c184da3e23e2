"""Consistent counts on a tree: the two-pass fit against the normal equations, unbiasedness and the
intervals' coverage under the discrete Laplace noise that releases add."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpgate import noise
from dpgate.mechanisms import hierarchy


def _tree(rng: np.random.Generator, n_nodes: int = 120) -> tuple[np.ndarray, np.ndarray]:
    """(parent, depth) of a random tree, parents before children, fan-outs of 1 to 5."""
    parent, depth, frontier = [-1], [0], [0]
    while len(parent) < n_nodes and frontier:
        v = frontier.pop(0)
        for _ in range(int(rng.integers(1, 6))):
            parent.append(v), depth.append(depth[v] + 1)
            frontier.append(len(parent) - 1)
    return np.array(parent), np.array(depth)


def _leaves(parent: np.ndarray) -> np.ndarray:
    leaf = np.ones(len(parent), dtype=bool)
    leaf[parent[1:]] = False
    return np.flatnonzero(leaf)


def _design(parent: np.ndarray) -> np.ndarray:
    """Node x leaf incidence: a node's count is the sum of the leaves below it."""
    leaves = _leaves(parent)
    a = np.zeros((len(parent), len(leaves)))
    for j, v in enumerate(leaves):
        while v >= 0:
            a[v, j] = 1
            v = parent[v]
    return a


def _measured(parent, rng):
    """Every leaf and a random half of the internal nodes measured, at unequal variances."""
    n = len(parent)
    var = np.full(n, np.inf)
    var[_leaves(parent)] = rng.uniform(1, 20, len(_leaves(parent)))
    inner = np.setdiff1d(np.arange(n), _leaves(parent))
    chosen = inner[rng.random(len(inner)) < 0.5]
    var[chosen] = rng.uniform(1, 50, len(chosen))
    return var


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_two_passes_are_the_least_squares_fit_and_its_variance(seed):
    rng = np.random.default_rng(seed)
    parent, depth = _tree(rng)
    var = _measured(parent, rng)
    y = rng.normal(0, 10, len(parent))
    x, p = hierarchy.consistent(parent, depth, y, var)
    a = _design(parent)
    m = np.isfinite(var)
    w = 1 / var[m]
    normal = a[m].T @ (a[m] * w[:, None])
    leaves_fit = np.linalg.solve(normal, a[m].T @ (w * y[m]))
    assert np.allclose(x, a @ leaves_fit, atol=1e-9)
    cov = a @ np.linalg.inv(normal) @ a.T
    assert np.allclose(p, np.diag(cov), rtol=1e-9)


def test_estimates_are_consistent_and_reproduce_exact_counts():
    rng = np.random.default_rng(4)
    parent, depth = _tree(rng, 300)
    truth = _design(parent) @ rng.integers(0, 50, len(_leaves(parent)))
    var = _measured(parent, rng)
    x, _ = hierarchy.consistent(parent, depth, truth.astype(float), var)
    assert np.allclose(x, truth)  # exact measurements give back the counts
    y = truth + rng.normal(0, 3, len(parent))
    x, _ = hierarchy.consistent(parent, depth, y, var)
    kids = np.zeros(len(parent))
    np.add.at(kids, parent[1:], x[1:])
    inner = np.setdiff1d(np.arange(len(parent)), _leaves(parent))
    assert np.abs(kids[inner] - x[inner]).max() < 1e-9


def test_a_leaf_without_a_measurement_is_refused():
    parent, depth = np.array([-1, 0, 0]), np.array([0, 1, 1])
    with pytest.raises(ValueError, match="every leaf"):
        hierarchy.consistent(parent, depth, np.zeros(3), np.array([1.0, 1.0, np.inf]))


def test_merge_weights_repeated_measurements_by_precision():
    y, var = hierarchy.merge(3, [(np.array([0, 1]), np.array([10.0, 4.0]), 2.0), (np.array([1]), np.array([8.0]), 6.0)])
    assert y[0] == 10 and var[0] == 2 and var[2] == np.inf
    assert y[1] == pytest.approx((4 / 2 + 8 / 6) / (1 / 2 + 1 / 6)) and var[1] == pytest.approx(1 / (1 / 2 + 1 / 6))


def _simulate(parent, depth, truth, families, draws, rng):
    """x̂ − truth for ``draws`` releases of discrete Laplace measurements of ``families`` (nodes, ε)."""
    errors = np.empty((draws, len(parent)))
    for r in range(draws):
        measured = [(f, truth[f] + noise.discrete_laplace(e, 1, len(f), rng), noise.discrete_laplace_std(e, 1) ** 2)
                    for f, e in families]  # fmt: skip
        y, var = hierarchy.merge(len(parent), measured)
        x, _ = hierarchy.consistent(parent, depth, y, var)
        errors[r] = x - truth
    return errors


@pytest.mark.statistical
def test_estimates_are_unbiased_and_their_variance_is_the_one_computed():
    """3,000 releases on a fixed tree (leaves at ε = 0.3, a level at 0.1, the root at 0.05): the mean
    error of each node is within 4.5 standard errors of 0 (a false alarm about 7e-6 a node, 60
    nodes), and the empirical variance within 5 standard errors of the computed one."""
    rng = np.random.default_rng(11)
    parent, depth = _tree(rng, 60)
    truth = _design(parent) @ rng.integers(0, 30, len(_leaves(parent))).astype(float)
    families = [(_leaves(parent), 0.3), (np.flatnonzero(depth == 2), 0.1), (np.array([0]), 0.05)]
    errors = _simulate(parent, depth, truth, families, 3000, rng)
    measured = [(f, truth[f], noise.discrete_laplace_std(e, 1) ** 2) for f, e in families]
    _, var = hierarchy.merge(len(parent), measured)
    _, p = hierarchy.consistent(parent, depth, truth, var)
    se = np.sqrt(p / len(errors))
    assert (np.abs(errors.mean(axis=0)) < 4.5 * se).all()
    # the sample variance's standard error: sqrt((μ4 − σ⁴)/n), μ4 ≤ 6σ⁴ for these Laplace mixtures
    assert (np.abs(errors.var(axis=0) - p) < 5 * np.sqrt(5 / len(errors)) * p).all()


@pytest.mark.statistical
def test_intervals_cover_at_least_their_level_and_the_bound_is_an_mgf_bound():
    """Coverage of every node's interval over 2,000 releases is at least 1 − α (minus 3 standard
    errors of a proportion); the intervals are conservative (the bound is Chernoff/Chebyshev), so
    coverage is measured and printed, not tuned."""
    rng = np.random.default_rng(12)
    parent, depth = _tree(rng, 60)
    truth = _design(parent) @ rng.integers(0, 30, len(_leaves(parent))).astype(float)
    families = [(_leaves(parent), 0.5), (np.flatnonzero(depth == 1), 0.2)]
    errors = _simulate(parent, depth, truth, families, 2000, rng)
    _, var = hierarchy.merge(len(parent), [(f, truth[f], noise.discrete_laplace_std(e, 1) ** 2) for f, e in families])
    _, p = hierarchy.consistent(parent, depth, truth, var)
    kappa = max(hierarchy.laplace_ratio(e, 1) for _, e in families)
    for alpha in (0.05, 0.2):
        half = hierarchy.half_widths(p, kappa, alpha)
        coverage = (np.abs(errors) <= half).mean(axis=0)
        worst = 1 - alpha - 3 * math.sqrt(alpha * (1 - alpha) / len(errors))
        print(f"alpha {alpha}: coverage min {coverage.min():.4f}, mean {coverage.mean():.4f}")
        assert coverage.min() >= worst
    # the MGF domination the bound rests on: discrete Laplace at scale b under continuous Laplace(b)
    for eps in (0.05, 0.5, 2.0):
        a = noise.discrete_laplace_alpha(eps, 1)
        b = -1 / math.log(a)
        t = np.linspace(0, 0.999 / b, 200)
        discrete = (1 - a) ** 2 / ((1 - a * np.exp(t)) * (1 - a * np.exp(-t)))
        assert (discrete <= 1 / (1 - (t * b) ** 2) + 1e-12).all()


def test_a_single_measurement_gets_an_interval_no_narrower_than_its_exact_one():
    for eps in (0.05, 0.3, 1.0, 4.0):
        var = noise.discrete_laplace_std(eps, 1) ** 2
        for alpha in (0.01, 0.05, 0.2):
            half = hierarchy.half_widths(np.array([var]), hierarchy.laplace_ratio(eps, 1), alpha)[0]
            assert half >= noise.discrete_laplace_half_width(eps, 1, alpha) - 1e-9
