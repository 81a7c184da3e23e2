"""The query part of a connection: simple and extended query, portals, and their rows.

A statement other than transaction control runs in a worker thread as a ``Running``
(``dpgate.server.running``): within its login's slots and its time limits, its public rows
streamed to the client a batch at a time. In the simple protocol they go straight out. In
the extended protocol a portal runs when it is first described or executed (a DP statement
is charged then; fail closed: a client that disconnects keeps the debit) and an ``Execute``
with a row limit takes that many of its rows, leaving the statement suspended, as PostgreSQL
does. A portal ends at its ``Close``, at a ``Bind`` that reuses its name, at a ``Sync``
outside a transaction block (the implicit transaction's end), or when its connection ends.
Before another statement runs on the connection, the rest of a suspended portal is read into
memory (up to ``KEEP_BYTES`` a connection; past that the portal ends, DP719), since a session
runs one statement at a time.
"""

from __future__ import annotations

import asyncio
import logging
import re
from typing import Any

from sqlglot.errors import TokenError
from sqlglot.tokens import TokenType

from dpgate import errors
from dpgate.frontend.dialect import MAX_STATEMENT_BYTES, DPDuckDB
from dpgate.server import wire
from dpgate.server.running import Running
from dpgate.server.session import Outcome, bare

log = logging.getLogger("dpgate.server")

_BEGIN = re.compile(r"^\s*(begin|start\s+transaction)\b", re.I)
_COMMIT = re.compile(r"^\s*(commit|end)\b", re.I)
_ROLLBACK = re.compile(r"^\s*(rollback|abort)\b", re.I)


def _is_savepoint(w: list[str]) -> bool:
    return len(w) == 2 and w[0] == "savepoint"


def _is_release(w: list[str]) -> bool:
    return len(w) in (2, 3) and w[0] == "release" and (len(w) == 2 or w[1] == "savepoint")


def _is_rollback_to(w: list[str]) -> bool:
    rest = w[1:]
    if rest[:1] in (["work"], ["transaction"]):
        rest = rest[1:]
    return w[:1] == ["rollback"] and rest[:1] == ["to"] and len(rest[1:]) in (1, 2) and (
        len(rest[1:]) == 1 or rest[1] == "savepoint")
_PLACEHOLDER = re.compile(r"\$(\d+)")
#: DEALLOCATE [PREPARE] name | ALL and DISCARD ALL: a client's (psycopg's) cleanup of prepared statements
#: (matched in full against ``session.bare`` of the statement)
_DEALLOCATE = re.compile(r'deallocate\s+(?:prepare\s+)?(?:(all)|"((?:[^"]|"")+)"|([A-Za-z_][A-Za-z0-9_$]*))', re.I)
_DISCARD_ALL = re.compile(r"discard\s+all", re.I)
MAX_PARAMETERS = 65_535  # as PostgreSQL (the protocol counts them in 16 bits)
MAX_PREPARED = 1_000  # named statements and portals per session
KEEP_BYTES = 64 * 1024 * 1024  # rows of suspended portals kept in memory per connection
ROW_OVERHEAD = 64  # bytes a row object holds beyond its data (CPython's bytes header and list slot)


class QueryLoop:
    """The query half of ``Server`` (a mixin: it uses the server's pool, slots, limits and ``_flush``)."""

    async def _loop(self, client) -> None:
        while True:
            kind, payload = await self._read(client)
            if kind == b"X":
                return
            if client.skip_to_sync and kind != b"S":
                continue
            try:
                await self._message(client, kind, payload)
            except wire.ProtocolViolation:
                raise
            except errors.Error as e:
                self._failed(client, wire.error_for(e), extended=kind != b"Q")
            if kind in (b"Q", b"S", b"H"):
                await self._flush(client)

    def _failed(self, client, response: bytes, *, extended: bool) -> None:
        client.send(response)
        if client.tx == "T":
            client.tx = "E"
        if extended:
            client.skip_to_sync = True
        else:
            client.send(wire.ready(client.tx))

    async def _message(self, client, kind: bytes, payload: bytes) -> None:
        r = wire.Reader(payload)
        if kind == b"Q":
            await self._simple(client, r.string())
        elif kind == b"P":
            name, query = r.string(), r.string()
            oids = [r.int32() for _ in range(max(r.int16(), 0))]
            if len(query) > MAX_STATEMENT_BYTES or len(query.encode("utf-8", "surrogatepass")) > MAX_STATEMENT_BYTES:
                raise errors.ParseError(f"The statement is longer than {MAX_STATEMENT_BYTES:,} bytes", code="DP259",
                                        hint="send a shorter statement")  # fmt: skip
            # tokenizing takes up to a second for the longest statement: not on the loop every session shares
            placeholders = await asyncio.to_thread(parameter_numbers, query)
            if any(len(m) > 6 or int(m) > MAX_PARAMETERS for m in placeholders):
                raise errors.ProgrammingError(f"Parameter numbers go up to ${MAX_PARAMETERS}", code="DP602",
                                              hint="number parameters $1, $2, ...")  # fmt: skip
            n = max((int(m) for m in placeholders), default=0)
            if name and name not in client.statements and len(client.statements) >= MAX_PREPARED:
                raise errors.ProgrammingError(f"At most {MAX_PREPARED} prepared statements per session", code="DP705",
                                              hint="close statements you no longer need (DEALLOCATE / Close)")  # fmt: skip
            client.statements[name] = (query, oids[:n] + [0] * (n - len(oids)))
            client.send(wire.PARSE_COMPLETE)
        elif kind == b"B":
            await self._bind(client, r)
        elif kind == b"D":
            what, name = r.raw(1), r.string()
            if what == b"S":
                if name not in client.statements:
                    raise errors.ProgrammingError(f"No prepared statement {name!r}", code="DP705")
                client.send(wire.parameter_description(client.statements[name][1]))
                client.send(wire.NO_DATA)  # the columns are known only once it runs (and is charged)
            else:
                portal = self._portal(client, name)
                await self._open_portal(client, portal)
                columns = portal["columns"]
                client.send(wire.row_description(*columns) if columns and columns[0] else wire.NO_DATA)
        elif kind == b"E":
            name, limit = r.string(), r.int32()
            await self._execute(client, self._portal(client, name), limit)
        elif kind == b"C":
            what, name = r.raw(1), r.string()
            if what == b"S":
                client.statements.pop(name, None)
            elif name in client.portals:
                await self._end_portal(client, client.portals.pop(name))
            client.send(wire.CLOSE_COMPLETE)
        elif kind == b"S":
            client.skip_to_sync = False
            if client.tx == "I":  # the implicit transaction ends, and its portals with it (as PostgreSQL)
                await self._end_portals(client)
            client.send(wire.ready(client.tx))
        elif kind == b"H":
            pass
        elif kind in (b"p", b"d", b"c", b"f", b"F"):
            raise errors.NotSupportedError(f"Message {kind.decode()!r} is not supported here", code="DP706",
                                           hint="COPY and function calls are not part of dpgate's protocol")  # fmt: skip
        else:
            raise wire.ProtocolViolation(f"unknown message type {kind!r}")

    async def _bind(self, client, r: wire.Reader) -> None:
        portal, name = r.string(), r.string()
        formats = [r.int16() for _ in range(max(r.int16(), 0))]
        values = [None if (n := r.int32()) < 0 else r.raw(n) for _ in range(max(r.int16(), 0))]
        results = [r.int16() for _ in range(max(r.int16(), 0))]
        if name not in client.statements:
            raise errors.ProgrammingError(f"No prepared statement {name!r}", code="DP705")
        query, oids = client.statements[name]
        if any(f == 1 for f in results):
            raise errors.NotSupportedError("Binary result format is not supported", code="DP701",
                                           hint="ask for text results (psql and psycopg do by default)")  # fmt: skip
        if len(values) != len(oids):
            raise errors.ProgrammingError(f"The statement has {len(oids)} parameters, {len(values)} were bound",
                                          code="DP602")  # fmt: skip
        if len(formats) not in (0, 1, len(values)) or any(f not in (0, 1) for f in formats + results):
            raise wire.ProtocolViolation("parameter or result format codes do not match the parameters")

        def fmt(i: int) -> bool:
            return (formats[i] if len(formats) > 1 else formats[0] if formats else 0) == 1

        params = [wire.param_value(v, oids[i], fmt(i)) for i, v in enumerate(values)]
        if portal and portal not in client.portals and len(client.portals) >= MAX_PREPARED:
            raise errors.ProgrammingError(f"At most {MAX_PREPARED} open portals per session", code="DP705")
        if portal in client.portals:
            await self._end_portal(client, client.portals.pop(portal))
        client.portals[portal] = {"sql": query, "params": params, "started": False, "run": None, "columns": None,
                                  "rows": [], "tag": "", "error": None}  # fmt: skip
        client.send(wire.BIND_COMPLETE)

    def _portal(self, client, name: str) -> dict[str, Any]:
        if name not in client.portals:
            raise errors.ProgrammingError(f"No portal {name!r}", code="DP705")
        return client.portals[name]

    # -- portals ---------------------------------------------------------------------------------------
    async def _open_portal(self, client, portal: dict[str, Any]) -> None:
        """Run the portal's statement if it has not run: a stream until its columns are known, anything
        else to its end (its rows kept as DataRow messages)."""
        if portal["error"] is not None:
            raise portal["error"]
        if portal["started"]:
            return
        portal["started"] = True
        got = await self._statement(client, portal["sql"], portal["params"])
        if isinstance(got, Outcome):
            self._keep_outcome(client, portal, got)
            return
        item = await got.stream.next(got.worker)
        if item is None:  # ended without streaming rows
            try:
                outcome = await self._result(got)
            except errors.Error as e:
                portal["error"] = e
                raise
            self._keep_outcome(client, portal, outcome)
            return
        portal["run"], portal["columns"] = got, (item[1], item[2])

    @staticmethod
    def _keep_outcome(client, portal: dict[str, Any], outcome: Outcome) -> None:
        for text in outcome.notices:
            client.send(wire.notice(text))
        portal["columns"] = (outcome.columns, outcome.types) if outcome.columns else None
        portal["rows"] = [wire.data_row(row) for row in outcome.rows]
        portal["tag"] = outcome.tag

    async def _execute(self, client, portal: dict[str, Any], limit: int) -> None:
        await self._open_portal(client, portal)
        sent = 0
        while limit <= 0 or sent < limit:
            rows = portal["rows"]
            if rows:
                k = len(rows) if limit <= 0 else min(len(rows), limit - sent)
                client.out.extend(rows[:k])
                del rows[:k]
                sent += k
                await self._flush(client)
                continue
            run = portal["run"]
            if run is None:
                break
            item = await run.stream.next(run.worker)
            if item is None:
                portal["run"] = None
                try:
                    outcome = await self._result(run)
                except errors.Error as e:
                    portal["error"] = e
                    raise
                for text in outcome.notices:
                    client.send(wire.notice(text))
                portal["tag"] = f"SELECT {run.stream.rows}"
            elif item[0] == "rows":
                portal["rows"] = list(item[1])
        if portal["rows"] or portal["run"] is not None:
            client.send(wire.PORTAL_SUSPENDED)
        else:
            client.send(wire.command_complete(portal["tag"]))
        await self._flush(client)

    async def _end_portal(self, client, portal: dict[str, Any]) -> None:
        """Stop the portal's statement if it still runs (its unread rows are dropped)."""
        run = portal.get("run")
        if run is not None:
            portal["run"] = None
            await self._stop(run, "the portal being closed")
        portal["rows"] = []

    async def _end_portals(self, client) -> None:
        for portal in list(client.portals.values()):
            await self._end_portal(client, portal)
        client.portals.clear()

    async def _settle(self, client) -> None:
        """Before another statement: read the rest of a suspended portal into memory (the session runs one
        statement at a time), within KEEP_BYTES a connection; a larger rest ends the portal (DP719)."""
        kept = sum(_held(portal["rows"]) for portal in client.portals.values())
        for name, portal in client.portals.items():
            run = portal["run"]
            if run is None:
                continue
            while (item := await run.stream.next(run.worker)) is not None:
                if item[0] != "rows":
                    continue
                size = _held(item[1])
                if kept + size > KEEP_BYTES:
                    portal["run"] = None
                    await self._stop(run, "another statement on its connection")
                    kept -= _held(portal["rows"])
                    portal["rows"] = []
                    portal["error"] = errors.OperationalError(
                        f"Portal {name!r} was closed: another statement ran on its connection while more than "
                        f"{KEEP_BYTES // 2**20} MB of its rows were unread", code="DP719",
                        hint="read a result to its end before the next statement, or fetch it whole",
                    )  # fmt: skip
                    break
                portal["rows"].extend(item[1])
                kept += size
            else:
                portal["run"] = None
                try:
                    outcome = await self._result(run)
                    portal["tag"] = f"SELECT {run.stream.rows}"
                    for text in outcome.notices:
                        client.send(wire.notice(text))
                except errors.Error as e:
                    portal["error"] = e

    async def _stop(self, run: Running, reason: str) -> None:
        """Stop a statement the client no longer wants and wait for its worker (a charged one ends by itself)."""
        run.stop(reason)
        try:
            await asyncio.shield(run.worker)
        except Exception:  # noqa: BLE001 - nobody reads its outcome
            pass

    # -- the simple protocol -----------------------------------------------------------------------------
    async def _simple(self, client, sql: str) -> None:
        if len(sql) > MAX_STATEMENT_BYTES or len(sql.encode("utf-8", "surrogatepass")) > MAX_STATEMENT_BYTES:
            # before anything reads it: the time of every check below grows with the text
            client.send(wire.error_for(errors.ParseError(
                f"The query is longer than {MAX_STATEMENT_BYTES:,} bytes", code="DP259", hint="send a shorter statement")))  # fmt: skip
            client.send(wire.ready(client.tx))
            return
        parts = await self._call(split_statements, sql) if len(sql) > 4096 else split_statements(sql)
        if not parts:
            client.send(wire.EMPTY_QUERY)
        for part in parts:
            try:
                got = await self._statement(client, part, None)
                streamed = False
                if isinstance(got, Running):
                    run = got
                    got = await self._stream_all(client, run)
                    streamed = run.stream.columns is not None
            except errors.Error as e:
                client.send(wire.error_for(e))
                if client.tx == "T":
                    client.tx = "E"
                break
            for text in got.notices:
                client.send(wire.notice(text))
            if got.columns and not streamed:
                client.send(wire.row_description(got.columns, got.types))
                for row in got.rows:
                    client.send(wire.data_row(row))
                    if len(client.out) > 512:
                        await self._flush(client)
            client.send(wire.command_complete(got.tag))
        client.send(wire.ready(client.tx))

    async def _stream_all(self, client, run: Running) -> Outcome:
        """Send a statement's rows as they come; its Outcome (rows already sent when it streamed)."""
        while (item := await run.stream.next(run.worker)) is not None:
            if item[0] == "columns":
                client.send(wire.row_description(item[1], item[2]))
            else:
                client.out.extend(item[1])
                await self._flush(client)
        outcome = await self._result(run)
        if run.stream.columns is None:  # not streamed: the caller sends it
            return outcome
        return Outcome([], [], [], f"SELECT {run.stream.rows}", outcome.notices)

    # -- one statement --------------------------------------------------------------------------------
    async def _statement(self, client, sql: str, params: list[Any] | None) -> Outcome | Running:
        """Transaction control here; anything else started in the session's thread as a ``Running``."""
        if _BEGIN.match(sql):
            if client.tx == "I":
                client.tx = "T"
            return Outcome([], [], [], "BEGIN")
        # savepoints by their words (split, not matched: this runs on the loop every session shares)
        words = bare(sql).lower().split() if len(sql) < 1024 else []
        if _is_savepoint(words) or _is_release(words):
            if client.tx == "E":
                raise errors.ProgrammingError(
                    "current transaction is aborted, commands ignored until end of transaction block", code="DP707",
                    hint="send ROLLBACK (a debit is final whatever you send)",
                )  # fmt: skip
            return Outcome([], [], [], "SAVEPOINT" if _is_savepoint(words) else "RELEASE")
        if _is_rollback_to(words):  # the transaction goes on (an aborted one is usable again); nothing is refunded
            if client.tx == "E":
                client.tx = "T"
            return Outcome([], [], [], "ROLLBACK", ["dpgate debits are final: a rollback refunds nothing"])
        if _COMMIT.match(sql) or _ROLLBACK.match(sql):
            tag = "ROLLBACK" if _ROLLBACK.match(sql) or client.tx == "E" else "COMMIT"
            client.tx = "I"
            notices = ["dpgate debits are final: a rollback refunds nothing"] if tag == "ROLLBACK" else []
            return Outcome([], [], [], tag, notices)
        if client.tx == "E":
            raise errors.ProgrammingError(
                "current transaction is aborted, commands ignored until end of transaction block", code="DP707",
                hint="send ROLLBACK (a debit is final whatever you send)",
            )  # fmt: skip
        text = bare(sql) if len(sql) < 4096 else ""
        deallocate, discard = _DEALLOCATE.fullmatch(text), _DISCARD_ALL.fullmatch(text)
        if deallocate is not None or discard is not None:
            # prepared statements (and, for DISCARD ALL, portals) of this connection, as PostgreSQL; nothing
            # reaches DuckDB, and dpgate's session settings stay (psycopg sends these)
            if deallocate is not None and not deallocate.group(1):  # one statement, by name
                quoted, unquoted = deallocate.group(2), deallocate.group(3)
                name = quoted.replace('""', '"') if quoted else unquoted.lower()
                if name not in client.statements:
                    raise errors.ProgrammingError(f"prepared statement {name!r} does not exist", code="DP705")
                del client.statements[name]
                return Outcome([], [], [], "DEALLOCATE")
            # all of them; the unnamed ones stay: this very statement may be in them
            client.statements = {k: v for k, v in client.statements.items() if k == ""}
            if discard is not None:
                for k in [k for k in client.portals if k != ""]:
                    await self._end_portal(client, client.portals.pop(k))
            return Outcome([], [], [], "DISCARD ALL" if discard is not None else "DEALLOCATE ALL")
        await self._settle(client)
        run = Running(client.session, sql, params, statement_timeout=self.statement_timeout,
                      public_timeout=self.public_timeout, max_rows=self.max_result_rows,
                      max_bytes=self.max_result_bytes, gone=lambda: _gone(client))  # fmt: skip
        client.running = run
        login = client.session.login
        try:
            await self.slots.acquire(login, lambda: self._slot_refusal(run, login))
        except BaseException:
            client.running = None
            raise
        run.start(self.pool).add_done_callback(lambda _: self.slots.release(login))
        return run

    def _slot_refusal(self, run: Running, login: str) -> errors.Error | None:
        reason = run.why_stop()
        if reason is None:
            return None
        if reason.startswith("statement timeout"):
            return errors.OperationalError(
                f"The statement waited {self.statement_timeout:g} s for one of the {self.slots.per_login} statements "
                f"{login} may run at once on this server, and was not run", code="DP715",
                hint="wait for your other statements (other sessions of this login) to end; nothing was charged "
                "(the data owner sets the number: dpgate serve --statements-per-login)",
            )  # fmt: skip
        return errors.OperationalError(f"canceling statement due to {reason}", code="DP708",
                                       hint="nothing was run or charged")  # fmt: skip

    async def _result(self, run: Running) -> Outcome:
        try:
            return await run.result()
        except errors.Error:
            raise
        except Exception as e:
            log.exception("statement failed")
            raise errors.InternalError(f"Internal error: {type(e).__name__}", code="DP709") from e


def _gone(client) -> bool:
    """The peer closed its side (EOF seen, even with a Terminate still in the buffer)."""
    return getattr(client.reader, "_eof", False) or client.reader.at_eof() or client.writer.is_closing()


def _held(rows: list[bytes]) -> int:
    """Memory a list of encoded rows holds: their bytes and each object's overhead (about 64 bytes a row;
    counted by bytes alone, 64 MB of 11-byte rows held 320 MB)."""
    return sum(map(len, rows)) + ROW_OVERHEAD * len(rows)


def parameter_numbers(query: str) -> list[str]:
    """The numbers of the ``$n`` parameters of ``query``, as the statement's parser will read them: not
    inside a string, a quoted name or a comment (psql's ``\\password`` sends ``'SCRAM-SHA-256$4096:...'``,
    which counted as 4,096 parameters). A statement the tokenizer cannot read (an unclosed quote) is
    counted by pattern; it fails when it is parsed anyway."""
    try:
        tokens = DPDuckDB().tokenize(query)
    except TokenError:  # the statement's parse reports it
        return _PLACEHOLDER.findall(query)
    return [
        b.text for a, b in zip(tokens, tokens[1:])
        if a.token_type == TokenType.PARAMETER and b.token_type == TokenType.NUMBER and b.start == a.end + 1
        and b.text.isdigit()
    ]  # fmt: skip


def split_statements(sql: str) -> list[str]:
    """The statements of a simple query, split at top-level semicolons (outside quotes and comments)."""
    out, start, i, n = [], 0, 0, len(sql)
    while i < n:
        c = sql[i]
        if c in "'\"":
            j = i + 1
            while j < n:
                if sql[j] == c:
                    if j + 1 < n and sql[j + 1] == c:
                        j += 2
                        continue
                    break
                j += 1
            i = j + 1
            continue
        if sql.startswith("--", i):
            j = sql.find("\n", i)
            i = n if j < 0 else j + 1
            continue
        if sql.startswith("/*", i):
            j = sql.find("*/", i + 2)
            i = n if j < 0 else j + 2
            continue
        if c == ";":
            out.append(sql[start:i])
            start = i + 1
        i += 1
    out.append(sql[start:])
    return [s.strip() for s in out if s.strip() and not _only_comments(s)]


def _only_comments(s: str) -> bool:
    """Whether ``s`` holds nothing but comments and spaces (a scan: a pattern for comments backtracks
    over every unclosed ``/*``)."""
    i, n = 0, len(s)
    while i < n:
        if s[i].isspace():
            i += 1
        elif s.startswith("--", i):
            j = s.find("\n", i)
            i = n if j < 0 else j + 1
        elif s.startswith("/*", i):
            j = s.find("*/", i + 2)
            i = n if j < 0 else j + 2
        else:
            return False
    return True
