"""One client's session on the server: the statements it may send and what they return.

An analyst's session is a ``Gateway`` for the authenticated analyst (the name comes from the
SCRAM login, never from the client), so every statement goes through the same pipeline as
``dpgate.connect``. Interval columns are on by default (``SET dp_intervals = false`` turns them
off): a PostgreSQL client sees each noisy value's error bar as ordinary columns.

An owner's session runs the owner commands (``dpgate ledger``, ``dpgate budget``, ``dpgate analyst
add bob --epsilon 5``, ``dpgate policy apply FILE``, ...) against the server's database, and sets
passwords with ``ALTER ROLE name PASSWORD 'SCRAM-SHA-256$...'`` (what psql's ``\\password`` sends).

Both answer the few statements clients send on their own (``SHOW password_encryption``, ``SET
application_name``, ``BEGIN`` / ``COMMIT``; the protocol layer handles the transaction ones).
Methods run in worker threads; one session runs one statement at a time.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import re
import shlex
from typing import Any

from dpgate import errors
from dpgate.catalog import logins
from dpgate.interfaces import owner_commands
from dpgate.release import Result
from dpgate.server import pgcatalog

#: Settings clients send on their own (JDBC, BI tools); accepted and ignored.
CLIENT_SETTINGS = {"application_name", "extra_float_digits", "client_encoding", "datestyle", "search_path",
                   "statement_timeout", "lock_timeout", "idle_in_transaction_session_timeout", "timezone",
                   "intervalstyle", "client_min_messages", "standard_conforming_strings", "bytea_output"}  # fmt: skip

# Matched against the statement stripped of its spaces and final semicolons (``bare``), in full:
# a pattern with runs of optional spaces around an optional ';' at its end took time growing with the
# square (or cube) of a run of spaces, and Python's matcher holds every other session meanwhile.
_SET = re.compile(r"set\s+(?:session\s+)?([a-z_][a-z_0-9.]*)\s*(?:=|\bto\b)", re.I | re.S)
_ALTER_PASSWORD = re.compile(
    r"""alter\s+(?:user|role)\s+("(?:[^"]|"")+"|[a-z_][a-z_0-9]*)\s+(?:with\s+)?(?:encrypted\s+)?password\s+'((?:[^']|'')*)'""",
    re.I | re.S,
)
_SHOW_SETTING = re.compile(r"show\s+(password_encryption|server_version|server_encoding|client_encoding|"
                           r"transaction\s+isolation\s+level|standard_conforming_strings)", re.I)  # fmt: skip
_WHOAMI = re.compile(r"select\s+(current_user|session_user|current_role|user)(\s*\(\s*\))?", re.I)
_META = re.compile(r"dpgate\s+(.*)", re.I | re.S)


def bare(sql: str) -> str:
    """The statement without its surrounding spaces and final semicolons (what the server's statement
    patterns match in full: optional spaces at a pattern's end made its time grow with their square)."""
    return sql.strip().rstrip("; \t\r\n\f\v")  # one pass (stripping one ';' at a time copied the text each time)

#: Owner commands over the server: the ``dpgate`` owner commands (``owner_commands``) but ``init``.
OWNER_COMMANDS = ("ledger", "budget", "analyst", "policy", "protect", "load", "quality", "login", "answers")

_SHOWN = {"password_encryption": "scram-sha-256", "server_version": "15.0 (dpgate)", "server_encoding": "UTF8",
          "client_encoding": "UTF8", "standard_conforming_strings": "on"}  # fmt: skip


@dataclasses.dataclass
class Outcome:
    """What one statement sends back: a result set or not, its command tag, its notices."""

    columns: list[str]
    types: list[str]
    rows: list[tuple]
    tag: str
    notices: list[str] = dataclasses.field(default_factory=list)


def _table(columns: list[str], rows: list[tuple], types: list[str] | None = None, notices=None) -> Outcome:
    return Outcome(columns, types or ["VARCHAR"] * len(columns), rows, f"SELECT {len(rows)}", notices or [])


class Session:
    def __init__(self, path: str, login: str, role: str, *, test_seed: int | None = None):
        self.path = path
        self.login = login
        self.role = role
        self.gateway = None
        self.owner = None
        self.last_release: dict[str, Any] | None = None
        if role == "analyst":
            from dpgate.gateway import Gateway

            self.gateway = Gateway(path, login, test_seed=test_seed)
            self.gateway.session.values["intervals"] = True
            self.catalog = pgcatalog.CatalogDatabase()  # pg_catalog for clients: the analyst's tables, empty
        else:
            from dpgate.catalog.owner import Owner

            self.owner = Owner(path, create=False)

    def close(self) -> None:
        if self.gateway is not None:
            self.catalog.close()
            self.gateway.close()
        if self.owner is not None:
            self.owner.close()

    def interrupt(self) -> bool:
        """Stop the running statement (a CancelRequest, a timeout) unless it is past its debit: a charged
        statement runs to its end, so whether it finishes before a deadline cannot become its outcome
        (its work was bounded before the debit). Returns whether it was interrupted."""
        if self.gateway is not None:
            self.catalog.interrupt()  # a catalog query is free: it always stops
            return self.gateway.interrupt()
        con = self.owner._con
        if con is not None:
            con.interrupt()
            return True
        return False

    # -- statements ------------------------------------------------------------------------------
    def run(self, sql: str, params: list[Any] | None = None) -> Outcome:
        text = bare(sql)
        m = _SET.match(text)
        if m and m.group(1).lower() in CLIENT_SETTINGS:
            return Outcome([], [], [], "SET")
        m = _SHOW_SETTING.fullmatch(text)
        if m:
            name = "_".join(m.group(1).lower().split())
            value = _SHOWN.get(name, "read committed")
            return _table([name], [(value,)])
        m = _WHOAMI.fullmatch(text)
        if m:  # psql's \password asks who it is: the login, not DuckDB's "duckdb"
            return _table([m.group(1).lower()], [(self.login,)])
        m = _ALTER_PASSWORD.fullmatch(text)
        if m:
            return self._alter_password(m.group(1), m.group(2).replace("''", "'"))
        m = _META.fullmatch(text)
        if m:
            return self._meta(m.group(1).strip())
        if self.owner is not None:
            raise errors.ProgrammingError(
                "An owner session runs owner commands, not SQL", code="DP702",
                hint="dpgate ledger | dpgate budget | dpgate analyst add NAME --epsilon E | dpgate policy apply FILE "
                "| dpgate protect TABLE --unit COL | dpgate load TABLE FILE | dpgate quality RELEASE; analysts ask SQL",
            )  # fmt: skip
        tree = pgcatalog.catalog_query(sql)
        if tree is not None:  # psql's \dt, a driver's or a BI tool's introspection
            g = self.gateway
            return self._outcome(self.catalog.run(tree, g.tables(), params, reader=g.public_reader))
        result = self.gateway.run(sql, params or None)
        return self._outcome(result)

    def _outcome(self, result: Result) -> Outcome:
        from dpgate.interfaces.dbapi import _messages

        notices = _messages(result)
        if result.release is not None:
            self.last_release = release_json(result)
        if result.columns:
            return Outcome(result.columns, result.types, result.rows, f"SELECT {len(result.rows)}", notices)
        word = (result.message or "OK").split()[0].upper()
        tag = "SET" if word == "SET" else word
        return Outcome([], [], [], tag, notices)

    def _alter_password(self, name: str, password: str) -> Outcome:
        name = name[1:-1].replace('""', '"') if name.startswith('"') else name.lower()
        if self.role != "owner" and name != self.login:
            raise errors.PolicyError("An analyst may change only their own password", code="DP703")
        from dpgate.catalog.owner import Owner

        is_verifier = password.startswith("SCRAM-SHA-256$")
        with Owner(self.path, create=False) as owner:
            current = logins.lookup(owner.con, name)
            role = current[1] if current else "analyst"
            if self.role != "owner" and role != "analyst":
                raise errors.PolicyError("An analyst may change only their own password", code="DP703")
            owner.set_login(name, owner=role == "owner", **({"verifier": password} if is_verifier else {"password": password}))
        return Outcome([], [], [], "ALTER ROLE")

    # -- dpgate meta-commands --------------------------------------------------------------------
    def _meta(self, text: str) -> Outcome:
        try:
            words = shlex.split(text)
        except ValueError as e:
            raise errors.ProgrammingError(f"Cannot read the dpgate command: {e}", code="DP704") from e
        verb = words[0].lower() if words else ""
        if self.gateway is not None:
            return self._analyst_meta(verb, words[1:], text)
        if verb not in OWNER_COMMANDS:
            raise errors.ProgrammingError(
                f"Unknown owner command {verb!r}", code="DP704", hint="one of: dpgate " + ", dpgate ".join(OWNER_COMMANDS)
            )  # fmt: skip
        return self._owner_command(words)

    def _analyst_meta(self, verb: str, args: list[str], text: str) -> Outcome:
        """Metadata for dpgate's own remote client (the shell over a postgresql:// URL)."""
        g = self.gateway
        if verb == "release":
            return _table(["release"], [(json.dumps(self.last_release),)])
        if verb == "cost":
            sql = text.split(None, 1)[1] if len(text.split(None, 1)) > 1 else ""
            cost = g.cost(sql)
            return _table(["cost"], [(json.dumps(None if cost is None else list(cost)),)])
        if verb == "tables":
            return _table(["tables"], [(json.dumps(g.tables()),)])
        if verb == "session":
            return _table(["session"], [(json.dumps(g.session.values, default=str),)])
        if verb in OWNER_COMMANDS:
            raise errors.PolicyError(
                f"dpgate {verb} is an owner command; you are logged in as analyst {self.login}", code="DP713",
                hint="analysts ask SQL, SHOW BUDGET and EXPLAIN PRIVACY; the data owner logs in with an owner login",
            )  # fmt: skip
        raise errors.ProgrammingError(
            f"Unknown dpgate command {verb!r}", code="DP704",
            hint="analysts ask SQL, SHOW BUDGET and EXPLAIN PRIVACY",
        )  # fmt: skip

    def _owner_command(self, words: list[str]) -> Outcome:
        verb = words[0].lower()
        setting = verb == "budget" and self._sets_share(words)  # changes, then lists
        if (verb in ("ledger", "budget") and not setting) or [w.lower() for w in words[:2]] == ["analyst", "list"]:
            return self._owner_listing(verb, words)
        # the commands take the database after the (sub)command words
        at = 2 if verb in ("analyst", "policy", "login") else 1
        argv = [w.lower() if i < at else w for i, w in enumerate(words[:at])] + [self.path] + words[at:]
        # --password-stdin, or any abbreviation argparse would take for it: there is no stdin here
        if any(len(w) > 2 and ("--password-stdin".startswith(w.split("=")[0]) or w.startswith("--password")) for w in argv):
            raise _no_stdin()
        try:
            reply = owner_commands.run(owner_commands.parser().parse_args(argv), read_password=_refuse_stdin)
        except owner_commands.ArgumentsExit as e:
            if e.status:  # bad arguments: argparse's usage and complaint
                raise _failed(verb, e.err + e.out) from None
            return Outcome([], [], [], "DPGATE " + verb.upper(), _lines(e.out))  # --help
        except errors.Error as e:  # as the command line says it
            raise _failed(verb, f"error {e.code}: {e.message}\n" + (f"hint: {e.hint}\n" if e.hint else "")) from e
        if reply.listings:  # a command's table as the result set, its lines as notices (``dpgate answers``)
            out = _plain(reply.listings[0])
            out.notices.extend(_lines("\n".join(reply.lines)))
            return out
        return Outcome([], [], [], "DPGATE " + verb.upper(), _lines("\n".join(reply.lines)))

    def _sets_share(self, words: list[str]) -> bool:
        """Whether ``dpgate budget ...`` sets the default share (as the command line reads its options,
        abbreviations too); arguments it cannot read go the command's way, which says why."""
        try:
            args = owner_commands.parser().parse_args(["budget", self.path, *words[1:]])
        except owner_commands.ArgumentsExit:
            return True
        return args.share is not None

    def _owner_listing(self, verb: str, words: list[str]) -> Outcome:
        owner = self.owner
        if verb == "ledger":
            analyst = words[words.index("--analyst") + 1] if "--analyst" in words[:-1] else None
            return _plain(owner_commands.ledger(owner, analyst))
        analysts, tables = owner_commands.budgets(owner)
        out = _plain(tables if verb == "budget" and "--tables" in words else analysts)
        if verb == "budget":  # as on the command line: where quotas can use up subjects' budgets
            out.notices.extend(owner_commands.overcommit_notes(owner))
        return out


def _lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.strip()]


def _failed(verb: str, text: str) -> errors.ProgrammingError:
    """A failed owner command: its last line is the message, the lines before it the hint."""
    lines = _lines(text)
    return errors.ProgrammingError(
        lines[-1] if lines else f"dpgate {verb} failed", code="DP704",
        hint="; ".join(lines[:-1])[:500] or f"see dpgate {verb} --help",
    )  # fmt: skip


def _no_stdin() -> errors.ProgrammingError:
    return errors.ProgrammingError("There is no stdin over the server", code="DP704",
                                   hint="set passwords with ALTER ROLE name PASSWORD '...' (psql: \\password name)")  # fmt: skip


def _refuse_stdin() -> str:
    raise _no_stdin()


def _plain(listing: owner_commands.Listing) -> Outcome:
    """A listing as a result set, its columns typed from their values (exact decimals as DECIMAL)."""
    from decimal import Decimal

    names, rows = listing.names, listing.rows

    def typ(j: int) -> str:
        vals = [r[j] for r in rows if r[j] is not None]
        if vals and all(isinstance(v, datetime.datetime) for v in vals):
            return "TIMESTAMP"
        if vals and all(isinstance(v, bool) for v in vals):
            return "BOOLEAN"
        if vals and all(isinstance(v, int) and not isinstance(v, bool) for v in vals):
            return "BIGINT"
        if vals and all(isinstance(v, (int, float, Decimal)) and not isinstance(v, bool) for v in vals):
            return "DECIMAL"
        return "VARCHAR" if not vals or isinstance(vals[0], str) else "VARCHAR"

    types = [typ(j) for j in range(len(names))]
    out = [tuple(format(v.normalize(), "f") if isinstance(v, Decimal) else (str(v) if t == "VARCHAR" and v is not None
                 else v) for v, t in zip(r, types)) for r in rows]  # fmt: skip
    return _table(names, out, types)


def release_json(result: Result) -> dict[str, Any]:
    """The release metadata a remote client rebuilds ``cursor.release`` from (intervals travel as columns)."""
    info = result.release
    data = dataclasses.asdict(info)
    data.pop("intervals", None)
    return json.loads(json.dumps(data, default=str))
