"""PEP 249 (DB-API 2.0) connection and cursor over the gateway.

Follows DuckDB's Python API where that is sensible: ``paramstyle = "qmark"`` (``$name``
with a mapping also works), ``rowcount = -1``, 7-tuple ``description``, ``commit()`` does
nothing, leaving ``with`` closes the connection. Unlike DuckDB, ``cursor()`` returns a
light cursor sharing the connection's gateway, session settings and ledger.

``rollback()`` never refunds ε: the ledger debit of a released answer is final.

After a DP answer, ``cursor.messages`` holds its cost, its population (whose data it is about)
and its notes, one string each (like psycopg's notices), and a ``PopulationWarning`` is issued
when the population is not the whole roster: some subjects had no budget left, or the rule
left them out, so counts and sums cover fewer people than the table has.

As in DuckDB, ``fetch_arrow_table()``, ``fetchdf()``, ``pl()`` and ``fetchnumpy()`` take the rows
not fetched yet (``intervals=True`` adds ``<col>_ci_low`` / ``<col>_ci_high``); in a notebook a
cursor shows its answer with intervals, cost and population (``_repr_html_``, ``_repr_pretty_``).
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from dpgate import errors
from dpgate.gateway import Gateway
from dpgate.interfaces import frames
from dpgate.release import ReleaseInfo, Result


class Connection:
    """A DB-API connection for one analyst; make it with ``dpgate.connect``."""

    def __init__(self, gateway: Gateway):
        self._gateway = gateway

    @property
    def gateway(self) -> Gateway:
        if self._gateway.closed:
            raise errors.InterfaceError("The connection is closed", code="DP100")
        return self._gateway

    @property
    def analyst(self) -> str:
        return self._gateway.analyst

    @property
    def closed(self) -> bool:
        return self._gateway.closed

    @property
    def progress(self) -> Callable[[float, str], None] | None:
        """Called with (fraction done, message) while long work runs (a synthetic release)."""
        return self._gateway.progress

    @progress.setter
    def progress(self, callback: Callable[[float, str], None] | None) -> None:
        self._gateway.progress = callback

    def cursor(self) -> Cursor:
        return Cursor(self)

    def execute(self, sql: str, parameters: Any = None) -> Cursor:
        """Shortcut: a new cursor that has executed ``sql``."""
        return self.cursor()._execute(sql, parameters, stacklevel=3)

    def commit(self) -> None:
        self.gateway  # raises if closed

    def rollback(self) -> None:
        """Does nothing: dpgate's debits are final and answers cannot be taken back."""
        self.gateway

    def close(self) -> None:
        self._gateway.close()

    def budget(self) -> tuple[float, float]:
        """The analyst's remaining (ε, δ) quota."""
        return self.gateway.ledger.remaining(self.analyst)

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Cursor:
    """A DB-API cursor. After a DP query, ``release`` holds its cost and error bars."""

    arraysize = 1

    def __init__(self, connection: Connection):
        self.connection = connection
        self._result: Result | None = None
        self._pos = 0
        self._closed = False
        self.arraysize = 1
        #: The cost, population and notes of the last answer (and a statement's message), one
        #: string each; cleared by every execute.
        self.messages: list[str] = []

    def _check(self) -> None:
        if self._closed:
            raise errors.InterfaceError("The cursor is closed", code="DP100")
        self.connection.gateway  # raises if the connection is closed

    # -- executing -----------------------------------------------------------------------
    def execute(self, operation: str, parameters: Any = None) -> Cursor:
        return self._execute(operation, parameters, stacklevel=3)

    def _execute(self, operation: str, parameters: Any, *, stacklevel: int) -> Cursor:
        self._check()
        if not isinstance(operation, str):
            raise errors.ProgrammingError("execute() takes SQL text", code="DP200")
        self._result = None
        self._pos = 0
        self.messages = []
        self._result = self.connection.gateway.run(operation, parameters)
        self.messages = _messages(self._result)
        release = self._result.release
        if release is not None and not release.population.whole:
            warnings.warn(errors.PopulationWarning(_population_warning(release)), stacklevel=stacklevel)
        return self

    def executemany(self, operation: str, seq_of_parameters: Sequence[Any]) -> Cursor:
        self._check()
        for params in seq_of_parameters:
            self._execute(operation, params, stacklevel=3)
        return self

    # -- results -------------------------------------------------------------------------
    @property
    def description(self) -> list[tuple] | None:
        if self._result is None or not self._result.columns:
            return None
        return [(n, t, None, None, None, None, None) for n, t in zip(self._result.columns, self._result.types)]

    @property
    def rowcount(self) -> int:
        return -1

    @property
    def release(self) -> ReleaseInfo | None:
        """Cost, remaining quota, mechanism and error bars of the last DP answer (None otherwise)."""
        return self._result.release if self._result else None

    @property
    def result(self) -> Result | None:
        """The whole last result (dpgate extension): columns, types, rows and release metadata."""
        return self._result

    @property
    def message(self) -> str | None:
        return self._result.message if self._result else None

    def _rows(self) -> list[tuple]:
        self._check()
        if self._result is None:
            raise errors.ProgrammingError("No result: call execute() first", code="DP200")
        return self._result.rows

    def fetchone(self) -> tuple | None:
        rows = self._rows()
        if self._pos >= len(rows):
            return None
        self._pos += 1
        return rows[self._pos - 1]

    def fetchmany(self, size: int | None = None) -> list[tuple]:
        rows = self._rows()
        n = self.arraysize if size is None else size
        out = rows[self._pos : self._pos + n]
        self._pos += len(out)
        return out

    def fetchall(self) -> list[tuple]:
        rows = self._rows()
        out = rows[self._pos :]
        self._pos = len(rows)
        return out

    def __iter__(self) -> Iterator[tuple]:
        while (row := self.fetchone()) is not None:
            yield row

    # -- DataFrames and Arrow (names as in DuckDB's Python API); each takes the remaining rows --
    def _frame(self, make: Callable[..., Any], intervals: bool, *libraries: str) -> Any:
        """``make(result, remaining rows)``; the rows count as fetched only once it succeeded."""
        rows = self._rows()
        for library in libraries:  # a missing library is reported before any row is taken
            frames.need(library)
        out = make(self._result, rows[self._pos :], intervals=intervals)
        self._pos = len(rows)
        return out

    def fetch_arrow_table(self, *, intervals: bool = False):
        """The remaining rows as a pyarrow Table (``pip install 'dpgate[arrow]'``).

        ``intervals=True`` puts ``<col>_ci_low`` / ``<col>_ci_high`` after each noisy column.
        """
        return self._frame(frames.arrow, intervals, "pyarrow")

    arrow = to_arrow_table = fetch_arrow_table  # DuckDB 1.x and 2.x names

    def fetchdf(self, *, intervals: bool = False):
        """The remaining rows as a pandas DataFrame (``pip install 'dpgate[pandas]'``)."""
        return self._frame(frames.pandas, intervals, "pandas")

    df = fetchdf

    def pl(self, *, intervals: bool = False):
        """The remaining rows as a polars DataFrame (``pip install 'dpgate[polars]'``)."""
        return self._frame(frames.polars, intervals, "polars", "pyarrow")

    def fetchnumpy(self, *, intervals: bool = False) -> dict:
        """The remaining rows as a dict of numpy arrays, one per column."""
        return self._frame(frames.numpy, intervals)

    # -- display (notebooks, IPython, the REPL) -------------------------------------------
    def _repr_html_(self) -> str:
        """A notebook shows the answer with its intervals and its cost / population / notes."""
        return frames.to_html(self._result, self.messages)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        """IPython's text display: the table with intervals, then cost, population and notes."""
        p.text(repr(self) if cycle else self._text())

    def _text(self, max_rows: int = 40) -> str:
        from dpgate.interfaces.render import cells, format_table

        result = self._result
        if result is None:
            return repr(self)
        lines = []
        if result.columns:
            names, rows, numeric = cells(dataclasses.replace(result, rows=result.rows[:max_rows]))
            lines.append(format_table(names, rows, numeric))
            if len(result.rows) > max_rows:
                lines.append(f"({len(result.rows) - max_rows:,} more rows)")
        return "\n".join(lines + self.messages)

    def __repr__(self) -> str:
        state = "closed" if self._closed else "no result yet"
        result = self._result
        if result is not None:
            if result.columns:
                state = f"{len(result.rows):,} row(s) × {len(result.columns)} column(s): {', '.join(result.columns)}"
            else:
                state = result.message or "no rows"
            if result.release is not None:
                state += f"; ε {result.release.epsilon:g} charged"
        return f"<dpgate.Cursor {state}>"

    def setinputsizes(self, sizes: Any) -> None:
        pass

    def setoutputsize(self, size: Any, column: Any = None) -> None:
        pass

    def close(self) -> None:
        self._closed = True
        self._result = None

    def __enter__(self) -> Cursor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _messages(result: Result) -> list[str]:
    from dpgate.interfaces.render import release_lines

    lines = [result.message] if result.message else []
    return lines + release_lines(result)


def _population_warning(release: ReleaseInfo) -> str:
    return (f"population: {release.population.describe()}; the answer's counts and sums cover only "
            "these subjects (cursor.messages has its notes)")


def connect(
    database: str,
    analyst: str | None = None,
    *,
    password: str | None = None,
    test_seed: int | None = None,
    progress: Callable[[float, str], None] | None = None,
    spark: Any = None,
) -> Connection:
    """Open ``database`` (a DuckDB file with a dpgate catalog) as ``analyst``.

    ``database`` may also be a ``postgresql://analyst@host:port/dpgate`` URL of a ``dpgate
    serve`` server: the analyst is then the one the server authenticates (SCRAM), with
    ``password`` or libpq's usual sources (the URL, ``PGPASSWORD``, ``~/.pgpass``).
    ``test_seed`` fixes the noise for tests; the owner must allow it, and every result is
    then marked not private. ``progress(fraction, message)`` is called while a synthetic
    release is built (embedded only). ``spark`` is a ``SparkSession`` for protected tables
    whose rows live in Spark (without it, the policy's ``[backends.spark] master`` is used).
    """
    from dpgate.interfaces import remote

    if remote.is_url(database):
        if test_seed is not None or spark is not None:
            raise errors.InterfaceError("test_seed and spark are for embedded connections only", code="DP101")
        return Connection(remote.RemoteGateway(database, analyst, password=password))  # type: ignore[arg-type]
    if analyst is None:
        raise errors.InterfaceError("connect() needs analyst='<name>'", code="DP101",
                                    hint="dpgate.connect('company.duckdb', analyst='alice')")  # fmt: skip
    if password is not None:
        raise errors.InterfaceError("password= is for a postgresql:// URL of dpgate serve", code="DP101")
    con = Connection(Gateway(database, analyst, test_seed=test_seed, spark=spark))
    con.progress = progress
    return con
