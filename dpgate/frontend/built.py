"""How large a public statement's values may grow, and how long one call over them may take.

Why: a public statement runs free and as written, so its cost is the analyst's to choose, and the
server is shared. DuckDB's memory limit bounds what its operators keep (aggregate states, hash
tables, sorts, a recursive CTE's rows), not the value one scalar call returns:
``len(range(600000000))`` held 21 GB past the limit, ``lpad('a', 1000000000)`` 2 GB; a value that
depends on the row is built for each of a vector's 2,048 rows at once; and one call is not reached
by an interrupt, so no timeout stops ``levenshtein`` of two 100,000-character texts (16 s), a
``LIKE '_%a%a%a%b'`` over 1,000 characters (210 s) or ``json_structure`` of a deeply nested text
(the process crashed). A DP statement's row expressions have the tighter bounds of ``cost``; this
module bounds public statements (``check``, called by the gateway with the statement's
parameters), before anything runs.

A value's size is a form ``a * L + b + g * G`` (``growth.Size``): ``L`` the longest value stored in the
tables it reads (the owner's data), ``b`` characters or list elements the statement's constants and
parameters build, ``G`` the largest value an aggregate gathered. Refused (DP255) when
``a > MAX_FACTOR``, ``b > MAX_BUILT`` or ``g > MAX_GROWTH_OF_GATHERED``; ``growth`` holds what each
function builds and costs, measured:

- a builder whose size argument is not a constant: ``repeat``, ``lpad`` / ``rpad``, ``range`` /
  ``generate_series`` as a value (as a table, ``FROM range(n)``, rows stream and an interrupt
  stops them), ``list_resize``, ``bitstring``, ``printf`` / ``format`` (widths in a literal format;
  ``*`` and nested fields are refused);
- growth multiplies: builders over built values, ``replace`` / ``regexp_replace`` with a longer
  replacement, a separator repeated per element (``array_to_string``, ``concat_ws`` over a list,
  ``list_aggregate``), ``list_select``'s indexes, ``list_zip``'s lists, ``remap_struct``'s mapping, a
  JSON structure with a list, a JSON path list, a cast of a list to text, a type's names and labels
  (a cast to a STRUCT, ENUM or UNION; once per element of a list of them) and a fixed-size ARRAY's
  elements, a lambda's or a comprehension's body per element of its list, a ``list_reduce`` whose
  accumulator grows by more than its element;
- a column of a subquery, a CTE, a ``VALUES`` list or an alias of the same ``SELECT`` holds what
  those compute: sizes are carried through every level (a chain that still grows after as many
  rounds as the statement has levels, a recursion, is refused);
- a value an aggregate gathered (``string_agg``, ``list``, ``histogram``, ``max(x, n)``, ...) is as
  large as the rows it read: it may be shown, measured and searched, not grown by more than
  ``MAX_GROWTH_OF_GATHERED`` (each use counts: ``s || s`` is twice), nor gathered with names longer
  than ``growth.MAX_GATHERED_NAME`` (written once per element as text); aggregates whose state DuckDB
  does not count against its memory limit are refused (``growth.UNCOUNTED``).

Work that grows faster than its input takes inputs of at most ``MAX_QUADRATIC`` built characters, and
at most ``MAX_QUADRATIC ** 2`` steps a row with a lambda's calls counted (DP258): edit distances,
``json_pretty``, a JSON path with wildcards or computed, a ``list_reduce`` that grows, a cast to
``BIGNUM``; ``json_merge_patch`` (its recursion) takes the same inputs. A regular expression takes a
literal (or parameter) pattern of at most ``cost.MAX_REGEX_PROGRAM`` instructions. Over a gathered
value, one call may not do many times the gathering's work (``growth.HEAVY_ON_GATHERED``: set
operations, maps, ``list_reduce``; a regular expression of more than
``growth.MAX_PROGRAM_OVER_GATHERED`` instructions). Matching that backtracks (``LIKE`` with ``_`` or
``ESCAPE``, every ``ILIKE``, ``GLOB``, ``like_escape``) takes a literal pattern (or a parameter) with
at most one wildcard run before its end, as in DP statements (its work is the text's length to the
power of those runs, stored text included). Functions that recurse once per nesting level of a JSON
text (``json_structure``, ``json_contains``) are refused for every statement (``functions.REFUSED``).
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

from sqlglot import exp

from dpgate import database, errors
from dpgate.frontend import cost, growth
from dpgate.frontend.growth import FIXED as _FIXED
from dpgate.frontend.growth import GATHERED, Size, const, plus, product, scale, widest
from dpgate.frontend.projections import MAX_STAR_COLUMNS, columns, inside  # noqa: F401 (the bound, read by tests)

#: A value may hold this many characters or list elements beyond what stored values bring (a
#: scalar's value is built whole, in memory no limit counts, for each of a vector's 2,048 rows:
#: 4,096 elements of 16 bytes are 128 MB a vector), as a DP statement's row expression.
MAX_BUILT = 4096
#: ... and this many times the longest stored value.
MAX_FACTOR = 64
#: A value an aggregate gathered may grow by at most this factor (a separator, an escape).
MAX_GROWTH_OF_GATHERED = 64
#: Inputs of work that grows with a product of sizes: at most this many built characters.
MAX_QUADRATIC = 4096
#: Lambdas nested deeper than this are refused (each level multiplies the checker's work too).
MAX_LAMBDA_DEPTH = 4
#: Rounds of carrying sizes through subqueries at most (a deeper chain is refused, not guessed).
MAX_ROUNDS = 64
#: Expressions the checker sizes for one statement, over all rounds (about a second of Python).
MAX_CHECK_WORK = 200_000
_STORED = growth.STORED
_WIDTH = re.compile(r"\d+")
_NESTED_FIELD = re.compile(r"\{[^}]*\{")
#: Operators whose value is a boolean (the others -- arithmetic, ``BIGNUM`` digits, bit strings, a
#: struct's field, a collation -- are at most their widest operand).
_BOOLEAN = (exp.Predicate, exp.Not, exp.Connector)
_name = growth.call_name


def _args(node: exp.Func) -> list[exp.Expr]:
    if isinstance(node, exp.Anonymous):
        return list(node.expressions)
    out: list[exp.Expr] = []
    for key in node.arg_types:
        value = node.args.get(key)
        if isinstance(value, exp.Expr):
            out.append(value)
        elif isinstance(value, list):
            out.extend(v for v in value if isinstance(v, exp.Expr))
    return out


def _constant(node: exp.Expr | None) -> float | None:
    """The value of a numeric constant (a literal, negated, or arithmetic of such), else None. Exact
    (``Fraction``), as DuckDB's BIGINT and DECIMAL arithmetic is: in floats ``(2**53 + 1 - 2**53)``
    is 0 and DuckDB's is 1."""
    value = _exact(node)
    if value is None:
        return None
    try:
        out = float(value)
    except OverflowError:
        return None
    return out if math.isfinite(out) else None


def _exact(node: exp.Expr | None) -> Fraction | None:
    if node is None:
        return None
    if isinstance(node, (exp.Paren, exp.Cast)):
        return _exact(node.this)
    if isinstance(node, exp.Literal) and not node.is_string:
        try:
            text = node.this
            return Fraction(text) if len(text) <= 400 else None
        except (ValueError, ZeroDivisionError):
            return None
    if isinstance(node, exp.Neg):
        v = _exact(node.this)
        return None if v is None else -v
    if isinstance(node, (exp.Add, exp.Sub, exp.Mul)):
        x, y = _exact(node.this), _exact(node.expression)
        if x is None or y is None:
            return None
        return x + y if isinstance(node, exp.Add) else x - y if isinstance(node, exp.Sub) else x * y
    return None


def _refuse(code: str, message: str, hint: str) -> errors.Error:
    return errors.UnsupportedQueryError(message, code=code, hint=hint)


def _sql(node: exp.Expr, whole: bool = False) -> str:
    try:
        text = node.sql(dialect="duckdb")
    except Exception:  # a node sqlglot parses but cannot write back (a JSON path's recursion)
        text = type(node).__name__
    return text if whole or len(text) <= 80 else text[:77] + "..."


def _needs_constant(node: exp.Expr, what: str) -> errors.Error:
    return _refuse(
        "DP255",
        f"{_sql(node)}: {what} must be a constant in a public statement (a value built from a column or a "
        f"subquery could be of any size, held whole in memory)",
        f"write a constant of at most {MAX_BUILT:,}; to make rows, use a table function: SELECT ... FROM range(n)",
    )



class Sizes:
    """The size of each expression of one statement, with stored values of size ``column`` and
    placeholders of size ``parameter``."""

    def __init__(self, column: Size = _STORED, parameter: Size = (0.0, _FIXED, 0.0), sources: dict | None = None,
                 known: dict | None = None, patterns: list[str] | None = None, work: list[int] | None = None) -> None:  # fmt: skip
        self.column = column
        self.parameter = parameter
        self.sources = sources or {}  # id(column) -> the projections it may name (None: a stored column)
        self.known = known or {}  # id(projection) -> its size so far
        self.memo: dict[tuple, Size] = {}
        self.bound: dict[str, Size] = {}  # lambda parameters in scope
        self.depth = 0
        self.calls = 1.0  # how often the lambdas in scope call their body: the elements of their lists
        self.work = work if work is not None else [0]  # expressions sized, shared by every round: bounded
        self.patterns = patterns  # text parameters, when the statement's are known

    def of(self, node: exp.Expr) -> Size:
        key = (id(node), tuple(sorted(self.bound.items())) if self.bound else (), self.calls)
        found = self.memo.get(key)
        if found is None:
            found = self.memo[key] = self._of(node)
        return found

    def _of(self, node: exp.Expr) -> Size:
        if isinstance(node, exp.Literal):
            return const(len(node.this) if node.is_string else _FIXED)
        if isinstance(node, (exp.Placeholder, exp.Parameter)):
            return self.parameter
        if isinstance(node, exp.DataType):
            return const(len(_sql(node, whole=True)))  # an ENUM's labels, a STRUCT's names
        if isinstance(node, (exp.Null, exp.Boolean, exp.Star, exp.Interval)):
            return const(_FIXED)
        self.work[0] += 1
        if self.work[0] > MAX_CHECK_WORK:
            raise _refuse(
                "DP255", "The statement is too large or too nested for dpgate to bound its values before it runs",
                "split it into smaller statements (fewer UNION branches, columns or levels of subqueries)",
            )
        if isinstance(node, exp.Identifier):  # a lambda's parameter, else a name (a STRUCT's key, an alias)
            return self.bound.get(node.name.lower(), const(len(node.name)))
        if isinstance(node, exp.Column):
            if not node.table and node.name.lower() in self.bound:
                return self.bound[node.name.lower()]
            named = self.sources.get(id(node))
            if named is None:
                return self.column
            stored, projections = named
            return widest(([self.column] if stored else []) + [self.known.get(id(p), growth.ZERO) for p in projections])
        if isinstance(node, (exp.Subquery, exp.Select, exp.Union, exp.Intersect, exp.Except)):
            return self._query(node)
        if isinstance(node, (exp.Lambda, exp.Window, exp.Alias, exp.Paren, exp.Ordered, exp.Distinct)):
            return widest([self.of(c) for c in node.iter_expressions()] + [const(_FIXED)])
        if isinstance(node, exp.Cast):
            return self._cast(node)
        if isinstance(node, exp.Comprehension):
            return self._comprehension(node)
        if isinstance(node, exp.Connector):
            for c in node.iter_expressions():
                self.of(c)
            return const(_FIXED)  # AND / OR: a boolean
        if isinstance(node, exp.Func):
            try:
                return self._function(node)
            except IndexError:  # too few arguments for the model: DuckDB's binder refuses the call
                return plus(*(self.of(c) for c in node.iter_expressions()), const(_FIXED))
        if isinstance(node, (exp.DPipe, exp.Array, exp.Struct, exp.Tuple, exp.PropertyEQ, exp.Slice)):
            return plus(*(self.of(c) for c in node.iter_expressions()), const(1.0))
        if isinstance(node, (exp.Like, exp.ILike, exp.Glob, exp.Escape)):
            self._matching(node)
        if isinstance(node, exp.SimilarTo):
            self._regex(node, node.expression, self.of(node.this))
        children = [self.of(c) for c in node.iter_expressions()]
        if isinstance(node, _BOOLEAN):
            return const(_FIXED)  # comparisons, logic: a boolean
        return widest(children + [const(_FIXED)])  # arithmetic, a part of one input (an element, a field), a choice

    def _query(self, node: exp.Expr) -> Size:
        selects = [node] if isinstance(node, exp.Select) else list(node.find_all(exp.Select))
        return widest([self.of(p) for s in selects for p in s.selects])

    def _cast(self, node: exp.Cast) -> Size:
        """A cast writes a list out as text (up to ~24 characters an element), shows a type's names and
        labels (once per element of a list of the type), fills a fixed-size ARRAY, and converts decimal
        text to ``BIGNUM`` in time quadratic in its digits."""
        inner = self.of(node.this)
        to = node.args.get("to")
        if not isinstance(to, exp.DataType):
            return inner
        if growth.is_bignum(to):
            _quadratic(node, [inner], self.calls)
        if to.this.name in growth.TEXT_TYPES and not _is_text(node.this):
            inner = (inner[0], inner[1] * 24, inner[2] * 24)
        named = const(growth.type_text(to))
        if named[1] and to.find(exp.DataType, bfs=False) is not to or to.this == exp.DataType.Type.ARRAY:
            inner = plus(inner, product(inner, named))  # names shown for each element of a list
        return plus(inner, named, const(growth.array_elements(to) if growth.array_elements(to) > 1 else 0.0))

    def _matching(self, node: exp.Expr) -> None:
        """A LIKE / ILIKE / GLOB that backtracks: a literal pattern, at most one wildcard run before its end."""
        like = node.this if isinstance(node, exp.Escape) else node
        escape = node.expression if isinstance(node, exp.Escape) else None
        if isinstance(node, exp.Like) and isinstance(node.parent, exp.Escape):
            return  # checked with its ESCAPE
        _check_pattern(node, like.expression, glob=isinstance(like, exp.Glob),
                       backtracking=isinstance(like, (exp.ILike, exp.Glob)) or escape is not None, values=self)

    def _function(self, node: exp.Func) -> Size:
        name = _name(node)
        args = _args(node)
        held = growth.uncounted(name, database.DUCKDB_MAJOR)
        if held is not None and (isinstance(node, exp.AggFunc) or name in growth.UNCOUNTED | growth.UNCOUNTED_BEFORE_2):
            raise _refuse(
                "DP255", f"{_sql(node)}: DuckDB {database.DUCKDB_MAJOR}.x keeps this aggregate's state outside its "
                f"memory limit, as many entries as the rows it reads (it held {held}); a public statement's "
                "memory would be the analyst's to choose",
                "count with GROUP BY and count(*), or use quantile_cont / median, which DuckDB's limit covers",
            )  # fmt: skip
        if isinstance(node, growth.GATHERING_NODES) or name in growth.GATHERING or node.args.get("count") is not None:
            for a in args:
                self.of(a)
            return GATHERED  # max(x, n), arg_max(x, y, n): up to n rows gathered
        if isinstance(node, exp.AggFunc) or name in ("min", "max", "first", "last", "any_value", "arbitrary"):
            return widest([self.of(a) for a in args] + [const(_FIXED)])
        if isinstance(node, growth.REGEX_NODES) or name in growth.REGEX:
            pattern = node.expression if not isinstance(node, exp.Anonymous) else args[1]
            self._regex(node, pattern, self.of(args[0]))
        if name in growth.HEAVY_ON_GATHERED:
            self._not_gathered(node, [self.of(a) for a in args], growth.HEAVY_ON_GATHERED[name])
        if isinstance(node, exp.GenerateSeries) or name in ("range", "generate_series"):
            return self._series(node)
        if isinstance(node, exp.Repeat) or name == "repeat":
            this = node.this if isinstance(node, exp.Repeat) else args[0]
            times = _constant(node.args.get("times") if isinstance(node, exp.Repeat) else args[1])
            if times is None:
                raise _needs_constant(node, "the count of repeat()")
            return _grows(node, self.of(this), const(max(times, 0.0)))
        if isinstance(node, exp.Pad) or name in ("lpad", "rpad"):
            width = _constant(node.expression if isinstance(node, exp.Pad) else args[1])
            if width is None:
                raise _needs_constant(node, "the length of lpad() / rpad()")
            self.of(node.this)
            return const(max(width, 0.0))
        if name in ("list_resize", "array_resize"):
            size = _constant(args[1])
            if size is None:
                raise _needs_constant(node, f"the size of {name}()")
            fill = self.of(args[2]) if len(args) > 2 else const(1.0)
            return plus(self.of(args[0]), _grows(node, fill, const(max(size, 0.0))))
        if name == "equi_width_bins":  # equi_width_bins(min, max, bin_count, nice): a list of bin_count
            count = _constant(args[2])
            if count is None:
                raise _needs_constant(node, "the bin count of equi_width_bins()")
            return const(max(count, 0.0))
        if name == "strftime" and isinstance(node, exp.TimeToStr):
            fmt = node.args.get("format")
            if not (isinstance(fmt, exp.Literal) and fmt.is_string):
                raise _needs_constant(node, "the format of strftime()")
            return const(64 * fmt.this.count("%") + len(fmt.this))  # each specifier: a month's name, ...
        if name == "bitstring":
            size = _constant(args[1])
            if size is None:
                raise _needs_constant(node, "the length of bitstring()")
            return const(max(size, 0.0))
        if isinstance(node, exp.Format) or name in ("printf", "format"):
            return self._format(node, args)
        if isinstance(node, (exp.Replace, exp.RegexpReplace)):
            this = self.of(node.this)
            new = self.of(node.args["replacement"]) if node.args.get("replacement") else growth.ZERO
            old = node.expression
            if isinstance(node, exp.Replace) and isinstance(old, exp.Literal) and old.is_string and old.this:
                each = scale(1.0 / len(old.this), new)  # each match of len(old) becomes new
            else:
                each = plus(new, const(1.0))  # a pattern may match between any two characters
            return plus(this, _grows(node, this, each), new)
        if name in ("array_to_string", "list_to_string", "array_to_string_comma_default"):
            listed = self.of(args[0]) if args else growth.ZERO
            sep = self.of(args[1]) if len(args) > 1 else const(1.0)
            return plus(listed, _grows(node, listed, sep), *(self.of(a) for a in args[2:]))
        if name == "concat_ws":  # the separator between the other arguments, and between a list's elements
            sep, rest = self.of(args[0]), [self.of(a) for a in args[1:]]
            return plus(*rest, _grows(node, sep, plus(*rest, const(len(rest)))))
        if name in growth.LIST_AGGREGATE:  # list_aggregate(l, 'string_agg', sep): sep per element
            return self._list_aggregate(node, args)
        if name in growth.SELECTING:  # list_select(l, indexes): an element per index
            return _grows(node, self.of(args[0]), plus(self.of(args[1]), const(1.0)))
        if name in growth.ZIPPING:  # every list padded to the longest: the longest, once per list
            sizes = [self.of(a) for a in args]
            return _grows(node, widest(sizes), const(len(sizes)))
        if name == "remap_struct":  # remap_struct(input, type, mapping, defaults): a source field per target
            mapping = args[2] if len(args) > 2 else None
            fields = len(mapping.expressions) if isinstance(mapping, exp.Struct) else self.of(mapping)[1] if mapping else 1
            return plus(_grows(node, self.of(args[0]), const(max(fields, 1))), *(self.of(a) for a in args[1:]))
        if name in growth.SHAPED_BY_JSON and len(args) > 1:  # a structure with a list: its fields per element
            text, shape = self.of(args[0]), self.of(args[1])
            listed = not (isinstance(args[1], exp.Literal) and args[1].is_string and "[" not in args[1].this)
            return plus(text, shape, _grows(node, text, shape) if listed else growth.ZERO)
        if isinstance(node, (exp.JSONExtract, exp.JSONExtractScalar)) or name in growth.JSON_PATHS:
            return self._json_path(node, args)
        if name in growth.LIKE_FUNCTIONS:
            _check_pattern(node, args[1], glob=False, backtracking=True, values=self)
            return const(_FIXED)
        if isinstance(node, (exp.Transform, exp.ArrayFilter)) or name in growth.MAPPING | growth.FILTERING | growth.REDUCING:
            return self._lambda(node, name, args)
        if name == "json_pretty":
            inner = self.of(args[0])
            _quadratic(node, [inner], self.calls)
            return plus(inner, product(inner, inner))  # indentation: depth times length
        if name in growth.DEEP:
            _quadratic(node, [self.of(a) for a in args], self.calls, deep=True)
        if isinstance(node, (exp.Levenshtein, exp.JarowinklerSimilarity)) or name in growth.QUADRATIC:
            _quadratic(node, [self.of(a) for a in args[:2]], self.calls)
            return const(_FIXED)
        if name == "invoke":  # DuckDB 2.0: the lambda (its first argument) applied once to the others
            return self._invoke(args)
        total = plus(*(self.of(a) for a in args))
        total = (total[0], max(total[1], _FIXED), total[2])
        return scale(growth.GROWTH.get(name, growth.collation_growth(name)), total)

    def _list_aggregate(self, node: exp.Func, args: list[exp.Expr]) -> Size:
        """``list_aggregate(l, 'name', ...)``: the aggregate named runs over the list in one call."""
        listed = self.of(args[0])
        called = args[1].this.lower() if len(args) > 1 and isinstance(args[1], exp.Literal) else ""
        if growth.uncounted(called, database.DUCKDB_MAJOR) is not None:
            raise _refuse(
                "DP255", f"{_sql(node)}: DuckDB keeps {called}'s state outside its memory limit ({growth.uncounted(called, database.DUCKDB_MAJOR)})",
                "use an aggregate DuckDB's memory limit covers",
            )  # fmt: skip
        if called in growth.HEAVY_AGGREGATES:
            self._not_gathered(node, [listed], f"{called}(x) over the rows")
        extra = plus(*(self.of(a) for a in args[2:]), const(1.0))
        return plus(listed, _grows(node, listed, extra))

    def _not_gathered(self, node: exp.Func, inputs: list[Size], instead: str) -> None:
        if any(s[2] > 0 for s in inputs) or math.isinf(self.calls):
            raise _refuse(
                "DP258", f"{_sql(node)}: over a value an aggregate gathered, this one call does tens of times the "
                "gathering's work (10 million values: 16-28 s), in one call no interrupt reaches",
                f"use {instead}",
            )  # fmt: skip

    def _regex(self, node: exp.Expr, pattern: exp.Expr | None, text: Size) -> None:
        """A regular expression: a literal or parameter pattern; RE2's work per character grows with its
        program when its DFA cache overflows, so the program is bounded (tighter over a gathered value)
        and so is the text times the program for each row, a lambda's calls counted."""
        if isinstance(pattern, exp.Literal) and pattern.is_string:
            texts = [pattern.this]
        elif isinstance(pattern, (exp.Placeholder, exp.Parameter)):
            texts = self.patterns or []  # every text parameter could be this one
        else:
            raise _refuse(
                "DP258", f"{_sql(node)}: a pattern computed by the statement could compile to any program, whose "
                "work per character RE2 repeats over the whole text (in one call no interrupt reaches)",
                "write the pattern as a literal or pass it as a parameter",
            )  # fmt: skip
        gathered = text[2] > 0 or math.isinf(self.calls)
        limit = growth.MAX_PROGRAM_OVER_GATHERED if gathered else cost.MAX_REGEX_PROGRAM
        for one in texts:
            program = cost.regex_program(one, cost.regex_options(node))
            steps = self.calls * max(text[1], 1.0) * program
            if program > limit or not gathered and steps > MAX_QUADRATIC**2:
                where = "a value an aggregate gathered" if gathered else f"{steps:,.0f} steps a row"
                raise _refuse(
                    "DP258", f"The pattern of {_sql(node)} compiles to about {program:,} instructions, over {where}: "
                    "RE2's work per character grows with its program (``(a|b){1000}c`` took 32 s over 500,000 "
                    "characters, in one call no interrupt reaches)",
                    f"write a smaller pattern (at most {limit} instructions; a counted repetition {{n}} is copied n "
                    "times), or match fewer or shorter values",
                )  # fmt: skip

    def _invoke(self, args: list[exp.Expr]) -> Size:
        """``invoke(lambda x, y: body, a, b)``: ``body`` with x of a's size and the other parameters of the
        widest argument's (its body is skipped by ``check``, as every lambda's, and sized here; sized as a
        plain call, nested invokes grew values unseen)."""
        lam = args[0] if args and isinstance(args[0], exp.Lambda) else None
        values = [self.of(a) for a in args[1:]] or [const(_FIXED)]
        if lam is None:
            return plus(*values)
        return self._body(lam, [p.name.lower() for p in lam.expressions], values[0], widest(values))

    def _json_path(self, node: exp.Func, args: list[exp.Expr]) -> Size:
        this = self.of(args[0])
        path = node.expression if isinstance(node, (exp.JSONExtract, exp.JSONExtractScalar)) else (
            args[1] if len(args) > 1 else None)  # fmt: skip
        if path is None:
            return this
        paths = path.expressions if isinstance(path, exp.Array) else [path]
        for one in paths:
            plain = isinstance(one, exp.JSONPath) or isinstance(one, exp.Literal) and one.is_string
            text = one.this if isinstance(one, exp.Literal) else ""
            wild = isinstance(one, exp.JSONPath) and one.find(exp.JSONPathWildcard, exp.JSONPathRecursive,
                                                              exp.JSONPathFilter, exp.JSONPathScript, exp.JSONPathSlice)
            if not plain or wild or "*" in text or ".." in text:
                _quadratic(node, [this], self.calls)  # a computed or wildcard path: every match copied, for each
                return _grows(node, this, this)
        return _grows(node, this, const(len(paths)))

    def _series(self, node: exp.Func) -> Size:
        if isinstance(node.parent, exp.Table) and node.parent.this is node:
            return const(_FIXED)  # a table function: its rows stream
        if isinstance(node, exp.GenerateSeries):
            start, end, step = (node.args.get(k) for k in ("start", "end", "step"))
        else:
            args = _args(node)
            start, end, step = (args + [None, None, None])[:3] if len(args) > 1 else (None, args[0], None)
        lo = 0.0 if start is None else _constant(start)
        hi, by = _constant(end), 1.0 if step is None else _constant(step)
        if lo is None or hi is None or by is None:
            raise _refuse(
                "DP255",
                f"{_sql(node)}: as a value (a list held whole in memory), range() / generate_series() takes integer "
                "constants in a public statement, so that its length is known before it runs",
                "write integer constants, or use it as a table, whose rows stream: SELECT ... FROM generate_series(...)",
            )
        exclusive = bool(node.args.get("is_end_exclusive")) if isinstance(node, exp.GenerateSeries) else _name(node) == "range"
        return const(0.0 if by == 0 else max(0.0, (hi - lo) / by + (0 if exclusive else 1)))

    def _format(self, node: exp.Func, args: list[exp.Expr]) -> Size:
        fmt = node.this if isinstance(node, exp.Format) else (args[0] if args else None)
        rest = list(node.expressions) if isinstance(node, exp.Format) else args[1:]
        if not (isinstance(fmt, exp.Literal) and fmt.is_string):
            raise _needs_constant(node, "the format of printf() / format()")
        if "*" in fmt.this and not isinstance(node, exp.Format) or _NESTED_FIELD.search(fmt.this):
            raise _needs_constant(node, "a width or precision in printf() / format()'s format")  # '%*d', '{:>{}}'
        widths = sum(min(int(w), 2**40) for w in _WIDTH.findall(fmt.this[:MAX_BUILT * 2]))  # every number, a width
        fields = max(1, fmt.this.count("{") + fmt.this.count("%"))  # '{0}' and '%1$s' may name one argument often
        return plus(const(len(fmt.this) + widths), scale(fields, widest([self.of(a) for a in rest])))

    def _lambda(self, node: exp.Func, name: str, args: list[exp.Expr]) -> Size:
        lam = next((a for a in args if isinstance(a, exp.Lambda)), None)
        listed = self.of(node.this if not isinstance(node, exp.Anonymous) else args[0])
        if lam is None:
            return listed
        params = [p.name.lower() for p in lam.expressions]
        if name in growth.FILTERING or isinstance(node, exp.ArrayFilter):
            self._body(lam, params, listed, calls=growth.count(listed))
            return listed
        if name in growth.REDUCING:
            return self._reduced(node, listed, lam, params)
        return self._mapped(node, listed, lam, params)

    def _reduced(self, node: exp.Func, listed: Size, lam: exp.Lambda, params: list[str]) -> Size:
        """``list_reduce``: f(acc, e) = acc + g * e + c. The accumulator must appear once, ungrown (else it
        doubles per step); the result is then at most (g + c) times the list's size, and the work, one copy
        of the accumulator per step, is quadratic in it. Over a gathered list, one lambda call per element
        took 18 s for 10 million (a sum)."""
        self._not_gathered(node, [listed], "an aggregate over the rows (sum, string_agg, ...)")
        big, calls = 1e6, growth.count(listed)
        f1 = self._body(lam, params, const(big), const(1.0), calls=calls)
        f2 = self._body(lam, params, const(2 * big), const(1.0), calls=calls)
        if f2[0] - f1[0] > 0 or f2[2] - f1[2] > 0 or f2[1] - f1[1] > big * 1.0001:
            raise _refuse(
                "DP255",
                f"{_sql(node)}: the accumulator grows by more than the element each step adds, so the value "
                "doubles with the list's length",
                "use the accumulator once in the lambda's body, ungrown (e.g. (acc, x) -> acc || x)",
            )
        e2 = self._body(lam, params, const(big), const(2.0), calls=calls)
        slope = max(e2[1] - f1[1], 0.0)
        per = (f1[0], max(f1[1] - big, 0.0) + slope, f1[2])
        if per[1] > 0 or per[0] > 0:
            _quadratic(node, [listed], self.calls)  # the accumulator copied at each step
        return _grows(node, listed, (per[0], max(per[1], 1.0), per[2]))

    def _mapped(self, node: exp.Expr, listed: Size, lam: exp.Lambda, params: list[str]) -> Size:
        """A mapping of ``listed``: each element of size s becomes at most f(s) = g * s + c, so the list
        becomes at most (g + c) times its size (its elements' sizes sum to at most its size, and so does
        their count)."""
        calls = growth.count(listed)
        one, two = self._body(lam, params, const(1.0), calls=calls), self._body(lam, params, const(2.0), calls=calls)
        slope = two[1] - one[1]
        per = (one[0] + max(two[0] - one[0], 0.0), one[1] + max(slope, 0.0), one[2] + max(two[2] - one[2], 0.0))
        return _grows(node, listed, (per[0], max(per[1], 1.0), per[2]))

    def _comprehension(self, node: exp.Comprehension) -> Size:
        """``[body FOR x IN list IF cond]``: a mapping of ``list``, sized as ``list_transform``."""
        listed = self.of(node.args["iterator"])
        var = node.expression.name.lower()
        lam = exp.Lambda(this=node.this, expressions=[exp.to_identifier(var)])
        if node.args.get("condition") is not None:
            condition = exp.Lambda(this=node.args["condition"], expressions=[exp.to_identifier(var)])
            self._body(condition, [var], listed, calls=growth.count(listed))
        return self._mapped(node, listed, lam, [var])

    def _body(self, lam: exp.Lambda, params: list[str], first: Size, second: Size | None = None, *,
              calls: float = 1.0) -> Size:  # fmt: skip
        if self.depth >= MAX_LAMBDA_DEPTH:
            raise _refuse(
                "DP255", f"{_sql(lam)}: lambdas nested more than {MAX_LAMBDA_DEPTH} deep in a public statement",
                f"nest at most {MAX_LAMBDA_DEPTH} lambdas (or comprehensions)",
            )
        self.depth += 1
        saved, saved_calls = dict(self.bound), self.calls
        self.bound[params[0]] = first
        for p in params[1:]:
            self.bound[p] = second if second is not None else first
        self.calls = self.calls * calls
        try:
            return self.of(lam.this)
        finally:
            self.bound, self.calls = saved, saved_calls
            self.depth -= 1


def _is_text(node: exp.Expr) -> bool:
    """Whether ``node`` is text already (a cast of it to text writes nothing out)."""
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Literal):
        return node.is_string
    if isinstance(node, exp.Cast):
        return isinstance(node.to, exp.DataType) and node.to.this.name in ("VARCHAR", "TEXT", "CHAR", "NVARCHAR", "NCHAR")
    return isinstance(node, (exp.DPipe, exp.Concat, exp.GroupConcat, exp.Upper, exp.Lower, exp.Substring, exp.Repeat))


def _grows(node: exp.Expr, value: Size, factor: Size) -> Size:
    """``value`` times ``factor``; refused when ``value`` is as large as the rows an aggregate read and
    the factor is more than a small constant (the growth would be the analyst's to choose)."""
    out = product(value, factor)
    if value[2] > 0 and out[2] > MAX_GROWTH_OF_GATHERED:
        raise _refuse(
            "DP255",
            f"{_sql(node)} grows a value that is as large as the rows an aggregate read",
            "show or measure a gathered value (length, substring, a search); build with constants only",
        )
    return out


def _quadratic(node: exp.Expr, inputs: list[Size], calls: float = 1.0, *, deep: bool = False) -> None:
    """Work that grows with the product of its inputs' sizes (with one input, its square): inputs of at
    most ``MAX_QUADRATIC`` built characters, none gathered, and at most ``MAX_QUADRATIC ** 2`` steps a row
    with a lambda's calls counted. ``deep``: recursion once per nesting level, bounded the same way."""
    why = ("it recurses once per nesting level of its input (60,000 levels killed DuckDB 1.5.6)" if deep else
           "its work grows with the product of its inputs' lengths")  # fmt: skip
    for _, b, g in inputs:
        if b > MAX_QUADRATIC or g > 0:
            raise _refuse(
                "DP258",
                f"{_sql(node)}: {why}, and an input may be "
                f"{'as large as the rows an aggregate reads' if g > 0 else f'{b:,.0f} characters built by the statement'}"
                " (one such call cannot be interrupted)",
                f"give it stored values or text of at most {MAX_QUADRATIC:,} characters",
            )
    sizes = [max(b, 1.0) for _, b, _ in inputs] or [1.0]
    steps = calls * math.prod(sizes) * (sizes[0] if len(sizes) == 1 else 1.0)
    if steps > MAX_QUADRATIC**2:
        raise _refuse(
            "DP258",
            f"{_sql(node)}: {why}, and it is called once per element of a list "
            f"({'as long as the rows an aggregate read' if math.isinf(calls) else f'{steps:,.0f} steps a row'})",
            f"call it over fewer or shorter values (at most {MAX_QUADRATIC**2:,} steps a row)",
        )


def _check_pattern(node: exp.Expr, pattern: exp.Expr | None, *, glob: bool, backtracking: bool, values: Sizes) -> None:
    """A pattern a backtracking matcher reads: a literal (or a parameter's value) with at most one
    wildcard run before its end. A computed pattern could be anything, so it is refused."""
    from dpgate.frontend.cost import backtracks, wildcard_runs  # a sibling in the same stage

    texts: list[str]
    if isinstance(pattern, exp.Literal) and pattern.is_string:
        texts = [pattern.this]
    elif isinstance(pattern, (exp.Placeholder, exp.Parameter)) and values.patterns is not None:
        texts = values.patterns  # every text parameter could be this one
    else:
        raise _refuse(
            "DP258",
            f"{_sql(node)}: a pattern computed by the statement could make the matcher backtrack over every "
            "wildcard (its work the text's length to their power, in one call no interrupt reaches)",
            "write the pattern as a literal or pass it as a parameter",
        )
    for text in texts:
        if glob:
            text = text.replace("%", "_").replace("*", "%").replace("?", "_")
            slow = True
        else:
            slow = backtracking or backtracks(exp.Like(this=exp.Null(), expression=exp.Literal.string(text)), None)
        if slow and wildcard_runs(text) > 1:
            raise _refuse(
                "DP258",
                f"{_sql(node)}: this pattern matches by backtracking, and each wildcard with text after it "
                "multiplies the work by the text's length (one call, which no interrupt reaches)",
                "use at most one '%' (or '*') before the pattern's end, or LIKE without '_' and ESCAPE, which "
                "matches any number of '%' in linear time",
            )



def _value_size(v: object, depth: int = 0) -> float:
    """What DuckDB binds for a parameter: characters, bytes or elements, containers summed."""
    if isinstance(v, (str, bytes, bytearray)):
        return float(len(v))
    if isinstance(v, memoryview):
        return float(v.nbytes)
    if isinstance(v, (list, tuple, set, frozenset)) and depth < 8:
        return float(len(v)) + sum(_value_size(e, depth + 1) for e in v)
    if isinstance(v, dict) and depth < 8:
        return float(len(v)) + sum(_value_size(k, depth + 1) + _value_size(e, depth + 1) for k, e in v.items())
    nbytes = getattr(v, "nbytes", None)  # an array: its buffer
    if isinstance(nbytes, int):
        return float(max(nbytes, _FIXED))
    length = getattr(v, "__len__", None)
    if length is not None:
        try:
            return float(max(len(v) * _FIXED, _FIXED))  # a sequence of unknown elements
        except TypeError:
            pass
    return _FIXED


def _parameter_sizes(params: object) -> tuple[Size, list[str] | None]:
    """The largest parameter's size, and the text parameters (any of them may be a pattern)."""
    values = list(params.values()) if isinstance(params, dict) else list(params) if params else []
    size, texts = _FIXED, []
    for v in values:
        if isinstance(v, str):
            texts.append(v)
        size = max(size, _value_size(v))
    return const(size), texts




def check(statement: exp.Expr, params: object = None) -> None:
    """Refuse a public statement that could build a value past the bounds above, or do work on one
    value that no interrupt reaches. ``params`` are the values its placeholders will take."""
    _refuse_variant_casts(statement)
    _refuse_long_gathered_names(statement)
    parameter, patterns = _parameter_sizes(params)
    column: Size = _STORED
    sources = columns(statement)
    projections = {id(p): p for _, named in sources.values() for p in named}
    known: dict[int, Size] = {}
    work = [0]
    rounds = min(MAX_ROUNDS, 2 + sum(1 for _ in statement.find_all(exp.Select, exp.Values, exp.Unnest)))
    for _ in range(rounds):  # sizes carried level by level, until they settle
        inner = Sizes(column, parameter, sources, known, patterns, work)
        now = {key: inner.of(p) for key, p in projections.items()}
        if now == known:
            break
        known = now
    else:
        raise _refuse(
            "DP255",
            "The statement's values grow at every level of its subqueries (a recursion, or a chain deeper than "
            f"{MAX_ROUNDS}): dpgate cannot bound them before it runs",
            "build values with constants in one place; a recursive CTE may count and carry values, not grow them",
        )
    sizes = Sizes(column, parameter, sources, known, patterns, work)
    under_lambda = {id(n) for lam in statement.find_all(exp.Lambda, exp.Comprehension) for n in lam.walk()}
    for node in reversed(list(statement.walk())):  # inner expressions first: the refusal names the builder
        if not isinstance(node, exp.Expr) or isinstance(node, (exp.Select, exp.Subquery, exp.Table, exp.From,
                                                               exp.Join, exp.With, exp.CTE, exp.Values)):  # fmt: skip
            continue
        if id(node) in under_lambda and not isinstance(node, exp.Comprehension):
            continue  # sized with its parameters bound, by the call that holds it
        a, b, g = sizes.of(node)
        if any(math.isnan(v) for v in (a, b, g)) or a > MAX_FACTOR or b > MAX_BUILT or g > MAX_GROWTH_OF_GATHERED:
            raise _refuse(
                "DP255",
                f"{_sql(node)} can build a value of {_describe(a, b, g)}; a public statement's values may hold at most "
                f"{MAX_BUILT:,} built characters or list elements, {MAX_FACTOR} times a stored value and "
                f"{MAX_GROWTH_OF_GATHERED} times a value an aggregate gathered",
                "build less per value (a smaller count, width or list); to make rows, use a table function: "
                "SELECT ... FROM range(n)",
            )


def _refuse_long_gathered_names(statement: exp.Expr) -> None:
    """A STRUCT's field names and an ENUM's labels are kept once in the type and written once per element
    as text: in a statement that gathers, each is at most ``growth.MAX_GATHERED_NAME`` characters."""
    gathers = any(isinstance(f, growth.GATHERING_NODES) or _name(f) in growth.GATHERING or f.args.get("count") is not None
                  for f in statement.find_all(exp.AggFunc, exp.Anonymous))  # fmt: skip
    if gathers and growth.longest_name(statement) > growth.MAX_GATHERED_NAME:
        raise _refuse(
            "DP255", f"The statement gathers values whose type has a name or label longer than "
            f"{growth.MAX_GATHERED_NAME} characters: DuckDB keeps it once, and writes it once per gathered element "
            "as text (3 million elements of 8 bytes with a 1,000-character name: 3.1 GB past the memory limit)",
            f"use field names and labels of at most {growth.MAX_GATHERED_NAME} characters",
        )  # fmt: skip


def _refuse_variant_casts(statement: exp.Expr) -> None:
    """A VARIANT made from JSON text nests as deep as the text (``string_agg`` gathers 100,000 levels), and
    DuckDB's work on a VARIANT -- comparing it, writing it as text or to the client, ``variant_contains``,
    ``variant_normalize``, its sort key -- recurses once per level: 100,000 levels killed the process (1.5.6
    and 2.0.1 alike). A public statement makes none (``frontend.functions`` refuses the functions that build
    one); a stored VARIANT is read as it is."""
    for cast in statement.find_all(exp.Cast):  # TRY_CAST and :: too
        if any(t.this == exp.DataType.Type.VARIANT for t in cast.to.find_all(exp.DataType)):
            raise _refuse(
                "DP258", f"{_sql(cast)}: a public statement cannot make a VARIANT (one made from JSON text nests as "
                "deep as the text, and DuckDB's work on it recurses once per level)",
                "read JSON with the json_* functions, or a stored VARIANT column as it is",
            )  # fmt: skip




def _describe(a: float, b: float, g: float) -> str:
    if g > MAX_GROWTH_OF_GATHERED:
        return "any size (it grows a value an aggregate gathered)" if math.isinf(g) else (
            f"{g:,.0f} times a value an aggregate gathered")  # fmt: skip
    if a > MAX_FACTOR:
        return f"{a:,.0f} times a stored value"
    return f"{b:,.0f} characters or list elements"
