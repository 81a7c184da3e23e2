"""MST: noisy 1-way marginals, a private maximum spanning tree of 2-way marginals, sampled.

**Reference:** Ryan McKenna, Gerome Miklau, Daniel Sheldon, "Winning the NIST Contest: A
scalable and general approach to differentially private synthetic data", Journal of Privacy
and Confidentiality 11(3), 2021 (MST, the NIST 2018 winner). The paper measures with Gaussian
noise under zero-concentrated DP and estimates a graphical model with Private-PGM; this module
is a **pure ε-DP** reading that needs only numpy: discrete Laplace measurements, and, because
the selected graph is a tree (or forest), closed-form consistency and sampling.

**Guarantee:** ε-DP for neighbouring tables that differ by adding or removing one tuple (the
gateway hands over at most ``max_rows`` rows per subject and runs this at ``ε / max_rows``).
The row count is not public; it is estimated from the noisy outputs.

**Steps and sensitivities** (codes ``0 .. sizes[j] - 1``, ``d`` attributes):

0. [rows] (unless ``shares`` are given) a noisy row count at ``ROWS_SHARE · ε`` (sensitivity 1);
   from it, ``split_for`` chooses the shares (ε₁, ε_sel, ε₂) of the rest [split]: a function of
   a DP output and public facts only.
1. [one-way] every attribute's full-domain count vector (L1 sensitivity 1: one tuple adds 1 to
   one cell) plus exact discrete Laplace noise at ``ε₁ / d`` each.
2. [compress] (post-processing of step 1) the values whose noisy count is below
   ``3 ×`` the noise's standard deviation are merged into one group per attribute (MST's
   domain compression), so that 2-way tables do not spend their budget on empty cells.
3. [select] ``k = edge_count(...)`` [edges] (from DP outputs: the row estimate and the
   compressed sizes), then Kruskal's algorithm with the exponential mechanism: ``k`` rounds at
   ``ε_sel / k`` each. Round ``r`` chooses among the pairs ``(i, j)`` that join two components
   of the forest built so far (the candidates depend only on earlier outputs) with score
   ``w_ij = Σ |c_ij - ĉ_ij|``: ``c_ij`` the compressed 2-way counts, ``ĉ_ij`` the
   integer-rounded independence estimate from step 2 (a DP output, fixed). One tuple changes
   one cell of ``c_ij`` by 1, so ``w_ij`` moves by at most **1** [sens-w]; the scores are
   integers, so ``exponential.exponential_mechanism`` is exact.
4. [two-way] the ``k`` chosen pairs' compressed count tables (sensitivity 1 each) plus discrete
   Laplace noise at ``ε₂ / k`` each.

[cells] The model's conditionals are full-domain tables (parent's values × child's), so its size is
bounded from the public domains before any data is read: ``model_cells`` is the most any tree can
need, and a table over domains past ``MODEL_CELLS`` is refused (DP266), before the debit.

Each step's ε is fixed by public facts and earlier outputs, and they add up to ε, so by
(adaptive) sequential composition the output of steps 0-4 is ε-DP [split]; ``model.charges``
lists every step. Everything after reads only those outputs [post]:

- the row estimate ``n̂``: inverse-variance mean of the noisy row count and every noisy table's
  total;
- each attribute's compressed marginal: inverse-variance mean, cell by cell, of its noisy
  1-way counts and the row or column sums of each noisy 2-way table it is in, then Norm-Sub
  (non-negative, summing to ``n̂``);
- each 2-way table: shrunk towards the independence table of the fused marginals by the share
  of its deviation the noise explains (James-Stein: ``1 - cells · variance / ‖deviation‖²``,
  at least 0), Norm-Sub to ``n̂``, then iterative proportional fitting to the two fused
  marginals, so every table agrees with every other on shared attributes (on a forest, local
  agreement is global: the tables are the marginals of one distribution);
- sampling: each tree of the forest rooted at its smallest attribute, each attribute drawn
  from its table given its parent; a merged group's mass is spread over its values by their
  noisy 1-way counts.

**Accuracy:** each 1-way cell carries noise of standard deviation about ``√2 d / ε₁``, each
2-way cell ``√2 k / ε₂``; the fused marginals are better than either. As for PrivBayes there
are no per-value error bars: the error of the synthetic table's marginals is measured
(``examples/privbayes_adult.py`` prints 1-, 2- and 3-way total variation distance).

**Readings:** the paper's zCDP budget split is ρ/3 per step and always d - 1 pairs; pure ε
composes linearly, so here the 1-way marginals get 50-70% (``split_for``) and only as many pairs
are measured as stay above their noise (``edge_count``; at small ε a forest). The constants
(``ONE_WAY_SHARES``, ``SNR_LOW``/``SNR_HIGH``, ``DEPENDENCE``) were set on Adult and checked on a
generated 42-column table (``tests/benchmarks/bench_synthesis.py``). Private-PGM's estimate is
replaced by the closed-form steps above, which are exact on consistent inputs but not the
maximum-likelihood estimate under noise.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from dpgate import errors, noise
from dpgate.mechanisms import exponential
from dpgate.mechanisms.base import CodedRows, Synthesis, Synthesizer, checked_weights, tuple_counts
from dpgate.mechanisms.privbayes_model import PrivBayesModel, _noisy_counts, norm_sub

#: Share of ε for the noisy row count that chooses the split (``split_for``).
ROWS_SHARE = 0.01
#: The 1-way share at low and at high signal-to-noise ``n̂ ε / d`` (``split_for``).
ONE_WAY_SHARES = (0.7, 0.5)
SNR_LOW, SNR_HIGH = 200.0, 1000.0
#: Values whose noisy 1-way count is below this many noise standard deviations are merged.
COMPRESS_SIGMAS = 3.0
IPF_ROUNDS = 30
#: The total variation distance from independence of a pair worth measuring (``edge_count``).
DEPENDENCE = 0.1
#: Public cap on a model's cells [cells]: its conditionals are full-domain tables, built after the
#: debit (two columns of 50,001 and 2,001 values: 100 million cells, 2.5 GB and 40 s).
MODEL_CELLS = 1 << 25


def model_cells(sizes: Sequence[int]) -> int:
    """A public bound on the model's cells whatever tree is chosen [cells]: each attribute's
    conditional is its domain times its parent's, at most the largest other domain."""
    if len(sizes) == 1:
        return int(sizes[0])
    top = sorted(sizes, reverse=True)
    return sum(int(s) * int(top[1] if s == top[0] else top[0]) for s in sizes)


def _check(codes, sizes, epsilon, shares) -> tuple[np.ndarray, tuple[int, ...], tuple[float, float, float] | None]:
    sizes_t = tuple(int(s) for s in sizes)
    if not sizes_t or any(s < 1 for s in sizes_t):
        raise errors.InternalError("every attribute needs a domain of at least one value")
    if not (isinstance(epsilon, (int, float)) and np.isfinite(epsilon) and epsilon > 0):
        raise errors.DataError(f"epsilon must be a positive finite number, got {epsilon!r}", code="DP275")
    s = tuple(float(x) for x in shares) if shares is not None else None
    if s is not None and (len(s) != 3 or any(not np.isfinite(x) or x <= 0 for x in s) or abs(sum(s) - 1) > 1e-9):
        raise errors.InternalError(f"shares must be three positive numbers adding up to 1, got {shares!r}")
    d = len(sizes_t)
    cells = model_cells(sizes_t)
    if cells > MODEL_CELLS:
        raise errors.UnsupportedQueryError(
            f"An MST model over these domains may hold {cells:,} cells (a tree edge's conditional is the parent's "
            f"domain × the child's), more than the limit of {MODEL_CELLS:,}", code="DP266",
            hint="leave the largest domains out (the columns option), or use fewer bins; nothing was charged",
        )  # fmt: skip
    if epsilon * min(s or (ROWS_SHARE,)) / max(d, 1) < 1e-8:
        raise errors.DataError(f"epsilon={epsilon:g} is too small to split over {d} attributes", code="DP275",
                               hint="use a larger epsilon")  # fmt: skip
    arr = np.asarray(codes, dtype=np.int64)
    if arr.ndim != 2 or arr.shape[1] != d:
        raise errors.InternalError(f"codes must be an (n, {d}) array")
    if arr.size and ((arr < 0).any() or (arr >= np.array(sizes_t)).any()):
        raise errors.InternalError("a code lies outside its attribute's domain")
    return arr, sizes_t, s


def _fuse(estimates: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """Cell-wise inverse-variance mean of ``(values, variances)`` pairs."""
    estimates = [(x, np.maximum(v, 1e-9)) for x, v in estimates]  # at huge ε the variances vanish
    w = sum(1.0 / v for _, v in estimates)
    return sum(x / v for x, v in estimates) / w


def _ipf(table: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """Scale ``table``'s rows and columns towards the margins ``rows`` and ``cols`` [post]."""
    total = float(rows.sum())
    if total <= 0:
        return np.zeros_like(table, dtype=np.float64)
    t = table + 1e-9 * np.outer(rows, cols) / total  # no all-zero row or column
    for _ in range(IPF_ROUNDS):
        rs = t.sum(axis=1)
        t *= np.where(rs > 0, rows / np.where(rs > 0, rs, 1), 0)[:, None]
        cs = t.sum(axis=0)
        t *= np.where(cs > 0, cols / np.where(cs > 0, cs, 1), 0)[None, :]
    return t


def _pair_counts(ccols: list[np.ndarray], csizes: list[int], i: int, j: int,
                 weights: np.ndarray | None = None) -> np.ndarray:  # fmt: skip
    """The compressed 2-way counts of attributes i and j, flat (row i-major)."""
    return tuple_counts(ccols[i] * csizes[j] + ccols[j], csizes[i] * csizes[j], weights)


def selection_scores(ccols: list[np.ndarray], csizes: list[int], mu1: list[np.ndarray], n1: float,
                     weights: np.ndarray | None = None) -> tuple[list[tuple[int, int]], np.ndarray]:  # fmt: skip
    """Every pair ``(i, j)`` and its integer score ``Σ |c_ij - round(μ_i μ_jᵀ / n̂)|`` [sens-w]:
    how far the compressed 2-way counts are from what independence predicts. ``μ`` and ``n̂``
    are DP outputs (fixed between neighbours), so one tuple moves each score by at most 1."""
    nn = max(n1, 1.0)
    pairs = [(i, j) for i in range(len(ccols)) for j in range(i + 1, len(ccols))]
    scores = np.empty(len(pairs), dtype=np.int64)
    for k, (i, j) in enumerate(pairs):
        c = _pair_counts(ccols, csizes, i, j, weights)
        est = np.rint(np.outer(mu1[i], mu1[j]).reshape(-1) / nn).astype(np.int64)
        scores[k] = int(np.abs(c - est).sum())
    return pairs, scores


def split_for(n_hat: float, epsilon: float, d: int) -> tuple[float, float, float]:
    """The shares of (1-way, selection, 2-way) [split]: ``ONE_WAY_SHARES[1]`` of ε for the 1-way
    marginals when every marginal's signal-to-noise ``n̂ ε / d`` is at least ``SNR_HIGH``,
    ``ONE_WAY_SHARES[0]`` when it is at most ``SNR_LOW``, log-linear in between: when budgets
    are thin the 1-way marginals (which every other marginal rests on) come first. The rest is
    split 1 : 4 between choosing pairs and measuring them."""
    snr = max(n_hat, 1.0) * epsilon / d
    lo, hi = ONE_WAY_SHARES
    t = (math.log(snr) - math.log(SNR_LOW)) / (math.log(SNR_HIGH) - math.log(SNR_LOW))
    s1 = lo + (hi - lo) * min(max(t, 0.0), 1.0)
    return s1, (1 - s1) / 5, 4 * (1 - s1) / 5


def edge_count(epsilon_two_way: float, n1: float, cells: list[int], d: int) -> int:
    """How many pairs to measure [edges]: as many as keep a typical measured table above its
    noise. A table of ``C`` cells measured at ``ε_e`` carries noise of about ``C / ε_e`` in L1;
    a pair that is ``DEPENDENCE`` (in total variation) away from independence deviates by about
    ``DEPENDENCE · n̂``. So ``k = ε₂ n̂ DEPENDENCE / C`` pairs, ``C`` the median compressed table
    size, between 1 and ``d - 1``. Reads only DP outputs (``n̂``, the compressed sizes) and
    public constants."""
    typical = float(np.median(cells)) if cells else 1.0
    k = int(epsilon_two_way * max(n1, 0.0) * DEPENDENCE / max(typical, 1.0))
    return min(max(k, 1), d - 1)


def fit(
    codes: np.ndarray,
    sizes: Sequence[int],
    epsilon: float,
    *,
    rng: np.random.Generator,
    shares: Sequence[float] | None = None,
    progress: Callable[[float, str], None] | None = None,
    weights: np.ndarray | None = None,
) -> PrivBayesModel:
    """Fit an ε-DP MST model to an integer-coded table (at most one row per subject).

    ``weights``: how many tuples each row of ``codes`` stands for (``CodedRows.weights``); every
    count is then the weighted one, the same as over the rows repeated, so the model and its
    noise are the same too (the sensitivities are of the tuples, whichever way they come).

    Returns a ``privbayes.PrivBayesModel`` whose network is the tree (each attribute has at most
    one parent), so ``privbayes.sample`` draws from it.

    >>> rng = np.random.default_rng(3)
    >>> x = rng.integers(0, 2, 3000)
    >>> codes = np.stack([x, x, rng.integers(0, 3, 3000)], axis=1)
    >>> m = fit(codes, [2, 2, 3], 2.0, rng=rng)
    >>> [p for _, p in m.network].count(())
    1
    """
    arr, sizes_t, fixed = _check(codes, sizes, epsilon, shares)
    weights = checked_weights(weights, arr.shape[0])
    n_tuples = arr.shape[0] if weights is None else int(weights.sum())
    d = len(sizes_t)
    charges: list[tuple[str, float]] = []

    def report(f: float, m: str) -> None:
        if progress is not None:
            progress(f, m)

    rows: list[tuple[np.ndarray, np.ndarray]] = []  # (estimate of n, its variance)
    e_rows = 0.0
    if d == 1:  # nothing to select: the whole ε measures the one marginal
        s1, s_sel, s2 = 1.0, 0.0, 0.0
        rest = epsilon
    elif fixed is not None:
        (s1, s_sel, s2), rest = fixed, epsilon
    else:  # [rows] a noisy row count chooses the split (split_for)
        e_rows = ROWS_SHARE * epsilon
        noisy_n = float(n_tuples + int(noise.discrete_laplace(e_rows, 1, 1, rng)[0]))
        charges.append(("noisy row count", e_rows))
        rows.append((np.array(noisy_n), np.array(noise.discrete_laplace_std(e_rows, 1) ** 2)))
        rest = epsilon - e_rows
        s1, s_sel, s2 = split_for(noisy_n, rest, d)
    e1, e_sel, e2 = rest * s1, rest * s_sel, rest * s2
    each1 = e1 / d

    # 1. [one-way]
    report(0.0, "noisy 1-way marginals")
    cols = [arr[:, j] for j in range(d)]
    y1 = [_noisy_counts(tuple_counts(cols[j], sizes_t[j], weights), each1, rng).astype(np.float64) for j in range(d)]
    charges += [(f"1-way marginal {j + 1}", each1) for j in range(d)]
    var1 = noise.discrete_laplace_std(each1, 1) ** 2
    n1 = _fuse(rows + [(np.array(float(y.sum())), np.array(y.size * var1)) for y in y1])

    # 2. [compress] values below the noise floor share one code (post-processing)
    floor = COMPRESS_SIGMAS * np.sqrt(var1)
    maps, csizes = [], []
    for j in range(d):
        keep = y1[j] >= floor
        m = np.full(sizes_t[j], -1, dtype=np.int64)
        m[keep] = np.arange(int(keep.sum()))
        rare = int((~keep).sum())
        m[~keep] = int(keep.sum())
        maps.append(m)
        csizes.append(int(keep.sum()) + (1 if rare else 0))
    ccols = [maps[j][cols[j]] for j in range(d)]
    y1c = [np.bincount(maps[j], weights=y1[j], minlength=csizes[j]) for j in range(d)]
    var1c = [np.bincount(maps[j], minlength=csizes[j]) * var1 for j in range(d)]

    network: list[tuple[int, tuple[int, ...]]] = []
    tables: dict[tuple[int, int], np.ndarray] = {}
    if d > 1:
        # 3. [select] Kruskal with the exponential mechanism on integer scores [sens-w]
        report(0.1, "choosing the tree")
        mu1 = [norm_sub(y, float(n1)) for y in y1c]
        pairs, scores = selection_scores(ccols, csizes, mu1, float(n1), weights)
        comp = list(range(d))
        edges: list[tuple[int, int]] = []
        k = edge_count(e2, float(n1), [csizes[i] * csizes[j] for i, j in pairs], d)
        each_sel = e_sel / k
        for r in range(k):
            cand = [p for p, (i, j) in enumerate(pairs) if comp[i] != comp[j]]
            pick = cand[exponential.exponential_mechanism(scores[cand], each_sel, 1, rng=rng)]
            i, j = pairs[pick]
            edges.append((i, j))
            old, new = comp[j], comp[i]
            comp = [new if c == old else c for c in comp]
            charges.append((f"tree edge {r + 1}", each_sel))
            report(0.1 + 0.5 * (r + 1) / k, f"tree edge {r + 1} of {k}")

        # 4. [two-way]
        each2 = e2 / k
        var2 = noise.discrete_laplace_std(each2, 1) ** 2
        y2 = {}
        for i, j in edges:
            c = _pair_counts(ccols, csizes, i, j, weights).reshape(csizes[i], csizes[j])
            y2[(i, j)] = _noisy_counts(c, each2, rng).astype(np.float64)
        charges += [(f"2-way marginal {i + 1}×{j + 1}", each2) for i, j in edges]
        report(0.7, "making the tables agree")

        # [post] row estimate, fused marginals, consistent tables
        totals = rows + [(np.array(float(y.sum())), np.array(y.size * var1)) for y in y1]
        totals += [(np.array(float(t.sum())), np.array(t.size * var2)) for t in y2.values()]
        n_hat = float(_fuse(totals))
        est = {j: [(y1c[j], var1c[j])] for j in range(d)}  # _fuse floors the variances
        for (i, j), t in y2.items():
            est[i].append((t.sum(axis=1), np.full(csizes[i], csizes[j] * var2)))
            est[j].append((t.sum(axis=0), np.full(csizes[j], csizes[i] * var2)))
        mu = {j: norm_sub(_fuse(est[j]), n_hat) for j in range(d)}
        for (i, j), t in y2.items():
            # shrink towards independence by how much of the deviation the noise explains
            # (James-Stein): at small ε a measured table is mostly noise
            indep = np.outer(mu[i], mu[j]) / max(n_hat, 1.0)
            dev = t - indep
            energy = float((dev**2).sum())
            keep = max(0.0, 1.0 - t.size * var2 / energy) if energy > 0 else 0.0
            tables[(i, j)] = _ipf(norm_sub(indep + keep * dev, n_hat), mu[i], mu[j])
    else:
        n_hat = float(n1)
        mu = {0: norm_sub(y1c[0], n_hat)}
    mu_full = [norm_sub(y, n_hat) for y in y1]

    # within-group shares of merged values, from the noisy 1-way counts
    share = []
    for j in range(d):
        g = np.bincount(maps[j], weights=mu_full[j], minlength=csizes[j])
        size_g = np.bincount(maps[j], minlength=csizes[j])
        q = np.where(g[maps[j]] > 0, mu_full[j] / np.where(g[maps[j]] > 0, g[maps[j]], 1), 1.0 / size_g[maps[j]])
        share.append(q)

    def expand(v: np.ndarray, j: int) -> np.ndarray:
        full = v[maps[j]] * share[j]
        s = full.sum()
        return full / s if s > 0 else np.full(sizes_t[j], 1.0 / sizes_t[j])

    # the tree (or forest), each component rooted at its smallest attribute, breadth first
    adj: dict[int, list[int]] = {j: [] for j in range(d)}
    for i, j in tables:
        adj[i].append(j)
        adj[j].append(i)
    order: list[int] = []
    parent: dict[int, int | None] = {}
    for root in range(d):  # a forest when fewer than d - 1 pairs were measured
        if root in parent:
            continue
        parent[root] = None
        order.append(root)
        queue = [root]
        while queue:
            x = queue.pop(0)
            for y in sorted(adj[x]):
                if y not in parent:
                    parent[y] = x
                    order.append(y)
                    queue.append(y)
    conds = []
    for x in order:
        p = parent[x]
        if p is None:
            cond = expand(mu[x], x)[None, :]
        else:
            t = tables[(p, x)] if (p, x) in tables else tables[(x, p)].T  # [p, x] compressed
            rows = t[maps[p]] * share[p][:, None]  # parent's full values × child's groups
            fallback = expand(mu[x], x)
            full = rows[:, maps[x]] * share[x][None, :]
            s = full.sum(axis=1, keepdims=True)
            cond = np.where(s > 0, full / np.where(s > 0, s, 1), fallback[None, :])
        cond = np.ascontiguousarray(cond)
        cond.setflags(write=False)
        conds.append(cond)
        network.append((x, () if p is None else (p,)))
    report(1.0, "model ready")
    return PrivBayesModel(
        sizes=sizes_t,
        network=tuple(network),
        conditionals=tuple(conds),
        epsilon=float(epsilon),
        epsilon_rows=float(e_rows),
        epsilon_network=float(e_sel),
        epsilon_conditionals=float(e1 + e2),
        degree=1 if d > 1 else 0,
        score="MST",
        noisy_rows=max(0, int(round(n_hat))),
        theta=None,
        beta=float(s_sel),
        encoding="vanilla",
        columns=tuple((j, -1) for j in range(d)),
        charges=tuple(charges),
        kind="MST",
    )


class MST(Synthesizer):
    """``USING mst``: ``fit`` on ``CodedRows``; the release is a model for ``privbayes.sample``."""

    NAME = "mst"

    def synthesize(self, data: CodedRows, *, epsilon, delta=0.0, rng, options, progress=None) -> Synthesis:
        model = fit(data.codes, list(data.sizes), epsilon, rng=rng, progress=progress, weights=data.weights)
        return Synthesis(model, epsilon)
