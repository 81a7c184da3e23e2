"""dpgate's SQL dialect: DuckDB plus the differential-privacy clauses, parsed strictly.

Adds to DuckDB's grammar:

- ``SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5, delta = 1e-6, ...) ...``
  (the BigQuery / ZetaSQL clause), kept in the SELECT's ``hint`` slot as ``DPOptions``;
- ``SHOW BUDGET``;
- ``EXPLAIN PRIVACY <statement>``.

``SET dp_epsilon = 0.5`` needs nothing new: it is DuckDB's ``SET`` and the gateway decides
which names are dpgate settings. Parsing always uses ``ErrorLevel.IMMEDIATE``: sqlglot's
IGNORE level silently drops arguments, and sqlglot's fallback to an opaque ``Command``
node is treated as "not understood" by the classifier, never passed through.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import re

from sqlglot import ErrorLevel, exp
from sqlglot.dialects.duckdb import DuckDB
from sqlglot.errors import ParseError as SqlglotParseError
from sqlglot.errors import TokenError
from sqlglot.generators.duckdb import DuckDBGenerator
from sqlglot.parsers.duckdb import DuckDBParser
from sqlglot.tokens import TokenType
from sqlglot.trie import new_trie

from dpgate import errors
from dpgate.frontend.nodes import (
    CreateSynthetic,
    DPOption,
    DPOptions,
    DropSynthetic,
    ExplainPrivacy,
    ShowBudget,
    ShowReleases,
)


class DPTokenizer(DuckDB.Tokenizer):
    # EXPLAIN is a plain word here (DuckDB's tokenizer swallows the rest of the statement
    # as an opaque command); the parser accepts only EXPLAIN PRIVACY.
    KEYWORDS = {k: v for k, v in DuckDB.Tokenizer.KEYWORDS.items() if k != "EXPLAIN"}


class DPParser(DuckDBParser):
    SHOW_PARSERS = {
        **DuckDBParser.SHOW_PARSERS,
        "BUDGET": lambda self: self.expression(ShowBudget()),
        "RELEASES": lambda self: self.expression(ShowReleases()),
    }
    SHOW_TRIE = new_trie(key.split(" ") for key in SHOW_PARSERS)

    def _parse_statement(self) -> exp.Expr | None:
        if self._curr and self._curr.token_type == TokenType.VAR and self._curr.text.upper() == "EXPLAIN":
            nxt = self._next
            if nxt is None or nxt.text.upper() != "PRIVACY":
                self.raise_error("Only EXPLAIN PRIVACY <query> is supported")
            self._advance(2)
            inner = self._parse_statement()
            if inner is None:
                self.raise_error("EXPLAIN PRIVACY needs a query after it")
            return self.expression(ExplainPrivacy(this=inner))
        if (
            self._curr
            and self._curr.token_type in (TokenType.CREATE, TokenType.DROP)
            and self._next is not None
            and self._next.text.upper() == "SYNTHETIC"
        ):
            return self._parse_synthetic()
        return super()._parse_statement()

    def _parse_synthetic(self) -> exp.Expr:
        create = self._curr.token_type == TokenType.CREATE
        self._advance(2)
        if not self._match(TokenType.TABLE):
            self.raise_error("Expected TABLE after SYNTHETIC")
        if not create:
            exists = self._match_text_seq("IF", "EXISTS")
            name = self._parse_table_parts()
            return self.expression(DropSynthetic(this=name, exists=bool(exists)))
        name = self._parse_table_parts()
        if not self._match(TokenType.FROM):
            self.raise_error("Expected FROM <protected table> after CREATE SYNTHETIC TABLE <name>")
        source = self._parse_table_parts()
        mechanism = None  # no USING: the default synthesizer (queries.synthetic.DEFAULT_MECHANISM)
        if self._match(TokenType.USING):
            mechanism = self._parse_id_var(any_token=True)
            if mechanism is None:
                self.raise_error("Expected a mechanism name after USING")
        options = self._parse_dp_option_list("WITH") if self._match(TokenType.WITH) else []
        return self.expression(
            CreateSynthetic(this=name, source=source, mechanism=mechanism and exp.to_identifier(mechanism.name),
                            expressions=options)  # fmt: skip
        )

    def _parse_hint(self) -> exp.Hint | None:
        if self._curr and self._curr.token_type == TokenType.WITH:
            if self._next is not None and self._next.text.upper() == "DIFFERENTIAL_PRIVACY":
                self._advance(2)
                return self._parse_dp_options()  # type: ignore[return-value]
            self.raise_error("Expected DIFFERENTIAL_PRIVACY after SELECT WITH")
        return super()._parse_hint()

    def _parse_dp_options(self) -> DPOptions:
        if not self._match_text_seq("OPTIONS"):
            self.raise_error("Expected OPTIONS (...) after WITH DIFFERENTIAL_PRIVACY")
        return self.expression(DPOptions(expressions=self._parse_dp_option_list("OPTIONS")))

    def _parse_dp_option_list(self, keyword: str) -> list[exp.Expr]:
        """``(name = value, ...)`` after OPTIONS or WITH, parsed strictly."""
        if not self._match(TokenType.L_PAREN):
            self.raise_error(f"Expected ( after {keyword}")
        options: list[exp.Expr] = []
        if not self._match(TokenType.R_PAREN):
            while True:
                options.append(self._parse_dp_option())
                if self._match(TokenType.COMMA):
                    continue
                if not self._match(TokenType.R_PAREN):
                    self.raise_error(f"Expected , or ) in {keyword} (...)")
                break
        return options

    def _parse_dp_option(self) -> DPOption:
        name = self._parse_id_var(any_token=True)
        if name is None:
            self.raise_error("Expected an option name in OPTIONS (...)")
        if not self._match(TokenType.EQ) and not self._match(TokenType.FARROW):
            self.raise_error(f"Expected = after option {name.name!r}")
        value = self._parse_bitwise()
        if value is None:
            self.raise_error(f"Expected a value for option {name.name!r}")
        return self.expression(DPOption(this=exp.to_identifier(name.name), expression=value))


class DPGenerator(DuckDBGenerator):
    TRANSFORMS = {
        **DuckDBGenerator.TRANSFORMS,
        DPOptions: lambda self, e: (
            " WITH DIFFERENTIAL_PRIVACY OPTIONS ("
            + ", ".join(self.sql(o) for o in e.expressions)
            + ")"
        ),
        DPOption: lambda self, e: f"{self.sql(e, 'this')} = {self.sql(e, 'expression')}",
        ShowBudget: lambda self, e: "SHOW BUDGET",
        ShowReleases: lambda self, e: "SHOW RELEASES",
        CreateSynthetic: lambda self, e: (
            f"CREATE SYNTHETIC TABLE {self.sql(e, 'this')} FROM {self.sql(e, 'source')}"
            + (f" USING {self.sql(e, 'mechanism')}" if e.args.get("mechanism") else "")
            + (" WITH (" + ", ".join(self.sql(o) for o in e.expressions) + ")" if e.expressions else "")
        ),
        DropSynthetic: lambda self, e: f"DROP SYNTHETIC TABLE {'IF EXISTS ' if e.args.get('exists') else ''}{self.sql(e, 'this')}",
        ExplainPrivacy: lambda self, e: f"EXPLAIN PRIVACY {self.sql(e, 'this')}",
    }


class DPDuckDB(DuckDB):
    """DuckDB's dialect with dpgate's DP clauses."""

    Tokenizer = DPTokenizer
    Parser = DPParser
    Generator = DPGenerator


DIALECT = DPDuckDB()


def parse(sql: str) -> list[exp.Expr]:
    """Parse one or more statements strictly; raise ``dpgate.errors.ParseError`` with line and column."""
    try:
        with _quiet_sqlglot():
            statements = DIALECT.parse(sql, error_level=ErrorLevel.IMMEDIATE)
    except SqlglotParseError as e:
        first = e.errors[0] if e.errors else {}
        line, col, token = first.get("line"), first.get("col"), first.get("highlight") or ""
        raise errors.ParseError(
            f"Syntax error: {_plain(first.get('description') or str(e), token)}" + _caret(sql, line, col, token),
            code="DP201",
            hint="fix the SQL at the caret; dpgate speaks DuckDB SQL plus "
            "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (...), SHOW BUDGET, EXPLAIN PRIVACY",
            line=line,
            col=col,
            highlight=token,
        ) from None
    except TokenError:
        line, col = _open_quote(sql)
        what = "a quoted string or name is not closed" if line else "the text cannot be read as SQL"
        raise errors.ParseError(
            f"Syntax error: {what}" + (_caret(sql, line, col, sql.splitlines()[line - 1][col - 1]) if line else ""),
            code="DP201",
            hint="close the quote ('text' for strings, \"name\" for names)",
            line=line,
            col=col,
        ) from None
    except Exception:  # noqa: BLE001 - sqlglot's own slip on odd input (MAP('x') raised IndexError)
        raise errors.ParseError(
            "Syntax error: the statement cannot be read (a function called with arguments of an "
            "unexpected number or kind?)", code="DP201",
            hint="check the arguments of the functions called",
        ) from None
    return [s for s in statements if s is not None and not isinstance(s, exp.Semicolon)]


@contextlib.contextmanager
def _quiet_sqlglot():
    """sqlglot's warnings off (its "argument not supported" notes: dpgate checks what it writes)."""
    sqlglot_logger = logging.getLogger("sqlglot")
    level = sqlglot_logger.level
    sqlglot_logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        sqlglot_logger.setLevel(level)


def _plain(description: str, token: str) -> str:
    """sqlglot's message in plain words (never a Python class name)."""
    m = re.match(r"Required keyword: '(\w+)' missing for <class '[\w.]*?(\w+)'>", description)
    if m:
        node = m.group(2)
        if node in ("And", "Or"):
            return f"{node.upper()} needs an expression on both sides"
        return f"an incomplete {re.sub(r'(?<!^)(?=[A-Z])', ' ', node).lower()}"
    description = re.sub(r"<class '[\w.]*?(\w+)'>", r"\1", description)
    m = re.match(r"Expecting (\S+)$", description)
    if m:
        return f"a {m.group(1)!r} is missing"
    if description.startswith("Invalid expression / Unexpected token"):
        return f"unexpected {token!r}" if token else "unexpected token"
    return description


def _caret(sql: str, line: int | None, col: int | None, token: str) -> str:
    """The statement's line with a caret under the token that ends at ``col`` (1-based)."""
    lines = sql.splitlines()
    if not line or not col or line > len(lines):
        return ""
    text = lines[line - 1]
    end = min(col, len(text))
    start = max(1, end - len(token) + 1) if token else end
    lo = max(0, start - 60)  # a window around long lines
    shown = ("…" if lo else "") + text[lo : end + 40] + ("…" if end + 40 < len(text) else "")
    pad = (1 if lo else 0) + start - 1 - lo
    return f" (line {line}, column {start})\n  {shown}\n  {' ' * pad}{'^' * max(1, end - start + 1)}"


def _open_quote(sql: str) -> tuple[int | None, int | None]:
    """Line and column (1-based) of a quote that is never closed, if any."""
    quote = None
    for i, ch in enumerate(sql):
        if quote is None and ch in "'\"":
            quote, at = ch, i
        elif quote is not None and ch == quote:
            quote = None
    if quote is None:
        return None, None
    line = sql.count("\n", 0, at) + 1
    return line, at - (sql.rfind("\n", 0, at) + 1) + 1


def parse_one(sql: str) -> exp.Expr:
    """Exactly one statement: several statements in one string are refused (DP203).

    Returned is the tree of the SQL dpgate will write for it, not of the text received [fixpoint]:
    DuckDB runs what dpgate generates from the checked tree, and sqlglot writes some string
    arguments back out unquoted (``ANONYMOUS_AGG_FUNC('(SELECT ... FROM t) AS x, lower', 'y')``
    becomes a call of ``lower`` beside a subquery; a date unit can close a parenthesis: a "public"
    statement could read protected rows and rewrite the ledger that way). So
    the generated text is parsed again until it generates itself: what is checked is what runs.
    The settled tree of a text is kept (a few hundred texts), and each call gets its own copy.
    A text longer than ``MAX_STATEMENT_BYTES`` or of more than ``MAX_TOKENS`` tokens is refused
    before it is parsed (DP259): parsing costs about 80 µs a token, so a 200 KB statement held a
    worker for 15 s before any check.
    """
    _bounded(sql)
    return _settled(sql).copy()


#: The longest statement text accepted (bytes of UTF-8), and the most tokens: about a second of work.
MAX_STATEMENT_BYTES = 256 * 1024
MAX_TOKENS = 16_384


def _bounded(sql: str) -> None:
    size = len(sql.encode("utf-8", "surrogatepass"))
    if size > MAX_STATEMENT_BYTES:
        raise errors.ParseError(
            f"The statement is {size:,} bytes long; dpgate reads at most {MAX_STATEMENT_BYTES:,}",
            code="DP259", hint="send a shorter statement (a long IN list can be a table to join)",
        )  # fmt: skip
    if len(sql) > MAX_TOKENS:  # a text shorter than the limit cannot have more tokens than characters
        try:
            tokens = len(DIALECT.tokenize(sql))
        except Exception:  # noqa: BLE001 - the parser reports what the tokenizer cannot read
            return
        if tokens > MAX_TOKENS:
            raise errors.ParseError(
                f"The statement has {tokens:,} tokens; dpgate reads at most {MAX_TOKENS:,}",
                code="DP259", hint="send a shorter statement (a long IN list or OR chain can be a table to join)",
            )  # fmt: skip


@functools.lru_cache(maxsize=256)
def _settled(sql: str) -> exp.Expr:
    """``parse_one``'s work, once per text (a pure function of the text; callers get copies)."""
    first = _uncommented(_one(parse(sql)))
    text = _written(first)
    for _ in range(3):  # sqlglot settles in one or two rounds (INTERVAL 1 DAY -> INTERVAL '1' DAY)
        try:
            again = parse(text) if text is not None else []
        except errors.ParseError:
            break
        if len(again) != 1:
            break
        written = _written(_uncommented(again[0]))
        if written == text:
            if again[0] != first:
                # What the analyst wrote differs from what runs (syntax sqlglot drops, such as a table
                # hint): ``classify`` and the allowlist check both, so that either refusal stands.
                again[0].meta[RECEIVED] = first
            return again[0]
        text = written
    raise errors.ParseError(
        "dpgate cannot check this statement: the SQL it would send DuckDB reads differently from "
        "the statement received (a string argument that the SQL writer puts outside quotes)",
        code="DP208",
        hint="write the function's arguments as ordinary values; functions that take a keyword or "
        "a type as a string (a date part, a collation) accept only plain words there",
    )


#: ``meta`` key of a parsed statement: the tree of the text received, where it differs from what runs.
RECEIVED = "dpgate_received"


def received(statement: exp.Expr) -> exp.Expr | None:
    """The tree of the text received, if it differs from ``statement`` (what runs); else None."""
    return statement.meta.get(RECEIVED) if statement.meta else None


def _uncommented(statement: exp.Expr) -> exp.Expr:
    """The tree without its comments: inert for DuckDB, and sqlglot copies some of them anew at
    each writing (so a statement with comments would never write itself)."""
    for node in statement.walk():
        if node.comments:
            node.comments = None
    return statement


def _written(statement: exp.Expr) -> str | None:
    """``to_sql``, or None where sqlglot cannot write the tree (it raises on some odd arguments)."""
    try:
        with _quiet_sqlglot():
            return to_sql(statement)
    except Exception:  # noqa: BLE001 - any failure to write it means it cannot be checked
        return None


def _one(statements: list[exp.Expr]) -> exp.Expr:
    if not statements:
        raise errors.ParseError("Empty statement", code="DP202", hint="type a SQL statement")
    if len(statements) > 1:
        raise errors.ParseError(
            f"Found {len(statements)} statements in one string; dpgate runs one at a time",
            code="DP203",
            hint="send each statement in its own execute() call",
        )
    return statements[0]


def to_sql(node: exp.Expr) -> str:
    """dpgate-dialect SQL for a node (round-trips the DP clauses)."""
    return DIALECT.generate(node)


def to_duckdb(node: exp.Expr) -> str:
    """Plain DuckDB SQL for a node without DP clauses (what DuckDB executes)."""
    return node.sql(dialect="duckdb")
