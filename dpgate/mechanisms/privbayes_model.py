"""PrivBayes, the model: encodings, noisy conditional distributions, and sampling.

Part of ``privbayes`` (whose docstring holds the proof; the ``[labels]`` here are its).
``_noisy_conditionals`` measures each attribute's joint with its parents with discrete Laplace
noise [noise] and turns it into conditionals (Norm-Sub, post-processing); ``sample`` draws rows
from the fitted ``PrivBayesModel`` (post-processing).

**Guarantee:** the noisy marginals are ε_conditionals-DP together for neighbouring tables that
add or remove one tuple (``privbayes``); everything after the noise is post-processing.

**Sensitivity:** one tuple changes each count table by 1 in one cell (L1 sensitivity 1), whether
the rows come one per tuple or weighted (the counts are the same integers).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from dpgate import errors, noise
from dpgate.mechanisms.privbayes_network import _joint, _parent_code

#: Encodings of non-binary attributes (§3.4.1) that this core implements.
ENCODINGS = ("vanilla", "binary", "gray")
#: Vanilla keeps each attribute whole (semantics preserved, works with R); the thesis finds
#: Vanilla-R ≈ Hierarchical-R on marginals and hierarchical needs taxonomies the core does
#: not receive. Binary / gray multiply the attributes (Adult: 15 → 53) and the candidates.
DEFAULT_ENCODING = "vanilla"
_NOISE_CHUNK = 1 << 16


# --------------------------------------------------------------------------------------------
# the model
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class PrivBayesModel:
    """A fitted PrivBayes model: every field is public (a DP output or a public parameter).

    Attributes:
        sizes: domain size of each original attribute (codes ``0 .. size - 1``).
        network: ``(attribute, parents)`` pairs in sampling order, over the *encoded*
            attributes (the original ones for ``vanilla``; bit attributes for ``binary`` /
            ``gray``, see ``columns``); parents are sorted.
        conditionals: one array per network entry, shape ``(|dom Π|, |dom X|)``: row ``π``
            (mixed radix over the sorted parents, first parent most significant) is the noisy
            distribution ``P*[X | Π = π]``.
        epsilon: the total ε; ``epsilon_rows + epsilon_network + epsilon_conditionals``.
        epsilon_network / epsilon_conditionals / epsilon_rows: the shares.
        degree: the largest parent set in the network.
        score: ``"R"``, ``"F"``, ``"MI"`` (or ``"none"`` for the independent baseline).
        noisy_rows: a DP estimate of the number of rows (what ``sample`` should usually emit).
        theta, beta, encoding: the parameters used.
        columns: for each encoded attribute, ``(original attribute, bit)``; bit ``-1`` means
            the whole attribute (vanilla), otherwise bit ``b`` of the (gray) code, MSB first.
        charges: every privacy-consuming step with its ε (they add up to ``epsilon``).
    """

    sizes: tuple[int, ...]
    network: tuple[tuple[int, tuple[int, ...]], ...]
    conditionals: tuple[np.ndarray, ...]
    epsilon: float
    epsilon_network: float
    epsilon_conditionals: float
    degree: int
    score: str
    epsilon_rows: float = 0.0
    noisy_rows: int = 0
    theta: float | None = None
    beta: float = 0.3
    encoding: str = DEFAULT_ENCODING
    columns: tuple[tuple[int, int], ...] = ()
    charges: tuple[tuple[str, float], ...] = field(default=())
    kind: str = "PrivBayes"  # or "MST" (mechanisms.mst: a tree, same sampler)

    @property
    def encoded_sizes(self) -> tuple[int, ...]:
        """Domain sizes of the network's attributes."""
        if not self.columns:
            return self.sizes
        return tuple(self.sizes[a] if b < 0 else 2 for a, b in self.columns)

    def describe(self, names: Sequence[str] | None = None) -> list[str]:
        """The network and parameters, one line each (only DP outputs and public parameters).

        >>> rng = np.random.default_rng(0)
        >>> codes = rng.integers(0, 2, size=(500, 3))
        >>> m = fit(codes, [2, 2, 2], 1.0, degree=1, rng=rng)
        >>> m.describe()[0]
        'PrivBayes: 3 attributes, encoding vanilla, score R, degree 1, β=0.3'
        """
        label = _labeller(self, names)
        esizes = self.encoded_sizes
        th = "" if self.theta is None else f", θ={self.theta:g}"
        if self.kind == "MST":
            pairs = sum(1 for _, p in self.network if p)
            lines = [
                f"MST: {len(self.sizes)} attributes, {pairs} measured pair(s)",
                f"ε={self.epsilon:g}: rows {self.epsilon_rows:.4g} + choosing pairs {self.epsilon_network:.4g} "
                f"+ marginals {self.epsilon_conditionals:.4g} ({len(self.charges)} charged steps)",
                f"noisy row count: {self.noisy_rows}",
            ]
            for i, (x, parents) in enumerate(self.network, 1):
                ps = label(parents[0]) if parents else "∅ (a root)"
                lines.append(f"{i:3d}. {label(x)} ← {ps}")
            return lines
        lines = [
            f"{self.kind}: {len(self.sizes)} attributes, encoding {self.encoding}, score {self.score}, "
            f"degree {self.degree}{th}, β={self.beta:g}",
            f"ε={self.epsilon:g}: rows {self.epsilon_rows:.4g} + network {self.epsilon_network:.4g} "
            f"+ conditionals {self.epsilon_conditionals:.4g} ({len(self.charges)} charged steps)",
            f"noisy row count: {self.noisy_rows}",
        ]
        for i, (x, parents) in enumerate(self.network, 1):
            cells = esizes[x] * math.prod(esizes[p] for p in parents)
            ps = ", ".join(label(p) for p in parents) if parents else "∅"
            lines.append(f"{i:3d}. {label(x)} ← {ps}  [{cells} cells]")
        return lines


def _labeller(model: PrivBayesModel, names: Sequence[str] | None) -> Callable[[int], str]:
    def label(j: int) -> str:
        a, b = model.columns[j] if model.columns else (j, -1)
        base = names[a] if names is not None else f"a{a}"
        return base if b < 0 else f"{base}.b{b}"

    return label


# --------------------------------------------------------------------------------------------
# encodings (§3.4.1)
# --------------------------------------------------------------------------------------------
def _bit_width(size: int) -> int:
    return max(0, math.ceil(math.log2(size))) if size > 1 else 0


def _encode(codes: np.ndarray, sizes: Sequence[int], encoding: str) -> tuple[list[np.ndarray], tuple]:
    """Columns of the encoded table and ``columns`` (original attribute, bit) per column."""
    if encoding == "vanilla":
        cols = [np.ascontiguousarray(codes[:, j]) for j in range(codes.shape[1])]
        return cols, tuple((j, -1) for j in range(len(sizes)))
    cols, layout = [], []
    for j, size in enumerate(sizes):
        v = codes[:, j].astype(np.int64)
        if encoding == "gray":
            v = v ^ (v >> 1)
        w = _bit_width(size)
        for b in range(w - 1, -1, -1):  # most significant bit first (Figure 3.2)
            cols.append(((v >> b) & 1).astype(np.uint8))
            layout.append((j, b))
    return cols, tuple(layout)


def _decode(enc: np.ndarray, model: PrivBayesModel) -> np.ndarray:
    """Original codes from encoded columns; values ≥ size stay (the caller repairs them)."""
    if model.encoding == "vanilla":
        return enc
    out = np.zeros((enc.shape[0], len(model.sizes)), dtype=np.int64)
    for col, (a, b) in enumerate(model.columns):
        out[:, a] |= enc[:, col].astype(np.int64) << b
    if model.encoding == "gray":
        shift = 1
        while shift < 64:
            out ^= out >> shift
            shift <<= 1
    return out


# --------------------------------------------------------------------------------------------
# noisy conditionals (Algorithms 3.1 and 3.3)
# --------------------------------------------------------------------------------------------
def _noisy_counts(counts: np.ndarray, epsilon: float, rng) -> np.ndarray:
    """``counts + Z`` with exact discrete Laplace ``P(z) ∝ exp(-ε|z|)`` per cell [noise]."""
    flat = counts.reshape(-1)
    sizes = [min(_NOISE_CHUNK, flat.size - s) for s in range(0, flat.size, _NOISE_CHUNK)]
    z = np.concatenate([noise.discrete_laplace(epsilon, 1, size, rng) for size in sizes])
    return (flat + z).reshape(counts.shape)


def _conditional(joint: np.ndarray) -> np.ndarray:
    """``P*[X | Π]`` as rows ``π`` from a clipped noisy joint ``[x, π]`` [post].

    A parent value with no noisy mass falls back to the noisy marginal of X, and that to the
    uniform distribution (the thesis leaves this open).
    """
    j = np.asarray(joint, dtype=np.float64)
    fallback = j.sum(axis=1)
    fallback = fallback / fallback.sum() if fallback.sum() > 0 else np.full(j.shape[0], 1.0 / j.shape[0])
    col = j.sum(axis=0)
    out = np.where(col > 0, j / np.where(col > 0, col, 1.0), fallback[:, None])
    return np.ascontiguousarray(out.T)


def _marginalise(joint: np.ndarray, axes: list[int], sizes, keep: list[int]) -> np.ndarray:
    """Sum a joint over the attributes ``axes`` (its shape, in that order) down to ``keep``
    (first kept attribute as rows, the rest as mixed-radix columns)."""
    t = joint.reshape([sizes[a] for a in axes])
    drop = tuple(i for i, a in enumerate(axes) if a not in keep)
    t = t.sum(axis=drop)
    remaining = [a for a in axes if a in keep]
    t = np.transpose(t, [remaining.index(a) for a in keep])
    return t.reshape(sizes[keep[0]], -1)


def norm_sub(noisy: np.ndarray, total: float) -> np.ndarray:
    """Norm-Sub: ``max(noisy - δ, 0)`` with δ chosen so the cells add up to ``total`` [post].

    Clipping alone turns the noise of every empty cell into positive mass (about a third
    of the noise scale per cell); subtracting a common δ removes that bias. This is the
    Euclidean projection onto ``{x ≥ 0, Σ x = total}`` (Wang et al., "Locally Differentially
    Private Frequency Estimation with Consistency", NDSS 2020, call it Norm-Sub).
    """
    y = np.asarray(noisy, dtype=np.float64).reshape(-1)
    if total <= 0:
        return np.zeros_like(y).reshape(np.shape(noisy))
    srt = np.sort(y)[::-1]
    cum = np.cumsum(srt)
    deltas = (cum - total) / np.arange(1, y.size + 1)
    j = int(np.flatnonzero(srt > deltas)[-1])
    return np.maximum(y - deltas[j], 0.0).reshape(np.shape(noisy))


def _combined_rows(
    noisy_rows: float, rows_variance: float | None, totals: list[float], variances: list[float]
) -> float:
    """Inverse-variance mean of the noisy row count and the noisy marginals' totals [post]."""
    if rows_variance is None:  # a caller-supplied count of unknown variance is used as it is
        return noisy_rows
    w = [1.0 / max(v, 1e-12) for v in [rows_variance, *variances]]  # zero variance: (nearly) exact
    x = [noisy_rows] + totals
    return sum(wi * xi for wi, xi in zip(w, x)) / sum(w)


def _noisy_conditionals(
    cols, sizes, network, noisy_from: int, epsilon_each: float, noisy_rows: float, rows_variance: float | None, rng,
    weights: np.ndarray | None = None,
) -> tuple[list[np.ndarray], float]:
    """Noisy marginals for the entries ``noisy_from ..`` of the network; entries before it
    (Algorithm 3.1's first k) are derived from entry ``noisy_from``'s noisy marginal [post].
    ``weights``: how many tuples each row stands for; the counts, hence the noisy marginals for
    the same generator, are those of the rows repeated.

    Returns the conditionals and the combined row-count estimate used for Norm-Sub.
    """
    conds: list[np.ndarray | None] = [None] * len(network)
    if noisy_from >= len(network):
        return [], noisy_rows
    noisy = {}
    for i in range(noisy_from, len(network)):
        x, parents = network[i]
        counts = _joint(cols, sizes, x, parents, weights=weights)  # [full-domain]
        noisy[i] = _noisy_counts(counts, epsilon_each, rng)  # [noise]
    cell_var = noise.discrete_laplace_std(epsilon_each, 1) ** 2
    total = _combined_rows(
        noisy_rows, rows_variance, [float(v.sum()) for v in noisy.values()], [v.size * cell_var for v in noisy.values()]
    )
    joints = {i: norm_sub(v, total) for i, v in noisy.items()}  # [post]
    for i, j in joints.items():
        conds[i] = _conditional(j)
    if noisy_from > 0:
        x, parents = network[noisy_from]
        axes = [x, *parents]
        for i in range(noisy_from):
            xi, pi = network[i]
            conds[i] = _conditional(_marginalise(joints[noisy_from], axes, sizes, [xi, *pi]))
    return conds, total  # type: ignore[return-value]


def sample(model: PrivBayesModel, n_rows: int, *, rng: np.random.Generator) -> np.ndarray:
    """Draw ``n_rows`` synthetic tuples from the model (post-processing: no data is read).

    Attributes are drawn in network order from ``P*[X | parents]`` by inverse CDF. For the
    binary and gray encodings a decoded code can fall outside its domain (e.g. 5 bits for 42
    values); such rows are redrawn (up to 50 rounds, i.e. the model conditioned on valid
    codes), and any value still invalid is replaced by a uniform valid one.

    ``rng`` only draws post-processing randomness: pass the release's ``sampling`` stream
    (``noise.Randomness.sampling``), not its noise stream.

    Returns:
        ``(n_rows, d)`` int64 codes.
    """
    if n_rows < 0:
        raise errors.InternalError(f"n_rows must be non-negative, got {n_rows}")
    out = _decode(_sample_encoded(model, n_rows, rng), model)
    if model.encoding == "vanilla":
        return out
    limit = np.array(model.sizes)
    bad = np.flatnonzero((out >= limit).any(axis=1))
    rounds = 0
    while bad.size and rounds < 50:
        out[bad] = _decode(_sample_encoded(model, bad.size, rng), model)
        bad = bad[(out[bad] >= limit).any(axis=1)]
        rounds += 1
    for a, size in enumerate(model.sizes):
        wrong = out[:, a] >= size
        if wrong.any():
            out[wrong, a] = rng.integers(0, size, size=int(wrong.sum()))
    return out


def _sample_encoded(model: PrivBayesModel, n_rows: int, rng) -> np.ndarray:
    esizes = model.encoded_sizes
    out = np.zeros((n_rows, len(esizes)), dtype=np.int64)
    for (x, parents), cond in zip(model.network, model.conditionals):
        cdf = np.cumsum(cond, axis=1)
        cdf[:, -1] = 1.0  # rows sum to 1 up to rounding
        u = rng.random(n_rows)
        if not parents:
            out[:, x] = np.minimum(np.searchsorted(cdf[0], u, side="right"), esizes[x] - 1)
            continue
        code = np.zeros(n_rows, dtype=np.int64)
        for p in parents:
            code = code * esizes[p] + out[:, p]
        step = max(1, (1 << 22) // esizes[x])
        for s in range(0, n_rows, step):  # chunks bound the (rows × |dom X|) comparison
            sl = slice(s, s + step)
            out[sl, x] = np.minimum((u[sl, None] >= cdf[code[sl]]).sum(axis=1), esizes[x] - 1)
    return out


# --------------------------------------------------------------------------------------------
# evaluation (offline only: reads the real table)
# --------------------------------------------------------------------------------------------
def marginal_tables(codes: np.ndarray, sizes: Sequence[int], way: int,
                    weights: np.ndarray | None = None) -> list[np.ndarray]:  # fmt: skip
    """Normalised α-way marginals of ``codes`` for every α-subset of attributes (in
    ``itertools.combinations`` order), each row counted once or ``weights`` times. Offline
    evaluation only: never for release."""
    arr = np.asarray(codes)
    d = arr.shape[1]
    cols = [arr[:, j].astype(np.int64) for j in range(d)]
    n = arr.shape[0] if weights is None else float(np.sum(weights))
    out = []
    for subset in itertools.combinations(range(d), way):
        code, cells = _parent_code(cols, sizes, subset)
        counts = (np.bincount(code, weights=weights, minlength=cells).astype(np.float64) if code is not None
                  else np.array([n], float))  # fmt: skip
        out.append(counts / max(n, 1))
    return out


def marginal_tvd(real: np.ndarray, synth: np.ndarray, sizes: Sequence[int], way: int) -> float:
    """Average total variation distance (½ L1) over all α-way marginals (§3.5.1).

    >>> a = np.array([[0, 0], [1, 1]]); marginal_tvd(a, a, [2, 2], 2)
    0.0
    """
    if np.asarray(synth).shape[0] == 0 or np.asarray(real).shape[0] == 0:
        raise ValueError("marginal_tvd needs non-empty tables")
    return tvd_between(marginal_tables(real, sizes, way), marginal_tables(synth, sizes, way))


def tvd_between(tables_a: list[np.ndarray], tables_b: list[np.ndarray]) -> float:
    """Mean ½ L1 distance between two lists of normalised marginals (``marginal_tables``)."""
    return float(np.mean([0.5 * np.abs(p - q).sum() for p, q in zip(tables_a, tables_b)]))
