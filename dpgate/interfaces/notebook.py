"""IPython / Jupyter: ``%load_ext dpgate``, then ``%dpsql connect DB ANALYST`` and ``%%dpsql`` cells.

A cell's statement runs through the same gateway as ``dpgate.connect``; the cell's value is the
cursor, which a notebook shows as a table with intervals, cost and population
(``Cursor._repr_html_``), and which ``.fetchdf()`` turns into a DataFrame. IPython is not a
dependency: this module only uses the object IPython passes to ``load_ipython_extension``.
"""

from __future__ import annotations

import shlex
from typing import Any

from dpgate import errors

_STATE: dict[str, Any] = {"connection": None}


def dpsql(line: str, cell: str | None = None):
    """``%dpsql connect DB ANALYST``; ``%dpsql SQL`` or a ``%%dpsql`` cell runs one statement."""
    from dpgate import connect

    words = shlex.split(line) if line.strip() else []
    if cell is None and words[:1] == ["connect"]:
        if len(words) != 3:
            raise errors.ProgrammingError("%dpsql connect takes a database and an analyst", code="DP106",
                                          hint="%dpsql connect demo.duckdb demo")  # fmt: skip
        if _STATE["connection"] is not None:
            _STATE["connection"].close()
        _STATE["connection"] = connect(words[1], analyst=words[2])
        return None
    con = _STATE["connection"]
    if con is None:
        raise errors.InterfaceError("No dpgate connection in this notebook", code="DP106",
                                    hint="run %dpsql connect DB ANALYST first")  # fmt: skip
    sql = cell if cell is not None else line
    return con.cursor().execute(sql)


def load_ipython_extension(ipython) -> None:
    """Register ``%dpsql`` / ``%%dpsql`` (called by ``%load_ext dpgate``)."""
    ipython.register_magic_function(lambda line: dpsql(line), "line", "dpsql")
    ipython.register_magic_function(lambda line, cell: dpsql(line, cell), "cell", "dpsql")
