"""What mechanisms exchange with the rest of dpgate: the protocols, the noisy-column value, and
the statistics a plan hands a mechanism (aggregate kinds, components, key selection, the exact
answer).

These types live here, below ``dpgate.plans``, so that a mechanism never imports a stage above
it: plans import them from here. A mechanism is a small class with a ``NAME``, a ``VETTED`` flag
and its release method; its module docstring states, under fixed headings, the reference, the
guarantee and neighbouring relation, the sensitivity, the accuracy (error bars) and a proof
sketch citing ``[labels]`` on the code lines that implement each step.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import numpy as np

from dpgate import errors

if TYPE_CHECKING:
    from sqlglot import exp

#: Aggregate kinds of the counting class.
COUNT_ROWS = "count_rows"  # COUNT(*)
COUNT_VALUES = "count_values"  # COUNT(expr)
COUNT_SUBJECTS = "count_subjects"  # COUNT(DISTINCT <privacy unit>)
COUNT_DISTINCT = "count_distinct"  # COUNT(DISTINCT expr)
SUM = "sum"
AVG = "avg"
VAR_POP = "var_pop"  # VAR_POP(expr)
VAR_SAMP = "var_samp"  # VAR_SAMP / VARIANCE(expr)
STDDEV_POP = "stddev_pop"
STDDEV_SAMP = "stddev_samp"  # STDDEV_SAMP / STDDEV(expr)
VARIANCE_KINDS = (VAR_POP, VAR_SAMP, STDDEV_POP, STDDEV_SAMP)
QUANTILE = "quantile"  # MEDIAN(x), QUANTILE_CONT(x, q), PERCENTILE_CONT(x, q)
#: Kinds whose input is a bounded value put on a grid (not a count).
VALUE_KINDS = (SUM, AVG, *VARIANCE_KINDS, QUANTILE)


@dataclass(frozen=True)
class Component:
    """One noisy integer statistic: sensitivity in grid units and its share of ε."""

    label: str
    sensitivity: int
    epsilon: float


@dataclass(frozen=True)
class AggSpec:
    """One aggregate of the query, bounded and with its noise fixed."""

    index: int
    kind: str
    label: str  # as the analyst wrote it
    expr: exp.Expr | None  # row-level input (None for COUNT(*) and COUNT(DISTINCT unit))
    components: tuple[Component, ...]
    lower: float | None = None
    upper: float | None = None
    grid: float = 1.0  # values are summed as integers on this power-of-two grid
    integer: bool = True  # released as an integer
    level: float | None = None  # the quantile level q of a QUANTILE

    @property
    def epsilon(self) -> float:
        return sum(c.epsilon for c in self.components)

    @property
    def sql_type(self) -> str:
        return "BIGINT" if self.integer and self.kind not in (AVG, *VARIANCE_KINDS, QUANTILE) else "DOUBLE"

    def grid_int(self, value: float) -> int:
        return round(value / self.grid)


@dataclass(frozen=True)
class KeySelection:
    """DP key selection: release a key when its noisy subject count reaches ``threshold``."""

    epsilon: float
    delta: float
    sensitivity: int  # groups per subject (L1 of the subject-count vector)
    threshold: int


@dataclass
class ExactAnswer:
    """Exact bounded statistics, one array per noise component, aligned with ``keys``."""

    keys: list[tuple[Any, ...]]
    components: dict[tuple[int, str], np.ndarray]
    subjects: np.ndarray | None  # per key, for DP key selection
    heavy_subjects: int  # subjects whose rows were sampled down
    unused_units: int | None  # units with rows that were not charged (None: not counted)


class CountingSettings(Protocol):
    alpha: float
    clamp_counts: bool


class CountingPlan(Protocol):
    """What the counting mechanisms read of a counting plan (``dpgate.plans.CountPlan``)."""

    settings: CountingSettings
    aggs: tuple[AggSpec, ...]
    max_rows: int

    @property
    def epsilon(self) -> float: ...


@dataclass
class NoisyColumn:
    """Noisy values with their (1 - alpha) intervals, one entry per released key."""

    values: np.ndarray
    low: np.ndarray
    high: np.ndarray
    integer: bool
    mechanism: str
    epsilon: float
    scale: str  # human-readable noise description, e.g. "discrete Laplace, sensitivity 1, ε=0.5"


@dataclass(frozen=True)
class Spent:
    """The privacy loss one mechanism run consumed on one part of the subjects.

    ``part`` is the index of the personalization plan's part the run read (``pdp.Part.index``; 0
    when there is one), ``epsilon`` and ``delta`` what the run was given where it draws noise, or
    what its release object says it spent. A statement's runs on one part compose sequentially,
    so the part's loss is their sum; runs on different parts read disjoint subjects.
    """

    part: int
    epsilon: float
    delta: float = 0.0
    what: str = ""


_METER: ContextVar[list[Spent] | None] = ContextVar("dpgate_meter", default=None)


def spend(epsilon: float, delta: float = 0.0, *, part: int = 0, what: str = "") -> None:
    """Record, where noise is drawn, the ε and δ a mechanism run is given (nothing outside ``metered``).

    The gateway compares what an answer recorded with what was debited before it releases the
    answer: a share lost or counted twice on the way from the plan to the noise would otherwise
    release at a privacy loss nobody was charged for."""
    meter = _METER.get()
    if meter is not None:
        meter.append(Spent(int(part), float(epsilon), float(delta), what))


@contextmanager
def metered() -> Iterator[list[Spent]]:
    """Collect every ``spend`` of the runs inside (a query class's answer) into the list it yields.

    A context variable, so each thread's (each statement's) runs are its own; a free dry run outside
    it records nothing."""
    spent: list[Spent] = []
    token = _METER.set(spent)
    try:
        yield spent
    finally:
        _METER.reset(token)


class Mechanism:
    """A registered mechanism (``dpgate.mechanisms.MECHANISMS``): its name and whether it is vetted.

    An unvetted mechanism runs only where the data owner allowed it (``mechanisms.lookup``).
    """

    NAME: ClassVar[str] = "base"
    VETTED: ClassVar[bool] = True

    #: Why an unvetted mechanism is not vetted, for the refusal (``mechanisms.lookup``).
    STATUS: ClassVar[str] = ""


def checked_weights(weights, rows: int) -> np.ndarray | None:
    """``weights`` (``CodedRows.weights``) as float64, what ``bincount`` reads: one whole count ≥ 0
    per row, adding up to less than 2^53 so that every weighted count is an exact integer. dpgate
    makes them (an engine's counts of distinct coded rows), never an analyst: anything else is a bug."""
    if weights is None:
        return None
    w = np.asarray(weights)
    if w.shape != (rows,) or not (np.issubdtype(w.dtype, np.integer) or np.issubdtype(w.dtype, np.floating)):
        raise errors.InternalError(f"weights must be one count per row of codes ({rows}), got {w.dtype} {w.shape}")
    w = w.astype(np.float64)
    if not np.isfinite(w).all() or (w < 0).any() or (w != np.rint(w)).any() or w.sum() >= 2.0**53:
        raise errors.InternalError("weights must be whole, non-negative counts of tuples (adding up to less than 2^53)")
    return w


def tuple_counts(values: np.ndarray, size: int, weights: np.ndarray | None = None) -> np.ndarray:
    """How many tuples hold each value ``0 .. size - 1`` (int64): each row counts once, or its weight
    (``CodedRows.weights``; integer counts, exact in float64 below 2^53)."""
    if weights is None:
        return np.bincount(values, minlength=size)
    return np.rint(np.bincount(values, weights=weights, minlength=size)).astype(np.int64)


@dataclass(frozen=True)
class CodedRows:
    """A table as integer codes: one row per tuple, column j in ``0 .. sizes[j] - 1`` (public sizes).

    ``weights``, when given, says how many tuples each row of ``codes`` stands for (the distinct
    coded rows and their counts, as an engine that aggregates the rows returns them): every
    marginal is then a weighted count, equal to the one over the rows repeated (``rows()``).
    """

    codes: np.ndarray
    sizes: tuple[int, ...]
    weights: np.ndarray | None = None

    def rows(self) -> np.ndarray:
        """One row per tuple (the weighted rows repeated; a mechanism that reads tuples one by one)."""
        if self.weights is None:
            return self.codes
        return np.repeat(self.codes, np.asarray(self.weights, dtype=np.int64), axis=0)


@dataclass
class Synthesis:
    """What a synthesizer returns: its release, the ε it consumed, and facts about the release.

    ``release`` is what the synthetic class writes (a model to sample, a synopsis, itemsets,
    generalized rows); ``quality`` holds what the notes report (work caps hit, the parameters
    the run derived from ε); ``epsilon`` is what the run spent, all of what it was given.
    """

    release: Any
    epsilon: float
    quality: dict[str, Any] = field(default_factory=dict)


class Synthesizer(Mechanism):
    """A synthesizer: one signature for every ``CREATE SYNTHETIC TABLE ... USING <NAME>``.

    ``data`` is what it reads from the charged subjects, as its class documents (``CodedRows``,
    points, set-valued records, sequences, leaf tuples); ``epsilon`` and ``delta`` its shares;
    ``rng`` the noise stream; ``options`` its parameters, from the plan only. Run over no rows, it
    raises every refusal that depends only on ε and the options (the synthetic class's free dry
    run).
    """

    def synthesize(
        self, data: Any, *, epsilon: float, delta: float = 0.0, rng: np.random.Generator,
        options: Mapping[str, Any], progress: Callable[[float, str], None] | None = None,
    ) -> Synthesis:  # fmt: skip
        raise NotImplementedError
