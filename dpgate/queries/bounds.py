"""Interval arithmetic over row-level SQL expressions: public bounds for SUM and AVG inputs.

A SUM or AVG needs bounds on its input before its sensitivity is known. Bounds come from
the owner's declarations (a column's ``[lower, upper]``) and propagate through arithmetic,
``CASE``/``IF``/``COALESCE``, ``LEAST``/``GREATEST``, ``ABS``, rounding and casts; a boolean
predicate is bounded by ``[0, 1]``. The derived interval is still enforced by clamping in
the generated SQL, so a derivation that is too generous costs accuracy, never privacy.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from sqlglot import exp

Interval = tuple[float, float]
UNBOUNDED: Interval = (-math.inf, math.inf)

_PREDICATES = (
    exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.And, exp.Or, exp.Not, exp.In,
    exp.Between, exp.Like, exp.ILike, exp.Is, exp.Boolean, exp.NullSafeEQ, exp.NullSafeNEQ,
    exp.RegexpLike,
)  # fmt: skip


def _hull(*intervals: Interval) -> Interval:
    return (min(i[0] for i in intervals), max(i[1] for i in intervals))


def _mul(a: Interval, b: Interval) -> Interval:
    products = []
    for x in a:
        for y in b:
            if (x == 0 and math.isinf(y)) or (y == 0 and math.isinf(x)):
                products.append(0.0)
            else:
                products.append(x * y)
    return (min(products), max(products))


#: Seconds in each date_diff unit (the shortest month, quarter and year: a bound, not a value).
_UNIT_SECONDS = {
    "MICROSECOND": 1e-6, "MILLISECOND": 1e-3, "SECOND": 1, "MINUTE": 60, "HOUR": 3600, "DAY": 86400,
    "WEEK": 7 * 86400, "MONTH": 28 * 86400, "QUARTER": 89 * 86400, "YEAR": 365 * 86400,
}  # fmt: skip

#: ('day' | 'second', lo, hi): a DATE-valued expression in days since 1970-01-01, or a
#: TIMESTAMP-valued one in seconds, within [lo, hi].
Temporal = tuple[str, float, float]


def _seconds(t: Temporal) -> tuple[float, float]:
    scale = 86400 if t[0] == "day" else 1
    return (t[1] * scale, t[2] * scale)


def derive(
    node: exp.Expr,
    column_bounds: Callable[[exp.Column], Interval | None],
    temporal: Callable[[exp.Expr], Temporal | None] | None = None,
) -> Interval:
    """The tightest interval this simple analysis can prove for ``node`` (may be unbounded).

    ``temporal`` gives the bounds of DATE / TIMESTAMP-valued expressions (declared bounds of
    such a column, a constant): their differences ``d1 - d2`` (DATE: days) and
    ``date_diff(unit, a, b)`` are bounded [dates].
    """
    if temporal is not None:
        if isinstance(node, exp.Sub):
            a, b = temporal(node.this), temporal(node.expression)
            if a is not None and b is not None:
                if a[0] == b[0] == "day":  # DATE - DATE is a whole number of days
                    return (a[1] - b[2], a[2] - b[1])
                return UNBOUNDED  # TIMESTAMP - TIMESTAMP is an INTERVAL, not a number
        if isinstance(node, exp.DateDiff):
            unit = node.args.get("unit")
            u = _UNIT_SECONDS.get(unit.name.upper() if unit is not None else "DAY")
            start, end = temporal(node.expression), temporal(node.this)
            if u is not None and start is not None and end is not None:
                (s_lo, s_hi), (e_lo, e_hi) = _seconds(start), _seconds(end)
                # date_diff counts unit boundaries crossed: within one of the exact quotient.
                return (math.floor((e_lo - s_hi) / u) - 1, math.ceil((e_hi - s_lo) / u) + 1)
    if isinstance(node, exp.Paren):
        return derive(node.this, column_bounds, temporal)
    if isinstance(node, exp.Column):
        return column_bounds(node) or UNBOUNDED
    if isinstance(node, exp.Literal) and not node.is_string:
        v = float(node.this)
        return (v, v)
    if isinstance(node, exp.Boolean):
        return (0.0, 1.0)
    if isinstance(node, _PREDICATES):
        return (0.0, 1.0)
    if isinstance(node, exp.Neg):
        lo, hi = derive(node.this, column_bounds, temporal)
        return (-hi, -lo)
    if isinstance(node, exp.Add):
        a, b = derive(node.this, column_bounds, temporal), derive(node.expression, column_bounds, temporal)
        return (a[0] + b[0], a[1] + b[1])
    if isinstance(node, exp.Sub):
        a, b = derive(node.this, column_bounds, temporal), derive(node.expression, column_bounds, temporal)
        return (a[0] - b[1], a[1] - b[0])
    if isinstance(node, exp.Mul):
        return _mul(derive(node.this, column_bounds, temporal), derive(node.expression, column_bounds, temporal))
    if isinstance(node, (exp.Div, exp.IntDiv)):
        d = derive(node.expression, column_bounds, temporal)
        if d[0] == d[1] and d[0] != 0:  # division by a constant
            q = _mul(derive(node.this, column_bounds, temporal), (1 / d[0], 1 / d[0]))
            if isinstance(node, exp.IntDiv):
                return (math.floor(q[0]), math.floor(q[1]))
            return q
        return UNBOUNDED
    if isinstance(node, exp.Abs):
        lo, hi = derive(node.this, column_bounds, temporal)
        if lo >= 0:
            return (lo, hi)
        if hi <= 0:
            return (-hi, -lo)
        return (0.0, max(-lo, hi))
    if isinstance(node, (exp.Greatest, exp.Least)):
        args = [derive(a, column_bounds, temporal) for a in [node.this, *node.expressions]]
        if isinstance(node, exp.Greatest):
            return (max(a[0] for a in args), max(a[1] for a in args))
        return (min(a[0] for a in args), min(a[1] for a in args))
    if isinstance(node, (exp.Round, exp.Floor, exp.Ceil)):
        lo, hi = derive(node.this, column_bounds, temporal)
        return (math.floor(lo), math.ceil(hi)) if math.isfinite(lo) and math.isfinite(hi) else (lo, hi)
    if isinstance(node, (exp.Cast, exp.TryCast)):
        inner = derive(node.this, column_bounds, temporal)
        to = node.to
        if to is not None and to.is_type(*exp.DataType.INTEGER_TYPES) and all(map(math.isfinite, inner)):
            return (math.floor(inner[0]), math.ceil(inner[1]))
        if to is not None and (to.is_type(*exp.DataType.NUMERIC_TYPES) or to.is_type(exp.DType.BOOLEAN)):
            return inner
        return UNBOUNDED
    if isinstance(node, exp.Case):
        branches = [derive(i.args["true"], column_bounds, temporal) for i in node.args.get("ifs", [])]
        default = node.args.get("default")
        if default is not None and not isinstance(default, exp.Null):
            branches.append(derive(default, column_bounds, temporal))
        return _hull(*branches) if branches else UNBOUNDED
    if isinstance(node, exp.If):
        parts = [node.args.get("true"), node.args.get("false")]
        branches = [derive(p, column_bounds, temporal) for p in parts if p is not None and not isinstance(p, exp.Null)]
        return _hull(*branches) if branches else UNBOUNDED
    if isinstance(node, exp.Coalesce):
        args = [node.this, *node.expressions]
        return _hull(*(derive(a, column_bounds, temporal) for a in args))
    return UNBOUNDED


def is_bounded(interval: Interval) -> bool:
    return math.isfinite(interval[0]) and math.isfinite(interval[1])
