"""Consistent counts on a tree: the least-squares estimate of every node's count from noisy
counts of some of its nodes, and intervals that hold for it.

Hay, Rastogi, Miklau, Suciu, "Boosting the accuracy of differentially private histograms
through consistency", PVLDB 3(1), 2010 (constrained inference), in the form for unequal
variances and unmeasured nodes (a two-pass smoother over the tree).

**Guarantee.** None needed: everything here is post-processing of released noisy counts and of
the released tree (its shape and each measurement's noise distribution are public), so it keeps
the privacy of the measurements it reads. **Neighbouring relation and sensitivity:** those of the
measurements, stated by the mechanism that makes them (``privtree``); nothing here reads data.

**Estimate.** Each node v has a true count x_v with ``x_parent = Σ x_children``. Some nodes are
measured, ``y_v = x_v + noise`` with known variance σ²_v (several measurements of one node are
first merged by inverse-variance weighting [merge]). The estimate is the generalized least-squares
(best linear unbiased) fit of the leaves to all measurements, computed in two passes [gls]:

- up: a leaf's ``z = y`` with ``V = σ²``; an internal node combines its own measurement with the
  sum ``s`` of its children's z (variance ``S = Σ V``): ``V = 1/(1/σ² + 1/S)``,
  ``z = V·(y/σ² + s/S)`` (an unmeasured node: ``z = s``, ``V = S``);
- down: ``x̂_root = z_root``, and each child takes its share of its parent's correction in
  proportion to its variance, ``x̂_c = z_c + (V_c/S_p)·(x̂_p − s_p)``.

The estimates are consistent (every parent is the sum of its children), unbiased (each is a
fixed linear combination of the measurements, exact for exact counts), and of least variance
among linear unbiased estimates; the variance of each is ``P_root = V_root``,
``P_c = V_c + (V_c/S_p)²·(P_p − S_p)`` [var] (checked against the dense normal equations in
``tests/mechanisms/test_hierarchy.py``).

**Intervals.** ``x̂_v − x_v = Σ_i a_i Z_i`` over the measurements' independent noises. A discrete
Laplace Z of ratio ``a = e^{−1/b}`` has ``E e^{tZ} = 1/(1 − sinh²(t/2)/sinh²(1/(2b)))``, at most
the continuous Laplace(b)'s ``1/(1 − t²b²)`` (``sinh(u)/u`` grows), so
``E e^{s(x̂ − x)} ≤ Π 1/(1 − s²a_i²b_i²) ≤ 1/(1 − s²ν²)`` with ``ν² = Σ a_i²b_i² ≤ κ·P``,
``κ = max_i b_i²/σ_i²``: the Chernoff bound of one Laplace(ν) applies [tail]. A node's
half-width is the smaller of that bound's and Chebyshev's (``√(P/α)``), both valid, so the
interval covers the node's true count with probability at least 1 − α. Both are conservative
(about twice the exact half-width of a single Laplace count).
"""

from __future__ import annotations

import math

import numpy as np

from dpgate import noise


def merge(n_nodes: int, measurements: list[tuple[np.ndarray, np.ndarray, float]]) -> tuple[np.ndarray, np.ndarray]:
    """(y, σ²) per node from ``(nodes, noisy values, variance)`` families; σ² = inf where unmeasured [merge]."""
    precision = np.zeros(n_nodes)
    weighted = np.zeros(n_nodes)
    for nodes, values, variance in measurements:
        precision[nodes] += 1.0 / variance
        weighted[nodes] += np.asarray(values, dtype=float) / variance
    measured = precision > 0
    y = np.divide(weighted, precision, out=np.zeros(n_nodes), where=measured)
    var = np.divide(1.0, precision, out=np.full(n_nodes, np.inf), where=measured)
    return y, var


def consistent(parent: np.ndarray, depth: np.ndarray, y: np.ndarray, var: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(x̂, P): the least-squares estimate of every node's count and its variance [gls] [var].

    ``parent[0] == -1`` is the root; nodes are numbered so that a parent comes before its children
    (any order within a depth). Every leaf must be measured (finite ``var``)."""
    n = len(parent)
    leaf = np.ones(n, dtype=bool)
    leaf[parent[1:]] = False
    if not np.isfinite(var[leaf]).all():
        raise ValueError("every leaf needs a measurement")
    levels = [np.flatnonzero(depth == k) for k in range(int(depth.max()) + 1)] if n else []
    z, v = y.astype(float).copy(), var.astype(float).copy()
    s, big_s = np.zeros(n), np.zeros(n)
    for k in range(len(levels) - 1, -1, -1):
        nodes = levels[k]
        inner = nodes[~leaf[nodes]]
        if len(inner):
            own = 1.0 / var[inner]  # 0 where unmeasured
            kids = 1.0 / big_s[inner]
            v[inner] = 1.0 / (own + kids)
            z[inner] = v[inner] * (y[inner] * own + s[inner] * kids)
        if k:
            np.add.at(s, parent[nodes], z[nodes])
            np.add.at(big_s, parent[nodes], v[nodes])
    x, p = np.zeros(n), np.zeros(n)
    if n:
        x[0], p[0] = z[0], v[0]
    for nodes in levels[1:]:
        up = parent[nodes]
        share = v[nodes] / big_s[up]
        x[nodes] = z[nodes] + share * (x[up] - s[up])
        p[nodes] = v[nodes] + share**2 * (p[up] - big_s[up])
    return x, np.maximum(p, 0.0)


def _chernoff_laplace(alpha: float) -> float:
    """τ with ``min_{0<u<1} e^{−uτ}/(1 − u²) = α/2``: the one-sided Chernoff bound of Laplace(1) [tail]."""
    def bound(tau: float) -> float:
        u = (math.sqrt(1 + tau * tau) - 1) / tau  # the minimiser
        return math.exp(-u * tau) / (1 - u * u)

    lo, hi = 1e-9, 1.0
    while bound(hi) > alpha / 2:
        hi *= 2
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if bound(mid) <= alpha / 2 else (mid, hi)
    return hi


def laplace_ratio(epsilon: float, sensitivity: float) -> float:
    """κ = b²/σ² of the discrete Laplace sampler at (ε, sensitivity): its scale b = 1/c against its variance."""
    a = noise.discrete_laplace_alpha(epsilon, sensitivity)
    b = -1.0 / math.log(a)
    return b * b / noise.discrete_laplace_std(epsilon, sensitivity) ** 2


def half_widths(variance: np.ndarray, kappa: float, alpha: float) -> np.ndarray:
    """Half-widths that cover each estimate's count with probability ≥ 1 − α: min(Chernoff, Chebyshev) [tail]."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    chernoff = _chernoff_laplace(alpha) * np.sqrt(kappa * variance)
    chebyshev = np.sqrt(variance / alpha)
    return np.minimum(chernoff, chebyshev)
