"""The allowlist: what a statement over protected data may contain, and where.

Why an allowlist
----------------
dpgate used to refuse the constructs it knew to be dangerous (a blocklist). DuckDB's
grammar is too large for that: a red-team review got single persons' values out through
SQL that was accepted, e.g.

- ``date_trunc(CASE WHEN person_id = 1 AND age > 38 THEN 'timezone' ELSE 'day' END, ts)``
  raises a NotImplementedException (which ``TRY()`` does not catch) for exactly one row:
  the query fails or answers depending on one person's data, a 1-bit oracle; ``range(n)``
  or ``repeat(s, n)`` with ``n`` read from a row runs out of memory depending on a row;
- ``FROM adult TABLESAMPLE BERNOULLI (50%) REPEATABLE (42)``: the sample depends on the
  storage position of the rows;
- ``FROM adult AS adult(age, person_id)``, ``PIVOT`` / ``UNPIVOT``: the columns are
  relabelled, and the privacy unit with them.

So this module describes positively what may appear where, and ``check`` refuses
everything else (``UnsupportedQueryError``, codes DP250-DP257) before any budget is
charged, naming the construct as the analyst wrote it and saying what would be accepted.
It reads only the statement, never the catalog or the data.

The totality rule
-----------------
dpgate evaluates every row-level expression (WHERE, GROUP BY keys, aggregate inputs and
FILTER conditions) inside DuckDB's ``TRY(...)`` (``_try`` in ``dpgate.queries``). ``TRY`` turns
*conversion*, *out of range* and *invalid input* errors into NULL, and nothing else: a
NotImplementedException, an internal error or running out of memory still fails the
query. An error that fails the query for some values and not for others makes the query's
outcome depend on those values. So a function is on the list only if it is **total** on
every argument type DuckDB accepts for it -- under ``TRY``, it never raises for any value:
NULL, NaN, +-inf, the extreme integers, empty, very long and odd UTF-8 strings, the
smallest and largest dates and timestamps, ``infinity`` -- and that includes errors
DuckDB raises while *planning* from the column statistics (the minimum and maximum of a
protected column are data too: ``date_trunc('week', d)`` fails at plan time when the
smallest date is near DuckDB's minimum). Its output must also be bounded independently
of the data: at most a constant factor (fixed by the query text) times the size of its
inputs, so ``repeat``, ``range``/``generate_series``, list builders and ``lpad``/``rpad``
with a row-valued length are out. Arguments that select a behaviour (date parts,
formats, patterns, units, positions, lengths) must be constants from a verified set,
because a row-valued one is exactly how the first red-team example chose, row by row,
between a working and a failing behaviour.

``tests/frontend/test_allowlist.py`` checks this rule for every entry of ``FUNCTIONS``,
for the casts of ``CAST_TYPES`` and for the operators, by evaluating them in DuckDB inside
``TRY`` exactly as dpgate does, over a grid of extreme values (in real tables, so that the
statistics are exercised) with every allowed constant, for the argument types it is meant
for and for every other type too; a case DuckDB does not bind (``DESCRIBE`` fails) is
skipped: a binder error depends on the query and the column types only.

What the fuzzing found (DuckDB 2.0): ``TRY`` catches integer overflow of ``+ - * // %``
and unary minus (BIGINT and HUGEINT), ``abs(BIGINT_MIN)``, division by zero and failing
casts, so arithmetic and ``CAST`` / ``::`` of row values to the scalar types of
``CAST_TYPES`` are allowed; ``ln``/``log``/``sqrt``/``pow`` return NaN or +-inf rather
than raise. Not protected, hence not accepted: the date parts ``week``, ``weekofyear``,
``isoyear``, ``yearweek`` (a plan-time error from the statistics of a DATE column whose
smallest value is near DuckDB's minimum date), ``era``, ``julian`` and the ``timezone*``
parts (NotImplementedException); ``dayofweek()``, ``isodow()``, ``dayofyear()`` on
INTERVAL values and ``date_diff`` with calendar parts on TIME values (NotImplementedException
at run time); ``repeat``, ``range``, ``string_split`` (output size). And one finding that is
not about functions at all: DuckDB's common-subexpression elimination evaluates a
sub-expression that occurs twice (``(x + 1) * (x + 1)``, or the implicit cast DuckDB puts on
each element of ``s IN (1, 2)``) *outside* the ``TRY`` around it, so the connection that
runs DP queries must disable it: ``REQUIRED_SETTINGS``.

How to add a function
---------------------
Add one ``Rule`` to ``RULES``:

- ``node``: the sqlglot class the dpgate parser produces for the call (or, for functions
  sqlglot does not know, the lower-case name of the ``exp.Anonymous`` node, plus
  ``aliases``); parse the call with ``dpgate.frontend.dialect.parse_one`` to see which;
- ``args``: the argument slots that may hold row values (sqlglot arg names; for an
  anonymous function, ``arity`` bounds the argument count instead);
- ``consts``: the behaviour-selecting arguments (by sqlglot arg name, or by position for
  an anonymous function) and the constants they accept (``Part``, ``Int``, ``Text``, ...);
- ``reason``: one line saying why it is total and bounded;
- ``forms`` and ``types``: how the fuzz test calls it (``{0}``, ``{1}`` are the row-valued
  arguments, ``{name}`` (``{arg0}`` for position 0) the constant slots, filled with every
  sample of ``consts[name]``) and the argument types it is meant for.

Then run ``pytest tests/frontend/test_allowlist.py``: the fuzz test evaluates the new entry
over the extreme values; if it finds an error, narrow the constants or leave it out.

How to call it
--------------
``check(statement)`` takes the whole statement as parsed by ``dialect.parse_one`` and
classified as ``dp`` or ``synthetic`` (or ``explain`` of those): the SELECT *with* its
``WITH DIFFERENTIAL_PRIVACY OPTIONS`` clause (the options are not checked here), an
``ExplainPrivacy`` node (its inner statement is checked), or a ``CreateSynthetic`` node
(its source must be a bare table). Run it after the parameters are bound. It is not meant
for public queries, which DuckDB answers unchanged. The guarantees hold for row expressions
evaluated inside ``TRY`` on a connection with ``REQUIRED_SETTINGS``; join conditions run
outside ``TRY`` and are therefore limited to comparisons of two columns (whose types the
planner checks).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from sqlglot import exp

from dpgate.frontend import cost
from dpgate.frontend.cost import refuse as _refuse
from dpgate.frontend.cost import signed_literal as _signed_literal
from dpgate.frontend.cost import sql_text as _sql
from dpgate.frontend.nodes import CreateSynthetic, DPOptions, ExplainPrivacy
from dpgate.frontend.dialect import received

# -- dpgate's own names (the same as in classify; a test keeps them equal) ----------------------
#: dpgate's table function over a protected table (planned as a top-k query).
TOPK_COLUMNS_FUNCTION = "dp_top_k_columns"
#: dpgate's subgraph-count aggregates over a protected graph.
GRAPH_AGGREGATES = ("triangle_count", "kstar_count", "ktriangle_count", "kclique_count")

#: DuckDB settings the connection that runs DP queries must have for the totality rule to hold.
#: DuckDB's common-subexpression elimination moves a sub-expression that occurs twice out of
#: the TRY(...) around it (``TRY((x + 1) * (x + 1))``, but also the implicit cast DuckDB adds
#: to each element of ``s IN (1, 2)`` or to both bounds of BETWEEN), so its errors escape TRY.
#: Statistics propagation folds conditions with every row's min/max (uncharged subjects' too),
#: which decides whether other sub-expressions run at all: it is off as well.
REQUIRED_SETTINGS = {"disabled_optimizers": "common_subexpressions,statistics_propagation"}

#: Longest constant string (pattern, format, replacement) accepted.
MAX_CONSTANT_TEXT = 1000
#: Largest constant position or length (substring, left/right).
MAX_POSITION = 1_000_000
#: Largest constant padded length (lpad/rpad): the text a row expression may add [cost].
MAX_PAD = cost.MAX_TEXT_CONSTANT
#: Output size bound the fuzz test enforces: at most this many times the inputs, plus 1 KiB.
SIZE_FACTOR = 8


# -- errors ---------------------------------------------------------------------------------------
FROM_ITEM = "DP250"
JOIN = "DP251"
NODE = "DP252"
FUNCTION = "DP253"
CONSTANT = "DP254"
SIZE = "DP255"
CAST = "DP256"
SHAPE = "DP257"

_FROM_HINT = (
    "FROM and JOIN take table names, optionally main.-qualified, with a plain alias "
    "(FROM adult a); sample, pivot, relabel or time-travel nothing"
)
_JOIN_HINT = (
    "join public tables with [INNER | LEFT | RIGHT | FULL] JOIN t ON a.col = t.col [AND ...] "
    "(comparisons of two columns) or JOIN t USING (col); CROSS JOIN and FROM a, b work without a condition"
)
_NODE_HINT = (
    "row expressions may use columns, constants, arithmetic, comparisons, AND/OR/NOT, IS [NOT] NULL, "
    "BETWEEN, IN (constant list), LIKE, CASE, casts and the functions of dpgate's list (README, 'Allowed SQL')"
)


# -- constants ------------------------------------------------------------------------------------
def _is_constant(node: exp.Expr | None) -> bool:
    """A value fixed by the query text: literals, NULL, booleans, bound parameters, intervals,
    and casts / signs / parentheses of those."""
    if node is None:
        return False
    if isinstance(node, (exp.Literal, exp.Null, exp.Boolean, exp.Placeholder)):
        return True
    if isinstance(node, (exp.Neg, exp.Paren)):
        return _is_constant(node.this)
    if isinstance(node, (exp.Cast, exp.TryCast)):
        return _is_constant(node.this)
    if isinstance(node, exp.Interval):
        return _is_constant(node.this)
    return False


def _string(node: exp.Expr | None) -> str | None:
    """The value of a string literal (or a Var, which is how sqlglot keeps date parts)."""
    if isinstance(node, exp.Literal) and node.is_string:
        return node.this
    if isinstance(node, exp.Var):
        return node.name
    return None


def _integer(node: exp.Expr | None) -> int | None:
    return _signed_literal(node, int)


def _number(node: exp.Expr | None) -> float | None:
    return _signed_literal(node, float)


@dataclass(frozen=True)
class Const:
    """A behaviour-selecting argument: it must be a constant this object accepts."""

    description: str
    accept: Callable[[exp.Expr], bool]
    #: Text substituted into the fuzz templates (quoting is the template's).
    samples: tuple[str, ...]
    #: When the argument is not constant: DP254 (behaviour) or DP255 (output size).
    code: str = CONSTANT
    #: Whether the fuzz test tries every sample with every argument type (date parts: the
    #: failures depend on the pair), or only the first sample beyond the declared types.
    per_type: bool = False
    #: The sample shown in hints (default: the first).
    example: str | None = None

    def ok(self, node: exp.Expr) -> bool:
        return self.accept(node)


def Part(*names: str) -> Const:  # noqa: N802 - reads like a type in the rule table
    """A date part / unit from ``names`` (a string literal, or the bare word of EXTRACT)."""
    allowed = frozenset(n.lower() for n in names)

    def accept(node: exp.Expr) -> bool:
        value = _string(node)
        return value is not None and value.lower() in allowed

    example = "year" if "year" in allowed else names[0]
    return Const("one of " + ", ".join(f"'{n}'" for n in names), accept, tuple(names), per_type=True, example=example)


def Int(lo: int, hi: int, *, code: str = CONSTANT) -> Const:  # noqa: N802
    """A whole-number literal in ``[lo, hi]``."""

    def accept(node: exp.Expr) -> bool:
        value = _integer(node)
        return value is not None and lo <= value <= hi

    samples = tuple(str(v) for v in sorted({lo, hi, 0, 1, -1, 2, 3}) if lo <= v <= hi)
    example = "2" if lo <= 2 <= hi else str(lo)
    return Const(f"a whole number from {lo:,} to {hi:,}", accept, samples, code, example=example)


def Text(
    samples: tuple[str, ...],
    *,
    max_len: int = MAX_CONSTANT_TEXT,
    valid: Callable[[str], bool] | None = None,
    description: str = "a string constant",
    code: str = CONSTANT,
) -> Const:  # noqa: N802
    """A string literal of at most ``max_len`` characters (and ``valid``, if given)."""

    def accept(node: exp.Expr) -> bool:
        value = _string(node) if isinstance(node, exp.Literal) else None
        return value is not None and len(value) <= max_len and (valid is None or valid(value))

    quoted = tuple(s.replace("'", "''") for s in samples)
    return Const(description, accept, quoted, code, example=quoted[1] if len(quoted) > 1 else None)


# strftime: the specifiers DuckDB documents, every one fuzzed.
_STRFTIME_SPECIFIERS = "aAwudbBmyYHIpMSfgnzZjUWcxXGV%"
_STRFTIME_RE = re.compile(r"(?:[^%]|%-[dmyHIMSj]|%[" + re.escape(_STRFTIME_SPECIFIERS) + r"])*\Z")
_LIKE_SAMPLES = ("", "%", "_", "a%", "%a", "%a%b%", "%\\%", "%__%", "é%", "%%%%%%%%%%%x", "%🦆%")
#: ILIKE (and LIKE with '_') matches by backtracking: at most one '%' before the end [cost].
_BACKTRACKING_SAMPLES = ("", "%", "_", "a%", "%a", "%a_b%", "%\\%", "%__%", "é%", "%%%x", "%🦆%")
_REGEX_SAMPLES = (
    "", "a", "^a.*$", "(a|b)*c", "\\d+", "[[:alpha:]]+", "(?i)é", "(a)(b)?", ".*.*.*.*.*.*.*x", "\\p{L}+", "^$",
)  # fmt: skip
_TEXT_SAMPLES = ("", "a", "é", "🦆", "%", "xxxxxxxxxx", "\\", "'")


def _valid_regex_options(value: str) -> bool:
    # c/i: case; l: literal; m/n/p/s: newline handling. No 'g' (global replace multiplies output).
    return all(ch in "cilmnps" for ch in value)


LIKE = Text(_LIKE_SAMPLES, valid=lambda v: "_" not in v or cost.wildcard_runs(v) <= 1, code=cost.WORK,
            description="a constant LIKE pattern (with '_', at most one '%' before its end)")
ILIKE = Text(_BACKTRACKING_SAMPLES, valid=lambda v: cost.wildcard_runs(v) <= 1, code=cost.WORK,
             description="a constant LIKE pattern with at most one '%' before its end")
REGEX = Text(_REGEX_SAMPLES, valid=lambda v: cost.regex_program(v) <= cost.MAX_REGEX_PROGRAM, code=cost.WORK,
             description=f"a constant regular expression (RE2) of at most {cost.MAX_REGEX_PROGRAM} instructions")
OPTIONS = Text(("", "i", "c", "s", "m", "n", "p", "l"), max_len=8, valid=_valid_regex_options,
               description="constant regexp options from c, i, l, m, n, p, s (no g)")  # fmt: skip
STRFTIME_FORMAT = Text(
    ("%Y-%m-%d", "%H:%M:%S.%f", "%a %A %w %u %-d %b %B %y %-m %I %p %j %U %W %c %x %X %G %V %g %n %z %Z %%", "",
     "text"),
    valid=lambda v: _STRFTIME_RE.match(v) is not None,
    description="a constant strftime format using %" + ", %".join(_STRFTIME_SPECIFIERS)
    + " and %-d, %-m, %-y, %-H, %-I, %-M, %-S, %-j",
)

#: Date parts the fuzz test verified for date_part / extract / date_trunc / date_diff.
DATE_PARTS = (
    "millennium", "century", "decade", "year", "quarter", "month", "day", "hour", "minute", "second",
    "millisecond", "milliseconds", "microsecond", "microseconds", "epoch", "dow", "isodow", "doy",
    "dayofweek", "dayofyear",
)  # fmt: skip
#: Parts date_trunc accepts (it has no meaning for the day-of-week style parts).
TRUNC_PARTS = (
    "millennium", "century", "decade", "year", "quarter", "month", "day", "hour", "minute", "second",
    "millisecond", "milliseconds", "microsecond", "microseconds",
)  # fmt: skip
#: Parts date_diff accepts: on TIME values the calendar parts fail at run time (NotImplemented).
DIFF_PARTS = ("hour", "minute", "second", "millisecond", "milliseconds", "microsecond", "microseconds")


# -- rules ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Rule:
    """One entry of the function list."""

    name: str
    node: type[exp.Expr] | str
    reason: str
    forms: tuple[str, ...]
    types: tuple[tuple[str, ...], ...]
    args: tuple[str, ...] = ("this",)
    consts: Mapping[str | int, Const] = field(default_factory=dict)
    #: For anonymous functions: (min, max) number of arguments.
    arity: tuple[int, int] | None = None
    aliases: tuple[str, ...] = ()
    #: Extra check of the call (raises), for rules the slots above cannot express.
    extra: Callable[[exp.Expr], None] | None = None
    #: What the reference says about constant arguments the slots above do not describe.
    constants_note: str = ""
    #: Other sqlglot classes the parser produces for the same function (by argument type).
    also: tuple[type[exp.Expr], ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name, *self.aliases)


N1 = (("BIGINT",), ("INTEGER",), ("HUGEINT",), ("UBIGINT",), ("DOUBLE",), ("DECIMAL(18,3)",))
S1 = (("VARCHAR",),)
T1 = (("DATE",), ("TIMESTAMP",), ("TIMESTAMPTZ",))


def _log_base(node: exp.Expr) -> None:
    # LOG(x) is one argument; LOG(b, x) (also what log2 / log10 parse to) needs a constant base.
    if node.args.get("expression") is not None and _number(node.this) is None:
        raise _refuse(
            CONSTANT, f"The base of {_sql(node)} must be a constant", "write log(2, x), log10(x) or ln(x)"
        )


#: Parts DuckDB 1.5 fails on for every non-NULL INTERVAL (``rewrite_for_engine``).
_WEEKDAY_PARTS = {"dow", "dayofweek", "isodow", "doy", "dayofyear"}


def rewrite_for_engine(statement: exp.Expr) -> exp.Expr:
    """Rewrite, in place, what DuckDB evaluates unsafely into an equivalent it evaluates safely.

    Aliases take their rule's own name, day-of-week and day-of-year parts are read from
    ``CAST(x AS TIMESTAMP)`` (comments below), and ``COALESCE(a, b, ...)`` becomes ``CASE WHEN a
    IS NOT NULL THEN a WHEN b IS NOT NULL THEN b ... ELSE z END``: DuckDB 1.4-1.5 crashes the whole process (a segmentation fault, not an
    error TRY can catch) when an implicit cast between COALESCE's arguments fails under TRY —
    ``COALESCE(timestamptz, timestamp)`` over the extreme timestamps, for one — so the crash
    would depend on the data. CASE casts its branches the same way and fails cleanly. Same
    result, same type; the statement passed ``check`` before."""
    # Aliases first become the rule's own name: DuckDB's optimizer rewrites some spellings and
    # not others (date_part('year', TIME) becomes year(TIME), a bind error EXPLAIN catches for
    # free; datepart(...) stays and fails at run time on every non-NULL value).
    for node in list(statement.find_all(exp.Anonymous)):
        rule = FUNCTIONS.get(node.name.lower())
        if rule is not None and isinstance(rule.node, str) and node.name.lower() != rule.node:
            node.set("this", rule.node)
    # date_part / EXTRACT of a day-of-week or day-of-year part: on an INTERVAL DuckDB 1.5 fails on
    # every non-NULL value (so whether it fails depends on the data). Of CAST(x AS TIMESTAMP) the
    # part is the same for dates and timestamps (TIMESTAMPTZ: in the session's time zone, as
    # before) and NULL for what has no day (intervals, times) or lies beyond the TIMESTAMP range.
    for node in list(statement.find_all(exp.Extract, exp.Anonymous)):
        if isinstance(node, exp.Extract):
            part, arg = node.this, node.expression
        elif node.name.lower() == "date_part" and len(node.expressions) == 2:  # aliases renamed above
            part, arg = node.expressions
        else:
            continue
        name = (_string(part) or (part.name if isinstance(part, (exp.Var, exp.Column)) else "")).lower()
        if name in _WEEKDAY_PARTS and arg is not None:
            cast = exp.Cast(this=arg.copy(), to=exp.DataType.build("TIMESTAMP"))
            node.replace(exp.Anonymous(this="date_part", expressions=[exp.Literal.string(name), cast]))
    for node in reversed(list(statement.find_all(exp.Coalesce))):  # innermost first
        args = [node.this, *node.expressions]
        # Parenthesized: sqlglot writes the tree as it is, and `NOT a OR b IS NULL` would read as
        # `(NOT a) OR (b IS NULL)` (red team helper-34: an answer to another predicate).
        ifs = [exp.If(this=exp.Not(this=exp.paren(exp.Is(this=exp.paren(a.copy()), expression=exp.Null()))),
                      true=a.copy()) for a in args[:-1]]  # fmt: skip
        node.replace(exp.Case(ifs=ifs, default=args[-1].copy()) if ifs else args[-1].copy())
    return statement


def check_engine_hazards(statement: exp.Expr, column_types: dict[str, set[str]]) -> None:
    """Refuse what DuckDB cannot evaluate without invalidating the database, given the types of
    the columns the statement can name (lower-case name -> types; a name in several tables has
    all of them, so this errs towards refusing).

    ``date_diff`` of TIMESTAMP WITH TIME ZONE values runs through ICU, which raises an internal
    error (TRY does not catch it, and DuckDB then refuses every later statement until restarted)
    for the extreme timestamps, so whether it happens would depend on the data. The same
    difference of ``CAST(... AS TIMESTAMP)`` values is total under TRY."""
    zoned_types = (exp.DataType.Type.TIMESTAMPTZ, exp.DataType.Type.TIMESTAMPLTZ)
    for node in statement.find_all(exp.DateDiff):
        for arg in (node.this, node.expression):
            if arg is None:
                continue
            zoned = [c for c in arg.find_all(exp.Column) if "TIMESTAMP WITH TIME ZONE" in column_types.get(c.name.lower(), ())]
            zoned += [c for c in arg.find_all(exp.Cast) if c.to.this in zoned_types]
            if not all(_inside_cast_to_timestamp(z, arg) for z in zoned):
                raise _refuse(
                    CAST, f"{_sql(node)}: date_diff of TIMESTAMP WITH TIME ZONE values is not supported",
                    "cast them first: date_diff('hour', CAST(a AS TIMESTAMP), CAST(b AS TIMESTAMP)) (wall times in "
                    "the session's time zone)",
                )  # fmt: skip


_WALL_TIME_TYPES = {exp.DataType.Type.TIMESTAMP, exp.DataType.Type.TIMESTAMPNTZ, exp.DataType.Type.DATE,
                    exp.DataType.Type.TIMESTAMP_S, exp.DataType.Type.TIMESTAMP_MS, exp.DataType.Type.TIMESTAMP_NS}


def _inside_cast_to_timestamp(node: exp.Expr, root: exp.Expr) -> bool:
    while node is not root and node.parent is not None:
        node = node.parent
        if isinstance(node, exp.Cast):
            return node.to.this in _WALL_TIME_TYPES
    return False


#: How many COALESCE a COALESCE may sit inside: ``rewrite_for_engine`` copies each argument
#: twice, so the rewritten size grows by 4 per level (red-team finding: depth 18 took a minute).
MAX_COALESCE_NESTING = 2


def _coalesce_shape(node: exp.Expr) -> None:
    depth, up = 0, node.parent
    while up is not None:
        depth += isinstance(up, exp.Coalesce)
        up = up.parent
    if depth > MAX_COALESCE_NESTING:
        raise _refuse(SHAPE, f"COALESCE inside more than {MAX_COALESCE_NESTING} other COALESCE ({_sql(node)})",
                      "flatten it: coalesce(a, coalesce(b, c)) is coalesce(a, b, c)")  # fmt: skip
    # A NULL argument picks nothing; and DuckDB (1.4-1.5) crashes the process on a leading NULL
    # when a later argument's implicit cast fails under TRY (COALESCE(NULL, date, timestamp) with a
    # date beyond the timestamp range): a crash that depends on the data, so it is refused.
    for arg in (node.this, *node.expressions):
        inner = arg.this if isinstance(arg, exp.Cast) else arg
        if isinstance(inner, exp.Null):
            raise _refuse(CONSTANT, f"{_sql(node)} has a NULL argument, which it can never pick",
                          "leave the NULL out: coalesce(a, b)")  # fmt: skip


def _replace_growth(node: exp.Expr) -> None:
    # Each occurrence of `from` becomes `to`: the output grows by len(to) / len(from) at most.
    old, new = _string(node.args.get("expression")), _string(node.args.get("replacement"))
    if old is not None and new is not None and len(new) > SIZE_FACTOR * max(len(old), 1):
        raise _refuse(
            SIZE, f"{_sql(node)} would multiply the size of the text by {len(new) // max(len(old), 1)}",
            f"the replacement may be at most {SIZE_FACTOR} times as long as the text it replaces",
        )  # fmt: skip


RULES: tuple[Rule, ...] = (
    # -- numbers
    Rule("abs", exp.Abs, "overflow of abs(min) is an out-of-range error, caught by TRY",
         ("abs({0})",), N1),
    Rule("sign", exp.Sign, "defined for every number; NaN gives NaN", ("sign({0})",), N1),
    Rule("round", exp.Round, "rounding never fails; the number of decimals is a constant",
         ("round({0})", "round({0}, {decimals})"), N1, consts={"decimals": Int(-38, 38)}),
    Rule("floor", exp.Floor, "never fails", ("floor({0})",), N1),
    Rule("ceil", exp.Ceil, "never fails", ("ceil({0})",), N1, aliases=("ceiling",)),
    Rule("trunc", exp.Trunc, "never fails", ("trunc({0})",), N1),
    Rule("greatest", exp.Greatest, "a comparison of its arguments (failing implicit casts are caught by TRY)",
         ("greatest({0}, {1})", "greatest({0}, NULL, {1})"),
         (("BIGINT", "DOUBLE"), ("VARCHAR", "VARCHAR"), ("DATE", "TIMESTAMP"), ("HUGEINT", "DECIMAL(18,3)")),
         args=("this", "expressions")),
    Rule("least", exp.Least, "a comparison of its arguments (failing implicit casts are caught by TRY)",
         ("least({0}, {1})",),
         (("BIGINT", "DOUBLE"), ("VARCHAR", "VARCHAR"), ("DATE", "TIMESTAMP"), ("HUGEINT", "DECIMAL(18,3)")),
         args=("this", "expressions")),
    Rule("coalesce", exp.Coalesce, "picks an argument (no NULL argument, nested at most 3 deep; run as CASE WHEN ... IS NOT NULL)", ("coalesce({0}, {1})", "coalesce({0}, {1}, {0})"),
         (("BIGINT", "DOUBLE"), ("VARCHAR", "VARCHAR"), ("DATE", "TIMESTAMP")), args=("this", "expressions"),
         aliases=("ifnull",), extra=_coalesce_shape),
    Rule("nullif", exp.Nullif, "a comparison", ("nullif({0}, {1})",),
         (("BIGINT", "DOUBLE"), ("VARCHAR", "VARCHAR"), ("DATE", "TIMESTAMP")), args=("this", "expression")),
    Rule("ln", exp.Ln, "NaN for negative input, -inf for 0", ("ln({0})",), N1),
    Rule("log", exp.Log, "NaN for negative input, -inf for 0; the base is a constant",
         ("log({0})", "log(2, {0})", "log(0.5, {0})", "log(1, {0})", "log(0, {0})", "log(-1, {0})", "log10({0})",
          "log2({0})"), N1, args=("this", "expression"), extra=_log_base,
         constants_note="the base of log(b, x): a number", aliases=("log10", "log2")),
    Rule("sqrt", exp.Sqrt, "NaN for negative input", ("sqrt({0})",), N1),
    Rule("cbrt", exp.Cbrt, "defined everywhere", ("cbrt({0})",), N1),
    Rule("exp", exp.Exp, "+inf on overflow", ("exp({0})",), N1),
    Rule("pow", exp.Pow, "computed in DOUBLE: +-inf or NaN instead of an error", ("pow({0}, {1})", "{0} ** {1}"),
         (("DOUBLE", "DOUBLE"), ("BIGINT", "BIGINT"), ("HUGEINT", "DOUBLE")), args=("this", "expression"),
         aliases=("power",)),
    Rule("isnan", exp.IsNan, "a test", ("isnan({0})",), (("DOUBLE",),)),
    Rule("isinf", exp.IsInf, "a test", ("isinf({0})",), (("DOUBLE",), ("DATE",), ("TIMESTAMP",))),
    Rule("isfinite", "isfinite", "a test", ("isfinite({0})",), (("DOUBLE",), ("DATE",), ("TIMESTAMP",)),
         arity=(1, 1)),
    # -- text
    Rule("lower", exp.Lower, "case mapping; output about as long as the input", ("lower({0})",), S1,
         aliases=("lcase",)),
    Rule("upper", exp.Upper, "case mapping; output about as long as the input", ("upper({0})",), S1,
         aliases=("ucase",)),
    Rule("length", exp.Length, "counts characters", ("length({0})",), S1, aliases=("len", "char_length")),
    Rule("trim", exp.Trim, "removes characters; the set of characters is a constant",
         ("trim({0})", "ltrim({0})", "rtrim({0})", "trim({0}, '{expression}')"), S1,
         consts={"expression": Text(_TEXT_SAMPLES)}, aliases=("ltrim", "rtrim")),
    Rule("substring", exp.Substring, "a slice; positions out of range give '' (or a caught out-of-range error)",
         ("substring({0}, {start})", "substring({0}, {start}, {length})"), S1,
         consts={"start": Int(-MAX_POSITION, MAX_POSITION), "length": Int(-MAX_POSITION, MAX_POSITION)},
         aliases=("substr",)),
    Rule("left", exp.Left, "a prefix of constant length", ("left({0}, {expression})",), S1,
         consts={"expression": Int(-MAX_POSITION, MAX_POSITION)}),
    Rule("right", exp.Right, "a suffix of constant length", ("right({0}, {expression})",), S1,
         consts={"expression": Int(-MAX_POSITION, MAX_POSITION)}),
    Rule("starts_with", exp.StartsWith, "a test against a constant", ("starts_with({0}, '{expression}')",), S1,
         consts={"expression": Text(_TEXT_SAMPLES)}),
    Rule("ends_with", exp.EndsWith, "a test against a constant", ("ends_with({0}, '{expression}')",), S1,
         consts={"expression": Text(_TEXT_SAMPLES)}),
    Rule("contains", exp.Contains, "a test against a constant", ("contains({0}, '{expression}')",), S1,
         consts={"expression": Text(_TEXT_SAMPLES)}),
    Rule("strpos", exp.StrPosition, "a search for a constant",
         ("strpos({0}, '{substr}')", "position('{substr}' IN {0})"), S1, consts={"substr": Text(_TEXT_SAMPLES)},
         aliases=("instr", "position")),
    Rule("like", exp.Like, "LIKE / NOT LIKE with a constant pattern",
         ("{0} LIKE '{expression}'", "{0} NOT LIKE '{expression}'"), S1, consts={"expression": LIKE}),
    Rule("ilike", exp.ILike, "ILIKE / NOT ILIKE with a constant pattern",
         ("{0} ILIKE '{expression}'", "{0} NOT ILIKE '{expression}'"), S1, consts={"expression": ILIKE}),
    Rule("replace", exp.Replace, "replaces constant text by constant text (bounded growth)",
         ("replace({0}, '{expression}', '{replacement}')",), S1,
         consts={"expression": Text(_TEXT_SAMPLES), "replacement": Text(("", "b", "🦆", "yyyyyyyy"))},
         args=("this",), extra=_replace_growth,
         constants_note=f"the replacement is at most {SIZE_FACTOR} times as long as the text it replaces"),
    Rule("concat", exp.Concat, "joins its arguments (NULL as ''): as long as its inputs",
         ("concat({0}, {1})", "concat({0}, '-', {1})"), (("VARCHAR", "VARCHAR"),), args=("expressions",)),
    Rule("lpad", exp.Pad, "pads or cuts to a constant length (rpad likewise)",
         ("lpad({0}, {expression}, '{fill_pattern}')", "rpad({0}, {expression}, '{fill_pattern}')"), S1,
         consts={"expression": Int(0, MAX_PAD, code=SIZE), "fill_pattern": Text(_TEXT_SAMPLES)},
         aliases=("rpad",)),
    Rule("regexp_matches", exp.RegexpLike, "RE2 matching (linear time) with a constant pattern",
         ("regexp_matches({0}, '{expression}')", "regexp_matches({0}, '{expression}', '{flag}')"), S1,
         consts={"expression": REGEX, "flag": OPTIONS}),
    Rule("regexp_full_match", exp.RegexpFullMatch, "RE2 matching with a constant pattern",
         ("regexp_full_match({0}, '{expression}')", "regexp_full_match({0}, '{expression}', '{options}')"), S1,
         consts={"expression": REGEX, "options": OPTIONS}),
    Rule("regexp_extract", exp.RegexpExtract, "a part of the input, found with a constant pattern",
         ("regexp_extract({0}, '{expression}')", "regexp_extract({0}, '{expression}', {group})"), S1,
         consts={"expression": REGEX, "group": Int(0, 9)}),
    Rule("regexp_replace", exp.RegexpReplace,
         "replaces the first match by a constant without back-references (no 'g'): grows by the replacement only",
         ("regexp_replace({0}, '{expression}', '{replacement}')",
          "regexp_replace({0}, '{expression}', '{replacement}', '{modifiers}')"), S1,
         consts={"expression": REGEX,
                 "replacement": Text(("", "x", "é🦆", "yyyyyyyyyy"), max_len=64, valid=lambda v: "\\" not in v,
                                     description="a constant of at most 64 characters without \\"),
                 "modifiers": OPTIONS}),
    # -- dates and times
    Rule("year", exp.Year, "a date part", ("year({0})",), T1),
    Rule("quarter", exp.Quarter, "a date part", ("quarter({0})",), T1),
    Rule("month", exp.Month, "a date part", ("month({0})",), T1),
    Rule("day", exp.Day, "a date part", ("day({0})",), T1),
    Rule("dayofmonth", exp.DayOfMonth, "a date part", ("dayofmonth({0})",), T1),
    Rule("hour", exp.Hour, "a time part", ("hour({0})",), (*T1, ("TIME",))),
    Rule("minute", exp.Minute, "a time part", ("minute({0})",), (*T1, ("TIME",))),
    Rule("second", exp.Second, "a time part", ("second({0})",), (*T1, ("TIME",))),
    Rule("date_part", "date_part", "a date part from the verified list (day-of-week and day-of-year parts read CAST(x AS TIMESTAMP))",
         ("date_part('{arg0}', {0})",), T1, consts={0: Part(*DATE_PARTS)}, arity=(2, 2), aliases=("datepart",)),
    Rule("extract", exp.Extract, "a date part from the verified list (day-of-week and day-of-year parts read CAST(x AS TIMESTAMP))", ("extract({this} FROM {0})",), T1,
         args=("expression",), consts={"this": Part(*DATE_PARTS)}),
    Rule("date_trunc", exp.TimestampTrunc, "truncation to a part from the verified list",
         ("date_trunc('{unit}', {0})", "date_trunc('{unit}', CAST({0} AS DATE))"), (*T1, ("INTERVAL",)),
         consts={"unit": Part(*TRUNC_PARTS)}, aliases=("datetrunc",), also=(exp.DateTrunc,)),
    Rule("date_diff", exp.DateDiff, "a difference in a part from the verified list (overflow is caught); "
         "TIMESTAMPTZ values need CAST(... AS TIMESTAMP) first",
         ("date_diff('{unit}', {0}, {1})",),
         (("DATE", "DATE"), ("TIMESTAMP", "TIMESTAMP"), ("TIME", "TIME")),  # TIMESTAMPTZ: check_engine_hazards
         args=("this", "expression"), consts={"unit": Part(*DIFF_PARTS)}, aliases=("datediff",)),
    Rule("strftime", exp.TimeToStr, "formats with a constant format of verified specifiers",
         ("strftime({0}, '{format}')",), T1, consts={"format": STRFTIME_FORMAT}),
    Rule("last_day", exp.LastDay, "the last day of the month", ("last_day({0})",), T1),
    Rule("dayname", exp.Dayname, "an English day name", ("dayname({0})",), T1),
    Rule("monthname", exp.Monthname, "an English month name", ("monthname({0})",), T1),
)  # fmt: skip

#: The function list: sqlglot class or lower-case anonymous name -> rule.
FUNCTIONS: dict[type[exp.Expr] | str, Rule] = {}
for _rule in RULES:
    FUNCTIONS[_rule.node] = _rule
    for _class in _rule.also:
        FUNCTIONS[_class] = _rule
    if isinstance(_rule.node, str):
        for _alias in _rule.aliases:
            FUNCTIONS[_alias] = _rule
del _rule

#: Functions whose output size is set by an argument (``None``: by any argument): refused
#: with DP255 when such an argument is not a constant (and with DP253 otherwise: they are
#: not on the list either).
SIZE_FUNCTIONS: dict[type[exp.Expr], tuple[str, ...] | None] = {
    exp.Repeat: ("times",), exp.GenerateSeries: ("start", "end", "step"), exp.Split: None,
    exp.RegexpSplit: None, exp.ArrayConcat: None, exp.Unnest: None, exp.Explode: None,
}  # fmt: skip
SIZE_NAMES = frozenset({
    "repeat", "range", "generate_series", "list_resize", "array_resize", "string_split", "str_split",
    "string_split_regex", "str_split_regex", "regexp_split_to_array", "regexp_extract_all", "list_value",
    "array_value", "unnest", "bar", "list_concat", "array_concat", "list_cat", "array_cat", "list_zip",
    "array_zip", "string_to_array", "split",
})  # fmt: skip


def _sized_by_data(node: exp.Expr) -> bool:
    if isinstance(node, exp.Anonymous):
        if _function_name(node) not in SIZE_NAMES:
            return False
        return any(not _is_constant(a) for a in node.expressions)
    if type(node) not in SIZE_FUNCTIONS:
        return False
    keys = SIZE_FUNCTIONS[type(node)]
    values = [node.args.get(k) for k in keys] if keys else list(node.iter_expressions())
    return any(v is not None and not _is_constant(v) for v in values)


# -- casts ----------------------------------------------------------------------------------------
D = exp.DataType.Type
#: Target types of CAST / TRY_CAST / :: (a failing cast is a conversion error, caught by TRY).
CAST_TYPES = {
    D.BOOLEAN: "BOOLEAN", D.TINYINT: "TINYINT", D.SMALLINT: "SMALLINT", D.INT: "INTEGER", D.BIGINT: "BIGINT",
    D.INT128: "HUGEINT", D.UTINYINT: "UTINYINT", D.USMALLINT: "USMALLINT", D.UINT: "UINTEGER",
    D.UBIGINT: "UBIGINT", D.FLOAT: "FLOAT", D.DOUBLE: "DOUBLE", D.DECIMAL: "DECIMAL(p, s)",
    D.VARCHAR: "VARCHAR", D.TEXT: "VARCHAR", D.DATE: "DATE", D.TIMESTAMP: "TIMESTAMP",
    D.TIMESTAMPNTZ: "TIMESTAMP", D.TIMESTAMPTZ: "TIMESTAMPTZ", D.TIME: "TIME", D.INTERVAL: "INTERVAL",
}  # fmt: skip


# -- structural nodes -----------------------------------------------------------------------------
#: Operators: every argument is a row expression. (name shown in the reference, node classes)
OPERATORS: tuple[tuple[str, tuple[type[exp.Expr], ...]], ...] = (
    ("arithmetic + - * / // % and unary -", (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.IntDiv, exp.Mod, exp.Neg)),
    ("string concatenation ||", (exp.DPipe,)),
    ("comparisons = <> < <= > >= IS [NOT] DISTINCT FROM",
     (exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE, exp.NullSafeEQ, exp.NullSafeNEQ)),
    ("AND, OR, NOT", (exp.And, exp.Or, exp.Not)),
    ("[NOT] BETWEEN", (exp.Between,)),
    ("CASE [x] WHEN ... THEN ... [ELSE ...] END, IF(c, a, b)", (exp.Case, exp.If)),
    ("parentheses", (exp.Paren,)),
)  # fmt: skip
_OPERATOR_CLASSES = tuple(c for _, classes in OPERATORS for c in classes)
#: Flags sqlglot keeps on nodes that are not sub-expressions.
_LEAF_TYPES = (bool, str, int, float, type(None))
_VARIANCES = (exp.VariancePop, exp.Variance, exp.StddevPop, exp.StddevSamp, exp.Stddev)
_QUANTILES = (exp.Median, exp.PercentileCont)
#: MIN / MAX are accepted by the allowlist only for the per-subject subquery (its values are one
#: subject's); the query analysis refuses them anywhere else.
_AGGREGATES = (exp.Count, exp.Sum, exp.Avg, *_VARIANCES, *_QUANTILES, exp.Min, exp.Max)
SUPPORTED_AGGREGATES = (
    "COUNT(*), COUNT(expr), COUNT(DISTINCT expr), SUM(expr), AVG(expr), VAR_POP / VAR_SAMP / VARIANCE(expr), "
    "STDDEV_POP / STDDEV_SAMP / STDDEV(expr), MEDIAN(expr), QUANTILE_CONT(expr, q), PERCENTILE_CONT(expr, q) "
    "[FILTER (WHERE ...)]"
)

# SELECT clauses (sqlglot arg names) and how they are checked.
_SELECT_CLAUSES = {
    "expressions", "from_", "joins", "where", "group", "having", "order", "limit", "offset", "hint", "with_",
}  # fmt: skip
_CLAUSE_NAMES = {
    "distinct": "SELECT DISTINCT", "qualify": "QUALIFY", "windows": "WINDOW", "into": "SELECT INTO",
    "laterals": "LATERAL VIEW", "pivots": "PIVOT", "sample": "USING SAMPLE", "connect": "CONNECT BY",
    "match": "MATCH_RECOGNIZE", "prewhere": "PREWHERE", "kind": "SELECT AS", "operation_modifiers": "modifiers",
    "exclude": "EXCLUDE", "distribute": "DISTRIBUTE BY", "sort": "SORT BY", "cluster": "CLUSTER BY",
    "locks": "FOR UPDATE", "settings": "SETTINGS", "format": "FORMAT", "options": "OPTIONS", "for_": "FOR",
}  # fmt: skip
_TABLE_DECORATIONS = {
    "sample": "TABLESAMPLE", "pivots": "PIVOT / UNPIVOT", "hints": "a table hint", "system_time": "time travel",
    "version": "time travel (FOR ... AS OF)", "when": "time travel (AT / BEFORE)", "ordinality": "WITH ORDINALITY",
    "laterals": "LATERAL", "joins": "a nested join", "only": "ONLY", "partition": "PARTITION",
    "changes": "CHANGES", "rows_from": "ROWS FROM", "format": "a format", "pattern": "a file pattern",
    "indexed": "INDEXED BY",
}  # fmt: skip


def _present(value) -> bool:
    return value is not None and value is not False and value != [] and value != ""


def _children(value) -> list[exp.Expr]:
    if isinstance(value, exp.Expr):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, exp.Expr)]
    return []


def _function_name(node: exp.Expr) -> str:
    if isinstance(node, exp.Anonymous):
        return str(node.this).lower()
    if isinstance(node, exp.Func):
        return node.sql_name().lower()
    return node.key.lower()


# -- the checker ----------------------------------------------------------------------------------
def check(statement: exp.Expr) -> None:
    """Refuse the first construct of ``statement`` that is not on the allowlist.

    ``statement``: a DP SELECT as parsed (with its ``WITH DIFFERENTIAL_PRIVACY OPTIONS``
    node, which is skipped), an ``ExplainPrivacy`` of one, or a ``CreateSynthetic``.
    Raises ``errors.UnsupportedQueryError`` (DP250-DP257); returns None if all is allowed.
    Where the text received parsed differently from what runs (``dialect.received``), both must pass.
    """
    written = received(statement)
    if written is not None:
        check(written)
    if isinstance(statement, ExplainPrivacy):
        check(statement.this)
        return
    if isinstance(statement, CreateSynthetic):
        _Checker().table(statement.args["source"], allow_function=False)
        return
    if not isinstance(statement, exp.Select):
        raise _refuse(
            SHAPE,
            f"{statement.key.upper()} over protected data is not supported: a DP query is one SELECT",
            "write one SELECT ... FROM <protected table> with aggregates; combine answers afterwards",
        )
    _Checker().select(statement)
    cost.check(statement)  # the text and work of each row expression [cost]


class _Checker:
    """One walk over a statement; each method checks one kind of node and its children."""

    # -- statement -----------------------------------------------------------------------------
    def select(self, q: exp.Select) -> None:
        for key, value in q.args.items():
            if key in _SELECT_CLAUSES or not _present(value):
                continue
            name = _CLAUSE_NAMES.get(key, key.upper())
            code = FROM_ITEM if key in ("sample", "pivots", "laterals") else NODE
            raise _refuse(
                code, f"{name} is not supported in a query over protected data",
                "a DP query has SELECT, FROM, JOIN, WHERE, GROUP BY, HAVING, ORDER BY and LIMIT / OFFSET",
            )  # fmt: skip
        hint = q.args.get("hint")
        if hint is not None and not isinstance(hint, DPOptions):
            raise _refuse(NODE, f"Optimizer hint {_sql(hint)} is not supported", "drop the hint")
        if q.args.get("with_") is not None:
            self.degree_cte(q.args["with_"])
        from_ = q.args.get("from_")
        function_source = False
        if from_ is not None and isinstance(from_.this, exp.Subquery) and not q.args.get("joins"):
            self.per_subject(from_.this)
        elif from_ is not None:
            function_source = self.table(from_.this, allow_function=True)
        for join in q.args.get("joins") or []:
            self.join(join)
        for projection in q.expressions:
            self.projection(projection, function_source)
        where = q.args.get("where")
        if where is not None:
            self.expr(where.this)
        group = q.args.get("group")
        if group is not None:
            self.group(group)
        having = q.args.get("having")
        if having is not None:
            self.expr(having.this)
        order = q.args.get("order")
        if order is not None:
            self.order(order)
        for key in ("limit", "offset"):
            node = q.args.get(key)
            if node is not None:
                self.limit(node, key.upper())

    def projection(self, node: exp.Expr, function_source: bool) -> None:
        if isinstance(node, exp.Alias):
            self.expr(node.this)
            return
        if isinstance(node, exp.Star) and function_source and not any(_present(v) for v in node.args.values()):
            return  # SELECT * FROM dp_top_k_columns(...): the noisy ranking, not rows
        self.expr(node)

    def group(self, group: exp.Group) -> None:
        for key, value in group.args.items():
            if key in ("expressions", "all") or not _present(value):
                continue
            raise _refuse(
                NODE, f"GROUP BY {key.upper().replace('_', ' ')} is not supported over protected data",
                "group by plain expressions (or GROUP BY ALL); run one query per grouping",
            )  # fmt: skip
        for node in group.expressions:
            if isinstance(node, (exp.Rollup, exp.Cube, exp.GroupingSets)):
                raise _refuse(
                    NODE, f"GROUP BY {_sql(node)} is not supported over protected data",
                    "group by plain expressions; run one query per grouping",
                )  # fmt: skip
            self.expr(node)

    def order(self, order: exp.Order) -> None:
        if _present(order.args.get("siblings")) or order.this is not None:
            raise _refuse(NODE, f"{_sql(order)} is not supported", "ORDER BY expressions [ASC | DESC]")
        for item in order.expressions:
            if not isinstance(item, exp.Ordered) or _present(item.args.get("with_fill")):
                raise _refuse(NODE, f"ORDER BY {_sql(item)} is not supported", "ORDER BY expressions [ASC | DESC]")
            self.expr(item.this)

    def limit(self, node: exp.Expr, what: str) -> None:
        extra = [k for k, v in node.args.items() if k != "expression" and _present(v)]
        value = node.args.get("expression")
        if extra or not _is_constant(value):
            raise _refuse(
                NODE, f"{_sql(node)} is not supported: {what} takes a constant number of rows",
                f"write {what} 10 (parameters are fine)",
            )  # fmt: skip

    # -- FROM and JOIN ---------------------------------------------------------------------------
    def per_subject(self, sub: exp.Subquery) -> None:
        """The per-subject subquery: ``FROM (SELECT unit, agg AS v, ... FROM t [WHERE ...] GROUP BY unit) s``.

        Its SELECT is checked by the same rules as any DP SELECT (tables, functions, nodes);
        it has no JOIN, HAVING, ORDER BY, LIMIT or nested subquery. That it groups by the privacy
        unit alone, so that every subject yields at most one row, is checked by the analysis,
        which knows the unit [per-subject].
        """
        shape = "FROM (SELECT unit, COUNT(*) AS n, SUM(x) AS s FROM t [WHERE ...] GROUP BY unit) AS per_subject"
        extra = [k for k, v in sub.args.items() if k not in ("this", "alias") and _present(v)]
        inner = sub.this
        alias = sub.args.get("alias")
        if extra or not isinstance(inner, exp.Select) or (alias is not None and alias.args.get("columns")):
            raise _refuse(FROM_ITEM, f"A subquery in FROM is supported in one shape only: {shape}", _FROM_HINT)
        for key in ("joins", "having", "order", "limit", "offset", "with_", "distinct", "qualify"):
            if _present(inner.args.get(key)):
                raise _refuse(
                    FROM_ITEM, f"The per-subject subquery may not have {_CLAUSE_NAMES.get(key, key.upper())}",
                    f"write {shape}",
                )  # fmt: skip
        if not isinstance(inner.args.get("from_") and inner.args["from_"].this, exp.Table) or inner.args.get("group") is None:
            raise _refuse(FROM_ITEM, f"The per-subject subquery reads one table and groups by its unit: {shape}",
                          _FROM_HINT)  # fmt: skip
        self.in_per_subject = True
        try:
            self.select(inner)
        finally:
            self.in_per_subject = False

    def table(self, node: exp.Expr, *, allow_function: bool) -> bool:
        """A bare table (True if it is dpgate's table function)."""
        if not isinstance(node, exp.Table):
            kind = {
                exp.Subquery: "A subquery", exp.Lateral: "LATERAL", exp.Unnest: "UNNEST", exp.Values: "VALUES",
                exp.Pivot: "PIVOT / UNPIVOT",
            }.get(type(node), "This FROM item")  # fmt: skip
            raise _refuse(FROM_ITEM, f"{kind} in FROM is not supported over protected data: {_sql(node)}", _FROM_HINT)
        for key, value in node.args.items():
            if key in ("this", "alias", "db", "catalog") or not _present(value):
                continue
            name = _TABLE_DECORATIONS.get(key, key.upper())
            raise _refuse(
                FROM_ITEM, f"{name} on {node.name or _sql(node.this)} is not supported ({_sql(node)})", _FROM_HINT
            )
        alias = node.args.get("alias")
        if alias is not None:
            if not isinstance(alias, exp.TableAlias) or alias.args.get("columns"):
                raise _refuse(
                    FROM_ITEM, f"A column alias list relabels the columns of {node.name}: {_sql(node)}",
                    f"give the table a plain alias (FROM {node.name} AS t) and name columns in SELECT",
                )  # fmt: skip
            extra = [k for k, v in alias.args.items() if k != "this" and _present(v)]
            if extra or not isinstance(alias.this, exp.Identifier):
                raise _refuse(FROM_ITEM, f"Table alias {_sql(alias)} is not supported", _FROM_HINT)
        db, catalog = node.args.get("db"), node.args.get("catalog")
        if db is not None and not (isinstance(db, exp.Identifier) and db.name.lower() == "main"):
            raise _refuse(FROM_ITEM, f"{_sql(node)} is not a table of the main schema", _FROM_HINT)
        if catalog is not None and (db is None or not isinstance(catalog, exp.Identifier)):
            raise _refuse(FROM_ITEM, f"{_sql(node)} is not supported", _FROM_HINT)
        source = node.this
        if isinstance(source, exp.Identifier):
            return False
        if allow_function and isinstance(source, exp.Anonymous) and _function_name(source) == TOPK_COLUMNS_FUNCTION:
            for arg in source.expressions:
                value = arg.expression if isinstance(arg, (exp.Kwarg, exp.PropertyEQ, exp.EQ)) else arg
                if not _is_constant(value):
                    raise _refuse(
                        CONSTANT, f"{TOPK_COLUMNS_FUNCTION}() takes constants: {_sql(arg)}",
                        f"write {TOPK_COLUMNS_FUNCTION}('table', k => 10 [, counts => true])",
                    )  # fmt: skip
            return True
        name = _function_name(source) if isinstance(source, exp.Func) else _sql(source)
        raise _refuse(
            FROM_ITEM, f"Table function {name}() is not supported in a query over protected data",
            f"read protected tables by name; the only table function here is {TOPK_COLUMNS_FUNCTION}('table', k => n)",
        )  # fmt: skip

    def join(self, join: exp.Join) -> None:
        for key, value in join.args.items():
            if key in ("this", "on", "side", "kind", "using") or not _present(value):
                continue
            what = {"method": f"{str(value).upper()} JOIN", "match_condition": "ASOF JOIN", "pivots": "PIVOT"}.get(
                key, key.upper()
            )
            raise _refuse(JOIN, f"{what} is not supported over protected data ({_sql(join)})", _JOIN_HINT)
        side = str(join.args.get("side") or "").upper()
        kind = str(join.args.get("kind") or "").upper()
        if side not in ("", "LEFT", "RIGHT", "FULL") or kind not in ("", "INNER", "OUTER", "CROSS"):
            what = " ".join(p for p in (side, kind) if p)
            raise _refuse(JOIN, f"{what} JOIN is not supported ({_sql(join)})", _JOIN_HINT)
        if kind == "OUTER" and not side:
            raise _refuse(JOIN, f"{_sql(join)} is not supported", _JOIN_HINT)
        on, using = join.args.get("on"), join.args.get("using")
        if kind == "CROSS" and (on is not None or using):
            raise _refuse(JOIN, f"CROSS JOIN takes no condition ({_sql(join)})", _JOIN_HINT)
        if side and on is None and not using:
            raise _refuse(JOIN, f"{side} JOIN needs ON or USING ({_sql(join)})", _JOIN_HINT)
        self.table(join.this, allow_function=False)
        for ident in using or []:
            if not isinstance(ident, (exp.Identifier, exp.Column)) or (
                isinstance(ident, exp.Column) and (ident.table or not isinstance(ident.this, exp.Identifier))
            ):
                raise _refuse(JOIN, f"USING ({_sql(ident)}) takes column names", _JOIN_HINT)
        if on is not None:
            self.join_condition(on)

    def join_condition(self, on: exp.Expr) -> None:
        """A conjunction of comparisons of two columns (join conditions run outside TRY)."""
        while isinstance(on, exp.Paren):
            on = on.this
        if isinstance(on, exp.And):
            self.join_condition(on.this)
            self.join_condition(on.expression)
            return
        comparisons = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ)
        ok = isinstance(on, comparisons) and all(
            isinstance(side, exp.Column) and isinstance(side.this, exp.Identifier) for side in (on.this, on.expression)
        )
        if not ok:
            raise _refuse(
                JOIN, f"Join condition {_sql(on)} is not a comparison of two columns",
                "join on key columns, e.g. ON t.code = lookup.code; put conditions on constants in WHERE",
            )  # fmt: skip
        for side in (on.this, on.expression):
            self.column(side)

    def degree_cte(self, with_: exp.With) -> None:
        """The one CTE dpgate plans: the degree table of a graph's k-star sum."""
        shape = (
            "WITH d AS (SELECT x, COUNT(*) AS deg FROM (SELECT src AS x FROM g UNION ALL SELECT dst FROM g) "
            "GROUP BY x) SELECT SUM(deg * (deg - 1) / 2) FROM d"
        )
        bad = _refuse(SHAPE, f"This WITH clause is not supported over protected data: {_sql(with_)}",
                      f"the only CTE accepted is the degree table of a graph's k-star sum: {shape}")  # fmt: skip
        extra = [k for k, v in with_.args.items() if k != "expressions" and _present(v)]
        if extra or len(with_.expressions) != 1:
            raise bad
        cte = with_.expressions[0]
        alias = cte.args.get("alias")
        if (
            not isinstance(cte, exp.CTE)
            or [k for k, v in cte.args.items() if k not in ("this", "alias") and _present(v)]
            or not isinstance(alias, exp.TableAlias)
            or alias.args.get("columns")
        ):
            raise bad
        body = cte.this
        if not isinstance(body, exp.Select) or self._extra_clauses(body, "group") or len(body.expressions) != 2:
            raise bad
        key, deg = body.expressions
        count = deg.unalias()
        if not (isinstance(deg, exp.Alias) and isinstance(count, exp.Count) and isinstance(count.this, exp.Star)):
            raise bad
        if not isinstance(key.unalias(), exp.Column):
            raise bad
        group = body.args.get("group")
        if group is None or len(group.expressions) != 1 or not isinstance(group.expressions[0], exp.Column):
            raise bad
        if [k for k, v in group.args.items() if k != "expressions" and _present(v)]:
            raise bad
        sub = body.args["from_"].this
        if not isinstance(sub, exp.Subquery) or [
            k for k, v in sub.args.items() if k not in ("this", "alias") and _present(v)
        ]:
            raise bad
        sub_alias = sub.args.get("alias")
        if sub_alias is not None and (sub_alias.args.get("columns") or not isinstance(sub_alias, exp.TableAlias)):
            raise bad
        union = sub.this
        if not isinstance(union, exp.Union) or union.args.get("distinct"):
            raise bad
        if [k for k, v in union.args.items() if k not in ("this", "expression", "distinct") and _present(v)]:
            raise bad
        for part in (union.this, union.expression):
            if not isinstance(part, exp.Select) or self._extra_clauses(part) or len(part.expressions) != 1:
                raise bad
            column = part.expressions[0]
            if isinstance(column, exp.Alias):
                column = column.this
            if not isinstance(column, exp.Column):
                raise bad
            self.column(column)
            self.table(part.args["from_"].this, allow_function=False)
        self.column(key.unalias())

    @staticmethod
    def _extra_clauses(select: exp.Select, *allowed: str) -> bool:
        if select.args.get("from_") is None:
            return True
        return any(
            _present(v) for k, v in select.args.items() if k not in ("expressions", "from_", *allowed)
        )

    # -- expressions -----------------------------------------------------------------------------
    def column(self, node: exp.Column) -> None:
        extra = [k for k, v in node.args.items() if k not in ("this", "table") and _present(v)]
        if extra or not isinstance(node.this, exp.Identifier):
            what = "A star" if isinstance(node.this, exp.Star) else "This column reference"
            raise _refuse(NODE, f"{what} ({_sql(node)}) is not supported here", "name a column (or table.column)")
        table = node.args.get("table")
        if table is not None and not isinstance(table, exp.Identifier):
            raise _refuse(NODE, f"Column reference {_sql(node)} is not supported", "write column or table.column")

    def expr(self, node: exp.Expr) -> None:
        """A row-level (or post-processing) expression."""
        if isinstance(node, exp.Column):
            self.column(node)
            return
        if isinstance(node, (exp.Literal, exp.Null, exp.Boolean, exp.Placeholder)):
            return
        if isinstance(node, exp.Interval):
            unit = node.args.get("unit")
            if not _is_constant(node.this) or (unit is not None and not isinstance(unit, exp.Var)):
                raise _refuse(CONSTANT, f"Interval {_sql(node)} must be a constant", "write INTERVAL 3 DAY")
            return
        if isinstance(node, (exp.Cast, exp.TryCast)):
            self.cast(node)
            return
        if isinstance(node, _AGGREGATES) or isinstance(node, exp.Filter):
            self.aggregate(node)
            return
        if isinstance(node, exp.Anonymous) and _function_name(node) in GRAPH_AGGREGATES:
            self.graph_aggregate(node)
            return
        if isinstance(node, exp.In):
            self.in_list(node)
            return
        if isinstance(node, exp.Is):
            if not isinstance(node.expression, (exp.Null, exp.Boolean)):
                raise _refuse(NODE, f"{_sql(node)} is not supported", "write x IS [NOT] NULL, IS [NOT] TRUE / FALSE")
            self.expr(node.this)
            return
        if isinstance(node, exp.Escape):
            if not isinstance(node.this, (exp.Like, exp.ILike)) or not Text(()).ok(node.expression):
                raise _refuse(CONSTANT, f"{_sql(node)}: ESCAPE takes a constant", "write LIKE 'a!%' ESCAPE '!'")
            # DuckDB raises per row (and TRY does not catch it) for an escape that is not one ASCII
            # character, and for a pattern ending in an unescaped escape character [escape].
            escape, pattern = _string(node.expression) or "", _string(node.this.expression)
            if len(escape.encode()) > 1 or pattern is None or (escape and _dangling_escape(pattern, escape)):
                raise _refuse(
                    CONSTANT, f"{_sql(node)}: ESCAPE takes one ASCII character, and the pattern may not end in it",
                    "write LIKE 'a!%' ESCAPE '!' (a constant pattern; the escape character before another character)",
                )
            self.expr(node.this)
            return
        rule = self.rule(node)
        if rule is not None:
            self.call(node, rule)
            return
        if isinstance(node, _OPERATOR_CLASSES):
            self.operator(node)
            return
        self.not_allowed(node)

    def operator(self, node: exp.Expr) -> None:
        for key, value in node.args.items():
            if isinstance(value, _LEAF_TYPES):
                continue
            for child in _children(value):
                self.expr(child)

    def rule(self, node: exp.Expr) -> Rule | None:
        if isinstance(node, exp.Anonymous):
            found = FUNCTIONS.get(_function_name(node))
        else:
            found = FUNCTIONS.get(type(node))
        return found

    def call(self, node: exp.Expr, rule: Rule) -> None:
        name = _function_name(node)
        if isinstance(node, exp.Anonymous):
            args = list(node.expressions)
            lo, hi = rule.arity or (0, 1 << 30)
            if not lo <= len(args) <= hi:
                raise _refuse(
                    FUNCTION, f"{_sql(node)}: {name}() takes {lo if lo == hi else f'{lo} to {hi}'} argument(s) here",
                    f"write it as {_form_example(rule)}",
                )  # fmt: skip
            slots: list[tuple[str | int, exp.Expr]] = list(enumerate(args))
        else:
            slots = []
            for key, value in node.args.items():
                if isinstance(value, _LEAF_TYPES):
                    continue
                for child in _children(value):
                    if key not in rule.args and key not in rule.consts:
                        raise _refuse(
                            FUNCTION, f"{_sql(node)}: this form of {rule.name}() is not on dpgate's list",
                            f"write it as {_form_example(rule)}",
                        )  # fmt: skip
                    slots.append((key, child))
        if rule.extra is not None:
            rule.extra(node)
        for key, child in slots:
            const = rule.consts.get(key)
            if const is None:
                self.expr(child)
                continue
            if not const.ok(child):
                constant = _is_constant(child) or isinstance(child, exp.Var)
                if const is REGEX and _string(child) is not None:
                    cost.check_regex(node, _string(child))  # says how large the program is
                elif const in (LIKE, ILIKE) and _string(child) is not None:
                    cost.check_like(node, backtracking=True)  # says why '%' inside backtracks
                problem = "is not an accepted value" if constant else "must be a constant"
                raise _refuse(
                    CONSTANT if const.code == cost.WORK and not constant else const.code,
                    f"In {_sql(node)}, the argument {_sql(child, 40)} {problem}: it selects how {rule.name}() behaves"
                    + (" and how large its result is" if const.code == SIZE else ""),
                    f"write {const.description} there",
                )

    def cast(self, node: exp.Expr) -> None:
        extra = [k for k, v in node.args.items() if k not in ("this", "to") and not isinstance(v, _LEAF_TYPES)]
        to = node.args.get("to")
        if extra or not isinstance(to, exp.DataType) or to.this not in CAST_TYPES or (
            to.expressions
            and to.this != D.DECIMAL
            and not (to.this in (D.VARCHAR, D.TEXT) and len(to.expressions) == 1)
        ):
            raise _refuse(
                CAST, f"Cast {_sql(node)} is not supported: its target type is not on dpgate's list",
                "cast to one of " + ", ".join(sorted(set(CAST_TYPES.values()))),
            )  # fmt: skip
        for param in to.expressions:
            if not isinstance(param, exp.DataTypeParam) or not _is_constant(param.this):
                raise _refuse(CAST, f"Cast {_sql(node)}: type parameters are constants", "write DECIMAL(10, 2)")
        self.expr(node.this)

    def in_list(self, node: exp.In) -> None:
        for key in ("query", "unnest", "field"):
            if _present(node.args.get(key)):
                what = "a subquery" if key == "query" else _sql(node.args[key], 40)
                raise _refuse(
                    NODE, f"IN over {what} is not supported over protected data ({_sql(node)})",
                    "write IN with a list of constants, e.g. x IN ('a', 'b'), or join a public table",
                )  # fmt: skip
        for item in node.expressions:
            if not _is_constant(item):
                raise _refuse(
                    NODE, f"IN ({_sql(item, 40)}, ...): the list of IN holds constants only ({_sql(node)})",
                    "write x IN (1, 2, 3); compare with other columns with = and OR",
                )  # fmt: skip
        self.expr(node.this)

    in_per_subject = False

    def aggregate(self, node: exp.Expr) -> None:
        if isinstance(node, (exp.Min, exp.Max)) and not self.in_per_subject:
            raise _refuse(FUNCTION, f"Aggregate {_sql(node)} is not on dpgate's list (MIN / MAX only per subject)",
                          f"use {SUPPORTED_AGGREGATES}")  # fmt: skip
        if isinstance(node, exp.Filter):
            inner = node.this
            where = node.expression
            if not isinstance(inner, _AGGREGATES) or not isinstance(where, exp.Where):
                raise _refuse(NODE, f"{_sql(node)}: FILTER applies to aggregates", f"use {SUPPORTED_AGGREGATES}")
            self.aggregate(inner)
            self.expr(where.this)
            return
        text = _sql(node)
        extra = [k for k, v in node.args.items() if k != "this" and not isinstance(v, _LEAF_TYPES) and _present(v)]
        if isinstance(node, exp.PercentileCont) and extra == ["expression"]:
            # The level q is a plain number in [0, 1]: it only picks which rank the mechanism aims at.
            level = _number(node.args["expression"])
            if level is None or not 0 <= level <= 1:
                raise _refuse(CONSTANT, f"{text}: the quantile level must be one number between 0 and 1",
                              "write QUANTILE_CONT(x, 0.9); for several quantiles write several aggregates")  # fmt: skip
            extra = []
        arg = node.this
        if extra or arg is None:
            raise _refuse(NODE, f"{text}: this form of the aggregate is not supported", f"use {SUPPORTED_AGGREGATES}")
        if isinstance(arg, exp.Star):
            if not isinstance(node, exp.Count) or any(_present(v) for v in arg.args.values()):
                raise _refuse(NODE, f"{text} is not supported", f"use {SUPPORTED_AGGREGATES}")
            return
        if isinstance(arg, exp.Distinct):
            if not isinstance(node, exp.Count) or len(arg.expressions) != 1 or _present(arg.args.get("on")):
                raise _refuse(
                    NODE, f"{text}: DISTINCT is supported in COUNT(DISTINCT expr) only", f"use {SUPPORTED_AGGREGATES}"
                )
            self.expr(arg.expressions[0])
            return
        self.expr(arg)

    def graph_aggregate(self, node: exp.Anonymous) -> None:
        for arg in node.expressions:
            if isinstance(arg, exp.Column):
                self.column(arg)
            elif _integer(arg) is None:
                raise _refuse(
                    CONSTANT, f"{_sql(node)}: subgraph counts take the endpoint columns and a whole number k",
                    "write TRIANGLE_COUNT(src, dst) or KSTAR_COUNT(src, dst, 2)",
                )  # fmt: skip

    def not_allowed(self, node: exp.Expr) -> None:
        text = _sql(node)
        if isinstance(node, exp.Window):
            raise _refuse(NODE, f"Window function {text} is not supported over protected data",
                          "aggregate with GROUP BY; ORDER BY / LIMIT on the result are free")  # fmt: skip
        if isinstance(node, (exp.Subquery, exp.Query, exp.Exists, exp.Any, exp.All)):
            raise _refuse(NODE, f"Subquery {text} is not supported in a query over protected data",
                          "join public lookup tables in FROM; filter with WHERE on this table's columns")  # fmt: skip
        if isinstance(node, exp.Lambda):
            raise _refuse(NODE, f"Lambda {text} is not supported over protected data", _NODE_HINT)
        if isinstance(node, exp.WithinGroup):
            raise _refuse(NODE, f"The WITHIN GROUP form ({text}) is not supported",
                          "write PERCENTILE_CONT(x, 0.5), QUANTILE_CONT(x, 0.5) or MEDIAN(x)")  # fmt: skip
        if isinstance(node, (exp.Array, exp.Struct, exp.Map, exp.Tuple, exp.Bracket, exp.Dot, exp.VarMap)):
            raise _refuse(NODE, f"{text}: lists, structs, maps and element access are not allowed over protected data",
                          _NODE_HINT)  # fmt: skip
        if isinstance(node, exp.Star):
            raise _refuse(NODE, f"{text} would return rows of protected data",
                          "aggregate instead, e.g. SELECT COUNT(*) FROM t")  # fmt: skip
        if isinstance(node, exp.Collate):
            raise _refuse(NODE, f"COLLATE ({text}) is not supported over protected data", "use lower() or ILIKE")
        if isinstance(node, (exp.Columns, exp.PositionalColumn)):
            raise _refuse(NODE, f"{text} is not supported over protected data", "name the columns")
        if isinstance(node, exp.AggFunc):
            raise _refuse(FUNCTION, f"Aggregate {text} is not on dpgate's list", f"use {SUPPORTED_AGGREGATES}")
        if isinstance(node, exp.Func):
            name = _function_name(node)
            if _sized_by_data(node):
                raise _refuse(
                    SIZE, f"{text}: the size of the result of {name}() is set by a value from the data",
                    "functions whose output size depends on a row value are refused (one large value could exhaust "
                    "memory); lpad / rpad with a constant length are allowed",
                )  # fmt: skip
            raise _refuse(
                FUNCTION, f"Function {name}() is not on dpgate's list of functions for protected data ({text})",
                "allowed: " + ", ".join(sorted({r.name for r in RULES})) + " (README, 'Allowed SQL')",
            )  # fmt: skip
        raise _refuse(NODE, f"{type(node).__name__} ({text}) is not on dpgate's list of SQL constructs", _NODE_HINT)


def _slot_key(key: str | int) -> str:
    """The name of a constant slot in the fuzz templates (``{arg0}`` for position 0)."""
    return f"arg{key}" if isinstance(key, int) else key


def _form_example(rule: Rule) -> str:
    """The rule's fullest fuzz form with example constants, e.g. ``substring(x, 2, 2)``."""
    values = {_slot_key(k): c.example if c.example is not None else c.samples[0] for k, c in rule.consts.items()}
    return rule.forms[-1].format("x", "y", **values)


# -- reference --------------------------------------------------------------------------------------
def reference_markdown() -> str:
    """The allowlist as Markdown, for the README ('Allowed SQL')."""
    lines = [
        "Queries over protected tables may use only what is listed here; anything else is refused "
        "(DP250-DP257) before any budget is charged.",
        "",
        "- **FROM / JOIN**: table names (optionally `main.`-qualified) with an optional plain alias; no "
        "TABLESAMPLE / USING SAMPLE, PIVOT / UNPIVOT, column alias lists, time travel, WITH ORDINALITY, hints, "
        "LATERAL or table functions (except "
        f"`{TOPK_COLUMNS_FUNCTION}('table', k => n [, counts => true])`). One subquery shape: the per-subject "
        "subquery `FROM (SELECT unit, COUNT(*) AS n, SUM(x) AS s, ... FROM t [WHERE ...] GROUP BY unit) s`, "
        "checked by these same rules, with COUNT, SUM, AVG, MIN and MAX (and no JOIN, HAVING, ORDER BY or LIMIT) "
        "inside; it must group by the privacy unit alone.",
        "- **Joins** (lookups, and the graph triangle self-join): `[INNER] JOIN`, `LEFT | RIGHT | FULL "
        "[OUTER] JOIN` with `ON` comparisons of two columns joined by AND, or `USING (col, ...)`. A public table "
        "must be tied by equalities to columns whose values are unique in it (a lookup: it never repeats a row), "
        "and another protected table of the same subject space by its privacy unit; `CROSS JOIN`, `FROM a, b`, "
        "joins on `<` / `>` or on non-unique columns pass this list and are then refused (DP218, DP215). "
        "Not NATURAL, POSITIONAL, ASOF, SEMI, ANTI or LATERAL.",
        "- **WITH**: only the degree table of a graph's k-star sum.",
        "- **Clauses**: SELECT (with aliases), WHERE, GROUP BY (plain expressions or ALL), HAVING, ORDER BY, "
        "LIMIT / OFFSET with constants. Not DISTINCT, QUALIFY, WINDOW, ROLLUP / CUBE / GROUPING SETS.",
        f"- **Aggregates**: {SUPPORTED_AGGREGATES}; the graph counts "
        + ", ".join(f"`{g.upper()}`" for g in GRAPH_AGGREGATES) + ".",
        "- **Expressions**: columns, constants (numbers, strings, NULL, TRUE / FALSE, parameters, intervals), "
        + "; ".join(name for name, _ in OPERATORS)
        + "; `IS [NOT] NULL`, `IS [NOT] TRUE / FALSE`; `IN (constant, ...)`; "
        "`CAST` / `TRY_CAST` / `::` to " + ", ".join(sorted(set(CAST_TYPES.values()))) + ".",
        "- **Not allowed**: window functions, subqueries (also in IN and EXISTS), lambdas, list / struct / map "
        "constructors and element access, `*` outside `COUNT(*)`, and every function not in the table below.",
        f"- **Output size**: a whole row expression may make text of at most {cost.MAX_TEXT_FACTOR} times its "
        f"longest input value plus {cost.MAX_TEXT_CONSTANT:,} characters (nested `replace`, `lpad`, `concat` "
        "multiply; DP255).",
        f"- **Work per row**: a regular expression compiles to at most {cost.MAX_REGEX_PROGRAM} instructions "
        "(counted repetitions are copied: `(a|b){1,100}` is about 500; `.` or a class counts 16, a Unicode class 96, "
        f"case folding doubles) and is charged RE2's worst case, {cost.REGEX_UNITS} steps per character and "
        "instruction (so a pattern runs over stored values, not over long built text); a LIKE pattern with `_` or "
        "ESCAPE, and every "
        "ILIKE pattern, has at most one `%` before its end (LIKE without `_` takes any number of `%`); a row's "
        f"work is at most {cost.MAX_WORK_FACTOR:,} steps per character of its longest input plus "
        f"{cost.MAX_WORK_CONSTANT:,} steps (DP258). The time one chosen row takes is not the analyst's to choose.",
        "",
        "Functions: each is total (under `TRY`, no input makes it fail) and its output is bounded by its inputs; "
        "the arguments named in the second column must be constants.",
        "",
        "| function | constant arguments | note |",
        "|---|---|---|",
    ]
    for rule in sorted(RULES, key=lambda r: r.name):
        names = ", ".join(f"`{n}`" for n in rule.names)
        consts = "; ".join([f"{_slot_name(rule, k)}: {c.description}" for k, c in rule.consts.items()]
                           + ([rule.constants_note] if rule.constants_note else [])) or "-"
        lines.append(f"| {names} | {consts.replace('|', '&#124;')} | {rule.reason} |")
    return "\n".join(lines) + "\n"


def _slot_name(rule: Rule, key: str | int) -> str:
    if isinstance(key, int):
        return f"argument {key + 1}"
    return {"this": "part", "expression": "argument 2", "unit": "part", "decimals": "decimals",
            "fill_pattern": "fill", "flag": "options", "modifiers": "options"}.get(key, key)  # fmt: skip


def constant_samples(rule: Rule) -> list[dict[str, str]]:
    """Every combination of the rule's constant samples, keyed as in its ``forms`` (for the fuzz test)."""
    keys = list(rule.consts)
    combos: list[dict[str, str]] = [{}]
    for key in keys:
        name = _slot_key(key)
        combos = [dict(c, **{name: s}) for c in combos for s in rule.consts[key].samples]
    return combos


def _dangling_escape(pattern: str, escape: str) -> bool:
    """Whether ``pattern`` ends in an escape character that escapes nothing."""
    i = 0
    while i < len(pattern):
        if pattern[i] == escape:
            if i + 1 == len(pattern):
                return True
            i += 2
        else:
            i += 1
    return False


