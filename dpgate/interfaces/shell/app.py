"""The shell: one PromptSession, a loop that prints errors and goes on, and a script mode.

``dpgate shell DB --analyst NAME`` (or ``--demo``) starts it. When standard input is not a
terminal, statements are read from it and results printed without prompts, so
``dpgate shell db --analyst a < queries.sql`` works in pipelines (exit status 1 if any
statement failed).
"""

from __future__ import annotations

import os
import shutil
import sys
import warnings
from pathlib import Path
from typing import IO, Any

from prompt_toolkit import PromptSession
from prompt_toolkit.formatted_text import FormattedText
from prompt_toolkit.history import FileHistory, InMemoryHistory
from prompt_toolkit.shortcuts import print_formatted_text
from prompt_toolkit.styles import Style
from sqlglot.errors import TokenError
from sqlglot.tokens import TokenType

from dpgate import errors
from dpgate.interfaces.dbapi import Connection
from dpgate.frontend.dialect import DIALECT
from dpgate.interfaces.progress import ProgressBar
from dpgate.interfaces.render import format_result, release_lines, wrap_lines
from dpgate.interfaces.shell import commands
from dpgate.interfaces.shell.completer import SQLCompleter
from dpgate.interfaces.shell.keys import bindings, statement_complete
from dpgate.interfaces.shell.lexer import SQLLexer
from dpgate.interfaces.shell.toolbar import toolbar_text

STYLE = Style.from_dict(
    {
        "keyword": "bold #5f87d7",
        "dp": "bold #d75f00",
        "string": "#5f8700",
        "number": "#875faf",
        "comment": "italic #808080",
        "operator": "",
        "name": "",
        "bottom-toolbar": "bg:#303030 #d0d0d0",
        "error": "bold #d70000",
        "hint": "#d78700",
        "status": "#808080",
        "prompt": "bold",
    }
)


def history_path() -> Path:
    """Shell history lives in the user's data directory, never beside the database."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "dpgate" / "history"


def split_statements(text: str) -> list[str]:
    """Split SQL text on semicolons outside strings and comments (each piece keeps no ';')."""
    tokenizer = DIALECT.tokenizer_class()
    try:
        tokens = tokenizer.tokenize(text)
    except TokenError:
        return [text.strip()] if text.strip() else []
    pieces, start = [], 0
    for tok in tokens:
        if tok.token_type == TokenType.SEMICOLON:
            pieces.append(text[start : tok.start])
            start = tok.end + 1
    pieces.append(text[start:])
    return [p.strip() for p in pieces if p.strip() and not _only_comments(p)]


def _only_comments(text: str) -> bool:
    return all(not line.strip() or line.strip().startswith("--") for line in text.splitlines())


class Shell:
    """The REPL over one DB-API connection. ``interactive=False`` runs scripts without prompts."""

    def __init__(
        self,
        connection: Connection,
        *,
        interactive: bool = True,
        input: Any = None,
        output: Any = None,
        stdout: IO[str] | None = None,
        stderr: IO[str] | None = None,
        color: bool | None = None,
        history: Path | None = None,
        width: int | None = None,
    ):
        self.connection = connection
        self.gateway = connection.gateway
        self.interactive = interactive
        self.stdout = stdout or sys.stdout
        self.stderr = stderr or (self.stdout if interactive else sys.stderr)
        self.color = self.stdout.isatty() if color is None else color
        self.width = width  # fixed (tests); None: the terminal's, read at each result
        self.mode = "table"
        self.expanded = "auto"  # psql's \x: auto, on or off
        self.intervals = True
        self.explain = False
        self.done = False
        self.failures = 0
        self.reading = 0  # how deep .read is nested now
        self._output_file: IO[str] | None = None
        self._pt_input, self._pt_output = input, output
        self._budget = connection.budget()
        connection.progress = ProgressBar(self.stderr)  # a synthetic release shows its progress
        self.session: PromptSession | None = None
        if interactive:
            if history is None:
                history = history_path()
            try:
                history.parent.mkdir(parents=True, exist_ok=True)
                hist = FileHistory(str(history))
            except OSError:
                hist = InMemoryHistory()
            self.session = PromptSession(
                message=FormattedText([("class:prompt", f"{connection.analyst}> ")]),
                multiline=True,
                prompt_continuation=lambda width, line, soft: "." * (width - 1) + " ",
                lexer=SQLLexer(),
                completer=SQLCompleter(self._catalog_snapshot, lambda: commands.COMMANDS.keys()),
                complete_while_typing=False,
                key_bindings=bindings(),
                history=hist,
                enable_history_search=True,
                bottom_toolbar=self.toolbar,
                style=STYLE,
                input=input,
                output=output,
            )
        self._catalog_cache: dict | None = None

    # -- pieces the session calls ----------------------------------------------------------
    def toolbar(self) -> str:
        eps, delta = self._budget
        multiline = bool(self.session and not statement_complete(self.session.default_buffer.text))
        values = self.gateway.session.values
        return toolbar_text(self.connection.analyst, eps, delta, values["epsilon"], multiline, values["delta"])

    def _catalog_snapshot(self) -> dict:
        if self._catalog_cache is None:
            try:
                self._catalog_cache = self.gateway.tables()
            except errors.Error:
                self._catalog_cache = {}
        return self._catalog_cache

    # -- output ----------------------------------------------------------------------------
    def emit(self, text: str, style: str | None = None, err: bool = False) -> None:
        target = self.stderr if err else (self._output_file or self.stdout)
        if target is self._output_file:
            try:
                print(text, file=target)
                target.flush()
                return
            except OSError as e:  # a full disk, /dev/full: the answer (maybe paid for) goes to the screen
                name = getattr(target, "name", "the file")
                self._output_file = None
                try:
                    target.close()
                except OSError:
                    pass
                print(text, file=self.stdout)
                self.stdout.flush()
                raise errors.ProgrammingError(
                    f"Cannot write {name}: {e.strerror or e}; the result above is on the screen", code="DP242",
                    hint="results go to the screen again; .output FILE (or \\o FILE) sends them to another file",
                ) from None  # fmt: skip
        if self.color and style:
            print_formatted_text(FormattedText([(style, text)]), style=STYLE, file=target)
        else:
            print(text, file=target)
        target.flush()

    def set_output(self, path: Path | None) -> None:
        if self._output_file is not None:
            self._output_file.close()
            self._output_file = None
        if path is not None:
            try:
                handle = open(path.expanduser(), "w", encoding="utf-8")
            except (OSError, ValueError) as e:  # ValueError: a NUL byte in the name
                reason = e.strerror if isinstance(e, OSError) else "not a file name"
                raise errors.ProgrammingError(f"Cannot write {path}: {reason}", code="DP242") from None
            self.emit(wrap_lines(f"results go to {path}", self.screen_width()), "class:status")
            self._output_file = handle

    def error(self, e: errors.Error) -> None:
        self.failures += 1
        width = self.screen_width(self.stderr)
        self.emit(wrap_lines(f"error {e.code}: {e.message}", width, "  "), "class:error", err=True)
        if e.hint:
            self.emit(wrap_lines(f"hint: {e.hint}", width, "  "), "class:hint", err=True)

    def screen_width(self, target: IO[str] | None = None) -> int | None:
        """The width to fit what goes to ``target`` (the results' output by default) to, or None.

        None for a file (``.output``) and for a pipe, whose readers get the table as it always was;
        else the ``width`` given, ``COLUMNS``, or the terminal's size now (it may have been resized).
        """
        target = target or self._output_file or self.stdout
        if target is self._output_file:
            return None
        if self.width:
            return self.width
        columns = os.environ.get("COLUMNS", "")
        if columns.isdigit() and int(columns) > 0:
            return int(columns)
        try:
            if not target.isatty():
                return None
        except (AttributeError, ValueError):  # a closed or odd stream
            return None
        if self.session is not None:
            try:
                return self.session.output.get_size().columns
            except Exception:  # noqa: BLE001 - an output without a size: the OS's answer
                return shutil.get_terminal_size((120, 40)).columns
        return shutil.get_terminal_size((120, 40)).columns

    # -- running statements ------------------------------------------------------------------
    def run_sql(self, sql: str, *, status: bool = True) -> None:
        """Run one SQL statement: confirm if costly, explain if asked, print the result."""
        cost = None
        if self.explain or self.interactive:
            cost = self.gateway.cost(sql)
        if cost is not None and self.explain:
            self._print_result(self.connection.cursor().execute("EXPLAIN PRIVACY " + sql).result, status=False)
        if cost is not None and self.interactive and not self._confirm(cost[0]):
            self.emit("cancelled: nothing was spent", "class:status")
            return
        if self.interactive:  # what was shown (free, or the ε confirmed) is the most it may charge
            self.gateway.confirmed = 0.0 if cost is None else cost[0]
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", errors.PopulationWarning)  # the population line says it
                cur = self.connection.cursor().execute(sql)
        finally:
            self.gateway.confirmed = None
        self._print_result(cur.result, status=status)
        self._budget = self.connection.budget()
        if cur.result.release is None or cur.result.release.writes is not None:
            self._catalog_cache = None  # the statement may have changed the tables

    def _confirm(self, epsilon: float) -> bool:
        # Read now: the owner may have changed the quota since the last statement, and a stale
        # figure would skip the question for a query that then runs.
        self._budget = self.connection.budget()
        remaining = self._budget[0]
        share = self.gateway.session.values["confirm_share"]
        # More than is left: the gateway refuses it free (with the remaining quota in its message),
        # so asking first would only be answered by a refusal.
        if remaining <= 0 or epsilon <= share * remaining or epsilon > remaining:
            return True
        question = (
            f"This query spends ε={epsilon:g} of your remaining {remaining:g} "
            f"({100 * epsilon / remaining:.0f}%, above the {100 * share:g}% that needs a yes). Run it? [y/N] "
        )
        answer = PromptSession(input=self._pt_input, output=self._pt_output).prompt(question)
        return answer.strip().lower() in ("y", "yes")

    def _print_result(self, result, *, status: bool = True) -> None:
        if self.mode == "csv":
            # rows to the output (a file after .output), everything the answer says about itself
            # to the screen, one '# ' line each: the csv stays clean and nothing is dropped
            text = format_result(result, intervals=self.intervals, mode="csv")
            if text:
                self.emit(text)
            side = (result.message.splitlines() if result.message and (not result.columns or result.release is None)
                    else []) + release_lines(result, self.intervals)  # fmt: skip
            for line in side:
                self.emit(f"# {line}", "class:status", err=True)
            return
        width = self.screen_width()
        if result.message and not result.columns and self.mode == "table":
            self.emit(format_result(result, status=status, max_width=width), "class:status")
            return
        self.emit(format_result(result, intervals=self.intervals, mode=self.mode, status=status, max_width=width,
                                expanded=self.expanded))  # fmt: skip

    def run_text(self, text: str) -> None:
        """Run dot-commands and statements from a script (one dot-command per line)."""
        buffer: list[str] = []
        for line in text.splitlines():
            if not buffer and (not line.strip() or line.strip().startswith("--")):
                continue  # blank lines and comments between statements
            if not buffer and commands.is_command(line):
                self._run_one(line.strip())
            else:
                buffer.append(line)
                joined = "\n".join(buffer)
                if statement_complete(joined) and joined.strip():
                    for sql in split_statements(joined):
                        self._run_one(sql)
                    buffer = []
            if self.done:
                return
        rest = "\n".join(buffer)
        for sql in split_statements(rest):
            self._run_one(sql)

    def _run_one(self, item: str) -> None:
        try:
            if commands.is_command(item):
                commands.dispatch(self, item)
            else:
                self.run_sql(item)
        except errors.Error as e:
            self.error(e)

    # -- loops -----------------------------------------------------------------------------
    def run(self) -> int:
        """The interactive loop: Ctrl-C clears the input, Ctrl-D (or .quit) leaves."""
        assert self.session is not None
        self.emit(
            wrap_lines(f"dpgate shell — {self.connection.analyst} on {self.gateway.where}. "
                       "End statements with ;  .help for commands, Ctrl-D to leave.", self.screen_width()),
            "class:status",
        )  # fmt: skip
        while not self.done:
            try:
                text = self.session.prompt()
            except KeyboardInterrupt:
                continue
            except EOFError:
                break
            if not text.strip():
                continue
            # As in a script: a meta-command ends at its line's end, so a paste of "\\dt" and a
            # statement below it runs both.
            self.run_text(text)
        self.set_output(None)
        return 0

    def run_script(self, text: str) -> int:
        self.run_text(text)
        self.set_output(None)
        return 1 if self.failures else 0


def run_shell(args) -> int:
    """Entry point of ``dpgate shell``."""
    from dpgate import connect
    from dpgate.interfaces import demo

    if args.demo:
        database = str(demo.build(args.database) if args.database else demo.build())
        analyst = args.analyst or demo.DEMO_ANALYST
    else:
        from dpgate.interfaces.remote import is_url

        if not args.database or not (args.analyst or is_url(args.database)):
            raise errors.InterfaceError(
                "dpgate shell needs a database and --analyst", code="DP101",
                hint="e.g. dpgate shell company.duckdb --analyst alice, dpgate shell "
                "postgresql://alice@localhost:5433/dpgate, or dpgate shell --demo",
            )  # fmt: skip
        database, analyst = args.database, args.analyst
    with _open(connect, database, analyst) as con:
        if sys.stdin.isatty():
            return Shell(con).run()
        return Shell(con, interactive=False).run_script(sys.stdin.read())


def _open(connect, database: str, analyst: str | None):
    """The connection; for a server URL without a password anywhere, ask for it at a terminal."""
    from dpgate.interfaces.remote import is_url

    if not is_url(database):
        return connect(database, analyst=analyst)
    try:
        return connect(database, analyst=analyst)
    except errors.OperationalError as e:
        if not (sys.stdin.isatty() and "password" in str(e).lower()):
            raise
    import getpass

    return connect(database, analyst=analyst, password=getpass.getpass("Password: "))
