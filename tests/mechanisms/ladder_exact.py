"""Exact error-bar quantities of the ladder mechanism, summed over the noise instead of sampled.

Shared by the error-bar tests: the miss probability of one half-width from the sampler's exact
law, and coverage and mean half-width summed over the width statistic's exact noise law (the
half-width depends on the noisy statistic only through the clamped ranges of the calibration
cells, so the sum runs once per distinct set of ranges).
"""

from __future__ import annotations

import math

import numpy as np

from dpgate import noise
from dpgate.mechanisms import graphs, ladder, ladder_bounds
from dpgate.mechanisms.ladder import sampling_epsilon


def exact_miss(lf, epsilon: float, m: int) -> float:
    """P(|X - f| > m) for the ladder release at ``epsilon``."""
    h = sampling_epsilon(epsilon, lf.n_nodes) / 2
    shape = ladder_bounds._Shape(list(lf.rungs), lf.global_sensitivity)
    return math.exp(shape.log_beyond(m, h) - shape.log_total(h))


def exact_mean_error(lf, epsilon: float) -> float:
    """E|X - f|: rung u holds I_{u-1} integers each side at mean distance D_{u-1} + (I_{u-1} + 1)/2;
    past M the rungs have width GS and geometric weights."""
    h = sampling_epsilon(epsilon, lf.n_nodes) / 2
    d, c = lf.offsets(), lf.global_sensitivity
    logs, means = [0.0], [0.0]
    for u, w in enumerate(lf.rungs, start=1):
        if w:
            logs.append(math.log(2 * w) - h * u)
            means.append(d[u - 1] + (w + 1) / 2)
    a = math.exp(-h)
    logs.append(math.log(2 * c) - h * (lf.M + 1) - math.log(1 - a))
    means.append(d[-1] + c * a / (1 - a) + (c + 1) / 2)
    weights = np.exp(np.array(logs) - max(logs))
    return float(np.dot(weights / weights.sum(), np.array(means, dtype=float)))


def over_the_noise(lf, epsilon: float, share: float, alpha: float, tail: float = 1e-9):
    """``(miss, mean half-width)``: P(|X - f| > m(s + Z)) and E[m(s + Z)] summed over the
    statistic's noise Z (a window holding all but ``tail`` of its mass; the rest counted as a
    miss and left out of the mean)."""
    eps_w = epsilon * share
    eps_c = epsilon - eps_w
    reach = int(math.log(2 / tail) / eps_w) + 1
    z = np.arange(-reach, reach + 1)
    pmf = noise.discrete_laplace_pmf(eps_w, 1, z)
    shat = ladder.width_statistic(lf, eps_w) + z  # the statistic released at eps_w (triangles: c_K)
    knee = ladder_bounds.statistic_knee(lf.query, lf.k, lf.n_nodes, eps_w)
    lo_pub, hi_pub = graphs.statistic_range(lf.query, lf.n_nodes, lf.k, knee)
    keys = []
    for z_lo, z_hi, _ in ladder_bounds.statistic_cells(eps_w, alpha):  # the clamped range of every cell
        top = np.clip(shat - z_lo, lo_pub, hi_pub)
        keys += [np.full_like(shat, lo_pub) if z_hi is None else np.clip(shat - z_hi, lo_pub, top), top]
    _, first, inverse = np.unique(np.stack(keys, axis=1), axis=0, return_index=True, return_inverse=True)
    mass = np.bincount(inverse.ravel(), weights=pmf, minlength=first.size)
    miss, mean = 1 - float(pmf.sum()), 0.0
    for i, p in zip(first.tolist(), mass.tolist()):
        m, _, _ = ladder_bounds.calibrated_half_width(lf.query, lf.k, lf.n_nodes, eps_c, int(shat[i]), eps_w, alpha)
        miss += p * exact_miss(lf, eps_c, m)
        mean += p * m
    return miss, mean
