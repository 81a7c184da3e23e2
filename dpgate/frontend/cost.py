"""What one row of a DP statement may cost: the text its expressions build and the work they do.

Why: timing is an output the analyst sees (docs/privacy-model.md: what a statement's time can tell). An
expression that does seconds of work on one chosen row (``CASE WHEN <a condition on one person>
THEN regexp_matches(lpad(x, 100000, 'x'), '(x|y){1,1000}z') END``) turns a statement's duration
into a readout of that row, and no noise covers it. So every listed function's work is bounded
by the size of its inputs, and a row expression's bound is checked before anything runs:

text size
    A row expression's text is at most ``a * L + b`` characters, ``L`` the longest stored value
    it reads; dpgate refuses ``a > MAX_TEXT_FACTOR`` or ``b > MAX_TEXT_CONSTANT`` (DP255). The
    constant part is what the analyst adds beyond the data (``lpad(x, 4096, ' ')``).
work
    A row's work is at most ``A * L + B`` *units* (one unit: one step of a scan over one
    character), summed over the expression's nodes: each node's input size times its
    per-character factor (1 for a scan; the needle for a search; the pattern's length for a LIKE
    that backtracks; the compiled program for a regular expression), plus the text it builds.
    dpgate refuses ``A > MAX_WORK_FACTOR`` or ``B > MAX_WORK_CONSTANT`` (DP258), and a statement
    whose ``B`` times its public bound on rows exceeds ``MAX_STATEMENT_WORK`` (times Spark's cores,
    for a statement whose tables are all in Spark: ``check_rows``).
patterns
    A regular expression's program, with every counted repetition expanded as RE2 compiles it,
    has at most ``MAX_REGEX_PROGRAM`` instructions (RE2 is linear in the text, but its time per
    character grows with the program once its DFA cache overflows: ``(x|y){1,1000}z`` costs
    80 ms on 4 KB, ``(x|y){1,30}z`` 16 µs). A LIKE pattern that DuckDB matches by backtracking
    (one with ``_`` or an ESCAPE, and every ILIKE; every LIKE on Spark) may have at most one ``%``
    with text after it: each such ``%`` multiplies the work by the text's length (``'%_%z'`` on 4 KB:
    23 ms).

What the bounds leave: one row can change a statement's time by at most ``B`` units plus its
stored size times ``A`` (``tests/privacy/test_timing.py`` measures the worst accepted shapes).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from sqlglot import exp

from dpgate import errors
from dpgate.frontend.nodes import DPOptions

#: A row expression's text: at most this many times its longest input value ...
MAX_TEXT_FACTOR = 8
#: ... plus this many characters.
MAX_TEXT_CONSTANT = 4096
#: A regular expression's program, counted repetitions expanded (RE2 caps a count at 1,000).
MAX_REGEX_PROGRAM = 256
#: A row's work: at most this many units per character of its longest input (about 3 µs) ...
MAX_WORK_FACTOR = 8192
#: ... plus this many units (about 0.2 ms).
MAX_WORK_CONSTANT = 2**19
#: Units per character and instruction of a regular expression: RE2's worst case, a DFA state built
#: for each character of varied text when the pattern's states overflow its cache (about 25 ns).
REGEX_UNITS = 64
#: A statement's constant work over its public bound on rows (about a minute of one core) ...
MAX_STATEMENT_WORK = 2**37
#: ... times the cores Spark gives dpgate's session, for a statement that reads Spark tables only
#: (the work runs there, not on dpgate's server), up to this many.
MAX_SPARK_CORES = 256

SIZE = "DP255"
WORK = "DP258"

_FIXED = 64  # characters of any non-text value shown as text (a number, a date, a boolean)


def refuse(code: str, message: str, hint: str) -> errors.UnsupportedQueryError:
    return errors.UnsupportedQueryError(message, code=code, hint=hint)


def sql_text(node: exp.Expr, limit: int = 80) -> str:
    """``node`` as DuckDB SQL on one line, cut to ``limit`` characters (for messages)."""
    try:
        text = node.sql(dialect="duckdb")
    except Exception:  # noqa: BLE001 - dpgate's own nodes have no DuckDB form
        text = node.key.upper()
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _string(node: exp.Expr | None) -> str | None:
    return node.this if isinstance(node, exp.Literal) and node.is_string else None


def signed_literal(node: exp.Expr | None, convert):
    """A numeric literal under any signs and parentheses, converted (None if it is not one)."""
    negative = False
    while isinstance(node, (exp.Neg, exp.Paren)):
        negative ^= isinstance(node, exp.Neg)
        node = node.this
    if isinstance(node, exp.Literal) and not node.is_string:
        try:
            value = convert(node.this)
        except ValueError:
            return None
        return -value if negative else value
    return None


def _integer(node: exp.Expr | None) -> int | None:
    return signed_literal(node, int)


def _literal_length(node: exp.Expr | None) -> int:
    text = _string(node)
    return len(text) if text is not None else _FIXED


# -- regular expressions --------------------------------------------------------------------------
class _Regex:
    """The size of RE2's program for a pattern: a recursive reading of RE2's syntax that counts
    one instruction per atom and alternative and copies a repeated item as RE2 does."""

    def __init__(self, pattern: str):
        self.p, self.i = pattern, 0

    def size(self) -> int:
        n = self.alternation()
        return n

    def alternation(self) -> int:
        total, branches = self.sequence(), 1
        while self.i < len(self.p) and self.p[self.i] == "|":
            self.i += 1
            total += self.sequence()
            branches += 1
        return total + branches - 1

    def sequence(self) -> int:
        total = 0
        while self.i < len(self.p) and self.p[self.i] not in "|)":
            total += self.quantified(self.atom())
        return total

    def atom(self) -> int:
        p = self.p
        c = p[self.i]
        if c == "(":
            self.i += 1
            if p.startswith("?", self.i):  # (?flags) (?:...) (?P<name>...)
                while self.i < len(p) and p[self.i] not in ":)>":
                    self.i += 1
                if self.i < len(p) and p[self.i] == ")":
                    self.i += 1
                    return 0
                self.i += 1
            inner = self.alternation()
            self.i += 1  # ')'
            return inner + 1
        if c == "[":
            self.i += 1
            if p.startswith("^", self.i):
                self.i += 1
            if p.startswith("]", self.i):
                self.i += 1
            while self.i < len(p) and p[self.i] != "]":
                if p.startswith("[:", self.i):
                    end = p.find(":]", self.i + 2)
                    self.i = end + 2 if end >= 0 else len(p)
                    continue
                self.i += 2 if p[self.i] == "\\" else 1
            self.i += 1
            return _ANY  # ranges of UTF-8 byte sequences, not one instruction
        if c == "\\":
            if p.startswith("\\Q", self.i):  # literal text up to \E: one instruction a character
                end = p.find("\\E", self.i + 2)
                end = len(p) if end < 0 else end
                n = end - self.i - 2
                self.i = min(len(p), end + 2)
                return max(n, 0)
            if self.i + 1 < len(p) and p[self.i + 1] in "pP":  # a Unicode class: hundreds of ranges
                if p.startswith("{", self.i + 2):
                    end = p.find("}", self.i)
                    self.i = end + 1 if end >= 0 else len(p)
                else:
                    self.i += 3
                return _UNICODE
            letter = p[self.i + 1] if self.i + 1 < len(p) else ""
            self.i += 2
            return _ANY if letter in "DSWC" else (_ASCII if letter in "dswbB" else 1)
        self.i += 1
        return _ANY if c == "." else 1

    def quantified(self, size: int) -> int:
        p = self.p
        while self.i < len(p):
            c = p[self.i]
            if c in "*+?":
                self.i += 1
                size = size + 1
            elif c == "{":
                end = p.find("}", self.i)
                body = p[self.i + 1 : end] if end > 0 else ""
                lo, _, hi = body.partition(",")
                if not lo.strip().isdigit() or (hi.strip() and not hi.strip().isdigit()):
                    return size  # a literal '{' (RE2 reads it so when it is not a count)
                self.i = end + 1
                low = int(lo)
                high = int(hi) if hi.strip() else (low + 1 if "," in body else low)
                size = size * max(high, 1) + max(high - low, 0)
            else:
                return size
            if self.i < len(p) and p[self.i] == "?":  # lazy
                self.i += 1
        return size


#: Instructions of RE2's UTF-8 program for an item: any character ('.', a class, \\D), an ASCII
#: class (\\d, \\w, \\s), a Unicode class (\\pL: hundreds of ranges; \\p{L}{200} took 0.6 s to compile).
_ANY, _ASCII, _UNICODE = 16, 4, 96


def regex_program(pattern: str, options: str = "") -> int:
    """An upper estimate of the instructions RE2 compiles ``pattern`` into (UTF-8, case folding doubles)."""
    try:
        size = _Regex(pattern).size() + 1
    except (IndexError, ValueError):
        return len(pattern) * 1000  # unreadable here: RE2 decides; count it as too large
    folded = "i" in options or re.search(r"\(\?[a-zA-Z]*i", pattern) is not None
    return size * 2 if folded else size


def regex_options(node: exp.Expr) -> str:
    for key in ("modifiers", "flag", "options", "parameters"):
        text = _string(node.args.get(key))
        if text is not None:
            return text
    return ""


def check_regex(node: exp.Expr, pattern: str) -> None:
    size = regex_program(pattern, regex_options(node))
    if size > MAX_REGEX_PROGRAM:
        raise refuse(
            WORK,
            f"The pattern of {sql_text(node)} compiles to about {size:,} instructions (at most {MAX_REGEX_PROGRAM}); "
            "its work per character, and so the time one row takes, would be the analyst's to choose",
            "write a smaller pattern: fewer or smaller counted repetitions ({1,1000} is copied 1,000 times)",
        )


# -- LIKE ----------------------------------------------------------------------------------------
def wildcard_runs(pattern: str, escape: str | None = None) -> int:
    """How many runs of ``%`` in ``pattern`` have text after them (a trailing ``%`` matches the rest at
    once): a backtracking matcher's work grows with the text's length to that power."""
    wild: list[bool] = []
    i = 0
    while i < len(pattern):
        if escape and pattern[i] == escape and i + 1 < len(pattern):
            wild.append(False)
            i += 2
            continue
        wild.append(pattern[i] == "%")
        i += 1
    while wild and wild[-1]:
        wild.pop()
    runs, before = 0, False
    for w in wild:
        runs += w and not before
        before = w
    return runs


def backtracks(node: exp.Expr, escape: str | None) -> bool:
    """Whether DuckDB matches this LIKE / ILIKE by backtracking (its linear matcher takes only LIKE
    patterns of literal text and ``%``)."""
    pattern = _string(node.expression) or ""
    return isinstance(node, exp.ILike) or "_" in pattern or bool(escape)


#: Spark's LikeSimplification: equality, startsWith, endsWith, startsWith and endsWith, contains.
_SPARK_LINEAR = (r"[^_%\\]*", r"[^_%\\]+%", r"%[^_%\\]+", r"[^_%\\]+%[^_%\\]+", r"%[^_%\\]+%", r"%")


def spark_linear(pattern: str) -> bool:
    """Whether Spark matches this LIKE pattern without a regular expression: its optimizer turns
    ``abc``, ``abc%``, ``%abc``, ``%abc%`` and ``abc%def`` into comparisons and searches; any other
    pattern runs as a Java regular expression, which backtracks over ``%`` (``x%aaa%``: the text's
    length times the pattern's per row)."""
    pattern = re.sub("%+", "%", pattern)  # as dpgate writes a LIKE for Spark (translate._like)
    return any(re.fullmatch(shape, pattern, re.S) for shape in _SPARK_LINEAR)


def check_like(node: exp.Expr, escape: str | None = None, *, backtracking: bool | None = None) -> None:
    pattern = _string(node.expression)
    if pattern is None:
        return
    slow = backtracks(node, escape) if backtracking is None else backtracking
    if slow and wildcard_runs(pattern, escape) > 1:
        raise refuse(
            WORK,
            f"{sql_text(node)}: this pattern matches by backtracking, and each '%' with text after it multiplies the "
            "work by the text's length (a time one row could decide)",
            "use at most one '%' before the pattern's end (LIKE '%a_b%', 'a%b'), or LIKE without '_' and ESCAPE, "
            "which matches any number of '%' in linear time (on DuckDB; lower(x) LIKE '...' for ILIKE)",
        )


# -- size and work of a row expression -------------------------------------------------------------
Linear = tuple[float, float]  # (a, b): at most a * L + b


def _widest(parts: list[Linear]) -> Linear:
    return (max((a for a, _ in parts), default=0.0), max((b for _, b in parts), default=0.0))


def _plus(*parts: Linear) -> Linear:
    return (sum(a for a, _ in parts), sum(b for _, b in parts))


def _times(k: float, part: Linear) -> Linear:
    return (k * part[0], k * part[1])


def _memo(cache: dict[int, Linear], compute, node: exp.Expr) -> Linear:
    key = id(node)
    if key not in cache:
        cache[key] = compute(node)
    return cache[key]


class RowCost:
    """The size (characters) and work (units) of each node of one statement, as linear forms in
    the longest stored value ``L`` it reads."""

    def __init__(self) -> None:
        self.sizes: dict[int, Linear] = {}
        self.works: dict[int, Linear] = {}

    def size(self, node: exp.Expr) -> Linear:
        return _memo(self.sizes, self._size, node)

    def _size(self, node: exp.Expr) -> Linear:
        sub = [self.size(child) for child in node.iter_expressions()]
        if isinstance(node, exp.Column):
            return (1.0, 0.0)
        if isinstance(node, exp.Literal):
            return (0.0, float(len(node.this)) if node.is_string else float(_FIXED))
        if isinstance(node, (exp.DPipe, exp.Concat)):
            return _plus(*sub)
        if isinstance(node, exp.Replace):
            old, new = _string(node.expression), _string(node.args.get("replacement"))
            ratio = 1.0 if not old else max(1.0, (len(new) if new is not None else MAX_TEXT_CONSTANT) / len(old))
            return _times(ratio, self.size(node.this))
        if isinstance(node, exp.Pad):
            width = _integer(node.expression)
            return (0.0, float(width)) if width is not None else (float("inf"), 0.0)
        if isinstance(node, (exp.Left, exp.Right, exp.Substring)):
            n = _integer(node.args.get("length") if isinstance(node, exp.Substring) else node.expression)
            inner = self.size(node.this)
            if n is None:
                return inner
            return (0.0, float(abs(n))) if abs(n) <= MAX_TEXT_CONSTANT or inner[0] == 0 and abs(n) < inner[1] else inner
        if isinstance(node, exp.RegexpReplace):
            a, b = self.size(node.this)
            return (a, b + _literal_length(node.args.get("replacement")))
        if isinstance(node, (exp.Upper, exp.Lower)):
            return _times(3.0, self.size(node.this))  # case mapping lengthens a character at most 3x (ß -> SS)
        if isinstance(node, exp.TimeToStr):  # each specifier at most 32 characters (%c), other characters as they are
            fmt = _string(node.args.get("format"))
            return (0.0, float(32 * fmt.count("%") + len(fmt)) if fmt is not None else float(MAX_TEXT_CONSTANT))
        if isinstance(node, (exp.Cast, exp.TryCast, exp.Trim, exp.RegexpExtract, exp.Paren, exp.Case, exp.If,
                             exp.Coalesce, exp.Nullif, exp.Greatest, exp.Least, exp.Anonymous)):  # fmt: skip
            return _widest(sub + [(0.0, float(_FIXED))])  # at most one of its inputs, or a short value
        return (0.0, float(_FIXED))  # numbers, booleans, dates: fixed-size values

    def work(self, node: exp.Expr) -> Linear:
        return _memo(self.works, self._work, node)

    def _work(self, node: exp.Expr) -> Linear:
        children = list(node.iter_expressions())
        below = _plus(*(self.work(c) for c in children)) if children else (0.0, 0.0)
        inputs = _widest([self.size(c) for c in children]) if children else (0.0, 0.0)
        return _plus(below, _times(self._factor(node), inputs), self.size(node))

    @staticmethod
    def _factor(node: exp.Expr) -> float:
        """Units of work per input character of ``node``: one unit is a plain scan's time per character
        (DuckDB 1.5, measured on 4 KB values: length() 0.4 ns, upper() 1 ns, replace() growing 8x 20 ns,
        a backtracking LIKE 1.7 ns per character and pattern character, a search 0.017 ns per character
        and needle character; RE2 0.04 ns per character and instruction while its DFA cache holds, and
        up to 25 ns on varied text when a pattern's states do not fit (``.*a.{250}c``): that is charged)."""
        if isinstance(node, (exp.RegexpLike, exp.RegexpFullMatch, exp.RegexpExtract, exp.RegexpReplace)):
            pattern = _string(node.expression)
            program = regex_program(pattern, regex_options(node)) if pattern is not None else MAX_REGEX_PROGRAM
            return REGEX_UNITS * program
        if isinstance(node, (exp.Like, exp.ILike)):
            # charged as backtracking where either engine backtracks (the statement's engine is not
            # known here): DuckDB's matcher by its own rule, Spark's regular expression by its shape
            pattern = _string(node.expression) or ""
            escape = isinstance(node.parent, exp.Escape)
            slow = backtracks(node, "!" if escape else None) or not spark_linear(pattern)
            return 4.0 * max(len(pattern), 1) if slow else 2.0
        if isinstance(node, (exp.Contains, exp.StrPosition, exp.StartsWith, exp.EndsWith)):
            needle = node.args.get("substr") if isinstance(node, exp.StrPosition) else node.expression
            return 1.0 + _literal_length(needle) / 16.0
        if isinstance(node, exp.Replace):
            return 16.0 + _literal_length(node.expression) / 16.0
        if isinstance(node, exp.Trim):
            return 1.0 + (_literal_length(node.expression) / 64.0 if node.expression is not None else 0.0)
        if isinstance(node, (exp.Upper, exp.Lower)):
            return 3.0
        return 1.0


_SKIP = (exp.Select, exp.Subquery, exp.Table, exp.From, exp.Join, exp.With, exp.CTE)


def check(statement: exp.Expr) -> RowCost:
    """Refuse a row expression of ``statement`` whose text or work is not bounded as above."""
    cost = RowCost()
    for node in statement.walk():
        if not isinstance(node, exp.Expr) or isinstance(node, _SKIP):
            continue
        if isinstance(node, (exp.RegexpLike, exp.RegexpFullMatch, exp.RegexpExtract, exp.RegexpReplace)):
            pattern = _string(node.expression)
            if pattern is not None:
                check_regex(node, pattern)
        if isinstance(node, (exp.Like, exp.ILike)):
            escape = _string(node.parent.expression) if isinstance(node.parent, exp.Escape) else None
            check_like(node, escape or None)
        a, b = cost.size(node)
        if a > MAX_TEXT_FACTOR or b > MAX_TEXT_CONSTANT:
            raise refuse(
                SIZE,
                f"{sql_text(node)} can make a value of up to {a:g} x its input + {b:,.0f} characters",
                f"keep a row expression within {MAX_TEXT_FACTOR} x its longest input + {MAX_TEXT_CONSTANT:,} "
                "characters: nest fewer growing functions (replace, lpad, concat), pad to fewer characters",
            )
    for node in statement.walk():
        if not isinstance(node, exp.Expr) or isinstance(node, _SKIP):
            continue
        a, b = cost.work(node)
        if a > MAX_WORK_FACTOR or b > MAX_WORK_CONSTANT:
            raise refuse(
                WORK,
                f"{sql_text(node)} may do up to {a:,.0f} steps per character of its input + {b:,.0f} steps on one row "
                f"(at most {MAX_WORK_FACTOR:,} and {MAX_WORK_CONSTANT:,})",
                "do less per row: fewer or smaller patterns and searches over shorter built text; "
                "the time one row takes must not be the analyst's to choose",
            )
    return cost


def row_work(statement: exp.Expr) -> Linear:
    """The work of one row of ``statement``: the sum over its top-level row expressions. The DP
    options (``OPTIONS (epsilon = 1, ...)``) are read once, at planning, not per row."""
    cost = RowCost()
    total: Linear = (0.0, 0.0)
    for node in statement.walk():
        if isinstance(node, exp.Expr) and not isinstance(node, (*_SKIP, DPOptions)) and isinstance(node.parent, _SKIP + (exp.Where, exp.Group, exp.Having, exp.Order, exp.Alias, exp.Ordered)):
            total = _plus(total, cost.work(node))
    return total


def check_statement(b: float, rows: int, cores: int = 1) -> None:
    """Refuse a statement whose constant work per row ``b`` (``row_work``'s second part) times ``rows``
    (a public bound on the rows it reads) exceeds ``MAX_STATEMENT_WORK`` per core of ``cores``: it
    would hold them for minutes whatever the data."""
    total = b * max(rows, 1)
    counted = max(1, min(int(cores), MAX_SPARK_CORES))
    bound = MAX_STATEMENT_WORK * counted
    if total > bound:
        where = "" if counted == 1 else f", {counted} Spark cores"
        raise refuse(
            WORK,
            f"This statement may do {b:,.0f} steps on each of up to {rows:,} rows ({total:,.0f} in all; "
            f"at most {bound:,}{where})",
            "do less per row (shorter built text, fewer patterns), or ask the data owner about a smaller table",
        )


def check_rows(con: Any, statement: exp.Expr, tables: tuple, rows_per_subject: Callable[[Any], int],
               cores: Callable[[], int] | None = None) -> None:  # fmt: skip
    """The statement's constant work per row times a public bound on its rows (each table's roster
    times the rows one of its subjects adds), refused free when it would hold a core for minutes.

    ``cores``: for a statement that reads Spark tables only, the cores its Spark work may count on
    (asked only when one core's bound is not enough). Its work runs there, so the bound is a minute
    of each; what one row may cost (``MAX_WORK_CONSTANT``) is unchanged.

    Tables joined on the unit: a subject's joined rows are the product of its rows in each, so the
    rows are at most the largest roster times the larger of that product and the sum."""
    _, per_row = row_work(statement)
    if not tables:
        return
    each = [max(rows_per_subject(t), 1) for t in tables]
    widest = max(sum(each), math.prod(each))
    if per_row * 2**26 * widest <= MAX_STATEMENT_WORK:
        return  # within the bound for any roster below 67 million subjects: no count needed
    rows, most = 0, 0
    for table, n in zip(tables, each):
        (subjects,) = con.execute(f"SELECT count(*) FROM {table.roster_sql}").fetchone()
        rows, most = rows + subjects * n, max(most, subjects)
    if len(tables) > 1:
        rows = max(rows, most * math.prod(each))
    if cores is not None and per_row * max(rows, 1) > MAX_STATEMENT_WORK:
        check_statement(per_row, rows, cores())
        return
    check_statement(per_row, rows)
