"""The analyst's row-level expressions for Spark: each rewritten to what DuckDB computes (try_*
operators, casts, division, LIKE), and refused, before the debit, where the engines would differ."""

from __future__ import annotations

import datetime
import re

from sqlglot import exp

from dpgate import errors
from dpgate.catalog.tables import INTEGER_TYPES
from dpgate.frontend import cost

#: Row-level expressions that reach Spark (after the try_* rewrite), and why each is safe:
#: comparisons, boolean logic, CASE / IF / COALESCE, IS NULL, IN and BETWEEN never fail with ANSI
#: mode off; LIKE is safe with a literal pattern (checked below); ABS / LOWER / UPPER / LENGTH
#: and || never fail; the arithmetic and casts are rewritten to their try_* forms.
_SAFE = (
    exp.Column, exp.Identifier, exp.Literal, exp.Boolean, exp.Null, exp.Paren, exp.Alias,
    exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ, exp.NullSafeNEQ,
    exp.And, exp.Or, exp.Not, exp.Is, exp.In, exp.Between,
    exp.Case, exp.If, exp.Coalesce, exp.Like, exp.ILike,
    exp.Abs, exp.Lower, exp.Upper, exp.Length, exp.DPipe, exp.DataType, exp.DataTypeParam, exp.TryCast, exp.Tuple,
    exp.Escape, exp.DateDiff,
)  # fmt: skip
_NAMES = {exp.Mod: "%", exp.IntDiv: "//", exp.Pow: "POWER", exp.BitwiseAnd: "&", exp.BitwiseOr: "|"}
_TRY_OPS = {exp.Add: "try_add", exp.Sub: "try_subtract", exp.Mul: "try_multiply", exp.Div: "try_divide"}
_CASTABLE = {
    exp.DataType.Type.BOOLEAN, exp.DataType.Type.TINYINT, exp.DataType.Type.SMALLINT, exp.DataType.Type.INT,
    exp.DataType.Type.BIGINT, exp.DataType.Type.FLOAT, exp.DataType.Type.DOUBLE, exp.DataType.Type.DECIMAL,
    exp.DataType.Type.VARCHAR, exp.DataType.Type.TEXT, exp.DataType.Type.DATE,
}  # fmt: skip
ACCEPTED = (
    "columns, literals, + - * /, comparisons, AND / OR / NOT, IS NULL, IN (…), BETWEEN, LIKE 'pattern', "
    "CASE, IF, COALESCE, ABS, LENGTH, || and CAST, over values of one type "
    "(the documentation's page 'Tables in Apache Spark', docs/spark.md)"
)


def _unsupported(what: str) -> errors.UnsupportedQueryError:
    return errors.UnsupportedQueryError(
        f"{what} cannot run on the Spark backend", code="DP261",
        hint=f"Spark tables accept {ACCEPTED}; nothing was charged",
    )  # fmt: skip


_T = exp.DataType.Type
_NUMERIC = ("int", "decimal", "double")
_KIND_OF_TYPE = {
    _T.TINYINT: "narrow", _T.SMALLINT: "narrow", _T.INT: "int", _T.BIGINT: "int",
    _T.FLOAT: "float", _T.DOUBLE: "double", _T.DECIMAL: "decimal", _T.BOOLEAN: "bool",
    _T.VARCHAR: "text", _T.TEXT: "text", _T.DATE: "date",
}  # fmt: skip
#: Spark's rounding functions dpgate writes before a cast to an integer (never fail; ``_spark_cast``).
_ROUNDING = ("bround", "round")
# Whitespace as DuckDB trims it around a number (Spark trims these and more): no \\s, which in
# Python also matches U+001C..U+001F, U+0085, U+00A0, ...
_INTEGER_TEXT = re.compile(r"[ \t\n\r\v\f]*-?[0-9]+[ \t\n\r\v\f]*", re.ASCII)
_NUMBER_TEXT = re.compile(r"[ \t\n\r\v\f]*-?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?[ \t\n\r\v\f]*", re.ASCII)
_DATE_TEXT = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_DECIMAL_TYPE = re.compile(r"DECIMAL\((\d+),\s*(\d+)\)")


def _column_kind(sql_type: str) -> str | None:
    t = sql_type.upper()
    if t in ("TINYINT", "SMALLINT"):
        return "narrow"  # DuckDB keeps TINYINT + 1 a TINYINT (127 + 1 overflows), Spark widens it to INT
    if t in INTEGER_TYPES - {"HUGEINT", "UHUGEINT"}:
        return "int"
    if t == "DOUBLE":
        return "double"
    if t in ("FLOAT", "REAL"):
        # DuckDB computes FLOAT with a DECIMAL literal, and FLOAT / x, in FLOAT; Spark (as dpgate writes
        # it) in DOUBLE (f = 0.7 held on one engine only): its own kind, compared
        # only with FLOATs and never in arithmetic; CAST(f AS DOUBLE) is exact on both
        return "float"
    if t.startswith("DECIMAL"):
        # Past 18 digits DuckDB fits the other operand into the column's DECIMAL, overflowing to NULL
        # where Spark widens (dw > 0.00000000001 with dw DECIMAL(38, 10)):
        # such a column is summed and counted as it is, never combined (its kind is unknown).
        m = _DECIMAL_TYPE.fullmatch(t)
        return "decimal" if m is None or int(m.group(1)) <= 18 else None
    return {"VARCHAR": "text", "DATE": "date", "BOOLEAN": "bool"}.get(t)


def _kind(n: exp.Expr, types: dict[str, str], memo: dict[int, str | None] | None = None) -> str | None:
    """The kind of value (int, double, decimal, text, date, bool, null) an analyst's expression has
    in DuckDB, where it can be told from the expression alone; None where it cannot. ``memo``: kinds
    already found in the same tree, by node (one check asks for a node's kind from every ancestor)."""
    if memo is None:
        return _kind_of(n, types, None)
    key = id(n)
    if key not in memo:
        memo[key] = _kind_of(n, types, memo)
    return memo[key]


def _kind_of(n: exp.Expr, types: dict[str, str], memo: dict[int, str | None] | None) -> str | None:
    if isinstance(n, exp.Paren):
        return _kind(n.this, types, memo)
    if isinstance(n, exp.Null):
        return "null"
    if isinstance(n, exp.Column):
        return _column_kind(types[n.name.lower()]) if n.name.lower() in types else None
    if isinstance(n, exp.Literal):
        if n.is_string:
            return "text"
        text = n.name.lower()
        return "double" if "e" in text else "decimal" if "." in text else "int"  # DuckDB reads 2.5 as a DECIMAL
    if isinstance(n, (exp.Cast, exp.TryCast)):
        return _KIND_OF_TYPE.get(n.to.this)
    if isinstance(n, (exp.Boolean, exp.Predicate, exp.Not, exp.And, exp.Or, exp.Like, exp.ILike, exp.In, exp.Between)):
        return "bool"
    if isinstance(n, exp.Length):
        return "int"
    if isinstance(n, (exp.Lower, exp.Upper, exp.DPipe)):
        return "text"
    if isinstance(n, exp.Div):
        return "double"  # DuckDB's / is a DOUBLE quotient; dpgate writes it as one on Spark (_divide)
    if isinstance(n, (exp.Neg, exp.Abs)):
        return _kind(n.this, types, memo)
    if isinstance(n, (exp.Add, exp.Sub, exp.Mul)):
        a, b = _kind(n.this, types, memo), _kind(n.expression, types, memo)
        if isinstance(n, (exp.Add, exp.Sub)) and "date" in (a, b):  # DATE ± days; DATE - DATE is days
            if {a, b} == {"date", "int"} and not (isinstance(n, exp.Sub) and b == "date"):
                return "date"
            return "int" if isinstance(n, exp.Sub) and a == b == "date" else None
        return _numeric(a, b)
    if isinstance(n, (exp.Case, exp.If, exp.Coalesce)):
        kinds = {_kind(b, types, memo) for b in _branches(n)} - {"null"}
        if len(kinds) == 1:
            return kinds.pop()
        return _numeric(*kinds) if len(kinds) == 2 else None
    return None


#: The most digits a DECIMAL may have for DuckDB's conversion to DOUBLE to equal Spark's: DuckDB
#: converts the unscaled integer to a DOUBLE and then divides by 10^s (two roundings), Spark rounds
#: once; below 2^53 (15 digits always) the first step is exact (18 digits
#: differed for about 2% of values).
EXACT_DOUBLE_DIGITS = 15
_INTEGER_DIGITS = {"TINYINT": 3, "SMALLINT": 5, "INTEGER": 10, "BIGINT": 19}


def _decimal_type(n: exp.Expr, types: dict[str, str]) -> tuple[int, int] | None:
    """The exact (precision, scale) of an integer or DECIMAL expression by the SQL rules (+ - :
    max(p1 - s1, p2 - s2) + max(s1, s2) + 1 digits; * : p1 + p2), from its columns' types and its
    literals' digits; None where it cannot be told. DuckDB's result type has at least these digits
    while they are at most 18, and keeps 18 past them, where its values overflow (to NULL in dpgate's
    TRY) and Spark's do not (DECIMAL(18, 2) * 1.5 is a DECIMAL(18, 3) in DuckDB)."""
    if isinstance(n, (exp.Paren, exp.Neg, exp.Abs)):
        return _decimal_type(n.this, types)
    if isinstance(n, exp.Column):
        t = types.get(n.name.lower(), "").upper()
        m = _DECIMAL_TYPE.fullmatch(t)
        return (int(m.group(1)), int(m.group(2))) if m else ((_INTEGER_DIGITS[t], 0) if t in _INTEGER_DIGITS else None)
    if isinstance(n, exp.Literal) and not n.is_string:
        text = n.name.lower()
        if "e" in text:
            return None
        whole, _, frac = text.partition(".")
        return max(len(whole.lstrip("-")), 1) + len(frac), len(frac)
    if isinstance(n, exp.Cast) and n.to.this == _T.DECIMAL:
        params = n.to.expressions
        return (int(params[0].name), int(params[1].name) if len(params) > 1 else 0) if params else (18, 3)
    if isinstance(n, exp.Cast) and n.to.this in (_T.INT, _T.BIGINT):
        return (10, 0) if n.to.this == _T.INT else (19, 0)
    if isinstance(n, (exp.Add, exp.Sub, exp.Mul)):
        a, b = _decimal_type(n.this, types), _decimal_type(n.expression, types)
        if a is None or b is None:
            return None
        if isinstance(n, exp.Mul):
            return a[0] + b[0], a[1] + b[1]
        scale = max(a[1], b[1])
        return max(a[0] - a[1], b[0] - b[1]) + scale + 1, scale
    return None


def _branches(n: exp.Case | exp.If | exp.Coalesce) -> list[exp.Expr]:
    """The values a CASE, IF or COALESCE may take (not its conditions)."""
    values = [n.args.get("true"), n.args.get("false"), n.args.get("default"),
              *(i.args.get("true") for i in n.args.get("ifs") or [])]  # fmt: skip
    if isinstance(n, exp.Coalesce):
        values += [n.this, *n.expressions]
    return [v for v in values if v is not None]


def _numeric(a: str | None, b: str | None) -> str | None:
    """The kind of DuckDB's + - * (or CASE branches) over two kinds: a DOUBLE wins, then a DECIMAL."""
    if a == "null" or b == "null":
        return b if a == "null" else a
    if a not in _NUMERIC or b not in _NUMERIC:
        return None
    return "double" if "double" in (a, b) else "decimal" if "decimal" in (a, b) else "int"


def _spark_cast(n: exp.Cast, source: str | None) -> exp.Expr:
    """DuckDB's ``CAST(x AS t)`` for Spark, where the engines agree on its value; else refused.

    Spark's cast truncates a DOUBLE or DECIMAL to an integer where DuckDB rounds (a DOUBLE half to
    even, a DECIMAL half away from zero): ``bround`` and ``round`` first make them agree. Text is
    read as a number or a date differently (DuckDB reads '1e1' and '12.7' as integers, Spark gives
    NULL or 12; Spark reads '2020' as a date), and a DOUBLE is written as text differently
    ('10000000.0' against '1.0E7'): those casts are accepted for literals both engines read alike,
    and refused otherwise: the answers would differ silently between engines."""
    target = _KIND_OF_TYPE.get(n.to.this)
    value = n.this
    text = value.name if isinstance(value, exp.Literal) and value.is_string else None
    source = "int" if source == "narrow" else source  # a cast reads the value, whatever width holds it
    target = "int" if target == "narrow" else target  # out of a narrow type's range: NULL on both

    def cast(x: exp.Expr) -> exp.Expr:
        return exp.TryCast(this=x, to=n.to, safe=True)  # safe: sqlglot writes TRY_CAST for Spark

    params = n.to.expressions
    wide = target == "decimal" and bool(params) and int(params[0].name) > 18  # see _column_kind
    ok = source in ("null", target) and not wide
    if target == "int":
        if source in ("double", "float"):
            rounded = exp.Anonymous(this="bround", expressions=[value])
            if n.to.this != _T.BIGINT:
                return cast(rounded)
            # 2^63 is a DOUBLE that DuckDB finds out of BIGINT's range (NULL) and Spark's bound check,
            # made in DOUBLE, lets through to saturate at 2^63 - 1
            too_big = exp.GTE(this=rounded.copy(), expression=exp.Literal.number("9.223372036854775807E18"))
            return exp.Case(ifs=[exp.If(this=too_big, true=exp.Null())], default=cast(rounded))
        if source == "decimal":
            return cast(exp.Anonymous(this="round", expressions=[value]))
        ok = ok or source == "bool" or (text is not None and _INTEGER_TEXT.fullmatch(text) is not None)
    elif target == "double":
        # FLOAT from a DOUBLE out of its range: DuckDB NULL, Spark ±Infinity; from text: see _NUMBER_TEXT
        ok = ok or source in ("int", "decimal", "bool", "float") or (text is not None and _NUMBER_TEXT.fullmatch(text) is not None)
    elif target == "decimal":
        ok = not wide and (ok or source in ("int", "bool") or (text is not None and _NUMBER_TEXT.fullmatch(text) is not None))
    elif target == "text":
        # a DECIMAL's text (Spark may write 1.0E-7) and a DATE's outside years 1..9999 (BC, +10000) differ
        ok = ok or source in ("int", "bool")
    elif target == "bool":
        ok = ok or source == "int" or (text is not None and text.lower() in ("true", "false"))
    elif target == "date":
        ok = ok or (text is not None and _valid_date(text))
    if not ok:
        article = "an" if source and source[0] in "aeiou" else "a"
        what = f"{article} {source} value" if source not in (None, "text") else "text" if source else "an expression of this kind"
        raise errors.UnsupportedQueryError(
            f"CAST of {what} to {n.to.sql('duckdb')} ({n.sql('duckdb')[:60]}) cannot run on the Spark backend: "
            "the engines compute it differently",
            code="DP261",
            hint="on Spark, cast a column of a number type to a number type or to text, integers and booleans to "
            "each other, or a literal; nothing was charged",
        )
    return cast(value)


#: Divisions, ABS and casts nested in one another that a Spark statement may hold: each may be
#: written with its operand several times (``_divide``, ``_spark_cast``).
MAX_NESTING = 4
_COPIES = (exp.Div, exp.Abs, exp.Cast)
#: Characters of Spark SQL the analyst's expressions of one statement may take once written.
MAX_SPARK_SQL = 100_000
#: Days a literal may add to a date on Spark: years 1..9999 and back stay in both engines' range.
MAX_DAYS = 3_650_000
#: Operators whose result is NULL when an operand is NULL, whatever the other operands are.
_STRICT = (
    exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Neg, exp.Abs,
    exp.Cast, exp.Paren, exp.Like, exp.Escape, exp.Length, exp.DPipe, exp.Not, exp.Alias,
)  # fmt: skip


def _class(kind: str | None) -> str | None:
    return "number" if kind in (*_NUMERIC, "narrow") else kind


def _semantic_refusal(what: str, n: exp.Expr, hint: str | None = None) -> errors.UnsupportedQueryError:
    return errors.UnsupportedQueryError(
        f"{what} ({n.sql('duckdb')[:60]}) cannot run on the Spark backend: the engines compute it differently",
        code="DP261",
        hint=(hint or "on Spark, compare and combine values of one type (write DATE '2024-01-31', not "
              "'2024-01-31', for a date)") + "; nothing was charged",
    )  # fmt: skip


def _may_fail(n: exp.Expr, types: dict[str, str], memo: dict[int, str | None] | None = None) -> bool:
    """Whether DuckDB could raise evaluating ``n`` itself (an overflow, a cast out of range or of
    unreadable text): inside dpgate's TRY that makes the whole expression NULL on DuckDB, where
    Spark's try_* make only ``n`` NULL."""
    if isinstance(n, (exp.Add, exp.Sub, exp.Mul)):
        return _kind(n, types, memo) != "double"
    if isinstance(n, (exp.Neg, exp.Abs)):
        if isinstance(n.this, exp.Literal) and not n.this.is_string:
            return False  # a number literal of at most 18 digits (longer ones are refused): -7 cannot fail
        return _kind(n.this, types, memo) not in ("double", "float")
    if isinstance(n, exp.Cast) and not isinstance(n, exp.TryCast):
        if _KIND_OF_TYPE.get(n.to.this) == "text" or n.to.this == _T.DOUBLE:
            return False
        return not (isinstance(n.this, exp.Literal) and n.this.is_string and _constant_cast(n.this.name, n.to.this))
    return False


_RANGES = {_T.TINYINT: 2**7, _T.SMALLINT: 2**15, _T.INT: 2**31, _T.BIGINT: 2**63}


def _constant_cast(text: str, to: exp.DataType.Type) -> bool:
    """Whether CAST('text' AS to) succeeds alike on both engines (a constant that cannot fail)."""
    if to in _RANGES:
        return _INTEGER_TEXT.fullmatch(text) is not None and -_RANGES[to] <= int(text) < _RANGES[to]
    if to == _T.DATE:
        return _valid_date(text)
    return to == _T.BOOLEAN and text.lower() in ("true", "false")


def _valid_date(text: str) -> bool:
    """A day written YYYY-MM-DD that exists (both engines read it alike; '2024-02-30' they do not)."""
    if _DATE_TEXT.fullmatch(text) is None:
        return False
    try:
        datetime.date.fromisoformat(text)
    except ValueError:
        return False
    return True


def _passes_null(parent: exp.Expr, child: exp.Expr) -> bool:
    """Whether a NULL ``child`` makes ``parent`` NULL (or hands it up as a CASE value)."""
    if isinstance(parent, _STRICT):
        return True
    if isinstance(parent, exp.If):  # CASE's WHEN clause, or IF(cond, a, b): its values, not its condition
        return child is not parent.this
    if isinstance(parent, exp.Case):
        return child is not parent.this  # the WHEN clauses (checked as If) and the ELSE value
    return False


def _check_semantics(root: exp.Expr, types: dict[str, str], predicate: bool) -> None:
    """Refuse what DuckDB and Spark compute differently on the same rows: one statement must answer alike on both.

    - a comparison, IN or BETWEEN of values of different types: DuckDB converts text to a number,
      date or boolean implicitly ('1e1' = 10, '2020' is no date), Spark differently;
    - ``||`` of anything but text and integers (a DOUBLE's or DECIMAL's text differs);
    - arithmetic on TINYINT / SMALLINT (DuckDB keeps the narrow type and overflows, Spark widens) or
      on what is not a number (dates: ± days, and DATE - DATE);
    - LOWER, UPPER, ILIKE: Java's case mapping of non-ASCII letters is not DuckDB's (final sigma,
      dotted İ, ß);
    - CASE / COALESCE whose branches are of different types;
    - an operation that can fail (``_may_fail``) below anything that is not NULL-strict: DuckDB's
      TRY makes the whole expression NULL, Spark's try_* only the failing operation, so IS NULL,
      COALESCE, a CASE condition, OR, IN or BETWEEN above it would see different values. In a WHERE
      (``predicate``), ANDs from the top down pass too: a NULL or a FALSE conjunct drops the row alike.
    """
    # The WHERE's top AND chain: nodes all of whose ancestors (and themselves) are AND, parentheses or
    # dpgate's TRY, found once, top down (searched per failable node it was cubic in the depth).
    memo: dict[int, str | None] = {}  # the kinds of this tree's nodes, each found once

    def kind(x: exp.Expr) -> str | None:
        return _kind(x, types, memo)

    def wide(x: exp.Expr) -> bool:
        """A DECIMAL that DuckDB and Spark may convert to different DOUBLEs (``EXACT_DOUBLE_DIGITS``)."""
        if kind(x) != "decimal":
            return False
        t = _decimal_type(x, types)
        return t is None or t[0] > EXACT_DOUBLE_DIGITS

    def to_double(operands, n: exp.Expr, always: bool = False) -> None:
        """Refuse when DuckDB would convert a wide DECIMAL operand to a DOUBLE here (``always``: the
        operation converts its operands whatever the others are)."""
        if (always or any(kind(o) in ("double", "float") for o in operands)) and any(wide(o) for o in operands):
            raise _semantic_refusal(
                f"A DECIMAL of more than {EXACT_DOUBLE_DIGITS} digits made a DOUBLE (the engines round it differently)", n,
                f"compare or combine it with DECIMAL or integer values, or CAST it to DECIMAL({EXACT_DOUBLE_DIGITS}, s) first")

    top_chain: set[int] = set()
    stack = [root] if predicate else []
    while stack:
        x = stack.pop()
        if isinstance(x, (exp.And, exp.Paren)) or _is_try(x):
            top_chain.add(id(x))
            stack.extend(x.iter_expressions())
    def copies(x: exp.Expr) -> bool:  # written with its operand several times (a date shift: _date_shift)
        return isinstance(x, _COPIES) or (isinstance(x, (exp.Add, exp.Sub)) and "date" in (kind(x.this), kind(x.expression)))

    # How many divisions, ABS, casts or date shifts each node sits under (top down, once).
    above: dict[int, int] = {id(root): sum(copies(a) for a in _ancestors(root))}
    for n in root.walk():
        below = above[id(n)] + copies(n)
        for c in n.iter_expressions():
            above[id(c)] = below
    for n in root.walk():
        if copies(n) and above[id(n)] >= MAX_NESTING:
            # nine nested divisions made 21 MB of Spark SQL in 208 s, ten nested casts failed after
            # the debit
            raise _semantic_refusal(f"More than {MAX_NESTING} nested divisions, ABS, casts or date shifts", n,
                                    "simplify the expression")
        if isinstance(n, exp.Literal) and not n.is_string and sum(c.isdigit() for c in re.split("[eE]", n.name)[0]) > 18:
            # beyond BIGINT, DuckDB reads an integer as a HUGEINT and fits a decimal into the other
            # operand's DECIMAL (overflowing to NULL), Spark widens it
            raise _semantic_refusal("A number literal of more than 18 digits", n)
        if isinstance(n, (exp.Lower, exp.Upper, exp.ILike)):
            raise _semantic_refusal(f"{n.key.upper()} (case mapping of non-ASCII letters differs)", n,
                                    "compare the text as it is stored (region = 'north', LIKE 'n%')")
        operands = None
        if isinstance(n, (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ, exp.NullSafeNEQ)):
            operands = [n.this, n.expression]
        elif isinstance(n, exp.Between):
            operands = [n.this, n.args.get("low"), n.args.get("high")]
        elif isinstance(n, exp.In):
            operands = [n.this, *n.expressions]
        elif isinstance(n, exp.Case) and n.this is not None:  # CASE x WHEN v ...: x = v, checked as any comparison
            operands = [n.this, *(i.this for i in n.args.get("ifs") or [])]
        if operands is not None:
            classes = {_class(kind(o)) for o in operands if o is not None} - {"null"}
            if None in classes or len(classes) > 1:
                raise _semantic_refusal("A comparison of values of different or unknown types", n)
            to_double([o for o in operands if o is not None], n)
        if isinstance(n, exp.Like) and kind(n.this) not in ("text", "null"):
            raise _semantic_refusal("LIKE on a value that is not text", n)
        if isinstance(n, exp.DPipe):
            for o in (n.this, n.expression):
                if kind(o) not in ("text", "int", "null"):
                    raise _semantic_refusal("|| of a value that is not text or an integer", n)
        if isinstance(n, (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Neg, exp.Abs)):
            operands = (n.this,) if isinstance(n, (exp.Neg, exp.Abs)) else (n.this, n.expression)
            kinds = [kind(o) for o in operands]
            dated = isinstance(n, (exp.Add, exp.Sub)) and "date" in kinds and set(kinds) <= {"date", "int", "null"}
            if not dated and not all(k in (*_NUMERIC, "null") for k in kinds):
                raise _semantic_refusal("Arithmetic on TINYINT / SMALLINT / FLOAT or on values that are not numbers", n,
                                        "CAST a FLOAT to DOUBLE first (exact on both engines)")
            to_double(operands, n, always=isinstance(n, exp.Div))  # DuckDB's / converts to DOUBLE
            if isinstance(n, (exp.Add, exp.Sub, exp.Mul)) and kind(n) == "decimal":
                t = _decimal_type(n, types)
                if t is None or t[0] > 18:
                    raise _semantic_refusal(
                        "DECIMAL arithmetic whose exact result may need more than 18 digits (DuckDB keeps 18 and "
                        "gives NULL past them, Spark widens)", n,
                        "CAST an operand to a narrower DECIMAL or to DOUBLE first")
            days = [o for o, k in zip(operands, kinds) if k == "int"] if dated else []
            if days and not (isinstance(days[0], exp.Literal) and abs(int(days[0].name)) <= MAX_DAYS):
                # DuckDB's dates reach year 5,881,580 and overflow to NULL past it; Spark's date_add
                # wraps its 32-bit day number (d + 2147483647 < DATE '2000-01-01')
                raise _semantic_refusal(f"A date plus or minus anything but a literal of at most {MAX_DAYS:,} days", n)
        if isinstance(n, exp.Cast) and _KIND_OF_TYPE.get(n.to.this) in ("double", "float"):
            to_double([n.this], n, always=True)
        if isinstance(n, (exp.Case, exp.Coalesce)):  # nested ones too (in an ELSE)
            to_double(_branches(n), n)
        if isinstance(n, (exp.Case, exp.If, exp.Coalesce)) and not isinstance(n.parent, exp.Case) and kind(n) is None:
            raise _semantic_refusal(f"{n.key.upper()} whose values are of different or unknown types", n)
        if _may_fail(n, types, memo):
            child, parent = n, n.parent
            while parent is not None and not _is_try(parent):  # at dpgate's TRY both engines agree again
                if id(parent) in top_chain:  # it and all above it are ANDs, parentheses or TRY: all pass
                    break
                if not _passes_null(parent, child):
                    raise _semantic_refusal(
                        "An operation that can overflow or fail under IS NULL, COALESCE, a CASE condition, OR, "
                        "IN or BETWEEN", parent,
                        "test the operands instead (income IS NULL, not income + 1 IS NULL), or move the "
                        "operation out of the OR / COALESCE")  # fmt: skip
                child, parent = parent, parent.parent


def _is_try(n: exp.Expr) -> bool:
    return isinstance(n, exp.Try) or isinstance(n, exp.Anonymous) and n.name.upper() == "TRY" and len(n.expressions) == 1


def _ancestors(n: exp.Expr):
    p = n.parent
    while p is not None:
        yield p
        p = p.parent


def to_spark(node: exp.Expr, dates: frozenset[str] = frozenset(), types: dict[str, str] | None = None,
             *, predicate: bool = False) -> exp.Expr:
    """The analyst's row-level expression for Spark: try_* operators, refusing anything not on ``_SAFE``.

    ``dates``: the table's DATE columns. DuckDB's ``DATE - DATE`` is a number of days, Spark's an
    interval: it becomes ``datediff``; ``DATE ± n`` is ``try_add`` / ``try_subtract`` on both.
    ``types``: the table's columns and their DuckDB types, which decide how a CAST is written
    (``_spark_cast``); a CAST whose argument's kind is unknown is refused.
    """
    types = {k.lower(): v for k, v in (types or {}).items()}
    for name in dates:
        types.setdefault(name.lower(), "DATE")

    def rewrite(n: exp.Expr) -> exp.Expr:
        if isinstance(n, exp.Sub) and n.meta.get("dp_days_between"):
            return exp.DateDiff(this=n.this, expression=n.expression)
        if isinstance(n, exp.Div):
            return _divide(n.this, n.expression)
        if n.meta.get("dp_date_shift"):
            return _date_shift(n)
        if type(n) in _TRY_OPS:
            return exp.Anonymous(this=_TRY_OPS[type(n)], expressions=[n.this, n.expression])
        if isinstance(n, exp.Neg):
            return exp.Anonymous(this="try_subtract", expressions=[exp.Literal.number(0), n.this])
        if isinstance(n, exp.Abs) and n.meta.get("dp_integer"):
            # Spark's abs wraps the minimum (abs(-2^63) = -2^63) where DuckDB's overflows (TRY: NULL)
            negative = exp.LT(this=n.this.copy(), expression=exp.Literal.number(0))
            negated = exp.Anonymous(this="try_subtract", expressions=[exp.Literal.number(0), n.this.copy()])
            return exp.Case(ifs=[exp.If(this=negative, true=negated)], default=n.this)
        if isinstance(n, exp.Cast):
            return _spark_cast(n, n.meta.get("dp_source_kind"))
        if isinstance(n, (exp.Like, exp.ILike)) and isinstance(n.expression, exp.Literal):
            return _like(n)
        return n

    def bottom_up(n: exp.Expr) -> exp.Expr:
        for key, value in list(n.args.items()):
            if isinstance(value, exp.Expr):
                n.set(key, bottom_up(value))
            elif isinstance(value, list):
                n.set(key, [bottom_up(v) if isinstance(v, exp.Expr) else v for v in value])
        if isinstance(n, exp.Try) or isinstance(n, exp.Anonymous) and n.name.upper() == "TRY" and len(n.expressions) == 1:
            return n.this if isinstance(n, exp.Try) else n.expressions[0]  # every operator below is try_* now
        return rewrite(n)

    copy = node.copy()
    if types:
        _check_semantics(copy, types, predicate)
    for n in copy.walk():
        if isinstance(n, (exp.Like, exp.ILike)):
            # Spark matches LIKE with a Java regular expression, which backtracks: each '%' inside a pattern
            # multiplies the work by the text's length, a time one row could decide [cost]
            cost.check_like(n, backtracking=True)
    memo: dict[int, str | None] = {}
    for n in copy.walk():  # kinds of the analyst's own expressions, before any is rewritten for Spark
        if isinstance(n, exp.Cast):  # TRY_CAST converts as CAST does (exp.TryCast is an exp.Cast)
            n.meta["dp_source_kind"] = _kind(n.this, types, memo)
        if isinstance(n, exp.Abs):
            n.meta["dp_integer"] = _kind(n.this, types, memo) == "int"
        if isinstance(n, exp.Sub):  # DuckDB's DATE - DATE is days, Spark's an interval: datediff
            n.meta["dp_days_between"] = _kind(n.this, types, memo) == _kind(n.expression, types, memo) == "date"
        if isinstance(n, (exp.Add, exp.Sub)):  # DATE ± days, days + DATE: DuckDB's infinities and range
            kinds = (_kind(n.this, types, memo), _kind(n.expression, types, memo))
            n.meta["dp_date_shift"] = kinds == ("date", "int") or (isinstance(n, exp.Add) and kinds == ("int", "date"))
            n.meta["dp_days_first"] = kinds == ("int", "date")
    out = bottom_up(copy)
    for n in out.walk():
        if isinstance(n, exp.Anonymous) and n.name in (*_TRY_OPS.values(), *_ROUNDING, "startswith", "isnan", *_DAYS):
            continue
        if isinstance(n, exp.TryCast) and n.to.this not in _CASTABLE:
            raise _unsupported(f"CAST to {n.to.sql('duckdb')}")
        if isinstance(n, (exp.Like, exp.ILike)) and not (
            isinstance(n.expression, exp.Literal) and isinstance(n.parent, exp.Escape) and n.parent.this is n
        ):
            raise _unsupported("LIKE with a pattern that is not a literal")
        if isinstance(n, exp.Escape) and not (isinstance(n.this, (exp.Like, exp.ILike)) and n.this.meta.get("dp_escape")):
            raise _unsupported("LIKE ... ESCAPE")
        if not isinstance(n, _SAFE):
            what = _NAMES.get(type(n), n.name.upper() if isinstance(n, (exp.Func, exp.Anonymous)) and n.name else n.key.upper())
            raise _unsupported(f"{what} (in {n.sql('duckdb')[:60]})")
    return out


#: Escape characters for LIKE patterns: the first that does not occur in the pattern is declared.
#: Symbols without case only: Spark's ILIKE lowercases the pattern (not the escape character), and
#: lowercasing can turn other characters into letters (KELVIN SIGN into k), never into these.
_ESCAPES = "!#~^|@$&;:=?*+<>[]{}(),./-"


def _like(n: exp.Expr) -> exp.Expr:
    """DuckDB's ``LIKE 'p'`` (no escape character) for Spark, whose default escape is a backslash.

    A backslash would make some patterns malformed, and Spark compiles a pattern lazily when it
    evaluates without generated code, i.e. on the first row that reaches it: a failure one row
    could decide, after the debit. Declaring an escape character that the pattern does not
    contain makes every pattern well formed, with DuckDB's meaning (``%`` and ``_`` wildcards, every
    other character itself)."""
    # runs of '%' mean one '%' (DuckDB's LIKE has no escape character here); each would become a '.*'
    # of Spark's regular expression, backtracking over the text once more per run
    pattern = re.sub("%+", "%", n.expression.name)
    n.set("expression", exp.Literal.string(pattern))
    escape = next((c for c in _ESCAPES if c not in pattern), None)
    if escape is None:
        raise _unsupported("A LIKE pattern that uses every candidate escape character")
    n.meta["dp_escape"] = True  # dpgate's own ESCAPE, told apart from one the analyst wrote
    return exp.Escape(this=n, expression=exp.Literal.string(escape))


#: Spark's functions between a DATE and its day number (``_date_shift``).
_DAYS = ("unix_date", "date_from_unix_date", "nullif")
#: DuckDB's finite dates are days -(2^31 - 2) .. 2^31 - 2; ±(2^31 - 1) are its DATE '±infinity'
#: (``literals.INFINITE_DAYS``, as Parquet stores them and Spark reads them).
_FINITE_DAYS = 2**31 - 2


def _date_shift(n: exp.Expr) -> exp.Expr:
    """DuckDB's ``DATE ± days`` (or ``days + DATE``) for Spark: 'infinity' and '-infinity' stay what they
    are, and a result outside DuckDB's finite dates is NULL (TRY). Spark's ``try_add`` overflowed
    'infinity' + 1 to NULL (DuckDB: 'infinity'), and gave a date where DuckDB's overflows. The date is
    written three times (``copies`` counts a shift as a nesting level)."""
    date, days = (n.expression, n.this) if n.meta.get("dp_days_first") else (n.this, n.expression)
    number = exp.TryCast(this=exp.Anonymous(this="unix_date", expressions=[date.copy()]),
                         to=exp.DataType.build("BIGINT"), safe=True)  # fmt: skip
    shifted = exp.Anonymous(this="try_subtract" if isinstance(n, exp.Sub) else "try_add", expressions=[number, days])
    days_int = exp.TryCast(this=shifted, to=exp.DataType.build("INT"), safe=True)  # NULL outside 32 bits
    for edge in (_FINITE_DAYS + 1, -_FINITE_DAYS - 1, -_FINITE_DAYS - 2):  # DuckDB's infinities, and below them
        days_int = exp.Anonymous(this="nullif", expressions=[days_int, _number(edge)])
    infinite = exp.EQ(
        this=exp.Abs(this=exp.TryCast(this=exp.Anonymous(this="unix_date", expressions=[date.copy()]),
                                      to=exp.DataType.build("BIGINT"), safe=True)),
        expression=_number(_FINITE_DAYS + 1),
    )  # fmt: skip
    back = exp.Anonymous(this="date_from_unix_date", expressions=[days_int])
    return exp.Case(ifs=[exp.If(this=infinite, true=date)], default=back)


def _number(v: int) -> exp.Expr:
    return exp.Literal(this=str(v), is_string=False)  # a negative literal as one node (not a NEG)


def _divide(a: exp.Expr, b: exp.Expr) -> exp.Expr:
    """DuckDB's ``a / b``: a DOUBLE quotient, ±Infinity or NaN for a zero divisor (IEEE 754), where
    Spark's division gives NULL; so a Spark table answers as the DuckDB table would."""
    def double(x: exp.Expr) -> exp.Expr:
        return exp.TryCast(this=x, to=exp.DataType.build("DOUBLE"), safe=True)

    def special(name: str) -> exp.Expr:
        return double(exp.Literal.string(name))

    zero = exp.EQ(this=b.copy(), expression=exp.Literal.number(0))
    # IEEE 754, as DuckDB: NaN or 0 over ±0 is NaN (Spark orders NaN above every number, so the sign
    # tests come after it); otherwise ±Infinity by the signs of both, the divisor's read from its
    # text, '-0.0' for -0.0 (1 / (x * 0) for x < 0). Not atan2(b, -1): Spark 4 adds 0.0 to atan2's
    # arguments, which makes -0.0 a 0.0.
    a_double = double(a.copy())
    b_text = exp.TryCast(this=double(b.copy()), to=exp.DataType.build("VARCHAR"), safe=True)
    positive = exp.EQ(
        this=exp.Paren(this=exp.GT(this=a.copy(), expression=exp.Literal.number(0))),
        expression=exp.Paren(this=exp.Not(
            this=exp.Anonymous(this="startswith", expressions=[b_text, exp.Literal.string("-")]))),
    )  # fmt: skip
    by_sign = exp.Case(
        ifs=[
            exp.If(this=exp.Is(this=a.copy(), expression=exp.Null()), true=exp.Null()),
            exp.If(this=exp.Or(this=exp.Anonymous(this="isnan", expressions=[a_double]),
                               expression=exp.EQ(this=a.copy(), expression=exp.Literal.number(0))),
                   true=special("NaN")),  # fmt: skip
            exp.If(this=positive, true=special("Infinity")),
        ],
        default=special("-Infinity"),
    )
    quotient = exp.Anonymous(this="try_divide", expressions=[double(a), double(b)])
    return exp.Case(ifs=[exp.If(this=zero, true=by_sign)], default=quotient)


def _sql(node: exp.Expr) -> str:
    return node.sql(dialect="spark")
