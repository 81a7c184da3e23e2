"""Column coding for DP synthetic releases: values ↔ integer codes over public code spaces.

PrivBayes (``mechanisms/privbayes.py``) works on integer codes with public domain sizes. This
module builds those codes from a protected table and turns sampled codes back into a typed
DuckDB table, so ``CREATE SYNTHETIC TABLE ... USING privbayes`` needs nothing else.

Every code space comes from public facts only: a declared domain, the column
type, a NOT NULL constraint, declared bounds and the requested number of bins. Nothing is read
from the rows to build it; a column with no public code space is refused (DP213).

- A categorical column (declared domain, or BOOLEAN) is coded by position in its declared
  values; a value outside them goes to the NULL code, or drops the row when NULL has no code.
- A numeric column is *clamped* to its bounds, then binned: integers exactly (one code per
  integer, or equi-width bins whose edges are integers, none empty); DOUBLE, FLOAT and DECIMAL
  on edges that are values of the column's own type, so a value on an edge falls in the same
  bin in SQL and in ``decode``. NaN counts as NULL; ±inf is clamped.
- NULL has its own code, always the last, when the domain contains None or the column may be
  NULL (no NOT NULL constraint); otherwise a row holding NULL is dropped.

The encoding SQL cannot raise a runtime error whatever a row holds (every row-level expression
is wrapped in ``TRY``): an error that depends on one row would reveal one bit about it.

``quality`` reads the raw rows to compare marginals: it is for the data owner only, and its
numbers are not DP.
"""

from __future__ import annotations

import bisect
import dataclasses
import datetime
import json
import math
import numbers
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from functools import cached_property
from typing import Any

import duckdb
import numpy as np
from sqlglot import exp

from dpgate import database, errors
from dpgate.catalog import tables as catalog
from dpgate.catalog.tables import quote_ident
from dpgate.mechanisms import privbayes

KINDS = ("categorical", "integer", "real")
MIN_BINS, MAX_BINS = 2, 1024

#: Value range of each DuckDB integer type (a schema fact: decoded values must fit it).
_INTEGER_RANGE = {
    "TINYINT": (-(2**7), 2**7 - 1), "SMALLINT": (-(2**15), 2**15 - 1),
    "INTEGER": (-(2**31), 2**31 - 1), "BIGINT": (-(2**63), 2**63 - 1),
    "HUGEINT": (-(2**127), 2**127 - 1), "UTINYINT": (0, 2**8 - 1), "USMALLINT": (0, 2**16 - 1),
    "UINTEGER": (0, 2**32 - 1), "UBIGINT": (0, 2**64 - 1), "UHUGEINT": (0, 2**128 - 1),
}  # fmt: skip
#: Binned integers are computed in HUGEINT: (value - lower) * bins must stay below this.
_HUGEINT_LIMIT = 2**127
#: The bin estimate runs in DOUBLE and is then corrected by one step against exact edges; a bin
#: must be wider than this fraction of the bounds' magnitude for the estimate to be within one.
_DOUBLE_PRECISION = 2.0**-40
_FLOAT32_MAX = float(np.finfo(np.float32).max)
_INT64_SAFE = 2**62
_DECIMAL_RE = re.compile(r"^DECIMAL(?:\((\d+)\s*,\s*(\d+)\))?$")


# --------------------------------------------------------------------------------------------
# codings
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ColumnCoding:
    """How one column becomes codes ``0 .. size - 1`` (NULL, when coded, is ``size - 1``).

    Attributes:
        name: the source column (and the release column).
        sql_type: the source column's DuckDB type; the release column gets the same type.
        kind: ``"categorical"``, ``"integer"`` or ``"real"``.
        values: the declared values (categorical), without None.
        lower, upper: the bounds the codes use (integer: the integers actually allowed).
        bins: the number of bins; None for an integer column coded one code per integer (a
            DECIMAL with fewer values than the requested bins gets one bin per value).
        null_code: NULL has its own code, the last one.
        temporal: ``"date"`` for a DATE column coded as days since 1970-01-01 (integer kind),
            ``"timestamp"`` for a TIMESTAMP coded as seconds since then (real kind, DOUBLE):
            dates are binned like numbers and decoded back to dates.

    >>> c = ColumnCoding("age", "INTEGER", "integer", lower=17, upper=90, bins=16)
    >>> c.size, c.describe()
    (16, '16 equi-width bins on [17, 90]')
    """

    name: str
    sql_type: str
    kind: str
    values: tuple[Any, ...] | None = None
    lower: float | None = None
    upper: float | None = None
    bins: int | None = None
    null_code: bool = False
    temporal: str | None = None

    @property
    def numeric_type(self) -> str:
        """The type the codes are computed in: the column's, or BIGINT days / DOUBLE seconds."""
        return {"date": "BIGINT", "timestamp": "DOUBLE"}.get(self.temporal or "", self.sql_type)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise errors.InternalError(f"Unknown coding kind {self.kind!r} for column {self.name!r}")
        if self.kind == "categorical":
            if not isinstance(self.values, tuple) or None in self.values or self.bins is not None:
                raise errors.InternalError(f"Categorical coding of {self.name!r} needs values without None")
        elif self.lower is None or self.upper is None:
            raise errors.InternalError(f"Numeric coding of {self.name!r} needs bounds")
        self._layout  # noqa: B018 - validate the numeric layout now, not at first use

    @property
    def cells(self) -> int:
        """Number of codes for non-NULL values."""
        if self.kind == "categorical":
            return len(self.values)
        return self._layout.bins

    @property
    def size(self) -> int:
        """Number of codes (the public domain size handed to PrivBayes)."""
        return self.cells + int(self.null_code)

    @property
    def null(self) -> int | None:
        """The NULL code, or None when NULL has no code."""
        return self.cells if self.null_code else None

    @property
    def bin_edges(self) -> tuple | None:
        """``bins + 1`` edges: bin ``k`` is ``[e[k], e[k+1])``, the last bin also holds ``e[-1]``.

        Integers for integer columns, floats for DOUBLE / FLOAT, ``Decimal`` for DECIMAL; None
        for categorical columns.
        """
        if self.kind == "categorical":
            return None
        return self._layout.edges

    def describe(self) -> str:
        """One line for EXPLAIN."""
        null = " + NULL" if self.null_code else ""
        if self.kind == "categorical":
            if self.sql_type.upper() == "BOOLEAN" and self.values == (False, True):
                return f"false, true{null}"
            n = len(self.values)
            return f"{n} declared value{'s' if n != 1 else ''}{null}"
        lay = self._layout
        if self.kind == "integer" and self.bins is None:
            n = lay.hi - lay.lo + 1
            return f"{n} integer{'s' if n != 1 else ''} {lay.lo}..{lay.hi}{null}"
        if lay.decimal_scale is not None and lay.bins == lay.grid_values:
            step = Decimal(1).scaleb(-lay.decimal_scale)
            return f"{lay.bins} values {_fmt(lay.edges[0])}..{_fmt(lay.edges[-1])} in steps of {step}{null}"
        if self.temporal is not None:
            lo, hi = _from_epoch(self, self.lower), _from_epoch(self, self.upper)
            if self.kind == "integer" and self.bins is None:
                return f"{lay.hi - lay.lo + 1} days {lo}..{hi}{null}"
            return f"{lay.bins} equi-width bins on [{lo}, {hi}]{null}"
        return f"{lay.bins} equi-width bins on [{_fmt(self.lower)}, {_fmt(self.upper)}]{null}"

    @cached_property
    def _layout(self) -> _Layout:
        return _layout(self)


@dataclass(frozen=True)
class _Layout:
    """The exact bins of a numeric coding (derived from public fields only)."""

    bins: int
    edges: tuple  # bins + 1 values of the column's type (see ColumnCoding.bin_edges)
    lo: int = 0  # integer kind: the integer bounds
    hi: int = 0
    decimal_scale: int | None = None
    grid_values: int = 0  # DECIMAL: values of the type within the bounds
    grid: tuple[int, ...] = ()  # DECIMAL: edges in units of 10^-scale (exact)
    float32: bool = False
    estimate_lower: float = 0.0  # real kind: the DOUBLE estimate floor((x - lower) / width)
    estimate_width: float = 1.0


def _refuse(name: str, why: str, hint: str) -> errors.PolicyError:
    message = f"Column {name!r} cannot be coded for a synthetic release: {why}"
    return errors.PolicyError(message, code="DP213", hint=hint)


_NARROW_HINT = "use fewer bins, or declare wider bounds, or leave the column out with the `columns` option"


def _layout(c: ColumnCoding) -> _Layout | None:
    if c.kind == "categorical":
        return None
    t = c.numeric_type.upper().strip()
    if c.kind == "integer":
        return _integer_layout(c, t)
    return _real_layout(c, t)


def _integer_layout(c: ColumnCoding, t: str) -> _Layout:
    if t not in _INTEGER_RANGE:
        raise errors.InternalError(f"Integer coding of {c.name!r} on a non-integer type {c.sql_type}")
    if c.lower != math.floor(c.lower) or c.upper != math.floor(c.upper):
        raise errors.InternalError(f"Integer coding of {c.name!r} needs integer bounds")
    lo, hi = int(c.lower), int(c.upper)
    tmin, tmax = _INTEGER_RANGE[t]
    if not (tmin <= lo <= hi <= tmax):
        raise errors.InternalError(f"Integer bounds [{lo}, {hi}] of {c.name!r} do not fit {t}")
    span = hi - lo
    if c.bins is None:
        b = span + 1
    else:
        b = c.bins
        if not (isinstance(b, int) and 2 <= b <= span):
            raise errors.InternalError(f"{b} bins cannot all hold an integer of [{lo}, {hi}] ({c.name!r})")
        if span * b >= _HUGEINT_LIMIT or hi > _INTEGER_RANGE["HUGEINT"][1]:
            raise _refuse(c.name, f"the bounds [{lo}, {hi}] are too wide to bin exactly", _NARROW_HINT)
    # Bin k holds the integers lo + i with floor(i * b / span) = k, i.e. i from ceil(k span / b).
    starts = [lo + (-(-k * span // b) if c.bins is not None else k) for k in range(b)]
    return _Layout(bins=b, edges=(*starts, hi), lo=lo, hi=hi)


def _real_layout(c: ColumnCoding, t: str) -> _Layout:
    lower, upper, b = float(c.lower), float(c.upper), c.bins
    if not (isinstance(b, int) and b >= 1):
        raise errors.InternalError(f"Real coding of {c.name!r} needs a number of bins")
    if not (math.isfinite(lower) and math.isfinite(upper) and lower < upper and math.isfinite(upper - lower)):
        raise _refuse(c.name, f"the bounds [{lower:g}, {upper:g}] are not finite with lower < upper",
                      "declare finite bounds with lower < upper")  # fmt: skip
    m = _DECIMAL_RE.match(t)
    if m:
        precision, scale = (int(m.group(1)), int(m.group(2))) if m.group(1) else (18, 3)
        unit = 10**scale
        top = 10**precision - 1  # the largest DECIMAL(p, s) value, in units of 10^-s
        g_lo = max(math.ceil(Fraction(lower) * unit), -top)
        g_hi = min(math.floor(Fraction(upper) * unit), top)
        if g_lo >= g_hi:
            raise _refuse(c.name, f"{c.sql_type} holds fewer than two values within [{lower:g}, {upper:g}]",
                          "declare wider bounds, or leave the column out with the `columns` option")  # fmt: skip
        span = g_hi - g_lo
        b = min(b, span + 1)  # never more bins than values: each bin holds at least one
        # Bin k holds the grid values g_lo + i with floor(i * b / span) = k (exact integers).
        grid = tuple(g_lo + -(-k * span // b) for k in range(b)) + (g_hi,)
        est_lower, est_width = g_lo / unit, span / unit / b
        _check_precision(c.name, est_lower, g_hi / unit, est_width)
        edges = tuple(Decimal(g).scaleb(-scale) for g in grid)
        return _Layout(bins=b, edges=edges, decimal_scale=scale, grid_values=span + 1, grid=grid,
                       estimate_lower=est_lower, estimate_width=est_width)  # fmt: skip
    if t in ("FLOAT", "REAL", "FLOAT4"):
        lo32, hi32 = _float32_inward(lower, upper)
        if not lo32 < hi32:
            raise _refuse(c.name, f"FLOAT holds no interval within [{lower:g}, {upper:g}]", _NARROW_HINT)
        width = (hi32 - lo32) / b
        edges = [lo32] + [float(np.float32(lo32 + (hi32 - lo32) * k / b)) for k in range(1, b)] + [hi32]
        ulp = float(np.spacing(np.float32(max(abs(lo32), abs(hi32)))))
        if width < 4 * ulp or any(x >= y for x, y in zip(edges, edges[1:])):
            raise _refuse(c.name, f"{b} bins on [{lower:g}, {upper:g}] are finer than FLOAT's precision", _NARROW_HINT)
        _check_precision(c.name, lo32, hi32, width)
        return _Layout(bins=b, edges=tuple(edges), float32=True, estimate_lower=lo32, estimate_width=width)
    if t in ("DOUBLE", "FLOAT8"):
        width = (upper - lower) / b
        edges = [lower] + [lower + (upper - lower) * k / b for k in range(1, b)] + [upper]
        _check_precision(c.name, lower, upper, width)
        if any(x >= y for x, y in zip(edges, edges[1:])):
            raise _refuse(c.name, f"{b} bins on [{lower:g}, {upper:g}] are finer than DOUBLE's precision", _NARROW_HINT)
        return _Layout(bins=b, edges=tuple(edges), estimate_lower=lower, estimate_width=width)
    raise errors.InternalError(f"Real coding of {c.name!r} on an unsupported type {c.sql_type}")


def _check_precision(name: str, lower: float, upper: float, width: float) -> None:
    magnitude = max(abs(lower), abs(upper))
    if not width >= _DOUBLE_PRECISION * magnitude:
        why = f"bins of width {width:g} are too narrow for bounds as large as {magnitude:g}"
        raise _refuse(name, why, _NARROW_HINT)


def _float32_inward(lower: float, upper: float) -> tuple[float, float]:
    lo = np.float32(min(max(lower, -_FLOAT32_MAX), _FLOAT32_MAX))
    if float(lo) < lower:
        lo = np.nextafter(lo, np.float32(np.inf))
    hi = np.float32(min(max(upper, -_FLOAT32_MAX), _FLOAT32_MAX))
    if float(hi) > upper:
        hi = np.nextafter(hi, np.float32(-np.inf))
    return float(lo), float(hi)


def coding_for(column: catalog.Column, *, bins: int) -> ColumnCoding:
    """The coding of one column, from its declarations and schema only.

    Args:
        column: the catalog's column (type, declared domain / bounds, NOT NULL).
        bins: bins per numeric column (2 to 1024); integer columns spanning at most ``bins``
            integers get one code per integer instead.

    Raises:
        errors.ProgrammingError: ``bins`` is not an integer in [2, 1024] (DP205).
        errors.PolicyError: the column has no public code space (DP213).

    >>> coding_for(catalog.Column("sex", "VARCHAR", domain=("F", "M")), bins=16).describe()
    '2 declared values'
    """
    if isinstance(bins, bool) or not isinstance(bins, numbers.Integral) or not MIN_BINS <= bins <= MAX_BINS:
        raise errors.ProgrammingError(
            f"Invalid value {bins!r} for bins", code="DP205",
            hint=f"bins takes an integer from {MIN_BINS} to {MAX_BINS}",
        )  # fmt: skip
    bins = int(bins)
    name, t = column.name, column.type.upper().strip()
    nullable = not column.not_null
    if column.domain is not None:
        values = _distinct(v for v in column.domain if v is not None)
        return ColumnCoding(name, column.type, "categorical", values=values, null_code=None in column.domain)
    if t == "BOOLEAN":
        return ColumnCoding(name, column.type, "categorical", values=(False, True), null_code=nullable)
    leave_out = "or leave the column out with the `columns` option"
    if (column.is_date or column.is_timestamp) and column.bounded:
        if column.is_date:
            lo, hi = math.ceil(column.lower), math.floor(column.upper)
            days = {} if hi - lo + 1 <= bins else {"bins": bins}
            return ColumnCoding(name, column.type, "integer", lower=lo, upper=hi, null_code=nullable,
                                temporal="date", **days)  # fmt: skip
        return ColumnCoding(name, column.type, "real", lower=float(column.lower), upper=float(column.upper),
                            bins=bins, null_code=nullable, temporal="timestamp")  # fmt: skip
    if not catalog.is_numeric_type(t):
        why = "bounds apply only to numeric columns" if column.bounded else "it has no declared domain"
        raise _refuse(name, f"{why} ({column.type})", f"declare a domain of its values, {leave_out}")
    if not column.bounded:
        raise _refuse(name, f"it is {column.type} with no declared bounds and no declared domain",
                      f"declare bounds (numeric bins) or a domain (one code per value), {leave_out}")  # fmt: skip
    if column.is_integer:
        tmin, tmax = _INTEGER_RANGE[t]
        lo = max(math.ceil(column.lower), tmin) if math.isfinite(column.lower) else tmin
        hi = min(math.floor(column.upper), tmax) if math.isfinite(column.upper) else tmax
        if lo > hi:
            raise _refuse(name, f"no {column.type} value lies within the bounds [{column.lower:g}, {column.upper:g}]",
                          f"declare bounds that contain an integer, {leave_out}")  # fmt: skip
        if hi - lo + 1 <= bins:
            return ColumnCoding(name, column.type, "integer", lower=lo, upper=hi, null_code=nullable)
        return ColumnCoding(name, column.type, "integer", lower=lo, upper=hi, bins=bins, null_code=nullable)
    coding = ColumnCoding(name, column.type, "real", lower=float(column.lower), upper=float(column.upper),
                          bins=bins, null_code=nullable)  # fmt: skip
    # a DECIMAL with fewer values than bins in its bounds gets one code per value
    return coding if coding.cells == bins else dataclasses.replace(coding, bins=coding.cells)


def _distinct(values) -> tuple:
    """Declared values in order, without repeats (1 and True are different values here)."""
    seen, out = set(), []
    for v in values:
        key = (type(v), v)
        if key not in seen:
            seen.add(key)
            out.append(v)
    return tuple(out)


# --------------------------------------------------------------------------------------------
# encoding (one DuckDB pass)
# --------------------------------------------------------------------------------------------
_q = quote_ident


def _str(text: str) -> str:
    return exp.Literal.string(text).sql(dialect="duckdb")


def _text(value: Any) -> str:
    """A declared value as text, the way the owner's declaration check casts it."""
    return json.dumps(value) if isinstance(value, bool) else str(value)


def _typed(text: str, sql_type: str) -> str:
    return f"CAST({_str(text)} AS {sql_type})"


def _typed_list(texts: list[str], sql_type: str) -> str:
    return f"CAST(CAST([{', '.join(_str(x) for x in texts)}] AS VARCHAR[]) AS {sql_type}[])"


def _double(x: float) -> str:
    return _typed(repr(float(x)), "DOUBLE")


def _values_list(c: ColumnCoding) -> str:
    return values_list(c.values, c.sql_type)


def values_list(values: Sequence[Any], sql_type: str) -> str:
    """A declared domain as a list of the column's own type: each value's text (``_text``) cast with
    TRY_CAST, so a value that does not convert is NULL (it matches no row). Compared with a column,
    this never casts the column: an implicit cast of a stored value could fail on one subject's row,
    after the debit (e.g. a VARCHAR item column with a numeric domain)."""
    return f"TRY_CAST(CAST([{', '.join(_str(_text(v)) for v in values)}] AS VARCHAR[]) AS {sql_type}[])"


def domain_lookup(values: Sequence[Any], sql_type: str) -> str:
    """A relation (v, i) of the declared values as the column's type (``values_list``), numbered from 0,
    to join a column with (``ON column = v``): both sides have the column's type."""
    return f"SELECT unnest({values_list(values, sql_type)}) AS v, unnest(range({len(values)})) AS i"


def edge_texts(c: ColumnCoding) -> list[str]:
    """A numeric coding's bin edges as text that reads back as exactly the same values of its type
    (a DECIMAL's digits, a float's ``repr``), for the encoding SQL of either engine."""
    lay = c._layout
    if lay.decimal_scale is not None:
        return [format(e, "f") for e in lay.edges]
    return [repr(float(e)) for e in lay.edges]


def _edges_list(c: ColumnCoding) -> str:
    return _typed_list(edge_texts(c), c.numeric_type)


def _column_sql(i: int, c: ColumnCoding, x: str) -> tuple[list[str], str]:
    """The inner (per-row) and outer expressions that give coding ``i``'s code as ``__c{i}``."""
    nc = str(c.null) if c.null_code else "NULL"
    if c.kind == "categorical":
        pos = f"list_position({_values_list(c)}, {x}) - 1"
        code = f"CASE WHEN {x} IS NULL THEN {nc} ELSE coalesce({pos}, {nc}) END"
        return [f"TRY(CAST({code} AS INTEGER)) AS __c{i}"], f"__c{i}"
    lay = c._layout
    top = lay.bins - 1
    if c.temporal == "date":
        x = f"date_diff('day', DATE '1970-01-01', {x})"
    elif c.temporal == "timestamp":
        x = f"epoch({x})"
    if c.kind == "integer":
        lo_t, hi_t = _typed(str(lay.lo), c.numeric_type), _typed(str(lay.hi), c.numeric_type)
        offset = f"(CAST({x} AS HUGEINT) - {_typed(str(lay.lo), 'HUGEINT')})"
        inside = offset if c.bins is None else f"({offset} * {lay.bins}) // {_typed(str(lay.hi - lay.lo), 'HUGEINT')}"
        code = (
            f"CASE WHEN {x} IS NULL THEN {nc} WHEN {x} <= {lo_t} THEN 0 WHEN {x} >= {hi_t} THEN {top} "
            f"ELSE {inside} END"
        )
        return [f"TRY(CAST({code} AS INTEGER)) AS __c{i}"], f"__c{i}"
    # real: a DOUBLE estimate, then one step of correction against the exact typed edges
    xd = f"CAST({x} AS DOUBLE)"
    estimate = (
        f"CASE WHEN {x} IS NULL OR isnan({xd}) THEN NULL ELSE CAST(greatest(0, least({top}, "
        f"floor(({xd} - {_double(lay.estimate_lower)}) / {_double(lay.estimate_width)}))) AS INTEGER) END"
    )
    e, v, edges = f"__e{i}", f"__x{i}", _edges_list(c)
    code = (
        f"CASE WHEN {e} IS NULL THEN {nc} WHEN {e} > 0 AND {v} < {edges}[{e} + 1] THEN {e} - 1 "
        f"WHEN {e} < {top} AND {v} >= {edges}[{e} + 2] THEN {e} + 1 ELSE {e} END"
    )
    return [f"{x} AS {v}", f"TRY({estimate}) AS {e}"], f"TRY(CAST({code} AS INTEGER))"


def encode_query(source_sql: str, codings: list[ColumnCoding]) -> str:
    """A SELECT over ``(source_sql)`` with one INTEGER code column per coding (``__c0``, ...).

    ``source_sql`` must yield the coded columns by name; it may use parameters, which pass
    through unchanged (the codes add none). A code is SQL NULL only for a value that has no
    code (outside a domain, or NULL, where NULL has no code); ``fetch_codes`` drops those rows.
    No expression can raise a runtime error, whatever a row holds.

    >>> c = ColumnCoding("flag", "BOOLEAN", "categorical", values=(False, True))
    >>> duckdb.sql(encode_query("SELECT true AS flag", [c])).fetchall()
    [(1,)]
    """
    if not codings:
        raise errors.InternalError("encode_query needs at least one coding")
    inner, outer = [], []
    for i, c in enumerate(codings):
        ins, out = _column_sql(i, c, f"__src.{_q(c.name)}")
        inner += ins
        outer.append(f"{out} AS __c{i}")
    return (
        f"SELECT {', '.join(outer)} FROM (SELECT {', '.join(inner)} FROM ({source_sql}) AS __src) AS __enc"
    )


def fetch_codes(con: duckdb.DuckDBPyConnection, sql: str, params: Any = None) -> np.ndarray:
    """Run an ``encode_query`` query: ``(rows, d)`` int64 codes, rows with a SQL NULL code dropped.

    Raises:
        errors.ProgrammingError: DuckDB cannot bind the query (DP230; nothing about rows).
        errors.InternalError: the query failed while running (its message is not passed on:
            it could quote a row).
    """
    try:
        res = con.execute(sql, params if params is not None else []).fetchnumpy()
    except (duckdb.ParserException, duckdb.BinderException, duckdb.CatalogException) as e:
        raise errors.ProgrammingError(
            f"DuckDB cannot bind the encoding query: {str(e).strip().splitlines()[0]}", code="DP230"
        ) from e
    except duckdb.Error as e:
        raise errors.InternalError("The encoding query failed while reading rows") from e
    cols = list(res.values())
    n = len(cols[0]) if cols else 0
    out = np.empty((n, len(cols)), dtype=np.int64)
    keep = np.ones(n, dtype=bool)
    for j, col in enumerate(cols):
        if isinstance(col, np.ma.MaskedArray):
            keep &= ~np.ma.getmaskarray(col)
            out[:, j] = col.filled(0)
        else:
            out[:, j] = col
    return out[keep]


# --------------------------------------------------------------------------------------------
# decoding and the release table
# --------------------------------------------------------------------------------------------
def decode(coding: ColumnCoding, codes: np.ndarray, *, rng: np.random.Generator) -> list:
    """Values for codes (post-processing): NULL code → None; a bin → a uniform value inside it.

    Categorical codes give the declared value; integer bins a uniform integer of the bin;
    DOUBLE / FLOAT bins a uniform value of ``[e[k], e[k+1])`` rounded to the type and kept
    inside; DECIMAL bins a uniform value of the type (the last bin includes ``upper``). Every
    value encodes back to its code.

    >>> c = ColumnCoding("n", "INTEGER", "integer", lower=1, upper=3, null_code=True)
    >>> decode(c, np.array([0, 2, 3]), rng=np.random.default_rng(0))
    [1, 3, None]
    """
    codes = _check_codes(coding, codes)
    null = codes == coding.null if coding.null_code else np.zeros(codes.shape, dtype=bool)
    k = np.where(null, 0, codes)
    if coding.kind == "categorical":
        values = coding.values
        return [None if z else values[i] for i, z in zip(k.tolist(), null.tolist())]
    lay = coding._layout
    if coding.kind == "integer":
        out = _uniform_in_bins(rng, lay.edges, k)
    elif lay.decimal_scale is not None:
        out = [Decimal(g).scaleb(-lay.decimal_scale) for g in _uniform_in_bins(rng, lay.grid, k)]
    else:
        out = _uniform_reals(rng, lay, k).tolist()
    if coding.temporal is not None:
        out = [_from_epoch(coding, v) for v in out]
    return [None if z else v for v, z in zip(out, null.tolist())]


def _from_epoch(coding: ColumnCoding, v: float) -> Any:
    """Days (DATE) or seconds (TIMESTAMP, floored to the microsecond) since 1970-01-01 as a value."""
    if coding.temporal == "date":
        return datetime.date(1970, 1, 1) + datetime.timedelta(days=int(v))
    micros = math.floor(float(v) * 1_000_000)
    return datetime.datetime(1970, 1, 1) + datetime.timedelta(microseconds=micros)


def _check_codes(coding: ColumnCoding, codes: Any) -> np.ndarray:
    arr = np.asarray(codes)
    if arr.ndim != 1 or (arr.size and not np.issubdtype(arr.dtype, np.integer)):
        raise errors.InternalError(f"Codes of {coding.name!r} must be a 1-d integer array")
    arr = arr.astype(np.int64)
    if arr.size and (arr.min() < 0 or arr.max() >= coding.size):
        raise errors.InternalError(f"A code of {coding.name!r} is outside 0..{coding.size - 1}")
    return arr


def _uniform_in_bins(rng: np.random.Generator, edges: tuple[int, ...], k: np.ndarray) -> list[int]:
    """A uniform integer of bin ``k``: ``[edges[k], edges[k+1])``, the last bin also ``edges[-1]``."""
    ends = list(edges[1:])
    ends[-1] += 1
    starts = list(edges[:-1])
    if -_INT64_SAFE < starts[0] and ends[-1] < _INT64_SAFE:
        s, e = np.array(starts, dtype=np.int64), np.array(ends, dtype=np.int64)
        return rng.integers(s[k], e[k]).tolist() if k.size else []
    # bounds beyond int64 (HUGEINT, DECIMAL(38, s)): exact Python integers, one draw per row
    return [starts[i] + _randbelow(rng, ends[i] - starts[i]) for i in k.tolist()]


def _randbelow(rng: np.random.Generator, n: int) -> int:
    bits = n.bit_length()
    while True:
        words = rng.integers(0, 2**32, size=(bits + 31) // 32, dtype=np.uint64).tolist()
        r = 0
        for w in words:
            r = (r << 32) | w
        r >>= 32 * len(words) - bits
        if r < n:
            return r


def _uniform_reals(rng: np.random.Generator, lay: _Layout, k: np.ndarray) -> np.ndarray:
    edges = np.array(lay.edges, dtype=np.float64)
    lo, hi = edges[k], edges[k + 1]
    v = lo + rng.random(k.size) * (hi - lo)
    if lay.float32:
        v32 = np.maximum(v.astype(np.float32), lo.astype(np.float32))
        v = np.minimum(v32, np.nextafter(hi.astype(np.float32), np.float32(-np.inf))).astype(np.float64)
    else:
        v = np.minimum(np.maximum(v, lo), np.nextafter(hi, -np.inf))
    return v


def _release_column(coding: ColumnCoding, codes: np.ndarray, rng: np.random.Generator, v: str) -> tuple[list, str]:
    """A parameter list, and the SQL that turns its element ``v`` into a value of the column's type."""
    t = coding.sql_type
    if coding.kind == "categorical":  # the code itself, looked up in the same typed list as the encoder's
        null = coding.null
        return [None if c == null else c + 1 for c in codes.tolist()], f"CAST({_values_list(coding)}[{v}] AS {t})"
    values = decode(coding, codes, rng=rng)
    lay = coding._layout
    if coding.temporal is not None:  # dates and timestamps travel as ISO text
        return [None if x is None else x.isoformat(sep=" ") if coding.temporal == "timestamp" else x.isoformat()
                for x in values], f"CAST(CAST({v} AS VARCHAR) AS {t})"  # fmt: skip
    if lay.decimal_scale is not None or (coding.kind == "integer" and not _fits_int64(lay)):
        texts = [None if x is None else format(x, "f") if isinstance(x, Decimal) else str(x) for x in values]
        return texts, f"CAST(CAST({v} AS VARCHAR) AS {t})"
    return values, f"CAST({v} AS {t})"


def _numeric_release(coding: ColumnCoding) -> bool:
    """Whether the column's released values travel as numbers (not text): categorical codes,
    and integers or floats without a decimal scale (the fast path of ``write_table``)."""
    if coding.kind == "categorical":
        return True
    lay = coding._layout
    return coding.temporal is None and lay.decimal_scale is None and (coding.kind != "integer" or _fits_int64(lay))


def _write_from_arrays(con: duckdb.DuckDBPyConnection, name: str, codings: list[ColumnCoding], arr: np.ndarray, *,
                       rng: np.random.Generator) -> int:  # fmt: skip
    """``write_table`` for numeric releases: the columns go to DuckDB as numpy arrays (a
    registered scan, no Python objects per value), NULLs as a mask column."""
    data: dict[str, np.ndarray] = {}
    selects = []
    for j, c in enumerate(codings):
        codes = _check_codes(c, arr[:, j])
        v, m = f"__v{j}", f"__m{j}"
        if c.kind == "categorical":  # 1-based index into the typed value list; 0 is NULL
            null = c.null
            idx = codes.astype(np.int64) + 1
            if null is not None:
                idx[codes == null] = 0
            data[v] = idx
            selects.append(f"CAST({_values_list(c)}[NULLIF({v}, 0)] AS {c.sql_type}) AS {_q(c.name)}")
            continue
        values = decode(c, codes, rng=rng)
        mask = np.fromiter((x is None for x in values), dtype=bool, count=len(values))
        dtype = np.int64 if c.kind == "integer" else np.float64
        data[v] = np.fromiter((0 if x is None else x for x in values), dtype=dtype, count=len(values))
        data[m] = mask
        selects.append(f"CASE WHEN {m} THEN NULL ELSE CAST({v} AS {c.sql_type}) END AS {_q(c.name)}")
    view = f"__dp_release_{secrets.token_hex(8)}"
    database.register(con, view, data)
    try:
        _create(con, name, f"CREATE TABLE main.{_q(name)} AS SELECT {', '.join(selects)} FROM {view}")
    finally:
        con.unregister(view)
    return int(arr.shape[0])


def _create(con: duckdb.DuckDBPyConnection, name: str, sql: str, params: Any = None) -> None:
    """Run the CREATE TABLE of a release, with dpgate's errors."""
    try:
        con.execute(sql, params)
    except duckdb.CatalogException as e:
        if relation_exists(con, name):
            raise errors.ProgrammingError(f"A table or view named {name!r} already exists", code="DP226") from e
        raise errors.InternalError(f"Creating the synthetic table {name!r} failed: {e}") from e
    except duckdb.Error as e:  # only synthetic (public) values are involved here
        raise errors.InternalError(f"Creating the synthetic table {name!r} failed: {e}") from e


def _fits_int64(lay: _Layout) -> bool:
    return -_INT64_SAFE < lay.lo and lay.hi < _INT64_SAFE


def relation_exists(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    """A table or view of this name (any case) exists in the main schema of the current database."""
    row = con.execute(
        "SELECT count(*) FROM (SELECT table_name AS n FROM duckdb_tables() WHERE database_name = current_database() "
        "AND schema_name = 'main' UNION ALL SELECT view_name FROM duckdb_views() "
        "WHERE database_name = current_database() AND schema_name = 'main') WHERE lower(n) = lower(?)",
        [name],
    ).fetchone()
    return bool(row[0])


def write_table(
    con: duckdb.DuckDBPyConnection, name: str, codings: list[ColumnCoding], codes: np.ndarray, *,
    rng: np.random.Generator,
) -> int:  # fmt: skip
    """Decode sampled codes and create ``main."name"`` from them, in one statement.

    Columns keep the source names and types. Returns the number of rows.

    Raises:
        errors.ProgrammingError: a table or view called ``name`` exists (DP226).
    """
    arr = np.asarray(codes)
    if not codings or arr.ndim != 2 or arr.shape[1] != len(codings):
        raise errors.InternalError(f"write_table got codes of shape {arr.shape} for {len(codings)} columns")
    if relation_exists(con, name):
        raise errors.ProgrammingError(
            f"A table or view named {name!r} already exists", code="DP226",
            hint="choose another name for the synthetic table, or drop the existing one first",
        )  # fmt: skip
    if all(_numeric_release(c) for c in codings):
        return _write_from_arrays(con, name, codings, arr, rng=rng)
    params, selects, unnests = [], [], []
    for j, c in enumerate(codings):
        values, value_sql = _release_column(c, _check_codes(c, arr[:, j]), rng, f"__v{j}")
        params.append(values)
        unnests.append(f"unnest(${j + 1}) AS __v{j}")
        selects.append(f"{value_sql} AS {_q(c.name)}")
    _create(con, name, f"CREATE TABLE main.{_q(name)} AS SELECT {', '.join(selects)} FROM (SELECT {', '.join(unnests)})",
            params)  # fmt: skip
    return int(arr.shape[0])


# --------------------------------------------------------------------------------------------
# the owner's quality report (reads raw rows: not DP, never for analysts)
# --------------------------------------------------------------------------------------------
def quality(
    con: duckdb.DuckDBPyConnection, source_sql: str, table: str, codings: list[ColumnCoding], *, params: Any = None
) -> dict[str, Any]:
    """Average total variation distance between the source's and the release's marginals.

    Both sides are coded with the same codings (rows that have no code are left out of both),
    then every 1-, 2- and 3-way marginal is compared. **Reads the protected rows: for the data
    owner only.**

    Returns:
        ``{"columns", "rows_source", "rows_release", "tvd_1way", "tvd_2way", "tvd_3way"}``;
        a TVD is None when there are too few columns or either side has no rows.
    """
    return quality_of(con, fetch_codes(con, encode_query(source_sql, codings), params), None, table, codings)


def quality_of(con: duckdb.DuckDBPyConnection, real: np.ndarray, weights: np.ndarray | None, table: str,
               codings: list[ColumnCoding]) -> dict[str, Any]:  # fmt: skip
    """``quality`` from the source's codes already read (each row ``weights`` times, when given:
    the distinct coded rows of a Spark source and their counts)."""
    synth = fetch_codes(con, encode_query(f"SELECT * FROM main.{_q(table)}", codings))
    sizes = [c.size for c in codings]
    d = len(codings)
    rows_source = int(real.shape[0]) if weights is None else int(np.sum(weights))

    def tvd(way: int) -> float | None:
        if d < way or not rows_source or not len(synth):
            return None
        return privbayes.tvd_between(
            privbayes.marginal_tables(real, sizes, way, weights), privbayes.marginal_tables(synth, sizes, way)
        )

    return {
        "columns": d,
        "rows_source": rows_source,
        "rows_release": int(synth.shape[0]),
        "tvd_1way": tvd(1),
        "tvd_2way": tvd(2),
        "tvd_3way": tvd(3),
    }


def code_of(coding: ColumnCoding, value: Any) -> int | None:
    """The code of one Python value, computed in Python from the same edges (a reference for tests).

    >>> code_of(ColumnCoding("age", "INTEGER", "integer", lower=17, upper=90, bins=16), 90)
    15
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return coding.null
    if coding.kind == "categorical":
        for i, v in enumerate(coding.values):
            if type(v) is type(value) and v == value:
                return i
        return coding.null
    edges = coding._layout.edges
    x = Decimal(value) if coding._layout.decimal_scale is not None and not isinstance(value, Decimal) else value
    return min(max(bisect.bisect_right(edges[1:-1], x), 0), coding._layout.bins - 1)


def _fmt(x: Any) -> str:
    if isinstance(x, Decimal):
        return format(x, "f")
    if isinstance(x, float) and x.is_integer() and abs(x) < 1e15:
        return str(int(x))
    return f"{x:.15g}" if isinstance(x, float) else str(x)


__all__ = ["ColumnCoding", "code_of", "coding_for", "decode", "encode_query", "fetch_codes", "quality", "quality_of",
           "write_table"]
