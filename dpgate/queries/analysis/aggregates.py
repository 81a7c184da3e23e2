"""The aggregates: which ones the statement computes, each one's bounded input, grid,
sensitivity and share of ε."""

from __future__ import annotations

import datetime
import math
from dataclasses import replace

from sqlglot import exp

from dpgate import errors
from dpgate.catalog.tables import EPOCH, INTEGER_TYPES, is_temporal_type
from dpgate.mechanisms.base import (
    AVG,
    COUNT_DISTINCT,
    COUNT_ROWS,
    COUNT_SUBJECTS,
    COUNT_VALUES,
    QUANTILE,
    STDDEV_POP,
    STDDEV_SAMP,
    SUM,
    VAR_POP,
    VAR_SAMP,
    VARIANCE_KINDS,
    AggSpec,
    Component,
)
from dpgate.queries import bounds
from dpgate.queries.analysis.common import display_sql, preempted

#: Bits of resolution below the bound range for real-valued sums (grid = range / 2^32).
GRID_BITS = 32
#: Variances sum squares of grid values, so they use a coarser grid (range / 2^20): squares
#: stay below 2^40 and their sum is an exact integer.
VARIANCE_GRID_BITS = 20
#: Quantiles choose among the grid points of [L, U]; the rank error grows with log(points),
#: so their grid is range / 2^20 (integer columns with a smaller range use unit steps).
QUANTILE_GRID_BITS = 20
_VARIANCES = {exp.VariancePop: VAR_POP, exp.Variance: VAR_SAMP, exp.StddevPop: STDDEV_POP,
              exp.StddevSamp: STDDEV_SAMP, exp.Stddev: STDDEV_SAMP}  # fmt: skip

SUPPORTED_AGGREGATES = (
    "COUNT(*), COUNT(expr), COUNT(DISTINCT expr), SUM(expr), AVG(expr), VAR_POP / VAR_SAMP / VARIANCE(expr), "
    "STDDEV_POP / STDDEV_SAMP / STDDEV(expr), MEDIAN(expr), QUANTILE_CONT(expr, q), PERCENTILE_CONT(expr, q)"
)


class AggregateAnalysis:
    """Aggregates, their inputs and bounds (part of ``Analysis``)."""

    def _collect_aggregates(self, q: exp.Select, projections: list[exp.Expr]) -> list[exp.Expr]:
        places = list(projections)
        if q.args.get("having") is not None:
            places.append(q.args["having"].this)
        if q.args.get("order") is not None:
            places.append(q.args["order"])
        found: dict[str, exp.Expr] = {}
        for place in places:
            for node in place.walk():
                if self._is_aggregate(node) and not any(self._is_aggregate(a) for a in _ancestors(node, place)):
                    found.setdefault(node.sql(dialect="duckdb"), node)
        return list(found.values())

    def _agg_input(self, node: exp.Expr) -> tuple[str, exp.Expr | None]:
        """What an aggregate computes and over which row expression.

        The forms refused here as ``preempted`` the allowlist refuses first (``_Checker.aggregate``:
        an aggregate of its list with one argument, DISTINCT only in COUNT(DISTINCT x), MIN / MAX
        only in the per-subject subquery, other aggregates DP253)."""
        cond = None
        if isinstance(node, exp.Filter):
            cond = node.expression.this
            self._check_row_expr(cond, "FILTER")
            node = node.this
        text = node.sql(dialect="duckdb")
        if isinstance(node, exp.Count):
            arg = node.this
            if arg is None:
                raise preempted(text)
            if isinstance(arg, exp.Star):
                if cond is None:
                    return COUNT_ROWS, None
                return COUNT_VALUES, exp.Case(ifs=[exp.If(this=cond, true=exp.Literal.number(1))])
            if isinstance(arg, exp.Distinct):
                if len(arg.expressions) != 1:
                    raise preempted(text)
                inner = arg.expressions[0]
                self._check_row_expr(inner, text)
                if isinstance(inner, exp.Column) and self._is_unit(inner):
                    if cond is None:
                        return COUNT_SUBJECTS, None
                    return COUNT_SUBJECTS, exp.Case(ifs=[exp.If(this=cond, true=inner.copy())])
                return COUNT_DISTINCT, _filtered(inner, cond)
            self._check_row_expr(arg, text)
            return COUNT_VALUES, _filtered(arg, cond)
        if isinstance(node, (exp.Sum, exp.Avg)):
            arg = node.this
            if arg is None or isinstance(arg, exp.Distinct) or node.args.get("expressions"):
                raise preempted(text)
            self._check_row_expr(arg, text)
            return (SUM if isinstance(node, exp.Sum) else AVG), _filtered(arg, cond)
        if type(node) in _VARIANCES or isinstance(node, (exp.Median, exp.PercentileCont)):
            arg = node.this
            if arg is None or isinstance(arg, exp.Distinct):
                raise preempted(text)
            if isinstance(node, exp.PercentileCont):
                quantile_level(node)
            self._check_row_expr(arg, text)
            kind = _VARIANCES.get(type(node), QUANTILE)
            return kind, _filtered(arg, cond)
        raise preempted(f"aggregate {text}")

    def _is_unit(self, col: exp.Column) -> bool:
        item = self.scope.find(col)
        return bool(item and item.protected and col.name.lower() == item.prot.unit)

    def _column_bounds(self, col: exp.Column) -> bounds.Interval | None:
        item = self.scope.find(col)
        if item is None or not item.protected:
            return None  # public columns have no declared bounds
        c = item.prot.column(col.name)
        if c is None:
            return None
        if c.bounded and not (c.is_date or c.is_timestamp):
            return (c.lower, c.upper)
        if c.type.upper() == "BOOLEAN":
            return (0.0, 1.0)
        values = [v for v in (c.domain or ()) if isinstance(v, (int, float)) and not isinstance(v, bool)]
        if values and len(values) == len([v for v in c.domain if v is not None]):
            return (float(min(values)), float(max(values)))  # a numeric declared domain bounds the column
        return None

    def _input_bounds(self, node: exp.Expr, label: str, clamp_example: str) -> bounds.Interval:
        """The derived bounds of an aggregate's input, or DP213 naming the columns without any."""
        lo, hi = bounds.derive(node, self._column_bounds, self._temporal_bounds)
        if not bounds.is_bounded((lo, hi)):
            cols = sorted({c.name for c in node.find_all(exp.Column)})
            raise errors.PolicyError(
                f"{label} needs bounds on its input, and {', '.join(cols) or 'its input'} has none declared",
                code="DP213",
                hint=f"ask the owner to declare bounds, or clamp it yourself: {clamp_example}",
            )
        return lo, hi

    def _temporal_bounds(self, node: exp.Expr) -> bounds.Temporal | None:
        """Declared bounds of a DATE / TIMESTAMP column, or a DATE / TIMESTAMP constant, as numbers."""
        while isinstance(node, exp.Paren):
            node = node.this
        if isinstance(node, exp.Column):
            item = self.scope.find(node)
            c = item.prot.column(node.name) if item is not None and item.protected else None
            if c is not None and c.bounded and (c.is_date or c.is_timestamp):
                return ("day" if c.is_date else "second", c.lower, c.upper)
            return None
        if isinstance(node, exp.Cast) and isinstance(node.this, exp.Literal) and node.this.is_string and node.to:
            text = node.this.this
            try:
                if node.to.is_type(exp.DType.DATE):
                    days = (datetime.date.fromisoformat(text) - EPOCH).days
                    return ("day", float(days), float(days))
                if node.to.is_type(exp.DType.TIMESTAMP, exp.DType.TIMESTAMPNTZ):
                    t = (datetime.datetime.fromisoformat(text) - datetime.datetime(1970, 1, 1)).total_seconds()
                    return ("second", t, t)
            except ValueError:
                return None
        return None

    def _agg_spec(
        self, i: int, node: exp.Expr, kind: str, inp: exp.Expr | None, epsilon: float,
        max_rows: int, groups_per_subject: float, vtype: str | None,
    ) -> AggSpec:  # fmt: skip
        label = display_sql(node)
        if kind in (COUNT_ROWS, COUNT_VALUES, COUNT_DISTINCT):
            return AggSpec(i, kind, label, inp, (Component("count", max_rows, epsilon),))
        if kind == COUNT_SUBJECTS:
            return AggSpec(i, kind, label, inp, (Component("subjects", int(groups_per_subject), epsilon),))
        if vtype is not None and is_temporal_type(vtype):
            raise errors.UnsupportedQueryError(
                f"{label} aggregates {vtype} values; dpgate aggregates numbers",
                code="DP212",
                hint="aggregate a difference: days between DATEs, e.g. AVG(end_date - start_date) or "
                "AVG(d - DATE '2020-01-01'), or AVG(date_diff('hour', start_ts, end_ts)) for TIMESTAMPs; "
                "GROUP BY year(d) or date_trunc('month', d) for counts",
            )
        fn = label.split("(", 1)[0] if "(" in label else "SUM"
        lo, hi = self._input_bounds(inp, label, f"{fn}(LEAST(GREATEST(expr, lo), hi))")
        if lo == hi:
            hi = lo + 1.0
        integer = (vtype or "").upper() in INTEGER_TYPES and float(lo).is_integer() and float(hi).is_integer()
        if kind in (SUM, AVG):
            grid = 1.0 if integer else 2.0 ** (math.floor(math.log2(hi - lo)) - GRID_BITS)
        else:  # a coarser grid; integers keep unit steps unless their range is wider than it
            bits = VARIANCE_GRID_BITS if kind in VARIANCE_KINDS else QUANTILE_GRID_BITS
            grid = 2.0 ** (math.floor(math.log2(hi - lo)) - bits)
            grid = max(1.0, grid) if integer else grid
        lo_i, hi_i = math.floor(lo / grid), math.ceil(hi / grid)
        if max(abs(lo_i), abs(hi_i)) >= 2**53:
            raise errors.PolicyError(
                f"{label}: the bounds [{lo:.15g}, {hi:.15g}] are too far from 0 for an exact sum", code="DP213",
                hint="subtract an offset inside the aggregate, e.g. SUM(x - 1e12), and add it back afterwards",
            )  # fmt: skip
        if kind == SUM:
            sens = max_rows * max(abs(lo_i), abs(hi_i))
            comps = (Component("sum", max(1, sens), epsilon),)
            return AggSpec(i, kind, label, inp, comps, lo_i * grid, hi_i * grid, grid, integer)
        mid = (lo_i + hi_i) // 2
        if kind == QUANTILE:
            # The rank utility moves by at most one per row: max_rows per subject [quantile].
            comps = (Component("quantile", max_rows, epsilon),)
            level = quantile_level(node.this if isinstance(node, exp.Filter) else node)
            return AggSpec(i, kind, label, inp, comps, lo_i * grid, hi_i * grid, grid, False, level)
        if kind in VARIANCE_KINDS:
            half = max(hi_i - mid, mid - lo_i)
            third = epsilon / 3
            comps = (
                Component("centered sum", max(1, max_rows * half), third),
                Component("centered squares", max(1, max_rows * half * half), third),
                Component("count", max_rows, epsilon - 2 * third),
            )
            return AggSpec(i, kind, label, inp, comps, lo_i * grid, hi_i * grid, grid, False)
        half = max(hi_i - mid, mid - lo_i)
        comps = (
            Component("centered sum", max(1, max_rows * half), epsilon / 2),
            Component("count", max_rows, epsilon - epsilon / 2),
        )
        return AggSpec(i, kind, label, inp, comps, lo_i * grid, hi_i * grid, grid, False)


def _ancestors(node: exp.Expr, stop: exp.Expr):
    """Parents of ``node`` up to and including ``stop``."""
    parent = node.parent
    while parent is not None and node is not stop:
        yield parent
        if parent is stop:
            return
        parent = parent.parent


def _filtered(arg: exp.Expr, cond: exp.Expr | None) -> exp.Expr:
    if cond is None:
        return arg
    return exp.Case(ifs=[exp.If(this=cond.copy(), true=arg.copy())])


def _with_epsilon(agg: AggSpec, epsilon: float) -> AggSpec:
    total = agg.epsilon
    comps = []
    acc = 0.0
    for k, c in enumerate(agg.components):
        e = epsilon - acc if k == len(agg.components) - 1 else c.epsilon * epsilon / total
        acc += e
        comps.append(replace(c, epsilon=e))
    return replace(agg, components=tuple(comps))


def quantile_level(node: exp.Expr) -> float:
    """The level q of MEDIAN (0.5) or QUANTILE_CONT / PERCENTILE_CONT(x, q): a constant in [0, 1]."""
    if isinstance(node, exp.Median):
        return 0.5
    q = node.args.get("expression")
    value = None
    if isinstance(q, exp.Literal) and not q.is_string:
        value = float(q.this)
    if value is None or not 0.0 <= value <= 1.0:
        raise errors.UnsupportedQueryError(
            f"{node.sql(dialect='duckdb')}: the quantile level must be one number between 0 and 1", code="DP283",
            hint="write QUANTILE_CONT(x, 0.9); for several quantiles write several aggregates",
        )  # fmt: skip
    return value
