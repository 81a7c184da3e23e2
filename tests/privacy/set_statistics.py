"""The marginals path's exact statistics for the neighbour harness (``harness._synthetic``).

Computed by ``mechanisms.setmarginals``' own functions at several truncations, each with its
declared L1 bound over a public cell set: record sizes per bin and sizes within the selected
items (1), weighted item supports (m1·2^GRID_BITS), weighted pair supports of the selected items
(C(m2, 2)·2^GRID_BITS). The selection is the K most frequent items of D, kept for D′ (on the
gateway it is a noisy output, so any fixed one will do).
"""

from __future__ import annotations

import numpy as np

from dpgate.mechanisms import setmarginals as sm


def marginals(plan, records: list[list[int]], selected) -> tuple[dict[str, tuple[dict, int]], list[int]]:
    """{name: (cell -> exact value, L1 bound)} and the selection used."""
    n_items = len(plan.options["items"])
    top = sm.longest(plan.max_rows, n_items)  # the size bins the mechanism uses
    x = np.zeros((len(records), n_items), dtype=bool)
    for r, items in enumerate(records):
        x[r, items] = True
    if selected is None:
        k = min(plan.options["pair_items"], n_items)
        selected = sorted(int(i) for i in np.argsort(-x.sum(axis=0), kind="stable")[:k])
    sel = np.asarray(selected, dtype=np.int64)
    kept_max = min(len(sel), top)
    out = {"record sizes": (dict(enumerate(sm.size_counts(x.sum(axis=1), top).tolist())), 1)}
    for m in sorted({1, 2, max(1, top // 2), top}):
        out[f"items m1={m}"] = (dict(enumerate(sm.weighted_items(x, m).tolist())), m << sm.GRID_BITS)
    if len(sel) >= 2:
        out["kept sizes"] = (dict(enumerate(sm.size_counts(x[:, sel].sum(axis=1), kept_max).tolist())), 1)
        iu = np.triu_indices(len(sel), 1)
        cells = [(int(sel[a]), int(sel[b])) for a, b in zip(*iu)]
        for m in sorted({2, min(3, max(2, kept_max)), max(2, kept_max)}):
            out[f"pairs m2={m}"] = (dict(zip(cells, sm.weighted_pairs(x, sel, m).tolist())), sm.pair_count(m) << sm.GRID_BITS)
    return out, selected
