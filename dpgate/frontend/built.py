"""How large a public statement's values may grow, and how long one call over them may take.

Why: a public statement runs free and as written, so its cost is the analyst's to choose, and the
server is shared. DuckDB's memory limit bounds what its operators keep (aggregate states, hash
tables, sorts, a recursive CTE's rows), not the value one scalar call returns:
``len(range(600000000))`` held 21 GB past the limit, ``lpad('a', 1000000000)`` 2 GB, and one call
over such a value (``levenshtein`` of two 100,000-character texts: 16 s; a ``GLOB`` with several
``*``) is not reached by an interrupt, so no timeout stops it. A DP statement's row expressions
have the tighter bounds of ``cost``; this module bounds public statements (``classify``), before
anything runs.

A value's size is a form ``a * L + b``: ``L`` the longest value stored in the tables it reads (the
owner's data), ``b`` characters or list elements the analyst's constants build. A product of two
stored values counts as one (the owner chose them). Refused (DP255) when ``a > MAX_FACTOR`` or
``b > MAX_BUILT``:

- a builder whose size argument is not a constant: ``repeat``, ``lpad`` / ``rpad``, ``range`` /
  ``generate_series`` as a value (as a table, ``FROM range(n)``, rows stream and an interrupt
  stops them), ``list_resize``, ``bitstring``, ``printf`` / ``format`` (widths in a literal format);
- nested growth: builders over built values, ``replace`` / ``regexp_replace`` with a longer
  replacement, a separator repeated per element (``array_to_string``), a lambda's body per element
  of its list, a ``list_reduce`` whose accumulator grows by more than its elements;
- a value an aggregate builds (``string_agg``, ``list``, ``histogram``, ...), which is as large
  as the rows it reads: it may be shown, measured and searched, not grown.

Work that grows faster than its input (edit distances, ``json_pretty``, a ``LIKE`` / ``GLOB`` that
backtracks over several wildcards) takes inputs of at most ``MAX_QUADRATIC`` built characters
(DP258).
"""

from __future__ import annotations

import math
import re

from sqlglot import exp

from dpgate import errors

#: A value may hold this many characters or list elements beyond what stored values bring (a
#: scalar's value is built whole, in memory no limit counts, for each of a vector's 2,048 rows).
MAX_BUILT = 2**18
#: ... and this many times the longest stored value.
MAX_FACTOR = 256
#: A value an aggregate gathered may grow by at most this factor (a separator, an escape).
MAX_GROWTH_OF_GATHERED = 64
#: Inputs of work that grows with a product of sizes: at most this many built characters.
MAX_QUADRATIC = 4096

Size = tuple[float, float]  # (a, b): at most a * L + b

_INF: Size = (math.inf, math.inf)
_FIXED = 32.0  # a number, a date, a boolean: its text
_STORED: Size = (1.0, 0.0)

#: Aggregates whose value grows with the rows they read.
_GATHERING = {
    "string_agg", "group_concat", "listagg", "list", "array_agg", "histogram", "histogram_exact",
    "json_group_array", "json_group_object", "json_group_structure", "map_agg", "bitstring_agg",
}  # fmt: skip
_GATHERING_NODES = (exp.GroupConcat, exp.ArrayAgg)
#: Growth of a function's output over the sum of its inputs (case mapping, escapes, encodings).
_GROWTH = {
    "upper": 3, "lower": 3, "ucase": 3, "lcase": 3, "hex": 8, "to_hex": 8, "bin": 8, "to_binary": 8,
    "to_base64": 2, "base64": 2, "url_encode": 3, "to_json": 6, "json_quote": 6, "array_to_json": 6,
    "row_to_json": 6, "json_object": 6, "json_array": 6, "regexp_escape": 2, "strftime": 32, "translate": 4,
}  # fmt: skip
#: Lambda calls: the list is the first argument, the lambda the last.
_MAPPING = {"list_transform", "array_transform", "list_apply", "array_apply", "apply", "transform"}
_FILTERING = {"list_filter", "array_filter", "filter"}
_REDUCING = {"list_reduce", "array_reduce", "reduce"}
#: Edit distances and similarities: work is the product of the inputs' lengths.
_QUADRATIC = {"levenshtein", "editdist3", "damerau_levenshtein", "jaro_similarity", "jaro_winkler_similarity"}
_WIDTH = re.compile(r"\d+")


def _plus(*parts: Size) -> Size:
    return (sum(a for a, _ in parts), sum(b for _, b in parts))


def _widest(parts: list[Size]) -> Size:
    return (max((a for a, _ in parts), default=0.0), max((b for _, b in parts), default=0.0))


def _scale(k: float, s: Size) -> Size:
    return (k * s[0], k * s[1])


def _product(x: Size, y: Size) -> Size:
    """``x * y`` with ``L * L`` counted as ``L``."""
    (a1, b1), (a2, b2) = x, y
    mixed = a1 * b2 + a2 * b1 + a1 * a2 if a1 and a2 else a1 * b2 + a2 * b1
    return (mixed, b1 * b2)


def _name(node: exp.Func) -> str:
    if isinstance(node, exp.Anonymous):
        return str(node.this).lower()
    return node.sql_name().lower()


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
    """The value of an integer constant (a literal, negated, or arithmetic of such), else None."""
    if node is None:
        return None
    if isinstance(node, exp.Paren):
        return _constant(node.this)
    if isinstance(node, exp.Literal) and not node.is_string:
        try:
            return float(node.this)
        except ValueError:
            return None
    if isinstance(node, exp.Neg):
        v = _constant(node.this)
        return None if v is None else -v
    if isinstance(node, exp.Cast):
        return _constant(node.this)
    if isinstance(node, (exp.Add, exp.Sub, exp.Mul)):
        x, y = _constant(node.this), _constant(node.expression)
        if x is None or y is None:
            return None
        return x + y if isinstance(node, exp.Add) else x - y if isinstance(node, exp.Sub) else x * y
    return None


def _refuse(code: str, message: str, hint: str) -> errors.Error:
    return errors.UnsupportedQueryError(message, code=code, hint=hint)


def _sql(node: exp.Expr) -> str:
    text = node.sql(dialect="duckdb")
    return text if len(text) <= 80 else text[:77] + "..."


def _needs_constant(node: exp.Expr, what: str) -> errors.Error:
    return _refuse(
        "DP255",
        f"{_sql(node)}: {what} must be a constant in a public statement (a value built from a column or a "
        f"subquery could be of any size, held whole in memory)",
        f"write a constant of at most {MAX_BUILT:,}; to make rows, use a table function: SELECT ... FROM range(n)",
    )


class Sizes:
    """The size of each expression of one statement, with stored values of size ``column``."""

    def __init__(self, column: Size = _STORED) -> None:
        self.column = column
        self.memo: dict[int, Size] = {}
        self.bound: dict[str, Size] = {}  # lambda parameters in scope

    def of(self, node: exp.Expr) -> Size:
        key = id(node)
        if key not in self.memo or self.bound:
            self.memo[key] = self._of(node)
        return self.memo[key]

    def _of(self, node: exp.Expr) -> Size:
        if isinstance(node, exp.Literal):
            return (0.0, float(len(node.this)) if node.is_string else _FIXED)
        if isinstance(node, (exp.Null, exp.Boolean, exp.Star, exp.Placeholder, exp.Parameter)):
            return (0.0, _FIXED)
        if isinstance(node, exp.Identifier):
            return self.bound.get(node.name.lower(), self.column)
        if isinstance(node, exp.Column):
            if not node.table and node.name.lower() in self.bound:
                return self.bound[node.name.lower()]
            return self.column
        if isinstance(node, (exp.Subquery, exp.Select, exp.Union, exp.Intersect, exp.Except)):
            return self._query(node)
        if isinstance(node, (exp.Lambda, exp.Window)):
            return self.of(node.this)
        if isinstance(node, exp.Func):
            return self._function(node)
        children = [c for c in node.iter_expressions()]
        return _plus(*(self.of(c) for c in children)) if children else (0.0, _FIXED)

    def _query(self, node: exp.Expr) -> Size:
        selects = [node] if isinstance(node, exp.Select) else list(node.find_all(exp.Select))
        return _widest([self.of(p) for s in selects for p in s.selects])

    def _function(self, node: exp.Func) -> Size:
        name = _name(node)
        args = _args(node)
        if isinstance(node, _GATHERING_NODES) or name in _GATHERING:
            return _INF
        if isinstance(node, exp.AggFunc) or name in ("min", "max", "first", "last", "any_value", "arbitrary"):
            return _widest([self.of(a) for a in args] + [(0.0, _FIXED)])
        if isinstance(node, exp.GenerateSeries) or name in ("range", "generate_series"):
            return self._series(node)
        if isinstance(node, exp.Repeat) or name == "repeat":
            this = node.this if isinstance(node, exp.Repeat) else args[0]
            times = _constant(node.args.get("times") if isinstance(node, exp.Repeat) else args[1])
            if times is None:
                raise _needs_constant(node, "the count of repeat()")
            return _grows(node, self.of(this), (0.0, max(times, 0.0)))
        if isinstance(node, exp.Pad) or name in ("lpad", "rpad"):
            width = _constant(node.expression if isinstance(node, exp.Pad) else args[1])
            if width is None:
                raise _needs_constant(node, "the length of lpad() / rpad()")
            self.of(node.this)
            return (0.0, max(width, 0.0))
        if name in ("list_resize", "array_resize"):
            size = _constant(args[1]) if len(args) > 1 else None
            if size is None:
                raise _needs_constant(node, f"the size of {name}()")
            fill = self.of(args[2]) if len(args) > 2 else (0.0, 1.0)
            return _plus(self.of(args[0]), _grows(node, fill, (0.0, max(size, 0.0))))
        if name == "bitstring":
            size = _constant(args[1]) if len(args) > 1 else None
            if size is None:
                raise _needs_constant(node, "the length of bitstring()")
            return (0.0, max(size, 0.0))
        if isinstance(node, exp.Format) or name in ("printf", "format"):
            return self._format(node, args)
        if isinstance(node, exp.Replace) or isinstance(node, exp.RegexpReplace):
            this = self.of(node.this)
            new = self.of(node.args["replacement"]) if node.args.get("replacement") else (0.0, 0.0)
            old = node.expression
            if isinstance(node, exp.Replace) and isinstance(old, exp.Literal) and old.is_string and old.this:
                growth = _scale(1.0 / len(old.this), new)  # each match of len(old) becomes new
            else:
                growth = _plus(new, (0.0, 1.0))  # a pattern may match between any two characters
            return _plus(this, _grows(node, this, growth), new)
        if name in ("array_to_string", "list_to_string", "array_to_string_comma_default", "concat_ws"):
            listed = self.of(args[0]) if args else (0.0, 0.0)
            sep = self.of(args[1]) if len(args) > 1 else (0.0, 1.0)
            rest = [self.of(a) for a in args[2:]]
            if name == "concat_ws":  # a separator between each of the other arguments
                return _plus(*rest, _scale(len(rest), listed))
            return _plus(listed, _grows(node, listed, sep), *rest)
        if isinstance(node, (exp.Transform, exp.ArrayFilter)) or name in _MAPPING | _FILTERING | _REDUCING:
            return self._lambda(node, name, args)
        if name == "json_pretty":
            inner = self.of(args[0])
            _quadratic(node, [inner])
            return _plus(inner, _product(inner, inner))  # indentation: depth times length
        if isinstance(node, (exp.Levenshtein, exp.JarowinklerSimilarity)) or name in _QUADRATIC:
            _quadratic(node, [self.of(a) for a in args[:2]])
            return (0.0, _FIXED)
        total = _plus(*(self.of(a) for a in args), (0.0, _FIXED))
        return _scale(_GROWTH.get(name, 1), total)

    def _series(self, node: exp.Func) -> Size:
        if isinstance(node.parent, exp.Table) and node.parent.this is node:
            return (0.0, _FIXED)  # a table function: its rows stream
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
        count = 0.0 if by == 0 else max(0.0, (hi - lo) / by + 1)
        return (0.0, count)

    def _format(self, node: exp.Func, args: list[exp.Expr]) -> Size:
        fmt = node.this if isinstance(node, exp.Format) else (args[0] if args else None)
        rest = list(node.expressions) if isinstance(node, exp.Format) else args[1:]
        if not (isinstance(fmt, exp.Literal) and fmt.is_string):
            raise _needs_constant(node, "the format of printf() / format()")
        widths = sum(int(w) for w in _WIDTH.findall(fmt.this))  # every number in it, as a width
        return _plus((0.0, float(len(fmt.this) + widths)), *(self.of(a) for a in rest))

    def _lambda(self, node: exp.Func, name: str, args: list[exp.Expr]) -> Size:
        lam = next((a for a in args if isinstance(a, exp.Lambda)), None)
        listed = self.of(node.this if not isinstance(node, exp.Anonymous) else args[0])
        if lam is None:
            return listed
        params = [p.name.lower() for p in lam.expressions]
        if name in _FILTERING or isinstance(node, exp.ArrayFilter):
            self._body(lam, params, listed)
            return listed
        if name in _REDUCING:
            # f(acc, e) = acc + g * e + c: the accumulator must appear once, ungrown (else it doubles per step);
            # the result is then at most (g + c) times the list's size
            big = 1e6
            f1, f2 = self._body(lam, params, (0.0, big), (0.0, 1.0)), self._body(lam, params, (0.0, 2 * big), (0.0, 1.0))
            if f2[0] - f1[0] > 0 or f2[1] - f1[1] > big * 1.0001:
                raise _refuse(
                    "DP255",
                    f"{_sql(node)}: the accumulator grows by more than the element each step adds, so the value "
                    "doubles with the list's length",
                    "use the accumulator once in the lambda's body, ungrown (e.g. (acc, x) -> acc || x)",
                )
            e2 = self._body(lam, params, (0.0, big), (0.0, 2.0))
            g = max(e2[1] - f1[1], 0.0)
            per = (f1[0], max(g + f1[1] - big - g, 0.0) + g)
            return _grows(node, listed, (per[0], max(per[1], 1.0)))
        # a mapping: each element of size s becomes at most f(s) = g * s + c, so the list becomes at most
        # (g + c) times its size (its elements' sizes sum to at most its size, and so does their count)
        one, two = self._body(lam, params, (0.0, 1.0)), self._body(lam, params, (0.0, 2.0))
        g = (two[1] - one[1], two[0] - one[0])
        per = (one[0] + max(g[1], 0.0), one[1] + max(g[0], 0.0))  # (stored part, per-element constant)
        return _grows(node, listed, (per[0], max(per[1], 1.0)))

    def _body(self, lam: exp.Lambda, params: list[str], first: Size, second: Size | None = None) -> Size:
        saved = dict(self.bound)
        self.bound[params[0]] = first
        for p in params[1:]:
            self.bound[p] = second if second is not None else first
        try:
            return self.of(lam.this)
        finally:
            self.bound = saved


def _grows(node: exp.Expr, value: Size, factor: Size) -> Size:
    """``value`` times ``factor``; refused when ``value`` is as large as the rows an aggregate read and
    the factor is more than a small constant (the growth would be the analyst's to choose)."""
    if math.isinf(value[0]) and (factor[0] > 0 or factor[1] > MAX_GROWTH_OF_GATHERED):
        raise _refuse(
            "DP255",
            f"{_sql(node)} grows a value that is as large as the rows an aggregate read",
            "show or measure a gathered value (length, substring, a search); build with constants only",
        )
    return _product(value, factor)


def _quadratic(node: exp.Expr, inputs: list[Size]) -> None:
    for a, b in inputs:
        if b > MAX_QUADRATIC or math.isinf(a):
            raise _refuse(
                "DP258",
                f"{_sql(node)}: its work grows with the product of its inputs' lengths, and an input may be "
                f"{'as large as the rows an aggregate reads' if math.isinf(a) else f'{b:,.0f} characters built by the statement'}"
                " (one such call cannot be interrupted)",
                f"give it stored values or text of at most {MAX_QUADRATIC:,} characters",
            )


def _backtracking(node: exp.Expr) -> bool:
    """A LIKE / ILIKE / GLOB whose pattern has more than one wildcard run with text after it (a
    backtracking matcher's work is the text's length to that power)."""
    from dpgate.frontend.cost import wildcard_runs  # a sibling in the same stage

    pattern = node.expression
    if not isinstance(pattern, exp.Literal) or not pattern.is_string:
        return True
    text = pattern.this.replace("*", "%").replace("?", "_") if isinstance(node, exp.Glob) else pattern.this
    return wildcard_runs(text) > 1


def _derived(statement: exp.Expr) -> list[exp.Expr]:
    """Projections of the statement's subqueries and CTEs: the values its columns may hold."""
    out = []
    for select in statement.find_all(exp.Select):
        if select is statement or not select.find_ancestor(exp.Subquery, exp.CTE):
            continue
        out.extend(select.selects)
    return out


def check(statement: exp.Expr) -> None:
    """Refuse a public statement that could build a value past the bounds above, or do work on one
    value that no interrupt reaches."""
    column: Size = _STORED
    derived = _derived(statement)
    for _ in range(3):  # a column may name a subquery's projection: as large as the largest of them
        inner = Sizes(column)
        widest = _widest([column] + [inner.of(p) for p in derived])
        if widest == column:
            break
        column = widest
    else:
        column = _INF
    sizes = Sizes(column)
    for node in reversed(list(statement.walk())):  # inner expressions first: the refusal names the builder
        if not isinstance(node, exp.Expr) or isinstance(node, (exp.Select, exp.Subquery, exp.Table, exp.From,
                                                               exp.Join, exp.With, exp.CTE)):  # fmt: skip
            continue
        if isinstance(node, exp.Lambda) or node.find_ancestor(exp.Lambda):
            continue  # sized with its parameters bound, by the call that holds it
        a, b = sizes.of(node)
        if isinstance(node, (exp.Like, exp.ILike, exp.Glob)) and _backtracking(node):
            _quadratic(node, [sizes.of(node.this)])
        if not math.isinf(a) and not math.isinf(b) and (a > MAX_FACTOR or b > MAX_BUILT):
            raise _refuse(
                "DP255",
                f"{_sql(node)} can build a value of {_describe(a, b)}; a public statement's values may hold at most "
                f"{MAX_BUILT:,} built characters or list elements and {MAX_FACTOR} times a stored value",
                "build less per value (a smaller count, width or list); to make rows, use a table function: "
                "SELECT ... FROM range(n)",
            )


def _describe(a: float, b: float) -> str:
    if math.isinf(a) or math.isinf(b):
        return "any size (it grows a value an aggregate gathered)"
    if a > MAX_FACTOR:
        return f"{a:,.0f} times a stored value"
    return f"{b:,.0f} characters or list elements"
