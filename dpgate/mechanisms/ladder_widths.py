"""Public ladders that bound every graph's ladder given its width statistic (for the error bars).

**Guarantee:** none by itself, and nothing private is read here: these are public functions of
``(query, k, N, s)``. Neighbouring graphs differ in one edge (edge-level DP), and the width
statistic ``s`` has global sensitivity 1: ``a_m`` (the most common neighbours of any pair) for
public triangle and k-clique bars, otherwise a shift statistic (``dpgate.mechanisms.graphs``: the
smallest of a nested family of public ladders that lies above the graph's): ``c_K`` for triangles
and k-cliques, ``c_k`` for k-stars and k-triangles. ``dpgate.mechanisms.ladder``
releases ``s`` with noise; ``dpgate.mechanisms.ladder_bounds`` turns these bounds into error bars.

:func:`width_bounds` returns ladders with ``L_t(s) <= I_t(g) <= U_t(s)`` for every graph ``g``
whose statistic is ``s`` and every ``t``, both non-decreasing in ``s`` (so a range of ``s``
is covered by ``L(lo)`` and ``U(hi)``):

- triangles: ``min(s + floor(t / 2), N-2) <= LS(g, t) <= min(s + t, N-2)`` (Lemma 5.2: the pair
  with ``a_ij = a_m``; ``floor((t + min(t, b)) / 2) <= t``);
- triangles with a knee ``K`` (error bars at ``epsilon_width > 0``), [triangle]: ``s = c_K``
  (``width_statistics.triangle_shift_statistic``, ``ψ_K(x) = min(max(⌊x/2⌋, x - K), N-2)``). Upper:
  ``U_t = ψ_K(c + t)``, by the definition of ``c``. Lower: ``c - 1`` fails at some ``t0``, so
  some pair of the graph, with Lemma 5.2's ladder ``LS_ab(t) = min(a + min(t, ⌊(t + b)/2⌋), N-2)``
  (``b <= 2(N-2-a)``), has ``LS_ab(t0) > ψ_K(c - 1 + t0)``, and ``I_t >= LS_ab(t)`` at every
  ``t``. The lower ladder is the least ladder of such a pair: ``min(a_min + t, ⌊(q + t)/2⌋,
  N-2)`` with ``a_min`` the least such ``a`` and ``q`` the least ``2a + b`` (the two terms of
  ``LS_ab`` are minimised apart). Failing grows with ``b`` (a binary search per ``a``); between
  the kinks of ``LS_ab`` and ``ψ_K`` their difference is affine on even and on odd ``t``, so a
  peak lies within two steps of a kink or at ``t = 0, 1`` (``_pair_fails``; checked against
  every pair and ``t`` on small universes). Both ladders grow with ``c`` (fewer pairs fail).
  Where ``a_m`` let its upper ladder grow a rung per step, a sparse graph's ladder grows half a
  rung per step after ``b`` steps, and so does ``c_K``'s while ``c + t <= 2K``;
- k-cliques: ``0 <= LS(g) <= C(a_m, k-2)`` in Theorem 5.6 (public bars, ``s = a_m``);
- k-cliques with a knee ``K``, [kclique]: ``s = c_K`` (``width_statistics.kclique_shift_statistic``).
  Theorem 5.6's ladder is ``min(C(a + t, r) - δ, GS)`` (``r = k-2``, ``a = a_m``,
  ``δ = C(a, r) - LS`` in ``[0, C(a, r)]``). Upper: ``U_c(t) = min(C(A(c) + t, r) - δ(c), GS)``
  (``graphs.kclique_path``), by the definition of ``c``. Lower: ``c - 1`` fails at some ``t0``.
  If ``a > A' = A(c - 1)``, ``I_t >= C(A' + 1 + t, r) - C(A' + 1, r)`` (``LS >= 0``, increasing
  in ``a``). If ``a <= A'``, ``C(A' + t, r) - C(a + t, r)`` is non-decreasing in ``t``, so
  ``c - 1`` fails already at ``t = 0``: ``LS >= v = C(A', r) - δ(c-1) + 1``, hence ``a >= a_lo``,
  the least ``a`` with ``C(a, r) >= v``, and ``I_t >= v + C(a_lo + t, r) - C(a_lo, r)``. The
  lower ladder is the smaller (capped at ``GS``); both grow with ``c`` (``C(A, r) - δ`` does
  along the path). Checked against every ``(a, LS)`` on small universes;
- k-triangles, [ktriangle]: Theorem 5.7's ladder ``I_t = min(LS + F(a + t) - F(a), GS)``
  (``a = a_m``, ``F(x) = sum_{i<x} U(i)``, ``graphs.ktriangle_steps_sum``), with
  ``C(a, k) <= LS <= G(a) = C(a, k) + 2 a C(a, k-1)`` (Lemma 5.5: the pair with ``a_ij = a_m``
  contributes ``C(a_m, k)`` plus ``a_ij <= a_m`` non-negative terms, each at most
  ``2 C(a_m, k-1)``). Upper: ``U_t(c) = min(F(c + t), GS)``, by the definition of ``c = c_k``.
  Lower: if ``a >= c``, ``I_t >= min(C(c, k) + F(c + t) - F(c), GS)`` (increasing in ``a``). If
  ``a < c``, ``c - 1`` fails at some ``t0`` (below the cap, since ``F(c - 1 + cap) >= GS``):
  ``LS + F(a + t0) - F(a) > F(c - 1 + t0)``, and ``F(c - 1 + t) - F(a + t)`` is non-decreasing
  (``U`` is), so already ``LS > F(c - 1)``; with ``LS <= G(a)``, ``a >= a_lo``, the least ``a``
  with ``G(a) > F(c - 1)``, and ``I_t >= min(F(c - 1) + 1 + F(a_lo + t) - F(a_lo), GS)``. The
  lower ladder is the smaller of the two; both grow with ``c``. Where ``a_m`` bounded ``LS`` by
  ``G(a_m)``, which grows like the square of the noise on ``a_m``, ``c_k`` pays for its noise
  one rung at a time. [family]: the ladder is fixed by ``(a, LS)``, so :func:`ktriangle_family`
  lists every ladder whose ``c_k`` lies in a range, and ``ladder_bounds`` bounds each of them
  where they are few, instead of the band between ``L`` and ``U``;
- k-stars, [kstar]: ``I_t = LS(g, t) = max over pairs of S_t(x, y)`` (Lemma 5.3, ``x >= y`` the
  pair's ``d'``). Upper: ``U_t(c) = C(c + t, k-1)`` while ``c + t <= N - 2``, then ``GS``, by the
  definition of ``c = c_k``. Lower: ``c - 1`` fails at some ``t0`` with ``c - 1 + t0 <= N - 2``,
  and the pair ``(x, y)`` attaining ``I_{t0}`` either has ``x >= c`` (then ``S_t(x, y) >=
  S_t(c, 0)``), or ``x <= c - 1``, when ``C(c - 1 + t, k-1) - S_t(x, y)`` is non-decreasing on
  ``t <= N - 1 - c`` (both terms in Lemma 5.3's first case), so it is already negative at
  ``t = 0``: ``C(x, k-1) + C(y, k-1) > C(c - 1, k-1)``. Hence ``I_t >= min`` of ``S_t(c, 0)``
  and, over ``x``, ``S_t(x, y_c(x))`` with ``y_c(x)`` the least ``y <= x`` meeting that
  inequality (``S`` is non-decreasing in ``x`` and ``y``). The ``x`` are pooled in cells of a
  public grid (``x`` rounded down to the cell's start, ``y`` to its value at the cell's end), which
  keeps the cost at ``O(cells N)`` and the bound non-decreasing in ``c``: every candidate for
  ``c + 1`` dominates one for ``c``. Compared with ``d_m`` (``U = S_t(d_m, d_m)``), noise that
  overstates the statistic no longer counts twice, once per node of the pair.

Floating point: the k-star lower ladder is summed in float64 and rounded down (below ``2^40``
the sums are exact), so it stays a lower bound.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import math

import numpy as np

from dpgate.mechanisms.graphs import binom, binom_row, check_query, check_universe, convergence_cap, global_sensitivity
from dpgate.mechanisms.graphs import kclique_path, statistic_range
from dpgate.mechanisms.width_statistics import triangle_psi
from dpgate.mechanisms.graphs import ktriangle_steps_sum as steps_sum

__all__ = ["Widths", "ktriangle_family", "ktriangle_offsets", "ktriangle_statistics", "width_bounds"]

Widths = tuple[list[int], int]  # a ladder's widths until it becomes constant, and that constant

#: The k-star lower ladder pools the candidate ``x`` in cells: every ``x`` below this, then cells
#: growing by ``_GRID_GROWTH`` [kstar].
_GRID_EXACT = 64
_GRID_GROWTH = 1.05
_EXACT_FLOAT = 2.0**40


def width_bounds(
    query: str, k: int | None, n_nodes: int, statistic: int, knee: int | None = None
) -> tuple[Widths, Widths]:
    """Public ladders sandwiching the private one: ``L_t(s) <= I_t(g) <= U_t(s)`` when ``s`` is
    the graph's width statistic (module docstring).

    Returns ``((lower_widths, lower_tail), (upper_widths, upper_tail))``: each ladder as its
    widths until it becomes constant, and that constant. Both are non-decreasing in ``s``.
    For triangles, a ``knee`` means ``s`` is ``c_K`` [triangle], not ``a_m``.

    >>> (lw, lt), (uw, ut) = width_bounds("kstar", 3, 34, 24)  # karate: I_0 = 256
    >>> lw[:3], uw[:3], ut
    ([254, 273, 291], [276, 300, 325], 992)
    """
    k = check_query(query, k)
    n = check_universe(n_nodes)
    gs = global_sensitivity(query, k, n)
    s = int(statistic)
    top = n - 2
    cap = convergence_cap(n)
    if query == "kstar":
        upper = list(binom_row(k - 1, top)[min(s, top + 1) :])  # C(s + t, k-1) while s + t <= N - 2
        return _kstar_lower(k, n, s), (upper, gs)
    if knee is not None and (query == "triangle" or (query == "kclique" and k == 3)):
        return _triangle_shift_bounds(n, int(knee), s)
    if knee is not None and query == "kclique":
        return _kclique_path_bounds(k, n, int(knee), s)
    if query == "triangle" or (query == "kclique" and k == 3):
        lower = [s + t // 2 for t in range(min(cap, 2 * max(gs - s, 0) + 2))]
        upper = [s + t for t in range(min(cap, max(gs - s, 0) + 1))]
    elif query == "kclique":
        row = binom_row(k - 2, s + cap)
        lower = [row[s + t] - row[s] for t in range(cap)]
        upper = [row[s + t] for t in range(cap)]
    else:
        return _ktriangle_bounds(k, n, s)
    return _until_limit(lower, gs, cap), _until_limit(upper, gs, cap)


@functools.lru_cache(maxsize=1024)
def _kstar_lower(k: int, n: int, c: int) -> Widths:
    """The lower ladder of every graph whose ``c_k`` is ``c`` [kstar]; from ``t = 2(N-2) + 1`` on
    every pair's ladder is ``GS``."""
    top = n - 2
    row = binom_row(k - 1, top)
    t = np.arange(2 * top + 1, dtype=np.int64)
    table = np.array([float(v) for v in row])
    cands = [(min(c, top), 0)] if c <= top else []  # x >= c
    if c >= 1:
        threshold = row[min(c - 1, top)]
        for start, end in _grid_cells(min(c - 1, top)):  # x <= c - 1, pooled per cell
            y = _least_partner(row, threshold, end)
            if y is not None:  # every x in the cell has x >= start and y_c(x) >= y_c(end) = y
                cands.append((max(start, y), min(start, y)))
    low = np.full(t.size, np.inf)
    for x, y in cands:
        low = np.minimum(low, _pair_ladder(table, top, x, y, t))
    return _until_limit([_round_down(v) for v in low.tolist()], 2 * row[top], convergence_cap(n))


def _grid_cells(x_max: int) -> list[tuple[int, int]]:
    """Public cells ``[start, end]`` covering ``0 .. x_max``: single values below ``_GRID_EXACT``,
    then growing geometrically; the cell boundaries do not depend on ``x_max``."""
    cells, start = [], 0
    while start <= x_max:
        end = start if start < _GRID_EXACT else max(start, int(start * _GRID_GROWTH) - 1)
        cells.append((start, min(end, x_max)))
        start = end + 1
    return cells


def _least_partner(row: tuple[int, ...], threshold: int, x: int) -> int | None:
    """The least ``y <= x`` with ``C(x, k-1) + C(y, k-1) > threshold`` (None: no such ``y``)."""
    y = bisect.bisect_right(row, threshold - row[x], 0, x + 1)
    return y if y <= x else None


def _pair_ladder(table: np.ndarray, top: int, x: int, y: int, t: np.ndarray) -> np.ndarray:
    """Lemma 5.3 for a pair with ``d'_i = x >= d'_j = y``, in float64: ``x`` fills up to ``N - 2``
    in ``B_x = N-2-x`` steps, then ``y``, then both are full."""
    bx, by = top - x, top - y
    first = table[np.minimum(x + t, top)] + table[y]
    second = table[top] + table[np.clip(y + t - bx, 0, top)]
    return np.where(t <= bx, first, np.where(t <= bx + by, second, 2 * table[top]))


def _round_down(v: float) -> int:
    """An integer at most the float ``v`` and at most the exact value it rounds (float64 sums of
    two binomials are exact below ``2^40``)."""
    if v < _EXACT_FLOAT:
        return int(v)
    return int(math.floor(v * (1 - 2.0**-50)))


@functools.lru_cache(maxsize=1024)
def _ktriangle_bounds(k: int, n: int, c: int) -> tuple[Widths, Widths]:
    """Lower and upper ladders of every graph whose k-triangle ``c_k`` is ``c`` [ktriangle]."""
    gs = global_sensitivity("ktriangle", k, n)
    f = list(steps_sum(k, n))
    top = len(f) - 1  # F(top) >= GS: the upper ladder is GS from t = top - c on
    c = min(c, top)
    upper = f[c:top]
    while f[-1] < f[c] + gs:  # far enough for both lower ladders to reach GS
        a = len(f) - 1
        f.append(f[-1] + 3 * binom(a, k - 1) + a * binom(a, k - 2))

    def ladder(head: int, a: int) -> list[int]:  # min(head + F(a + t) - F(a), GS), t = 0 .. until GS
        return [min(head + f[a + t] - f[a], gs) for t in range(len(f) - a)]

    lower = ladder(binom(c, k), c)  # a >= c
    if c >= 1:  # a < c: LS > F(c - 1) and a >= a_lo
        a_lo = 0
        while binom(a_lo, k) + 2 * a_lo * binom(a_lo, k - 1) <= f[c - 1] and a_lo < c:
            a_lo += 1
        other = ladder(f[c - 1] + 1, a_lo)
        lower = [min(x, y) for x, y in itertools.zip_longest(lower, other, fillvalue=gs)]
    return _until_limit(lower, gs, convergence_cap(n)), (upper, gs)


@functools.lru_cache(maxsize=1024)
def _triangle_shift_bounds(n: int, knee: int, c: int) -> tuple[Widths, Widths]:
    """Lower and upper ladders of every graph whose triangle ``c_K`` is ``c`` [triangle]."""
    top = n - 2
    cap = convergence_cap(n)
    upper = [triangle_psi(c + t, n, knee) for t in range(max(statistic_range("triangle", n, None, knee)[1] - c, 0))]
    if c == 0:
        return _until_limit([t // 2 for t in range(2 * top + 2)], top, cap), (upper, top)
    zero = np.zeros(1, np.int64)
    a0 = bisect.bisect_left(range(top + 1), True, key=lambda x: bool(_pair_fails(zero + x, zero, n, knee, c - 1)[0]))
    a0 = min(top, a0)  # (top, 0) fails every c - 1 below the range's end
    a = np.arange(a0 + 1, dtype=np.int64)  # a pair (a > a0, b) is above (a0, 0) and so adds nothing
    b_max = 2 * (top - a)  # b_ij = d_i + d_j - 2 a_ij - 2 x_ij
    # LS_ab is non-decreasing in b, so failing is too: the a that fail at some b fail at b_max, one
    # test for every a; then the least failing b of those only, each search on the rows still open
    fails = _pair_fails(a, b_max, n, knee, c - 1)
    a, b_max = a[fails], b_max[fails]
    lo, hi = np.zeros_like(a), b_max  # the least b at which (a, b) fails c - 1: at most b_max
    open_ = np.flatnonzero(lo < hi)
    while len(open_):
        mid = (lo[open_] + hi[open_]) // 2
        failing = _pair_fails(a[open_], mid, n, knee, c - 1)
        hi[open_] = np.where(failing, mid, hi[open_])
        lo[open_] = np.where(failing, lo[open_], mid + 1)
        open_ = open_[lo[open_] < hi[open_]]
    b = lo
    a_min = int(a.min())
    q = int((2 * a + b).min())
    t = np.arange(2 * top + 2, dtype=np.int64)
    lower = np.minimum(np.minimum(a_min + t, (q + t) // 2), top)
    return _until_limit(lower.tolist(), top, cap), (upper, top)


@functools.lru_cache(maxsize=1024)
def _kclique_path_bounds(k: int, n: int, knee: int, c: int) -> tuple[Widths, Widths]:
    """Lower and upper ladders of every graph whose k-clique ``c_K`` is ``c`` [kclique]."""
    r, gs, cap = k - 2, global_sensitivity("kclique", k, n), convergence_cap(n)
    a, d = kclique_path(k, n, knee)
    c = min(c, len(a) - 1)
    row = binom_row(r, a[c] + cap + 1)
    upper = [min(row[a[c] + t] - d[c], gs) for t in range(cap)]
    if c == 0:  # every ladder: LS >= 0, a_m >= 0
        return _until_limit([min(row[t], gs) for t in range(cap)], gs, cap), _until_limit(upper, gs, cap)
    a1, d1 = a[c - 1], d[c - 1]
    row = binom_row(r, max(a1 + 1, n) + cap + 1)
    lower = [min(row[a1 + 1 + t] - row[a1 + 1], gs) for t in range(cap)]  # a_m > A(c - 1)
    v = row[a1] - d1 + 1  # a_m <= A(c - 1): LS >= v, and a_m >= a_lo, the least a with C(a, k-2) >= v
    a_lo = bisect.bisect_left(row, v, 0, n - 1)
    if a_lo <= n - 2:
        lower = [min(x, v + row[a_lo + t] - row[a_lo], gs) for t, x in enumerate(lower)]
    return _until_limit(lower, gs, cap), _until_limit(upper, gs, cap)


def _pair_fails(a: np.ndarray, b: np.ndarray, n: int, knee: int, c: int) -> np.ndarray:
    """Whether a pair ``(a_ij, b_ij) = (a, b)`` has ``LS_ab(t) > ψ_K(c + t)`` at some ``t``
    [triangle]: on each stretch between the kinks of the two ladders both are affine on even and
    on odd ``t``, so the difference peaks within two steps of a kink (or at ``t = 0, 1``)."""
    top = n - 2
    x_end = statistic_range("triangle", n, None, knee)[1]
    ls_cap = np.where(a + b >= top, top - a, 2 * (top - a) - b)
    kinks = np.stack([b, ls_cap, np.full_like(a, 2 * knee - c), np.full_like(a, x_end - c)], axis=1)
    near = (kinks[:, :, None] + np.arange(-2, 3)).reshape(a.size, -1)
    t = np.maximum(np.concatenate([np.zeros((a.size, 2), np.int64) + [0, 1], near], axis=1), 0)
    ls = np.minimum(a[:, None] + np.minimum(t, (t + b[:, None]) // 2), top)
    x = c + t
    psi = np.minimum(np.maximum(x // 2, x - knee), top)
    return np.any(ls > psi, axis=1)


def ktriangle_statistics(k: int, n: int, a: int, ls: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(c_k, M)`` of Theorem 5.7's ladder for ``a_m = a`` and each ``LS`` in ``ls`` [family]: the
    shift statistic (``graphs.ktriangle_shift_statistic`` of these rungs) and the number of rungs
    below ``GS`` (``graphs._closed_rungs``: at most the public cap). Closed form, checked against
    the scalar code: for ``c >= a``, ``F(c + t) - F(a + t)`` grows with ``t`` (``U`` does), so
    ``t = 0`` binds and ``c >= a`` holds iff ``F(c) >= LS``; for ``c < a`` it shrinks, so the last
    rung below ``GS``, ``t = M - 1``, binds. For ``(k, n)`` whose ``ktriangle_family`` is not None
    (int64 holds the steps)."""
    gs, cap = global_sensitivity("ktriangle", k, n), convergence_cap(n)
    f = _steps_to_twice_gs(k, n)
    ls = np.asarray(ls, dtype=np.int64)
    if a + 1 < f.size and f[-1] - f[a] >= gs:  # a < X: F(a) + GS lies within f
        rungs = np.clip(np.searchsorted(f, f[a] + gs - ls, side="left") - a, 0, cap)  # first LS + D_t >= GS
        last = np.where(rungs > 0, ls + f[np.maximum(a + rungs - 1, a)] - f[a], 0)  # the last rung below GS
    else:  # a small universe whose a_m passes X
        d = ktriangle_offsets(k, n, a, cap)
        rungs = np.searchsorted(d, gs - ls, side="left")
        last = np.where(rungs > 0, ls + d[np.maximum(rungs - 1, 0)], 0)
    x_end = len(steps_sum(k, n)) - 1  # F(X) >= GS
    below = np.searchsorted(f[: x_end + 1], last, side="left") - (rungs - 1)  # least c < a meeting t = M - 1
    above = np.maximum(a, np.searchsorted(f[: x_end + 1], ls, side="left"))  # least c >= a: F(c) >= LS
    core = np.where(rungs == 0, 0, np.where(below < a, np.maximum(below, 0), above))
    return np.maximum(core, x_end - rungs), rungs


def ktriangle_offsets(k: int, n: int, a: int, length: int) -> np.ndarray:
    """``D_t = min(F(a + t) - F(a), GS)`` for ``t < length``, as int64 (as for ``ktriangle_statistics``)."""
    gs = global_sensitivity("ktriangle", k, n)
    f = _steps_to_twice_gs(k, n)
    d = np.full(length, gs, dtype=np.int64)
    if a + 1 < f.size and f[-1] - f[a] >= gs:  # a < X: the steps reach F(a) + GS within f
        part = f[a : a + length] - f[a]
        d[: part.size] = np.minimum(part, gs)
        return d
    total, x = 0, a  # past X (small universes): the steps one by one
    for t in range(length):
        if total >= gs:
            break
        d[t] = total
        total += 3 * binom(x, k - 1) + x * binom(x, k - 2)
        x += 1
    return d


@functools.lru_cache(maxsize=16)
def _steps_to_twice_gs(k: int, n: int) -> np.ndarray | None:
    """``F(x)`` from ``x = 0`` until ``F(x) >= 2 GS``, as int64, or None when a value passes
    ``2^62`` (one step can exceed ``GS`` by far: ``ktriangle_family`` then lists nothing): for
    ``a < X`` every ``F(a + t) - F(a)`` below ``GS`` lies in it (``F(a) < GS``)."""
    f = list(steps_sum(k, n))
    gs = global_sensitivity("ktriangle", k, n)
    while f[-1] < 2 * gs:
        a = len(f) - 1
        f.append(f[-1] + 3 * binom(a, k - 1) + a * binom(a, k - 2))
    return np.array(f, dtype=np.int64) if f[-1] < 2**62 else None


def ktriangle_family(k: int, n: int, bottom: int, top: int, limit: int) -> list[tuple[int, int, int]] | None:
    """Every ladder a graph on ``n`` nodes can have whose k-triangle ``c_k`` lies in ``[bottom, top]``,
    as ``(a, LS_low, LS_high)``: Theorem 5.7's ladder is fixed by ``a = a_m`` and ``LS``, and
    ``C(a, k) <= LS <= C(a, k) + 2 a C(a, k-1)`` (Lemma 5.5, [ktriangle]) [family]. ``c_k`` grows
    with ``LS`` and, at either end of ``LS``'s range, with ``a`` (the ladder does, pointwise), so
    each ``a`` holds an interval of ``LS``, the ``a`` begin where the widest ladder's statistic
    reaches ``bottom`` and end where the least one's passes ``top``. None when there are more
    than ``limit`` ladders (the caller falls back to the band).
    """
    if not 0 < 2 * global_sensitivity("ktriangle", k, n) < 2**62 or _steps_to_twice_gs(k, n) is None:
        return None  # the offsets would pass int64 (GS = 0: every bar is 0 anyway)

    def ends(a: int) -> tuple[int, int, int, int]:  # LS's range for a, and the statistics at its ends
        first, last = binom(a, k), binom(a, k) + 2 * a * binom(a, k - 1)
        least, most = (int(c) for c in ktriangle_statistics(k, n, a, np.array([first, last]))[0])
        return first, last, least, most

    # the largest LS's ladder also grows with a: skip, by bisection, the a whose ladders all lie below
    start = bisect.bisect_left(range(n - 1), True, key=lambda a: ends(a)[3] >= bottom)
    out, count = [], 0
    for a in range(start, n - 1):  # a_m <= N - 2
        first, last, least, most = ends(a)
        if least > top:
            break
        if last - first < 4096:  # every LS at once
            stats = ktriangle_statistics(k, n, a, np.arange(first, last + 1))[0]
            lo, hi = first + int(np.searchsorted(stats, bottom)), first + int(np.searchsorted(stats, top, "right")) - 1
        else:
            lo = _least_ls(k, n, a, first, last, bottom)  # least LS with c >= bottom
            hi = _least_ls(k, n, a, first, last, top + 1) - 1  # largest LS with c <= top
        if lo <= hi:
            count += hi - lo + 1
            if count > limit:
                return None
            out.append((a, lo, hi))
    return out


def _least_ls(k: int, n: int, a: int, first: int, last: int, statistic: int) -> int:
    """The least ``LS`` in ``[first, last]`` whose ``c_k`` is at least ``statistic`` (``last + 1``:
    none), by bisection: ``c_k`` grows with ``LS``."""
    lo, hi = first, last + 1
    while lo < hi:
        mid = (lo + hi) // 2
        if int(ktriangle_statistics(k, n, a, np.array([mid]))[0][0]) >= statistic:
            hi = mid
        else:
            lo = mid + 1
    return lo


def _until_limit(values: list[int], limit: int, cap: int) -> tuple[list[int], int]:
    """The widths ``values[t]`` (non-decreasing) until the first that reaches ``limit`` (at
    most ``cap`` of them: the public convergence step), and ``limit``, the width from there on."""
    return values[: bisect.bisect_left(values, limit, 0, min(cap, len(values)))], limit
