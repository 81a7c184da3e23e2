"""``dpgate.connect('postgresql://alice@host:5433/dpgate')``: the same connection, over ``dpgate serve``.

A ``RemoteGateway`` stands in for the embedded ``Gateway`` behind the DB-API ``Connection``
(and so behind the shell): each statement goes to the server, which runs it through its own
gateway as the authenticated analyst. The answer comes back with its interval columns (the
server's default); the cost, population and notes as notices; and the rest of the release
metadata from the server's ``dpgate release`` command, so ``cursor.release``,
``cursor.messages``, the shell's display and the frames are the same as embedded. Errors come
back as the same dpgate classes and codes (the server puts them in the error's detail).

Needs psycopg 3 (``pip install 'dpgate[remote]'``). Passwords come from the URL, ``password=``,
``PGPASSWORD`` or ``~/.pgpass`` (libpq's usual places); they travel only inside SCRAM.
"""

from __future__ import annotations

import json
import re
import urllib.parse
from typing import Any

from sqlglot import exp

from dpgate import errors
from dpgate.frontend.dialect import parse_one, to_sql
from dpgate.release import ColumnNoise, ReleaseInfo, Result

#: PostgreSQL type oids back to DuckDB type names (what Result.types holds).
_TYPES = {16: "BOOLEAN", 17: "BLOB", 20: "BIGINT", 21: "SMALLINT", 23: "INTEGER", 25: "VARCHAR", 114: "JSON",
          700: "FLOAT", 701: "DOUBLE", 1082: "DATE", 1083: "TIME", 1114: "TIMESTAMP",
          1184: "TIMESTAMP WITH TIME ZONE", 1186: "INTERVAL", 1700: "DECIMAL(38,10)", 2950: "UUID"}  # fmt: skip
_DETAIL = re.compile(r"dpgate (DP\d+) \((\w+)\)")
_SET = re.compile(r"^\s*set\b", re.I)
_ASKED = re.compile(r"\bintervals\s*=\s*(true|1|'true')", re.I)


def is_url(database: Any) -> bool:
    return isinstance(database, str) and database.startswith(("postgresql://", "postgres://"))


def _psycopg():
    try:
        import psycopg
    except ImportError:
        raise errors.InterfaceError(
            "Connecting to a dpgate server needs psycopg 3", code="DP105", hint="pip install 'dpgate[remote]'"
        ) from None
    return psycopg


def _error(e: Exception) -> errors.Error:
    """The dpgate error the server reported (class and code from the detail), or a connection error."""
    diag = getattr(e, "diag", None)
    detail = getattr(diag, "message_detail", None) or ""
    m = _DETAIL.search(detail)
    message = getattr(diag, "message_primary", None) or str(e).strip()
    hint = getattr(diag, "message_hint", None) or ""
    if m:
        cls = getattr(errors, m.group(2), None)
        if isinstance(cls, type) and issubclass(cls, errors.Error):
            return cls(message, code=m.group(1), hint=hint)
    return errors.OperationalError(f"dpgate server: {message}", code="DP711", hint=hint)


class _Session:
    def __init__(self, values: dict[str, Any]):
        self.values = values


class RemoteGateway:
    """What ``Connection`` and the shell need from a gateway, over the PostgreSQL protocol."""

    def __init__(self, url: str, analyst: str | None = None, *, password: str | None = None,
                 connect_timeout: float = 10.0):  # fmt: skip
        psycopg = _psycopg()
        parts = urllib.parse.urlsplit(url)
        user = urllib.parse.unquote(parts.username) if parts.username else None
        if analyst is not None and user is not None and analyst != user:
            raise errors.InterfaceError(f"The URL logs in as {user!r}, not {analyst!r}", code="DP101")
        kwargs: dict[str, Any] = {"autocommit": True, "connect_timeout": connect_timeout}
        if user is None and analyst is not None:
            kwargs["user"] = analyst
        if password is not None:
            kwargs["password"] = password
        try:
            self._con = psycopg.connect(url, **kwargs)
        except psycopg.Error as e:
            raise errors.OperationalError(f"Cannot log in to {self._safe(url)}: {str(e).strip()}", code="DP712",
                                          hint="check the URL, the name and the password (PGPASSWORD or ~/.pgpass)") from e  # fmt: skip
        self._notices: list[str] = []
        self._con.add_notice_handler(lambda d: self._notices.append(d.message_primary or ""))
        self.where = self._safe(url)
        self.analyst = self._con.info.user
        self.closed = False
        self.progress = None
        self.ledger = self  # Connection.budget() asks gateway.ledger.remaining(analyst)
        self.session = _Session(self._meta("session"))
        self.session.values["intervals"] = False  # the wire always carries them; shown only when asked, as embedded

    @staticmethod
    def _safe(url: str) -> str:
        parts = urllib.parse.urlsplit(url)
        netloc = parts.hostname or ""
        if parts.port:
            netloc += f":{parts.port}"
        if parts.username:
            netloc = f"{parts.username}@{netloc}"
        return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._con.close()

    # -- round trips ------------------------------------------------------------------------------
    def _execute(self, sql: str, params: list[Any] | None = None):
        psycopg = _psycopg()
        if self._con.closed:
            raise errors.InterfaceError("The connection to the server is closed", code="DP100")
        self._notices.clear()
        cur = psycopg.RawCursor(self._con)
        try:
            cur.execute(sql, params if params else None)
        except psycopg.Error as e:
            raise _error(e) from None
        return cur

    def _meta(self, command: str) -> Any:
        return json.loads(self._execute("dpgate " + command).fetchone()[0])

    # -- what the DB-API and the shell ask -----------------------------------------------------------
    def run(self, sql: str, params: Any = None) -> Result:
        if self.closed:
            raise errors.InterfaceError("The connection is closed", code="DP100")
        sql, positional = _positional(sql, params)
        cur = self._execute(sql, positional)
        notices = list(self._notices)
        if _SET.match(sql):
            shown = self.session.values.get("intervals", False)
            values = self._meta("session")
            self.session.values.update(values)
            if re.search(r"\bdp_intervals\b", sql, re.I):  # what the user asked for; the wire keeps them on
                shown = values.get("intervals", False)
                if not shown:
                    self._execute("SET dp_intervals = true")
            self.session.values["intervals"] = shown
            return Result([], [], [], None, message=notices[0] if notices else cur.statusmessage or "SET")
        if cur.description is None:
            return Result([], [], [], None, message="\n".join(notices) or cur.statusmessage)
        names = [d.name for d in cur.description]
        types = [_TYPES.get(d.type_code, "VARCHAR") for d in cur.description]
        rows = [tuple(r) for r in cur.fetchall()]
        if not any(n.startswith("cost: ") for n in notices):
            return Result(names, types, rows, None)
        info = self._release()
        keep = bool(self.session.values.get("intervals")) or bool(_ASKED.search(sql))
        return _with_intervals(names, types, rows, info, keep=keep)

    def _release(self) -> ReleaseInfo:
        data = self._meta("release")
        data["columns"] = {k: ColumnNoise(**v) for k, v in data.get("columns", {}).items()}
        return ReleaseInfo(**data)

    def cost(self, sql: str, params: Any = None) -> tuple[float, float] | None:
        if params:
            sql = to_sql(_bind_literals(sql, params))
        out = self._meta("cost " + sql)
        return None if out is None else (out[0], out[1])

    def tables(self) -> dict[str, tuple[str, list[tuple[str, str]]]]:
        return {name: (kind, [tuple(c) for c in cols]) for name, (kind, cols) in self._meta("tables").items()}

    def remaining(self, analyst: str) -> tuple[float, float]:
        row = self._execute("SHOW BUDGET").fetchone()
        return float(row[1]), float(row[2])


def _positional(sql: str, params: Any) -> tuple[str, list[Any] | None]:
    """``?`` and ``$name`` placeholders as PostgreSQL's ``$1, $2, ...`` with their values in order."""
    if not params:
        return sql, None
    statement = parse_one(sql)
    values: list[Any] = []
    named: dict[str, int] = {}
    positional = list(params) if isinstance(params, (list, tuple)) else None
    counter = iter(range(10**9))

    def replace(node: exp.Expr) -> exp.Expr:
        if not isinstance(node, exp.Placeholder):
            return node
        key = node.this
        if key is None:  # ?
            if positional is None:
                raise errors.ProgrammingError("? placeholders need a sequence of parameters", code="DP601")
            i = next(counter)
            if i >= len(positional):
                raise errors.ProgrammingError("Not enough parameters", code="DP602")
            values.append(positional[i])
            return exp.Placeholder(this=str(len(values)))
        key = str(key)
        if key.isdigit():
            if positional is None or not 1 <= int(key) <= len(positional):
                raise errors.ProgrammingError(f"No parameter ${key}", code="DP602")
            value = positional[int(key) - 1]
        else:
            if not isinstance(params, dict) or key not in params:
                raise errors.ProgrammingError(f"No parameter named ${key}", code="DP602")
            value = params[key]
        if key not in named:
            values.append(value)
            named[key] = len(values)
        return exp.Placeholder(this=str(named[key]))

    bound = statement.copy().transform(replace)
    return to_sql(bound), values


def _bind_literals(sql: str, params: Any) -> exp.Expr:
    from dpgate.frontend.parameters import bind_parameters

    return bind_parameters(parse_one(sql), params)


def _with_intervals(names, types, rows, info: ReleaseInfo, keep: bool) -> Result:
    """Take the ``<col>_ci_low`` / ``<col>_ci_high`` columns into ``release.intervals``."""
    pairs = [(c, names.index(f"{c}_ci_low"), names.index(f"{c}_ci_high")) for c in info.columns
             if c in names and f"{c}_ci_low" in names and f"{c}_ci_high" in names]  # fmt: skip
    info.intervals = [{c: (row[lo], row[hi]) for c, lo, hi in pairs} for row in rows]
    if keep or not pairs:
        return Result(names, types, rows, info)
    drop = {i for _, lo, hi in pairs for i in (lo, hi)}
    keep_at = [i for i in range(len(names)) if i not in drop]
    return Result([names[i] for i in keep_at], [types[i] for i in keep_at],
                  [tuple(r[i] for i in keep_at) for r in rows], info)  # fmt: skip
