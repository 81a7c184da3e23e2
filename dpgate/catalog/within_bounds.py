"""Whether every value of a numeric column lies within an aggregate's bounds, in this snapshot.

Every SUM, AVG, variance and quantile input is clamped to its bounds before it is summed
(``backends.bounded.scaled_input``): the clamp is what bounds one subject's influence. On a large
table the clamp is a third of the exact pass's time, and when every stored value already lies
within the bounds it changes nothing. ``within`` asks DuckDB, inside the query's own transaction
(one snapshot), whether any value of the column is below ``lower`` or above ``upper``:

    SELECT EXISTS (SELECT 1 FROM t WHERE c < L) OR EXISTS (SELECT 1 FROM t WHERE c > U)

with ``L`` and ``U`` literals of the column's own type. DuckDB compares a filter against each row
group's minimum and maximum before reading it, so on unchanged, in-bounds data the answer costs
about a millisecond whatever the table's size; when it cannot rule a row group out it reads it,
and when a value is out of bounds it stops at the first.

Only for a stored column of a base table, whose type is read in the same snapshot (``stored_types``).

Soundness [elide]. The answer is DuckDB's exact answer to a query over the same snapshot as the
aggregate (the caller runs both in one transaction), not an estimate: if it says no value is out
of bounds, then for every row the clamp's two comparisons are false and it returns its ELSE branch,
the value itself, so the unclamped SQL computes the same integers bit for bit, and the sensitivity
argument of the clamped statistic holds unchanged. If any value is out of bounds — on D or on a
neighbour D' — the clamp is kept, and the statistic is the clamped one; either way the released
statistic equals the clamped statistic of the data, so the neighbour relation and the declared
sensitivity are those of the clamp. What the check reads (whether an out-of-bounds value exists)
only chooses between two computations of the same number; it is never released, charged, or
allowed to fail: the literals are of the column's own type (built here, checked to fit), so no
comparison casts a stored value, and a comparison of a column with a constant of its type cannot
raise.

The literals, for a stored value ``v`` and bounds ``lo <= hi`` (floats):
- integer column: ``v < lo`` iff ``v < ceil(lo)``; ``v > hi`` iff ``v > floor(hi)``;
- DECIMAL(p, s): ``v < lo`` iff ``v < ceil_s(lo)`` (``lo`` rounded up to s decimals), likewise
  ``floor_s`` above; each is the exact decimal of the float bound;
- DOUBLE: the bounds themselves (``NaN > U`` holds in DuckDB, so a NaN is out of bounds, as the
  clamp treats it);
- FLOAT / REAL: the nearest FLOAT on the safe side (the smallest FLOAT >= lo, the largest <= hi);
  infinities and NaN compare as for DOUBLE.
When a literal does not fit the type, that side is decided without reading any row (no stored
value can be below the type's minimum) or by whether any non-NULL value exists.
A stored value within [lo, hi] also passes the clamp's comparisons, which are made in DOUBLE:
rounding a value to the nearest double is monotone and the bounds are doubles.
"""

from __future__ import annotations

import math
import re
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal, localcontext

import numpy as np

from dpgate.catalog import sample_order
from dpgate.catalog.tables import quote_ident

#: Ranges of the integer types whose comparison with a literal of their own type is total.
_INTEGER_RANGES = {
    "TINYINT": (-(2**7), 2**7 - 1),
    "SMALLINT": (-(2**15), 2**15 - 1),
    "INTEGER": (-(2**31), 2**31 - 1),
    "BIGINT": (-(2**63), 2**63 - 1),
    "UTINYINT": (0, 2**8 - 1),
    "USMALLINT": (0, 2**16 - 1),
    "UINTEGER": (0, 2**32 - 1),
    "UBIGINT": (0, 2**64 - 1),
}
_DECIMAL = re.compile(r"DECIMAL\((\d+),\s*(\d+)\)")

#: Tables with fewer rows than this keep the clamp: a check costs a round trip (about a
#: millisecond), the clamp over so few rows costs less.
MIN_ROWS = 100_000

#: A side of the check: SQL for "some stored value is beyond this bound", or None (no value can be).
_Side = str | None


def supported(sql_type: str) -> bool:
    """Column types ``within`` can check: integers of at most 64 bits, FLOAT/REAL/DOUBLE, DECIMAL."""
    t = sql_type.upper()
    return t in _INTEGER_RANGES or t in ("FLOAT", "REAL", "DOUBLE") or _DECIMAL.fullmatch(t) is not None


_quote = quote_ident


def _sides(column: str, sql_type: str, lower: float, upper: float) -> tuple[_Side, _Side]:
    """(below lower, above upper) conditions on ``column`` for a stored value of ``sql_type``."""
    t = sql_type.upper()
    c = _quote(column)
    any_value = f"{c} IS NOT NULL"
    if t in _INTEGER_RANGES:
        tmin, tmax = _INTEGER_RANGES[t]
        lo, hi = math.ceil(lower), math.floor(upper)
        below = None if lo <= tmin else (any_value if lo > tmax else f"{c} < CAST({lo} AS {t})")
        above = None if hi >= tmax else (any_value if hi < tmin else f"{c} > CAST({hi} AS {t})")
        return below, above
    m = _DECIMAL.fullmatch(t)
    if m:
        p, s = int(m.group(1)), int(m.group(2))
        step = Decimal(1).scaleb(-s)
        limit = Decimal(10) ** (p - s) - step  # the largest DECIMAL(p, s)
        lower_d, upper_d = Decimal(lower), Decimal(upper)  # exact; compared exactly with the type's range
        if lower_d <= -limit:
            below = None
        elif lower_d > limit:
            below = any_value
        else:
            with localcontext() as ctx:
                ctx.prec = 2 * p + 10  # |lower| <= limit: the rounded value has at most p + 1 digits
                below = f"{c} < CAST('{lower_d.quantize(step, rounding=ROUND_CEILING):f}' AS {t})"
        if upper_d >= limit:
            above = None
        elif upper_d < -limit:
            above = any_value
        else:
            with localcontext() as ctx:
                ctx.prec = 2 * p + 10
                above = f"{c} > CAST('{upper_d.quantize(step, rounding=ROUND_FLOOR):f}' AS {t})"
        return below, above
    if t == "DOUBLE":
        return f"{c} < CAST('{float(lower)!r}' AS DOUBLE)", f"{c} > CAST('{float(upper)!r}' AS DOUBLE)"
    if t in ("FLOAT", "REAL"):
        with np.errstate(over="ignore"):
            lo32, hi32 = np.float32(lower), np.float32(upper)
        if float(lo32) < lower:
            lo32 = np.nextafter(lo32, np.float32(np.inf))
        if float(hi32) > upper:
            hi32 = np.nextafter(hi32, np.float32(-np.inf))
        return f"{c} < CAST('{float(lo32)!r}' AS FLOAT)", f"{c} > CAST('{float(hi32)!r}' AS FLOAT)"
    raise ValueError(f"no bounds check for type {sql_type}")


def check_sql(table_sql: str, column: str, sql_type: str, lower: float, upper: float) -> str:
    """A boolean SQL expression: true when some value of the column is outside [lower, upper]."""
    conds = [s for s in _sides(column, sql_type, lower, upper) if s is not None]
    if not conds:
        return "false"
    return " OR ".join(f"EXISTS (SELECT 1 FROM {table_sql} WHERE {s})" for s in conds)


def generated(definition: str) -> bool:
    """Whether a table's definition (its CREATE text) may hold a generated column, which DuckDB
    computes at each read (conservative: the word anywhere counts)."""
    return "GENERATED" in definition.upper()


def stored_types(con, table: str, definition: str | None = None) -> dict[str, str]:
    """The stored columns' types of base table ``main.table`` as ``con`` sees it now (lower-case
    names), or {} when it is not a base table or has a generated column. A view's column or a
    generated column is computed anew at each read (``random()`` is allowed in both), so what a
    check read is not what the aggregate reads; and a column's type is read in the snapshot of the
    check because the owner may have changed it since the plan was made."""
    if definition is None:  # "" unless a base table of main (the caller may have read it in this snapshot)
        definition = sample_order.definition(con, table)
    if not definition or generated(definition):
        return {}
    rows = con.execute("SELECT lower(name), type FROM pragma_table_info(?)", [f"main.{_quote(table)}"]).fetchall()
    return {name: str(dtype).upper() for name, dtype in rows}


def within(con, table_sql: str, checks: list[tuple[str, str, float, float]]) -> list[bool]:
    """For each (column, type, lower, upper): every value of the column lies within the bounds,
    as ``con`` sees the table now (one round trip for all of them)."""
    if not checks:
        return []
    sql = "SELECT " + ", ".join(f"({check_sql(table_sql, *c)}) AS o{i}" for i, c in enumerate(checks))
    row = con.execute(sql).fetchone()
    return [v is False for v in row]
