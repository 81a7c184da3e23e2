"""Discrete Laplace (two-sided geometric) noise for counts, bounded sums and averages.

**Reference:** Ghosh, Roughgarden, Sundararajan, "Universally utility-maximizing privacy
mechanisms", STOC 2009 (the geometric mechanism); Canonne, Kamath, Steinke, "The Discrete
Gaussian for Differential Privacy", NeurIPS 2020, arXiv 2004.00010 (discrete Laplace);
Mironov, "On Significance of the Least Significant Bits for Differential Privacy", CCS
2012 (why real values go on a grid). Contribution bounding follows Wilson et al., "DP SQL
with bounded user contribution", arXiv 1909.01917.

**Guarantee:** ε-DP per aggregate, for neighbouring databases that differ in all the rows of
one subject (added or removed; the subject roster and budgets are public). The shares of the
aggregates of one query add up to the query's ε (basic composition). Under a personalization
rule with several partitions of subjects, partition i runs every aggregate at its share of
ε_i, and a subject is only in its own partition (``pdp``).

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
With several partitions, their answers are combined with public weights (``pdp.coefficients``:
plain sums of exact parts, or 1/p per sampling stratum); each partition's half-width is taken
at ``alpha / parts`` and the weighted half-widths add up (a union bound) [ci-parts]. When
the rule samples subjects (or a weighting extrapolates), the interval also covers the sampling
error (Bernstein, with ``alpha / 2``; the noise then gets the other half [ci-sample]) and a
deterministic bound on any extrapolation bias (``pdp.extrapolation``) [ci-extrapolation], both
from public quantities only: the interval covers the *population's* total (everyone the rule
uses or samples; ``pdp.answer_population``). It does not cover bias from contribution bounding
(clamping, row sampling), which the answer's notes name.
Clamping counts at 0 and averages to ``[L, U]`` is post-processing.

**Proof sketch:** each component is an integer statistic with L1 sensitivity ``Δ``
(above); adding independent discrete Laplace noise with ``P(z) ∝ exp(-ε |z| / Δ)`` to every
cell is ε-DP [noise] (``noise.discrete_laplace`` samples it exactly, see its docstring for
the float margin). AVG's two components use ``ε/2`` each [split]. Everything after the
noise — grid scaling, combining partitions, division, clamping, intervals — is
post-processing of noisy values and public quantities.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dpgate import noise
from dpgate.mechanisms import pdp
from dpgate.mechanisms.base import (
    AVG,
    COUNT_SUBJECTS,
    QUANTILE,
    STDDEV_POP,
    STDDEV_SAMP,
    SUM,
    VAR_SAMP,
    VARIANCE_KINDS,
    AggSpec,
    Component,
    CountingPlan,
    ExactAnswer,
    Mechanism,
    NoisyColumn,
    spend,
)


@dataclass
class _Combined:
    """A component after noise (and combining partitions): estimates and half-widths per cell."""

    values: np.ndarray  # object ints when exact, floats when partitions were scaled and mixed
    half: np.ndarray
    exact_ints: bool


class LaplaceCounting(Mechanism):
    NAME = "laplace"
    VETTED = True

    def release(
        self,
        plan: CountingPlan,
        exact: ExactAnswer,
        rows: np.ndarray,
        *,
        rng: np.random.Generator,
        subjects: pdp.SubjectPlan | None = None,
    ) -> list[NoisyColumn]:
        """Noisy values for every aggregate at the key positions ``rows`` of ``exact``."""
        alpha = plan.settings.alpha
        parts = _parts(plan, subjects)
        out = []
        for agg in plan.aggs:
            if agg.kind == QUANTILE:
                out.append(None)  # the exponential mechanism's (``dpgate.mechanisms.quantile``)
            elif agg.kind == AVG:
                out.append(_avg(plan, agg, exact, rows, parts, alpha, rng))
            elif agg.kind in VARIANCE_KINDS:
                out.append(_variance(plan, agg, exact, rows, parts, alpha, rng))
            else:
                out.append(_single(plan, agg, exact, rows, parts, alpha, rng, plan.settings.clamp_counts))
        return out


@dataclass
class _Parts:
    epsilons: list[float]  # ε of each partition (the query's ε when there is one)
    subjects: pdp.SubjectPlan | None

    def index(self, i: int) -> int:
        """The personalization plan's index of the i-th partition (0 without a plan)."""
        return self.subjects.parts[i].index if self.subjects is not None else 0

    @property
    def combined(self) -> bool:
        """Answers are combined or scaled: several partitions, or subjects left out or sampled."""
        return self.subjects is not None and self.subjects.combined


def _parts(plan: CountingPlan, subjects: pdp.SubjectPlan | None) -> _Parts:
    if subjects is None:
        return _Parts([plan.epsilon], None)
    return _Parts([float(p.epsilon) for p in subjects.parts], subjects)


def _unit_variance(plan: CountingPlan, agg: AggSpec, comp: Component) -> float:
    """Public prior on one subject's contribution variance, in component units: (range / 2)²."""
    if agg.kind == COUNT_SUBJECTS:
        width = 1.0
    elif comp.label == "centered squares":
        width = plan.max_rows * ((agg.upper - agg.lower) / agg.grid / 2) ** 2
    elif comp.label in ("sum", "centered sum"):
        width = plan.max_rows * (agg.upper - agg.lower) / agg.grid
    else:
        width = float(plan.max_rows)
    return (width / 2.0) ** 2


def _component(plan, agg, comp, exact, rows, parts: _Parts, alpha: float, rng) -> _Combined:
    x = exact.components[(agg.index, comp.label)][:, rows]  # (parts, cells)
    frac = comp.epsilon / plan.epsilon
    n_parts = len(parts.epsilons)
    sampled = parts.subjects is not None and parts.subjects.rule == "sample" and parts.combined
    alpha_noise = alpha / 2 if sampled else alpha  # [ci-sample]: the other half for sampling
    ys, halves, variances = [], [], []
    for i, eps_i in enumerate(parts.epsilons):
        e = eps_i * frac
        spend(e, part=parts.index(i), what=f"{agg.label} ({comp.label})")
        z = noise.discrete_laplace(e, comp.sensitivity, x.shape[1], rng)  # [noise]
        ys.append(x[i] + z.astype(object))
        halves.append(noise.discrete_laplace_half_width(e, comp.sensitivity, alpha_noise / n_parts))  # [ci-parts]
        variances.append(noise.discrete_laplace_std(e, comp.sensitivity) ** 2)
    if not parts.combined:
        return _Combined(ys[0], np.full(x.shape[1], halves[0], dtype=object), True)
    c = pdp.coefficients(parts.subjects, variances, _unit_variance(plan, agg, comp))  # [combine]
    est = sum(c[i] * np.asarray(ys[i], dtype=float) for i in range(n_parts))
    # [ci-extrapolation]: sampling (Bernstein) and any bias of extrapolating, from public facts
    sampling, bias = pdp.extrapolation(parts.subjects, c, float(comp.sensitivity), alpha / 2)
    half = sum(abs(c[i]) * halves[i] for i in range(n_parts)) + sampling + bias
    return _Combined(np.asarray(est, dtype=float), np.full(x.shape[1], half, dtype=float), False)


def _single(plan, agg: AggSpec, exact, rows, parts: _Parts, alpha, rng, clamp_counts: bool) -> NoisyColumn:
    comp = agg.components[0]
    c = _component(plan, agg, comp, exact, rows, parts, alpha, rng)
    eps = _run_epsilon(plan, comp.epsilon, parts)
    desc = f"discrete Laplace, sensitivity {comp.sensitivity}{_grid_note(agg)}, ε={eps:.4g}" + _parts_note(parts)
    if agg.kind == SUM:
        if agg.integer and c.exact_ints:
            vals, half = c.values, c.half
        else:
            vals = np.array([float(v) * agg.grid for v in c.values])
            half = np.array([float(h) * agg.grid for h in c.half])
            if agg.integer:  # scaled partitions: round the estimate back to an integer
                vals = np.array([int(round(v)) for v in vals], dtype=object)
                half = np.array([int(math.ceil(h)) for h in half], dtype=object)
        return NoisyColumn(vals, vals - half, vals + half, agg.integer, "laplace", eps, desc)
    y, half = c.values, c.half
    if not c.exact_ints:
        y = np.array([int(round(v)) for v in y], dtype=object)
        half = np.array([int(math.ceil(h)) for h in half], dtype=object)
    low, high = y - half, y + half
    if clamp_counts:
        y = np.array([max(0, v) for v in y], dtype=object)
        low = np.array([max(0, v) for v in low], dtype=object)
        high = np.array([max(0, v) for v in high], dtype=object)
    mech = "laplace" if agg.kind != COUNT_SUBJECTS else "laplace (subjects)"
    return NoisyColumn(y, low, high, True, mech, eps, desc)


def _avg(plan, agg: AggSpec, exact, rows, parts: _Parts, alpha, rng) -> NoisyColumn:
    g = agg.grid
    lo_i, hi_i = round(agg.lower / g), round(agg.upper / g)
    mid = (lo_i + hi_i) // 2
    # Centre the exact sums (x - mid) before the noise: exact integers [sens-avg].
    centered = {
        (agg.index, "centered sum"): exact.components[(agg.index, "centered sum")]
        - exact.components[(agg.index, "count")] * mid,
        (agg.index, "count"): exact.components[(agg.index, "count")],
    }
    ex = ExactAnswer(exact.keys, centered, exact.subjects, exact.heavy_subjects, exact.unused_units)
    sc, cc = agg.components
    s = _component(plan, agg, sc, ex, rows, parts, alpha / 2, rng)  # [split] [ci-avg]
    c = _component(plan, agg, cc, ex, rows, parts, alpha / 2, rng)
    vals, low, high = [], [], []
    for si, ci, ws, wc in zip(s.values, c.values, s.half, c.half):
        si, ci, ws, wc = float(si), float(ci), float(ws), float(wc)
        denom = max(ci, 1.0)
        vals.append(_clip((mid + si / denom) * g, agg.lower, agg.upper))
        c_lo, c_hi = ci - wc, ci + wc
        s_lo, s_hi = si - ws, si + ws
        if c_lo < 1:
            low.append(agg.lower)
            high.append(agg.upper)
            continue
        ratios = [s_lo / c_lo, s_lo / c_hi, s_hi / c_lo, s_hi / c_hi]
        low.append(_clip((mid + min(ratios)) * g, agg.lower, agg.upper))
        high.append(_clip((mid + max(ratios)) * g, agg.lower, agg.upper))
    desc = (
        f"discrete Laplace: sum of (x - mid) sensitivity {sc.sensitivity}{_grid_note(agg)} at "
        f"ε={_run_epsilon(plan, sc.epsilon, parts):.4g}, count sensitivity {cc.sensitivity} at "
        f"ε={_run_epsilon(plan, cc.epsilon, parts):.4g}" + _parts_note(parts)
    )
    eps = _run_epsilon(plan, agg.epsilon, parts)
    return NoisyColumn(np.array(vals, dtype=float), np.array(low), np.array(high), False, "laplace", eps, desc)


def _variance(plan, agg: AggSpec, exact, rows, parts: _Parts, alpha, rng) -> NoisyColumn:
    """VAR / STDDEV from noisy centred sum S, centred sum of squares Q and count C [variance].

    ``var_pop = Q/C - (S/C)^2`` (of ``y = x - mid`` on the grid: the same variance as of x);
    ``var_samp = var_pop * C / (C - 1)``; ``stddev = sqrt(var)``. The interval is the range of
    these over the Bonferroni box of the three components (``alpha / 3`` each) [ci-var].
    """
    g = agg.grid
    lo_i, hi_i = round(agg.lower / g), round(agg.upper / g)
    mid = (lo_i + hi_i) // 2
    h = float(max(hi_i - mid, mid - lo_i))
    sc, qc, cc = agg.components
    s = _component(plan, agg, sc, exact, rows, parts, alpha / 3, rng)
    q = _component(plan, agg, qc, exact, rows, parts, alpha / 3, rng)
    c = _component(plan, agg, cc, exact, rows, parts, alpha / 3, rng)
    samp = agg.kind in (VAR_SAMP, STDDEV_SAMP)
    root = agg.kind in (STDDEV_POP, STDDEV_SAMP)
    top = h * h * (2.0 if samp else 1.0)  # the largest variance of values in [mid - h, mid + h]

    def finish(v: float) -> float:
        v = _clip(v, 0.0, top) * g * g
        return math.sqrt(v) if root else v

    vals, low, high = [], [], []
    for si, qi, ci, ws, wq, wc in zip(s.values, q.values, c.values, s.half, q.half, c.half):
        si, qi, ci, ws, wq, wc = (float(x) for x in (si, qi, ci, ws, wq, wc))
        n = max(ci, 1.0)
        est = qi / n - (si / n) ** 2
        if samp:
            est = est * n / (n - 1) if n > 1 else top
        vals.append(finish(est))
        c_lo, c_hi = ci - wc, ci + wc
        if c_lo < (2 if samp else 1):
            low.append(finish(0.0))
            high.append(finish(top))
            continue
        s_lo, s_hi = si - ws, si + ws
        s_min2 = 0.0 if s_lo <= 0 <= s_hi else min(s_lo * s_lo, s_hi * s_hi)
        s_max2 = max(s_lo * s_lo, s_hi * s_hi)
        q_lo, q_hi = max(qi - wq, 0.0), qi + wq
        # f(C) = Q/C - S²/C²: its only stationary point, C = 2S²/Q, is a maximum, so the minimum
        # over [c_lo, c_hi] is at an end and the maximum at an end or there.
        f = lambda qq, ss, cc_: qq / cc_ - ss / (cc_ * cc_)  # noqa: E731
        lo_v = min(f(q_lo, s_max2, c_lo), f(q_lo, s_max2, c_hi))
        cands = [c_lo, c_hi]
        if q_hi > 0:
            cands.append(_clip(2 * s_min2 / q_hi, c_lo, c_hi))
        hi_v = max(f(q_hi, s_min2, x) for x in cands)
        if samp:  # C/(C-1) falls with C: the truth's factor lies between the ends' factors
            lo_v, hi_v = lo_v * c_hi / (c_hi - 1), hi_v * c_lo / (c_lo - 1)
        low.append(finish(lo_v))
        high.append(finish(hi_v))
    desc = (
        f"discrete Laplace: centred sum sensitivity {sc.sensitivity}, sum of squares sensitivity "
        f"{qc.sensitivity}{_grid_note(agg)}, count sensitivity {cc.sensitivity}, each at "
        f"ε={_run_epsilon(plan, sc.epsilon, parts):.4g}" + _parts_note(parts)
    )
    eps = _run_epsilon(plan, agg.epsilon, parts)
    return NoisyColumn(np.array(vals, dtype=float), np.array(low), np.array(high), False, "laplace", eps, desc)


def _run_epsilon(plan: CountingPlan, share: float, parts: _Parts) -> float:
    """The ε a share actually runs at: the personalization rule's ε (the largest part's) × the share."""
    return share * max(parts.epsilons) / plan.epsilon


def _clip(v: float, lo: float, hi: float) -> float:
    return min(max(v, lo), hi)


def _parts_note(parts: _Parts) -> str:
    if len(parts.epsilons) > 1:
        return f"; {len(parts.epsilons)} partitions of subjects combined (each at its own ε × this share)"
    if parts.combined:
        return "; scaled to all subjects with budget"
    return ""


def _grid_note(agg: AggSpec) -> str:
    if agg.kind in (SUM, AVG, *VARIANCE_KINDS) and agg.grid != 1.0:
        return f" (grid 2^{int(math.log2(agg.grid))})"
    return ""
