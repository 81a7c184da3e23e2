"""The allowlist's lists: the functions (``RULES``), casts, operators, aggregates and clauses
a statement over protected data may use, the constants their behaviour-selecting arguments
accept, and the refusal codes. Why each entry is safe is ``dpgate.frontend.allowlist``'s
totality rule.

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

# -- dpgate's own names (the same as in classify; a test keeps them equal) ----------------------
#: dpgate's table function over a protected table (planned as a top-k query).
TOPK_COLUMNS_FUNCTION = "dp_top_k_columns"
#: dpgate's subgraph-count aggregates over a protected graph.
GRAPH_AGGREGATES = ("triangle_count", "kstar_count", "ktriangle_count", "kclique_count")

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


#: How many COALESCE a COALESCE may sit inside: ``rewrite_for_engine`` copies each argument
#: twice, so the rewritten size grows by 4 per level (depth 18 took a minute to plan).
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


def slot_key(key: str | int) -> str:
    """The name of a constant slot in the fuzz templates (``{arg0}`` for position 0)."""
    return f"arg{key}" if isinstance(key, int) else key


def _form_example(rule: Rule) -> str:
    """The rule's fullest fuzz form with example constants, e.g. ``substring(x, 2, 2)``."""
    values = {slot_key(k): c.example if c.example is not None else c.samples[0] for k, c in rule.consts.items()}
    return rule.forms[-1].format("x", "y", **values)



def constant_samples(rule: Rule) -> list[dict[str, str]]:
    """Every combination of the rule's constant samples, keyed as in its ``forms`` (for the fuzz test)."""
    keys = list(rule.consts)
    combos: list[dict[str, str]] = [{}]
    for key in keys:
        name = slot_key(key)
        combos = [dict(c, **{name: s}) for c in combos for s in rule.consts[key].samples]
    return combos

