"""EXPERIMENTAL — supermodular DP anonymization: a generalized sample of the records.

Fouad, Elbassioni and Bertino, "A Supermodularity-Based Differential Privacy Preserving
Algorithm for Data Anonymization", IEEE TKDE 26(7), 2014, Algorithm 2, in its exact small-k
form (every generalization of a record is enumerated, which the paper calls the trivial case):

1. ε′ = (ε + ln β) / (3 η (1 − β)) with η = 2 (λ / φ_l + 1) (the paper's undefined φ(k) read
   as φ_l, the least Φ);
2. θ uniform in (θ0, 1), t = θ |D| (the random frequency threshold; secret, never stored);
3. every record is kept independently with probability 1 − β, where β > e^(−ε);
4. each kept record a becomes one generalization x of it (one hierarchy node per column, x ⪰ a)
   among the *t-frequent* ones — |ρ(x, D)| ≥ t records under x — drawn with probability
   ∝ exp(ε′ f(x) / |D|), f(x) = λ |ρ(x, D)| / Φ(x) + u(x)^κ, normalized over those candidates;
5. the output is the multiset of the chosen x plus one all-suppressed row ``*``.

Here u(x) = Σ depth of each node below ``*`` (a modular utility), Φ(x) = Σ_i w_i(depth), with
default weights w_i(d) = (d + 1) / ((H_i + 1) k): positive at ``*`` (the paper's weight 0 there
would make Φ = 0 and f infinite), falling as a column is generalized. Neighbours: add or remove
one record (the paper's D and D_{−a}); one subject is one record (``max_rows = 1``).

**Guarantee:** (ε, δ)-DP is *claimed* by the paper, not proved here (below); neighbouring
databases add or remove one record, and one subject is one record.

**Sensitivity:** each score ε′ f / |D| moves by at most ε′ η / (2 (|D| − 1)) between neighbours
when |D| ≥ ν^κ (proved below).

What is **proved** here, and tested exactly (``tests/mechanisms/test_supermodular.py``):

- for a record present in both neighbours and a θ at which both have the same candidates, each
  score ε′ f / |D| moves by at most ε′ η / (2 (|D| − 1)) when |D| ≥ ν^κ, so the record's law
  moves by a factor of at most exp(ε′ η / (|D| − 1));
- records are kept independently of each other, with probability 1 − β;
- every released cell covers at least t ≥ θ0 |D| records;
- the **random threshold's own leak** (the paper does not bound
  it): the candidates of D and of a neighbour differ only when θ falls in a window of width
  at most 1/(|D| − 1) next to one of the at most |D|·max|a⁺| / (θ0 (|D| − 1)) cells with more
  than θ0 (|D| − 1) records, so with probability at most
  ``threshold_delta(|D|) = |D| · max|a⁺| / (θ0 (1 − θ0) (|D| − 1)²)``; and it is of that order —
  a cell just above the threshold on D and just below it without one record appears on one
  side only, so δ ≥ 1 / (|D| (1 − θ0)) for any way of charging it.

What is only **claimed** by the paper (Theorem 3, proof omitted): that the whole release is
(ε, δ + o(1))-DP with o(1) ≈ h^k / |D|² — when the candidates agree, the step from per-record
laws to the released multiset (the record that is in D only must be "explained" by the ≥ t
others under its cell). An exact audit of a 7-record toy (same test file) finds δ ≈ 0.09 at
ε = 1. dpgate therefore charges a declared δ and splits it: δ/2 covers ``threshold_delta``
(proved), δ/4 the chance that the noisy row count below overstates |D|, δ/4 the paper's own
o(1) term (claimed, ``max|a⁺| / |D|² ≤ δ/4``). It labels every such release "experimental: (ε, δ)
claimed by the paper, δ not verified", and runs it only when the owner enabled experimental
mechanisms for the table. It also enforces the size conditions the claim rests on, read from the
paper: |D| ≥ ν^κ, |D| ≥ max|a⁺|, θ0 |D| ≥ t′ = β² max|a⁺| e^(ε′ t_f) / (1 − β) with
t_f = λ / φ_l + 1 the bound on f / |D| (t′ is defined but unused in the paper; read as a lower
bound on t). All are checked against a lower confidence bound of a discrete-Laplace row count
(``ROWS_SHARE`` of ε); when they fail, only the ``*`` row is released. In practice the threshold
term needs |D| ≳ 2 max|a⁺| / (θ0 (1 − θ0) δ): with δ = 10⁻⁶ that is billions of records, so
only a large δ makes the release run at all — which is the honest price of this mechanism.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np

from dpgate import errors
from dpgate.mechanisms.base import Synthesis, Synthesizer

#: Share of ε for the noisy row count that checks the size conditions.
ROWS_SHARE = 0.02
#: Cap on distinct records × level vectors (the count matrix: a few arrays of this many cells),
#: and on level vectors alone. Checked before the debit from public bounds (``max_cells``).
MAX_CELLS = 20_000_000
MAX_LEVELS = 200_000
CLAIM = "experimental: (ε, δ) claimed by the paper, δ not verified"
MAX_LAMBDA = 1e6


@dataclass(frozen=True)
class Parameters:
    """The mechanism's public parameters (ε here is what steps 1–4 spend)."""

    epsilon: float
    beta: float
    theta0: float
    lam: float
    kappa: int
    weights: tuple[tuple[float, ...], ...]  # per column: Φ weight by node depth (0 = ``*``)

    @property
    def phi_l(self) -> float:
        return float(sum(min(w) for w in self.weights))

    @property
    def eta(self) -> float:
        return 2.0 * (self.lam / self.phi_l + 1.0)

    @property
    def eps1(self) -> float:
        """ε′ of the paper (``eps_dp`` and ε′ kept apart: pitfall 10 of the paper's reading)."""
        return (self.epsilon + math.log(self.beta)) / (3.0 * self.eta * (1.0 - self.beta))

    @property
    def heights(self) -> tuple[int, ...]:
        return tuple(len(w) - 1 for w in self.weights)

    @property
    def nu(self) -> int:
        """The largest utility u = Σ depth."""
        return int(sum(self.heights))

    @property
    def max_generalizations(self) -> int:
        """max |a⁺| = Π (H_i + 1)."""
        return int(math.prod(h + 1 for h in self.heights))

    def t_prime(self) -> float:
        t_f = self.lam / self.phi_l + 1.0
        return self.beta**2 * self.max_generalizations * math.exp(self.eps1 * t_f) / (1.0 - self.beta)

    def threshold_delta(self, n: float) -> float:
        """A bound on P(θ makes the candidates of D and of a neighbour differ), |D| = n (proved above)."""
        if n <= 1:
            return 1.0
        return min(1.0, n * self.max_generalizations / (self.theta0 * (1 - self.theta0) * (n - 1) ** 2))

    def min_rows(self, delta: float) -> dict[str, float]:
        """The smallest |D| each size condition allows."""
        a = self.max_generalizations
        # threshold_delta(n) ≤ δ/2: n·a / (θ0 (1 − θ0) (n − 1)²) is decreasing in n; solve the quadratic
        c = 2.0 * a / (self.theta0 * (1 - self.theta0) * delta) if delta > 0 else math.inf
        n_threshold = 1.0 + (c + math.sqrt(c * c + 4.0 * c)) / 2.0 if math.isfinite(c) else math.inf
        return {
            "|D| ≥ ν^κ": float(self.nu) ** self.kappa,
            "|D| ≥ max|a⁺|": float(a),
            "θ0·|D| ≥ t′": self.t_prime() / self.theta0,
            "max|a⁺| / |D|² ≤ δ/4": math.sqrt(4.0 * a / delta) if delta > 0 else math.inf,
            "the random threshold's leak ≤ δ/2": n_threshold,
        }


def default_weights(heights: list[int] | tuple[int, ...]) -> tuple[tuple[float, ...], ...]:
    k = len(heights)
    return tuple(tuple((d + 1) / ((h + 1) * k) for d in range(h + 1)) for h in heights)


def default_beta(epsilon: float) -> float:
    """β = e^(−ε/2): half of ε goes to sampling records (ε + ln β = ε/2 for the choices)."""
    return math.exp(-epsilon / 2.0)


def parameters(epsilon: float, heights: list[int], *, beta: float | None = None, theta0: float = 0.05,
               lam: float = 1.0, kappa: int = 1, weights=None) -> Parameters:  # fmt: skip
    """Validated parameters; every refusal here is before any data is read."""
    if not (epsilon > 0 and math.isfinite(epsilon)):
        raise errors.DataError(f"ε must be positive, got {epsilon}", code="DP275")
    if not heights:
        raise errors.DataError("no column to generalize", code="DP287")
    beta = default_beta(epsilon) if beta is None else float(beta)
    if not (math.exp(-epsilon) < beta < 1.0):
        raise errors.DataError(
            f"β = {beta:g} must lie in (e^−ε, 1) = ({math.exp(-epsilon):.4g}, 1)", code="DP287",
            hint=f"omit beta (default e^(−ε/2) = {default_beta(epsilon):.4g}) or raise it",
        )  # fmt: skip
    if not (0.0 < theta0 < 1.0):
        raise errors.DataError(f"theta0 = {theta0:g} must lie in (0, 1)", code="DP287")
    if not (0 < lam <= MAX_LAMBDA):
        raise errors.DataError(f"lambda = {lam:g} must lie in (0, {MAX_LAMBDA:g}]", code="DP287")
    if not (isinstance(kappa, int) and kappa >= 1):
        raise errors.DataError(f"kappa = {kappa!r} must be a positive integer", code="DP287")
    w = default_weights(heights) if weights is None else tuple(tuple(float(x) for x in ws) for ws in weights)
    for ws, h in zip(w, heights):
        if len(ws) != h + 1 or min(ws) <= 0 or any(b < a for a, b in zip(ws, ws[1:])):
            raise errors.DataError("weights must be positive and not decrease with depth", code="DP287")
    levels = math.prod(h + 1 for h in heights)
    if levels > MAX_LEVELS:
        raise errors.UnsupportedQueryError(
            f"{levels:,} generalizations per record (Π (height + 1)) is above the cap of {MAX_LEVELS:,}",
            code="DP266", hint="generalize fewer columns, or declare flatter hierarchies",
        )  # fmt: skip
    return Parameters(float(epsilon), beta, float(theta0), float(lam), int(kappa), w)


def level_vectors(heights: tuple[int, ...] | list[int]) -> np.ndarray:
    """Every vector of node depths, one row per generalization level of a full-height record."""
    return np.array(list(itertools.product(*[range(h + 1) for h in heights])), dtype=np.int64).reshape(
        -1, len(heights)
    )


@dataclass
class Counts:
    """|ρ(x, D)| for every generalization of every distinct record (−1: not a generalization of it)."""

    records: np.ndarray  # (G, k) leaf nodes of the distinct records
    sizes: np.ndarray  # (G,) how many records are each
    levels: np.ndarray  # (L, k) depth vectors
    counts: np.ndarray  # (G, L)
    n: int


def cube_counts(leaves: np.ndarray, ancestors: list[np.ndarray], levels: np.ndarray) -> Counts:
    """Counts of records under each generalization, one grouping per depth vector (numpy).

    ``ancestors[i][node, d]`` is the ancestor at depth d of node (−1 when the node is shallower):
    a record b is under x only if each b_i has x_i as its ancestor at x_i's depth.
    """
    leaves = np.asarray(leaves, dtype=np.int64).reshape(-1, len(ancestors))
    n = len(leaves)
    if n == 0:
        return Counts(np.zeros((0, len(ancestors)), np.int64), np.zeros(0, np.int64), levels,
                      np.zeros((0, len(levels)), np.int64), 0)  # fmt: skip
    records, sizes = np.unique(leaves, axis=0, return_counts=True)
    if len(records) * len(levels) > MAX_CELLS:  # ruled out before the debit by max_cells; no row-derived number here
        raise errors.InternalError("the count matrix is above its cap although its public bound was checked")
    radix = [a.shape[0] + 1 for a in ancestors]
    counts = np.empty((len(records), len(levels)), dtype=np.int64)
    for j, lv in enumerate(levels):
        key = np.zeros(len(records), dtype=np.int64)
        valid = np.ones(len(records), dtype=bool)
        for i, anc in enumerate(ancestors):
            a = anc[records[:, i], lv[i]]
            valid &= a >= 0
            key = key * radix[i] + (a + 1)
        _, inv = np.unique(key, return_inverse=True)
        per_key = np.bincount(inv.ravel(), weights=sizes)
        counts[:, j] = np.where(valid, per_key[inv.ravel()].astype(np.int64), -1)
    return Counts(records, sizes, levels, counts, n)


def max_cells(params: Parameters, leaves: list[int], rows: int) -> int:
    """A public bound on the count matrix: distinct records ≤ min(rows, Π (leaves + 1)) (a value
    outside its tree is ``*``), times the level vectors."""
    combos = math.prod(n + 1 for n in leaves)
    return min(rows, combos) * params.max_generalizations


def laws(c: Counts, params: Parameters, t: float) -> np.ndarray:
    """Each distinct record's law over its t-frequent generalizations (rows sum to 1)."""
    w = params.weights
    phi = np.array([sum(w[i][d] for i, d in enumerate(lv)) for lv in c.levels])
    u = c.levels.sum(axis=1).astype(np.float64)
    n = max(c.n, 1)
    # ε′ f / |D| with the factors grouped so that nothing overflows: λ is capped, c ≤ |D|, Φ ≥ φ_l.
    score = (params.eps1 * params.lam / n) * (c.counts / phi) + params.eps1 * u**params.kappa / n
    ok = (c.counts >= t) & (c.counts >= 0)
    score = np.where(ok, score, -np.inf)
    score -= score.max(axis=1, keepdims=True)
    p = np.exp(score)
    return p / p.sum(axis=1, keepdims=True)


@dataclass
class Trace:
    """What a test may see of a run (never stored: θ and t are secret)."""

    t: float = 0.0
    kept: int = 0
    min_cover: int | None = None
    chosen_counts: list[int] = field(default_factory=list)


def release(leaves: np.ndarray, ancestors: list[np.ndarray], params: Parameters, *, rng: np.random.Generator,
            trace: Trace | None = None) -> np.ndarray:  # fmt: skip
    """Algorithm 2: the released rows as node ids (one column per attribute); row 0.. shuffled.

    The all-``*`` row is always included. ``leaves`` are the records' leaf nodes (node 0 when a
    value is outside its hierarchy: that column can only be ``*`` for the record).
    """
    levels = level_vectors(params.heights)
    c = cube_counts(leaves, ancestors, levels)
    k = len(ancestors)
    theta = rng.uniform(params.theta0, 1.0)
    t = theta * c.n
    rows = [np.zeros((1, k), dtype=np.int64)]
    kept_total = 0
    covers: list[int] = []
    if c.n:
        p = laws(c, params, t)
        kept = rng.binomial(c.sizes, 1.0 - params.beta)
        for g in np.flatnonzero(kept):
            picks = rng.multinomial(int(kept[g]), p[g])
            for j in np.flatnonzero(picks):
                lv = levels[j]
                node = [int(ancestors[i][c.records[g, i], lv[i]]) for i in range(k)]
                rows.append(np.repeat(np.array([node], dtype=np.int64), int(picks[j]), axis=0))
                covers.append(int(c.counts[g, j]))
            kept_total += int(kept[g])
    out = np.concatenate(rows, axis=0)
    rng.shuffle(out, axis=0)  # the order would tell which records were kept (pitfall 7)
    if trace is not None:
        trace.t, trace.kept = t, kept_total
        trace.chosen_counts = covers
        trace.min_cover = min(covers) if covers else None
    return out


class Supermodular(Synthesizer):
    """``USING supermodular``: ``release`` on the records' leaf nodes; unvetted (its δ is claimed).

    Options: ``ancestors`` (per column), ``params`` (``parameters`` at the ε it runs at).
    """

    NAME = "supermodular"
    VETTED = False
    STATUS = CLAIM

    def synthesize(self, data: np.ndarray, *, epsilon, delta=0.0, rng, options, progress=None) -> Synthesis:
        params: Parameters = options["params"]
        return Synthesis(release(data, options["ancestors"], params, rng=rng), params.epsilon)
