"""Dot-commands, registered by decorator (litecli's special commands)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dpgate import errors
from dpgate.interfaces.fit import display_width
from dpgate.interfaces.render import EXPANDED, wrap_lines

if TYPE_CHECKING:  # pragma: no cover
    from dpgate.interfaces.shell.app import Shell


@dataclass(frozen=True)
class Command:
    name: str
    args: str
    help: str
    run: Callable[["Shell", str], None]


COMMANDS: dict[str, Command] = {}
#: How deep .read may nest (a file that reads itself would otherwise recurse until Python stops it).
MAX_READ_DEPTH = 16


def command(name: str, args: str, help: str):
    def register(fn: Callable[["Shell", str], None]):
        COMMANDS[name] = Command(name, args, help, fn)
        return fn

    return register


#: psql's meta-commands people type by habit, and the dot-command each one is here.
PSQL = {"\\q": ".quit", "\\dt": ".tables", "\\d": ".schema", "\\d+": ".schema", "\\?": ".help",
        "\\h": ".help", "\\help": ".help", "\\i": ".read", "\\o": ".output", "\\x": ".expanded"}  # fmt: skip
#: How the help and an unknown command's hint name them.
PSQL_SHOWN = "\\q \\dt \\d [table] \\? \\i file \\o [file] \\x [on|off|auto]"


def is_command(text: str) -> bool:
    """A dot-command or a psql meta-command: it runs on Enter, without a ';'."""
    stripped = text.strip()
    return stripped.startswith((".", "\\"))


def dispatch(shell: Shell, line: str) -> None:
    name, _, arg = line.strip().partition(" ")
    name = name.rstrip(";")  # psql accepts "\q;" too
    if name.startswith("\\"):
        if name == "\\d" and not arg.strip():
            name = "\\dt"  # psql's \d alone lists the relations
        name = PSQL.get(name, name)  # case matters, as in psql (\\dT is not \\dt)
    cmd = COMMANDS.get(name.lower())
    if cmd is None:
        raise errors.ProgrammingError(
            f"Unknown command {name}", code="DP240",
            hint=f"type .help for the list of commands; of psql's, {PSQL_SHOWN} work here",
        )  # fmt: skip
    cmd.run(shell, arg.strip().rstrip(";").strip())


def _on_off(name: str, arg: str) -> bool:
    value = arg.lower()
    if value not in ("on", "off"):
        raise errors.ProgrammingError(f"{name} takes on or off", code="DP241", hint=f"e.g. {name} on")
    return value == "on"


@command(".help", "", "Show this list")
def _help(shell: Shell, arg: str) -> None:
    width = max(len(f"{c.name} {c.args}") for c in COMMANDS.values())
    screen = shell.screen_width()
    lines = []
    for c in COMMANDS.values():  # each description wraps beside its command, not under it
        text = wrap_lines(c.help, None if screen is None else max(screen - width - 2, 20)).split("\n")
        lines.append(f"{(c.name + ' ' + c.args).strip():<{width}}  {text[0]}")
        lines += [" " * (width + 2) + t for t in text[1:]]
    lines.append(f"psql's {PSQL_SHOWN} work too")
    lines.append("")
    for lead, examples in _SQL_HELP:  # a narrow screen breaks between examples, not inside one
        line = lead + examples[0]
        if screen is not None and display_width(line) > screen and lead.strip():
            lines.append(lead.rstrip())
            line = "     " + examples[0]
        for example in examples[1:]:
            if screen is not None and display_width(line) + 2 + display_width(example) > screen:
                lines.append(line)
                line = "     " + example
            else:
                line += "  " + example
        lines.append(line)
    shell.emit(wrap_lines("\n".join(lines), screen, "  "))


#: The SQL that ``.help`` reminds of, a line each as a wide screen shows it.
_SQL_HELP = [
    ("SQL: end statements with ;  —  ", ["SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5) ..."]),
    ("     ", ["SHOW BUDGET;", "EXPLAIN PRIVACY <query>;", "SET dp_epsilon = 0.5;", "SHOW TABLES;", "DESCRIBE <table>;"]),
    ("     ", ["... GROUP BY item ORDER BY COUNT(*) DESC LIMIT 10 (top-k);", "TRIANGLE_COUNT(src, dst) (graphs);"]),
    ("     ", ["CREATE SYNTHETIC TABLE t FROM <table> WITH (epsilon = 1);", "SHOW RELEASES;"]),
]


@command(".tables", "", "List the tables you can query (protected, graphs, releases, public, views)")
def _tables(shell: Shell, arg: str) -> None:
    shell.run_sql("SHOW TABLES")


@command(".schema", "[table]", "Columns, declared domains and bounds, privacy unit")
def _schema(shell: Shell, arg: str) -> None:
    tables = shell.gateway.tables()
    if len(arg) > 1 and arg[0] == arg[-1] == '"':  # a quoted name, as psql users type it
        arg = arg[1:-1].replace('""', '"')
    names = [arg.lower()] if arg else list(tables)
    for name in names:
        if name not in tables:
            raise errors.ProgrammingError(f"No table {name!r}", code="DP225", hint="see .tables")
        kind = tables[name][0]
        shell.emit(f"{name} ({kind})")
        shell.run_sql(f'DESCRIBE "{name}"', status=False)


@command(".budget", "", "Your remaining quota and how subjects' budgets are spread (SHOW BUDGET)")
def _budget(shell: Shell, arg: str) -> None:
    shell.run_sql("SHOW BUDGET")


@command(".explain", "on|off", "Show EXPLAIN PRIVACY before each DP query")
def _explain(shell: Shell, arg: str) -> None:
    shell.explain = _on_off(".explain", arg)
    shell.emit(f"explain {'on' if shell.explain else 'off'}")


@command(".intervals", "on|off", "Show each noisy value's interval")
def _intervals(shell: Shell, arg: str) -> None:
    shell.intervals = _on_off(".intervals", arg)
    shell.emit(f"intervals {'on' if shell.intervals else 'off'}")


@command(".expanded", "[on|off|auto]", "One record per block, as psql's \\x: on, off, or auto (the default: "
         "when a table cannot fit the screen); alone, it turns it on or off")
def _expanded(shell: Shell, arg: str) -> None:
    value = arg.lower() or ("off" if shell.expanded == "on" else "on")
    if value not in EXPANDED:
        raise errors.ProgrammingError(".expanded takes on, off or auto", code="DP241", hint="e.g. .expanded auto")
    shell.expanded = value
    shell.emit("Expanded display is used automatically." if value == "auto" else f"Expanded display is {value}.")


@command(".mode", "table|csv|json", "Output format")
def _mode(shell: Shell, arg: str) -> None:
    if arg not in ("table", "csv", "json"):
        raise errors.ProgrammingError(".mode takes table, csv or json", code="DP241", hint="e.g. .mode csv")
    shell.mode = arg
    shell.emit(f"mode {arg}")


@command(".output", "[file]", "Send results to a file (no argument: back to the screen)")
def _output(shell: Shell, arg: str) -> None:
    shell.set_output(Path(arg) if arg else None)


@command(".read", "file", "Run the statements in a file")
def _read(shell: Shell, arg: str) -> None:
    if not arg:
        raise errors.ProgrammingError(".read needs a file name", code="DP241", hint="e.g. .read queries.sql")
    if shell.reading >= MAX_READ_DEPTH:
        raise errors.ProgrammingError(f"{arg}: files read from files more than {MAX_READ_DEPTH} deep (does one read "
                                      "itself?)", code="DP242", hint="a script may .read others, not itself")  # fmt: skip
    try:
        text = Path(arg).expanduser().read_text(encoding="utf-8")
    except (OSError, ValueError) as e:  # ValueError: not UTF-8 text, or a NUL byte in the name
        reason = e.strerror if isinstance(e, OSError) else ("not UTF-8 text" if isinstance(e, UnicodeError) else "not a file name")
        raise errors.ProgrammingError(f"Cannot read {arg}: {reason}", code="DP242") from None
    shell.reading += 1
    try:
        shell.run_text(text)
    finally:
        shell.reading -= 1


@command(".quit", "", "Leave the shell (also .exit, Ctrl-D)")
def _quit(shell: Shell, arg: str) -> None:
    shell.done = True


COMMANDS[".exit"] = Command(".exit", "", "Leave the shell", _quit)
