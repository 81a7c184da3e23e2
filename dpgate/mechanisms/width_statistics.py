"""Shift statistics of the triangle and k-clique error bars: private, read from a graph's ladder.

**Guarantee:** none by itself: each statistic here is private data with global sensitivity 1
(argued per function), which ``dpgate.mechanisms.ladder`` releases with discrete Laplace noise
for the error bar. A shift statistic is the smallest ``c`` whose public ladder ``U_c`` lies
above the graph's ladder ``I``, in a nested family with ``U_c(t + 1) <= U_{c+1}(t)``: a
neighbour's ladder lies below the graph's shifted by one rung (Definition 5.6 (b)), so
``I_t(g') <= I_{t+1}(g) <= U_c(t + 1) <= U_{c+1}(t)`` and ``c(g') <= c(g) + 1``. The family of
each (a public knee ``K``, chosen from ``epsilon_width`` by ``ladder_bounds.statistic_knee``)
and the public ladders that bound a graph's ladder given ``c`` are in
``dpgate.mechanisms.ladder_widths``. k-stars' and k-triangles' ``c_k`` are in
``dpgate.mechanisms.graphs``.
"""

from __future__ import annotations

from dpgate.mechanisms.graphs import binom_row, global_sensitivity, kclique_path, statistic_range

__all__ = ["kclique_shift_statistic", "triangle_psi", "triangle_shift_statistic"]


def triangle_psi(x: int, n_nodes: int, knee: int) -> int:
    """``ψ_K(x) = min(max(⌊x/2⌋, x - K), N-2)``: half a rung per step up to ``x = 2K``, then one."""
    return min(max(x // 2, x - knee), n_nodes - 2)


def triangle_shift_statistic(rungs: tuple[int, ...] | list[int], n_nodes: int, knee: int) -> int:
    """``c_K``: the smallest ``c >= 0`` with ``I_t <= ψ_K(c + t)`` at every ``t`` (``I_t = LS(g, t)``,
    ``rungs`` then ``N - 2``; :func:`triangle_psi`).

    Global sensitivity 1 for fixed ``K``, as for ``graphs.kstar_shift_statistic``:
    ``I_t(g') <= I_{t+1}(g) <= ψ_K(c + 1 + t)``. Why: a pair's ladder ``a + ⌊(t + min(t, b))/2⌋``
    grows a rung per step only for ``b`` steps, then half a rung; ``a_m`` (``ψ(x) = x``, ``K = 0``)
    charges a sparse graph a full rung per step and per unit of noise, pure halves (``K >= N-2``,
    ``c ≈ 2a + b``) charge a hub's pair ``b/2`` at once. With ``K`` a few noise scales the
    statistic is about ``max`` over pairs of ``min(2a + b, a + K)``: halves where ``b`` is small,
    ``a_m``'s ladder plus at most ``K/2`` where it is large. In ``[0, min(2(N-2), N-2+K)]``.

    >>> import networkx as nx, numpy as np
    >>> from dpgate.mechanisms.graphs import ladder_quantities
    >>> q = ladder_quantities(np.array(nx.karate_club_graph().edges()), 34, "triangle")
    >>> triangle_shift_statistic(q.rungs, 34, 0), triangle_shift_statistic(q.rungs, 34, 32)  # a_m; 2a + b
    (10, 33)
    """
    top = n_nodes - 2
    c = max(0, statistic_range("triangle", n_nodes, None, knee)[1] - len(rungs))  # I_t = N-2 from len(rungs) on
    for t, width in enumerate(rungs):
        c = max(c, min(2 * int(width), int(width) + knee) - t)  # the least x with ψ_K(x) >= I_t
    return min(c, 2 * top)


def kclique_shift_statistic(rungs: tuple[int, ...] | list[int], n_nodes: int, k: int, knee: int) -> int:
    """``c_K`` for k-cliques (k >= 4): the smallest ``c`` whose ladder ``U_c`` (``graphs.kclique_path``)
    lies above Theorem 5.6's ``I_t = min(LS + C(a_m + t, k-2) - C(a_m, k-2), GS)`` at every ``t``.

    Global sensitivity 1: ``I_t(g') <= I_{t+1}(g) <= U_c(t + 1) <= U_{c+1}(t)``. Why: shifting a
    ladder keeps ``δ = C(a_m, k-2) - LS``, which ``a_m``'s ladder ``C(a_m + t, k-2)`` takes as 0;
    past the knee each step of ``c`` moves ``U`` two rungs and subtracts about half of
    ``C(A, k-2)``, so a graph with ``a_m`` well past ``K`` and a sparse common neighbourhood
    (``LS`` far below ``C(a_m, k-2)``) gets an upper ladder that knows it. In ``[0, len(A) - 1]``.
    """
    a, d = kclique_path(k, n_nodes, knee)
    r, gs, m = k - 2, global_sensitivity("kclique", k, n_nodes), len(rungs)

    def covers(c: int) -> bool:  # U_c >= I: the rungs, then GS from t = M on
        row = binom_row(r, a[c] + m)
        return row[a[c] + m] - d[c] >= gs and all(row[a[c] + t] - d[c] >= w for t, w in enumerate(rungs))

    lo, hi = 0, len(a) - 1  # U_hi(0) >= GS covers every ladder; nested in c
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if covers(mid) else (mid + 1, hi)
    return lo
