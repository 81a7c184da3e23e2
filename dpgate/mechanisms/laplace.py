"""Discrete Laplace (two-sided geometric) noise for counts, bounded sums and averages.

**Reference:** Ghosh, Roughgarden, Sundararajan, "Universally utility-maximizing privacy
mechanisms", STOC 2009 (the geometric mechanism); Canonne, Kamath, Steinke, "The Discrete
Gaussian for Differential Privacy", NeurIPS 2020, arXiv 2004.00010 (discrete Laplace);
Mironov, "On Significance of the Least Significant Bits for Differential Privacy", CCS
2012 (why real values go on a grid). Contribution bounding follows Wilson et al., "DP SQL
with bounded user contribution", arXiv 1909.01917.

**Guarantee:** ε-DP per aggregate, for neighbouring databases that differ in all the rows of
one subject (added or removed; the subject roster and budgets are public). The shares of the
aggregates of one query add up to the query's ε (basic composition).

**Sensitivity:** after bounding, a subject has at most ``R = max_rows`` rows in at most
``M = max_groups`` groups (``execute``). Over all cells of one aggregate, the L1 change is
``R`` for COUNT(*), COUNT(expr) and COUNT(DISTINCT expr) [sens-count]; ``min(R, M, cells)``
for COUNT(DISTINCT unit) [sens-subjects]; ``R * max(|L|, |U|)`` grid units for SUM of an
input clamped to ``[L, U]`` [sens-sum]; for AVG, ``R * (U - L) / 2`` for the sum of
``x - mid`` and ``R`` for the count [sens-avg]. Real inputs are rounded to a power-of-two
grid ``g`` (``(U - L) / 2^32``) in SQL and summed as exact integers, so the sensitivity in
grid units is an exact integer.

**Accuracy:** the noise ``Z`` of a component has ``P(|Z| > w) = 2 a^(w+1) / (1 + a)`` with
``a = exp(-ε / Δ)``; the reported interval is ``value ± w`` for the smallest ``w`` with
coverage ``>= 1 - alpha`` [ci]. For AVG, each of the two components gets ``alpha / 2`` and
the interval is the range of ``mid + S / C`` over the two boxes (Bonferroni) [ci-avg].
Intervals cover the bounded statistic (after clamping and row sampling), not bias from
bounding. Clamping counts at 0 and averages to ``[L, U]`` is post-processing.

**Proof sketch:** each component is an integer statistic with L1 sensitivity ``Δ``
(above); adding independent discrete Laplace noise with ``P(z) ∝ exp(-ε |z| / Δ)`` to every
cell is ε-DP [noise] (``noise.discrete_laplace`` samples it exactly, see its docstring for
the float margin). AVG's two components use ``ε/2`` each [split]. Everything after the
noise — grid scaling, division, clamping, intervals — is post-processing.
"""

from __future__ import annotations

import math

import numpy as np

from dpgate import noise
from dpgate.execute import ExactAnswer
from dpgate.mechanisms.base import Mechanism, NoisyColumn
from dpgate.plans import AVG, COUNT_SUBJECTS, SUM, AggSpec, CountPlan


class LaplaceCounting(Mechanism):
    NAME = "laplace"
    VETTED = True

    def release(
        self, plan: CountPlan, exact: ExactAnswer, rows: np.ndarray, *, rng: np.random.Generator
    ) -> list[NoisyColumn]:
        """Noisy values for every aggregate at the key positions ``rows`` of ``exact``."""
        alpha = plan.settings.alpha
        out = []
        for agg in plan.aggs:
            if agg.kind == AVG:
                out.append(_avg(agg, exact, rows, alpha, rng))
            else:
                out.append(_single(agg, exact, rows, alpha, rng, plan.settings.clamp_counts))
        return out


def _noisy(agg: AggSpec, label: str, exact: ExactAnswer, rows: np.ndarray, rng) -> tuple[np.ndarray, int, float]:
    comp = next(c for c in agg.components if c.label == label)
    x = exact.components[(agg.index, label)][rows]
    z = noise.discrete_laplace(comp.epsilon, comp.sensitivity, len(rows), rng)  # [noise]
    return x + z.astype(object), comp.sensitivity, comp.epsilon


def _single(agg: AggSpec, exact, rows, alpha, rng, clamp_counts: bool) -> NoisyColumn:
    label = agg.components[0].label
    y, sens, eps = _noisy(agg, label, exact, rows, rng)
    w = noise.discrete_laplace_half_width(eps, sens, alpha)  # [ci]
    desc = f"discrete Laplace, sensitivity {sens}{_grid_note(agg)}, ε={eps:.4g}"
    if agg.kind == SUM:
        g = agg.grid
        if agg.integer:
            vals = y
            low, high = y - w, y + w
        else:
            vals = np.array([float(v) * g for v in y], dtype=float)
            low, high = vals - w * g, vals + w * g
        return NoisyColumn(vals, _arr(low), _arr(high), agg.integer, "laplace", eps, desc)
    low, high = y - w, y + w
    if clamp_counts:
        y = np.array([max(0, v) for v in y], dtype=object)
        low = np.array([max(0, v) for v in low], dtype=object)
        high = np.array([max(0, v) for v in high], dtype=object)
    mech = "laplace" if agg.kind != COUNT_SUBJECTS else "laplace (subjects)"
    return NoisyColumn(y, low, high, True, mech, eps, desc)


def _avg(agg: AggSpec, exact, rows, alpha, rng) -> NoisyColumn:
    g = agg.grid
    lo_i, hi_i = round(agg.lower / g), round(agg.upper / g)
    mid = (lo_i + hi_i) // 2
    s_raw = exact.components[(agg.index, "centered sum")][rows]
    c_exact = exact.components[(agg.index, "count")][rows]
    centered = s_raw - c_exact * mid  # exact integers: sum of (x - mid)
    sc, cc = (c for c in agg.components)
    s = centered + noise.discrete_laplace(sc.epsilon, sc.sensitivity, len(rows), rng).astype(object)  # [split]
    c = c_exact + noise.discrete_laplace(cc.epsilon, cc.sensitivity, len(rows), rng).astype(object)
    ws = noise.discrete_laplace_half_width(sc.epsilon, sc.sensitivity, alpha / 2)  # [ci-avg]
    wc = noise.discrete_laplace_half_width(cc.epsilon, cc.sensitivity, alpha / 2)
    vals, low, high = [], [], []
    for si, ci in zip(s, c):
        denom = max(int(ci), 1)
        vals.append(_clip((mid + int(si) / denom) * g, agg.lower, agg.upper))
        c_lo, c_hi = int(ci) - wc, int(ci) + wc
        s_lo, s_hi = int(si) - ws, int(si) + ws
        if c_lo < 1:
            low.append(agg.lower)
            high.append(agg.upper)
            continue
        ratios = [s_lo / c_lo, s_lo / c_hi, s_hi / c_lo, s_hi / c_hi]
        low.append(_clip((mid + min(ratios)) * g, agg.lower, agg.upper))
        high.append(_clip((mid + max(ratios)) * g, agg.lower, agg.upper))
    desc = (
        f"discrete Laplace: sum of (x - mid) sensitivity {sc.sensitivity}{_grid_note(agg)} at ε={sc.epsilon:.4g}, "
        f"count sensitivity {cc.sensitivity} at ε={cc.epsilon:.4g}"
    )
    return NoisyColumn(np.array(vals, dtype=float), np.array(low), np.array(high), False, "laplace", agg.epsilon, desc)


def _clip(v: float, lo: float, hi: float) -> float:
    return min(max(v, lo), hi)


def _arr(values) -> np.ndarray:
    return np.asarray(values)


def _grid_note(agg: AggSpec) -> str:
    if agg.kind in (SUM, AVG) and agg.grid != 1.0:
        return f" (grid 2^{int(math.log2(agg.grid))})"
    return ""
