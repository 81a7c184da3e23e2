"""IPython / Jupyter: ``%load_ext dpgate``, then the ``%dpsql`` line magic and ``%%dpsql`` cells.

- ``%dpsql --connect DB ANALYST`` (or ``%dpsql connect DB ANALYST``) opens the notebook's
  connection; ``%dpsql`` alone says which one it is.
- ``%dpsql SQL`` runs one statement; a ``%%dpsql`` cell holds one statement. Either may start with
  ``--db PATH`` and/or ``--analyst NAME``, which (re)connect first (the other one is kept from the
  current connection), e.g. ``%%dpsql --db demo.duckdb --analyst demo``.

A statement runs through the same gateway as ``dpgate.connect``; its value is the cursor, which a
notebook shows as a table with intervals, cost and population (``Cursor._repr_html_``), and which
``.fetchdf()`` turns into a DataFrame. IPython is not a dependency: this module only uses the
object IPython passes to ``load_ipython_extension`` (its ``register_magic_function``).
"""

from __future__ import annotations

import os
import re
import shlex
from typing import Any

from dpgate import errors

_STATE: dict[str, Any] = {"connection": None, "db": None, "analyst": None}

#: One option word: a quoted string ("..." or '...') or a run of non-blank characters.
_WORD = r"""(?:"[^"]*"|'[^']*'|[^\s"']\S*)"""
_OPTION = re.compile(rf"""\s*--(db|analyst|connect)(?:\s*=\s*|\s+)({_WORD})(?:\s+({_WORD}))?""")


def _unquote(word: str) -> str:
    return shlex.split(word)[0] if word[:1] in "\"'" else word


def _options(line: str) -> tuple[dict[str, str], str]:
    """The leading ``--db`` / ``--analyst`` / ``--connect DB ANALYST`` options, and the SQL after them.

    The SQL is kept verbatim (its quotes and comments are the SQL's, not the magic's).
    """
    opts: dict[str, str] = {}
    rest = line
    while (m := _OPTION.match(rest)) is not None:
        name, value, extra = m.group(1), _unquote(m.group(2)), m.group(3)
        if name == "connect":
            if extra is None:
                raise _usage("--connect takes a database and an analyst")
            opts["db"], opts["analyst"] = value, _unquote(extra)
            rest = rest[m.end() :]
        else:
            opts[name] = value
            rest = rest[m.end(2) :]  # a third word is the next option or the SQL
    stripped = rest.strip()
    if not opts and stripped.split(None, 1)[:1] == ["connect"]:  # %dpsql connect DB ANALYST
        words = shlex.split(stripped)
        if len(words) != 3:
            raise _usage("%dpsql connect takes a database and an analyst")
        return {"db": words[1], "analyst": words[2]}, ""
    return opts, stripped


def _usage(message: str) -> errors.InterfaceError:
    hint = "%dpsql --connect demo.duckdb demo, or %%dpsql --db demo.duckdb --analyst demo"
    return errors.InterfaceError(message, code="DP106", hint=hint)


def _connect(db: str | None, analyst: str | None):
    """The notebook's connection to ``db`` as ``analyst`` (the current one's when not given)."""
    from dpgate import connect

    db = db if db is not None else _STATE["db"]
    analyst = analyst if analyst is not None else _STATE["analyst"]
    if db is None or analyst is None:
        raise errors.InterfaceError(
            "No dpgate connection in this notebook: say which database and analyst", code="DP106",
            hint="%dpsql --connect DB ANALYST (or %%dpsql --db DB --analyst NAME)",
        )  # fmt: skip
    current = _STATE["connection"]
    same = (_STATE["db"], _STATE["analyst"]) == (os.path.abspath(db), analyst)
    if current is not None and not current.closed and same:
        return current
    con = connect(db, analyst=analyst)  # opened before the old one is closed: a failure keeps it
    if current is not None:
        current.close()
    _STATE.update(connection=con, db=os.path.abspath(db), analyst=analyst)
    return con


def dpsql(line: str, cell: str | None = None):
    """The ``%dpsql`` line magic (``cell`` None) and the ``%%dpsql`` cell magic; see the module."""
    opts, sql = _options(line)
    if cell is not None:
        if sql:
            raise _usage(f"%%dpsql takes only --db and --analyst on its first line, not {sql!r}")
        sql = cell.strip()
    if opts:
        con = _connect(opts.get("db"), opts.get("analyst"))
    else:
        con = _STATE["connection"]
        if con is None or con.closed:
            raise errors.InterfaceError(
                "No dpgate connection in this notebook", code="DP106",
                hint="run %dpsql connect DB ANALYST first (or give %%dpsql --db DB --analyst NAME)",
            )  # fmt: skip
    if not sql:
        return None if opts else f"dpgate: {_STATE['db']} as {_STATE['analyst']}"
    return con.cursor().execute(sql)


def close() -> None:
    """Close the notebook's connection (if any)."""
    if _STATE["connection"] is not None:
        _STATE["connection"].close()
    _STATE.update(connection=None, db=None, analyst=None)


def load_ipython_extension(ipython) -> None:
    """Register ``%dpsql`` / ``%%dpsql`` (called by ``%load_ext dpgate``)."""

    def line_magic(line):
        return dpsql(line)

    def cell_magic(line, cell):
        return dpsql(line, cell)

    ipython.register_magic_function(line_magic, "line", "dpsql")
    ipython.register_magic_function(cell_magic, "cell", "dpsql")
