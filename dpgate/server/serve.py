"""``dpgate serve``: the gateway behind PostgreSQL's wire protocol (asyncio, one process).

The server owns the database file (DuckDB lets one process open it), so analysts, the owner
and any PostgreSQL client share it while it runs. Each connection:

1. **Startup**: SSLRequest is answered ``S`` and upgraded to TLS when the server has a
   certificate (and then TLS is required), else ``N``; GSSENCRequest ``N``; a CancelRequest
   interrupts the statement of the session whose (pid, secret) it names.
2. **Authentication**: SCRAM-SHA-256 against the verifier stored for the startup ``user``
   (``dpgate.catalog.logins``). The session's analyst is that authenticated name. Unknown
   names run the same exchange against a fake verifier (from a secret kept in the database, so
   the fake salts survive restarts like real ones); failures are delayed, and a name from one
   address, or an address trying many names, is locked out for a while (``LoginGuard``).
3. **Queries**: simple query (several statements run in order, stopping at the first error)
   and extended query (Parse / Bind / Describe / Execute / Close / Sync / Flush, text-format
   parameters and results). A portal runs when it is first described or executed; a DP
   statement is charged then (fail closed: a client that disconnects keeps the debit).
   ``BEGIN`` / ``COMMIT`` / ``ROLLBACK`` are accepted for clients that send them, and never
   refund anything: a debit is final.

Statements run in worker threads (``Session``); the asyncio loop only moves bytes, so a slow
query, a client that never reads or a malformed message affects only its own connection.
Before login a connection may send at most 64 KB per message and must finish within
``login_timeout``; at most ``max_pending`` connections (``max_pending_per_host`` per address)
may be logging in at once, and ``max_connections`` counts logged-in sessions (at most
``max_sessions_per_login`` of one login). After login a
statement's text is at most 1 MB, any message at most 16 MB, and a statement that runs longer
than ``statement_timeout`` is interrupted, so endless statements cannot hold every worker.
Errors become ErrorResponse (SQLSTATE from the PEP 249 class, the dpgate code in the detail,
the hint in the hint); an answer's cost, population and notes arrive as NoticeResponse.
"""

from __future__ import annotations

import asyncio
import collections
import hmac
import logging
import os
import re
import secrets
import ssl
import struct
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from sqlglot.errors import TokenError
from sqlglot.tokens import TokenType

from dpgate import __version__, errors
from dpgate.catalog import logins
from dpgate.frontend.dialect import DPDuckDB
from dpgate.server import scram, wire
from dpgate.server.session import Outcome, Session

log = logging.getLogger("dpgate.server")

_BEGIN = re.compile(r"^\s*(begin|start\s+transaction)\b", re.I)
_COMMIT = re.compile(r"^\s*(commit|end)\b", re.I)
_ROLLBACK = re.compile(r"^\s*(rollback|abort)\b", re.I)
_PLACEHOLDER = re.compile(r"\$(\d+)")
#: DEALLOCATE [PREPARE] name | ALL and DISCARD ALL: a client's (psycopg's) cleanup of prepared statements
_DEALLOCATE = re.compile(r'^\s*deallocate\s+(?:prepare\s+)?(?:(all)|"((?:[^"]|"")+)"|([A-Za-z_][A-Za-z0-9_$]*))\s*;?\s*$', re.I)
_DISCARD_ALL = re.compile(r"^\s*discard\s+all\s*;?\s*$", re.I)
MAX_PARAMETERS = 65_535  # as PostgreSQL (the protocol counts them in 16 bits)
MAX_PREPARED = 1_000  # named statements and portals per session


class LoginGuard:
    """Failed logins, so that guessing stays slow and nobody can lock others out cheaply.

    - A name from one address: ``max_failures`` failures within ``window`` seconds lock that pair
      out until the window has passed (a success does not reset it).
    - One address: ``10 × max_failures`` failures (any names) lock the address out — a sprayer of
      names, not a user who mistyped.
    - One name from anywhere: never locked (that would let anyone lock a user out); each failure
      makes its next answers slower, doubling from ``delay`` up to 8 s.

    Attempts in flight count against the same limits (``begin`` waits while they would pass
    them), so opening many connections at once does not buy more guesses than failures allowed,
    while a pool of clients logging in together with the right password only queues briefly.
    """

    def __init__(self, max_failures: int = 5, window: float = 60.0, delay: float = 0.5):
        self.max_failures, self.window, self.delay = max_failures, window, delay
        self._failures: dict[str, collections.deque] = {}
        self._inflight: collections.Counter = collections.Counter()

    def _recent(self, key: str, now: float) -> int:
        q = self._failures.get(key)
        while q and q[0] <= now - self.window:
            q.popleft()
        if q is not None and not q:
            del self._failures[key]
        return len(q) if q else 0

    def _limits(self, user: str, host: str) -> tuple[tuple[str, int], ...]:
        return (f"pair:{user}@{host}", self.max_failures), (f"host:{host}", 10 * self.max_failures)

    def locked_for(self, user: str, host: str) -> float:
        """Seconds until ``user`` may try again from ``host`` (0: now)."""
        now = time.monotonic()
        wait = 0.0
        for key, limit in self._limits(user, host):
            if self._recent(key, now) >= limit:
                wait = max(wait, self._failures[key][0] + self.window - now)
        return wait

    async def begin(self, user: str, host: str) -> float:
        """Start an attempt: 0 once it may go on (waiting while attempts in flight would pass the
        limits), else the seconds the pair or address stays locked."""
        while True:
            wait = self.locked_for(user, host)
            if wait > 0:
                return wait
            now = time.monotonic()
            if all(self._recent(k, now) + self._inflight[k] < limit for k, limit in self._limits(user, host)):
                for key, _ in self._limits(user, host):
                    self._inflight[key] += 1
                return 0.0
            await asyncio.sleep(0.02)

    def end(self, user: str, host: str, ok: bool) -> None:
        """Finish an attempt begun with ``begin``; anything but a success counts as a failure."""
        now = time.monotonic()
        for key, _ in self._limits(user, host):
            self._inflight[key] -= 1
            if self._inflight[key] <= 0:
                del self._inflight[key]
        if not ok:
            for key in (*(k for k, _ in self._limits(user, host)), f"user:{user}"):
                self._failures.setdefault(key, collections.deque()).append(now)

    def delay_for(self, user: str) -> float:
        """How long a failed login for ``user`` waits before its answer."""
        n = self._recent(f"user:{user}", time.monotonic())
        return min(self.delay * 2 ** (n // self.max_failures), 8.0) if self.delay else 0.0


class _Client:
    """One connection's protocol state."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader, self.writer = reader, writer
        self.session: Session | None = None
        self.tx = "I"  # ReadyForQuery status: I idle, T in a transaction, E failed transaction
        self.statements: dict[str, tuple[str, list[int]]] = {}
        self.portals: dict[str, dict[str, Any]] = {}
        self.skip_to_sync = False
        self.out: list[bytes] = []

    def send(self, data: bytes) -> None:
        self.out.append(data)


class Server:
    def __init__(self, path: str, *, host: str = "127.0.0.1", port: int = 5433, tls: ssl.SSLContext | None = None,
                 workers: int = 64, guard: LoginGuard | None = None, write_timeout: float = 300.0,
                 test_seed: int | None = None, max_connections: int = 100,
                 login_timeout: float = 10.0, max_pending: int = 128, max_pending_per_host: int = 32,
                 statement_timeout: float = 600.0, max_sessions_per_login: int = 32):  # fmt: skip
        self.path = os.path.abspath(path)
        self.max_connections = max_connections
        # Logged-in sessions count against max_connections; connections still logging in have their
        # own caps (in total and per address) and must finish within login_timeout.
        self.login_timeout = login_timeout
        self.max_pending, self.max_pending_per_host = max_pending, max_pending_per_host
        self.statement_timeout = statement_timeout  # a statement running longer is interrupted (its debit stands)
        # one login holds at most half of the 64 statement workers
        self.max_sessions_per_login = max_sessions_per_login
        self._per_login: dict[str, int] = {}
        self._pending: dict[str, int] = {}
        self._open = 0
        self.host, self.port, self.tls = host, port, tls
        self.guard = guard or LoginGuard()
        self.write_timeout = write_timeout
        self.test_seed = test_seed
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dpgate-session")
        # logins have threads of their own: long statements filling the pool never block a login; and
        # opening a session has its own, so that 32 logins at once do not wait for 32 sessions to open
        # (the last ones ran past login_timeout on a loaded machine)
        self._auth_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="dpgate-login")
        self._open_pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="dpgate-open")
        self._secret = b""  # set below: the fake verifiers' key, kept in the database
        self._sessions: dict[int, tuple[int, Session]] = {}
        self._next_pid = 1000
        self._admin_lock = threading.Lock()
        self._server: asyncio.base_events.Server | None = None
        from dpgate.catalog.owner import Owner

        self._admin = Owner(self.path, create=False, read_only=True)  # holds the file for the server's life
        with self._admin_lock:
            logins.ensure(self._admin.con)
            self._secret = logins.server_secret(self._admin.con)

    # -- lifecycle --------------------------------------------------------------------------------
    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, self.host, self.port, limit=2**16)
        self.port = self._server.sockets[0].getsockname()[1]

    async def serve_forever(self) -> None:
        if self._server is None:
            await self.start()
        async with self._server:
            await self._server.serve_forever()

    def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for _, session in list(self._sessions.values()):
            session.interrupt()
        self.pool.shutdown(wait=True, cancel_futures=True)
        self._auth_pool.shutdown(wait=True, cancel_futures=True)
        self._open_pool.shutdown(wait=True, cancel_futures=True)
        for _, session in list(self._sessions.values()):
            session.close()
        self._sessions.clear()
        self._admin.close()

    def logins(self) -> list[tuple[str, str]]:
        with self._admin_lock:
            return logins.names(self._admin.con)

    async def _call(self, fn, *args):
        return await asyncio.get_running_loop().run_in_executor(self.pool, fn, *args)

    # -- one connection ----------------------------------------------------------------------------
    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        client = _Client(reader, writer)
        pid = None
        peer = writer.get_extra_info("peername")
        host = peer[0] if isinstance(peer, tuple) else str(peer)
        pending = self._pending.get(host, 0)
        if pending >= self.max_pending_per_host or sum(self._pending.values()) >= self.max_pending:
            writer.close()  # too many connections still logging in: refuse before reading a byte
            return
        self._pending[host] = pending + 1
        logged_in = False
        try:
            try:
                login = await asyncio.wait_for(self._login(client), self.login_timeout)
            finally:
                self._pending[host] -= 1
                if not self._pending[host]:
                    del self._pending[host]
            if login is None:
                return
            params, name, role = login
            if self._open >= self.max_connections or self._per_login.get(name, 0) >= self.max_sessions_per_login:
                limit = (f"at most {self.max_connections}" if self._open >= self.max_connections
                         else f"at most {self.max_sessions_per_login} for {name}")  # fmt: skip
                client.send(wire.error("53300", f"too many connections ({limit})", severity="FATAL"))
                await self._flush(client, quiet=True)
                return
            self._open += 1
            self._per_login[name] = self._per_login.get(name, 0) + 1
            logged_in = True
            try:
                session = await asyncio.get_running_loop().run_in_executor(
                    self._open_pool, lambda: Session(self.path, name, role, test_seed=self.test_seed)
                )
            except errors.Error as e:
                client.send(wire.error_for(e))
                await self._flush(client)
                return
            client.session = session
            pid, secret = self._next_pid, secrets.randbits(31)
            self._next_pid += 1
            self._sessions[pid] = (secret, session)
            self._greet(client, params, name, pid, secret)
            await self._flush(client)
            await self._loop(client)
        except wire.ProtocolViolation as e:
            client.send(wire.error("08P01", f"protocol violation: {e}", severity="FATAL"))
            await self._flush(client, quiet=True)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.TimeoutError, ssl.SSLError, OSError):
            pass
        except Exception:  # a bug must not take the server down: this connection ends
            log.exception("connection failed")
        finally:
            if logged_in:
                self._open -= 1
                self._per_login[name] -= 1
            if pid is not None:
                self._sessions.pop(pid, None)
            if client.session is not None:
                session = client.session
                try:
                    job = self.pool.submit(session.close)
                except RuntimeError:  # the pool is shut down
                    session.close()
                else:
                    try:  # the close runs to its end even when the server stops meanwhile
                        await asyncio.shield(asyncio.wrap_future(job))
                    except asyncio.CancelledError:
                        pass
            writer.close()

    async def _login(self, client: _Client) -> tuple[dict[str, str], str, str] | None:
        params = await self._startup(client)
        if params is None:
            return None
        found = await self._authenticate(client, params)
        return None if found is None else (params, *found)

    async def _flush(self, client: _Client, quiet: bool = False) -> None:
        if not client.out:
            return
        data, client.out = b"".join(client.out), []
        try:
            client.writer.write(data)
            await asyncio.wait_for(client.writer.drain(), self.write_timeout)
        except Exception:
            if not quiet:
                raise

    async def _read(self, client: _Client, limit: int = wire.MAX_MESSAGE) -> tuple[bytes, bytes]:
        head = await client.reader.readexactly(5)
        kind, n = head[:1], struct.unpack("!i", head[1:])[0]
        if n < 4 or n > limit or (kind in (b"Q", b"P") and n > wire.MAX_QUERY + 4096):
            raise wire.ProtocolViolation(f"message length {n} out of range (at most {limit}; statements "
                                         f"at most {wire.MAX_QUERY} bytes)")  # fmt: skip
        return kind, await client.reader.readexactly(n - 4)

    async def _startup(self, client: _Client) -> dict[str, str] | None:
        tls_done = False
        for _ in range(4):
            n = struct.unpack("!i", await client.reader.readexactly(4))[0]
            if n < 8 or n > wire.MAX_STARTUP:
                raise wire.ProtocolViolation("startup packet length out of range")
            payload = await client.reader.readexactly(n - 4)
            code = struct.unpack("!i", payload[:4])[0]
            if code == wire.SSL_REQUEST and not tls_done:
                if self.tls is None:
                    client.writer.write(b"N")
                    continue
                client.writer.write(b"S")
                await client.writer.drain()
                await client.writer.start_tls(self.tls)
                tls_done = True
                continue
            if code == wire.GSSENC_REQUEST:
                client.writer.write(b"N")
                continue
            if code == wire.CANCEL_REQUEST and len(payload) == 12:
                pid, secret = struct.unpack("!ii", payload[4:])
                self._cancel(pid, secret)
                return None
            if code >> 16 != 3:
                raise wire.ProtocolViolation(f"unsupported protocol version {code >> 16}.{code & 0xFFFF}")
            if self.tls is not None and not tls_done:
                client.send(wire.error("28000", "this server requires TLS (sslmode=require)", severity="FATAL"))
                await self._flush(client)
                return None
            fields = payload[4:].split(b"\x00")
            try:
                words = [f.decode("utf-8") for f in fields]
            except UnicodeDecodeError as e:
                raise wire.ProtocolViolation("startup parameters are not UTF-8") from e
            params = dict(zip(words[0:-1:2], words[1::2]))
            if not params.get("user"):
                client.send(wire.error("28000", "no user name in the startup message", severity="FATAL"))
                await self._flush(client)
                return None
            return params
        raise wire.ProtocolViolation("too many startup requests")

    def _cancel(self, pid: int, secret: int) -> None:
        entry = self._sessions.get(pid)
        if entry is not None and hmac.compare_digest(struct.pack("!i", entry[0]), struct.pack("!i", secret)):
            entry[1].interrupt()

    async def _authenticate(self, client: _Client, params: dict[str, str]) -> tuple[str, str] | None:
        user = params["user"]
        peer = client.writer.get_extra_info("peername")
        host = peer[0] if isinstance(peer, tuple) else str(peer)
        wait = await self.guard.begin(user, host)
        if wait > 0:
            client.send(wire.error("28000", f"too many failed logins; try again in {wait:.0f} s", severity="FATAL"))
            await self._flush(client)
            return None
        ok = False
        try:
            found = await self._exchange(client, user)
            ok = found is not None
            return found
        finally:  # a login abandoned half-way counts as a failure, as a wrong password does
            self.guard.end(user, host, ok)

    async def _exchange(self, client: _Client, user: str) -> tuple[str, str] | None:
        def lookup():
            with self._admin_lock:
                return logins.lookup(self._admin.con, user)

        found = await asyncio.get_running_loop().run_in_executor(self._auth_pool, lookup)
        verifier = found[0] if found else scram.fake_verifier(user, self._secret)
        client.send(wire.auth(10, wire.cstr(scram.MECHANISM) + b"\x00"))
        await self._flush(client)
        kind, payload = await self._read(client, wire.MAX_AUTH_MESSAGE)
        if kind != b"p":
            raise wire.ProtocolViolation("expected a SASLInitialResponse")
        r = wire.Reader(payload)
        mechanism = r.string()
        length = r.int32()
        first = r.raw(length).decode("utf-8", "replace") if length >= 0 else ""
        try:
            if mechanism != scram.MECHANISM:
                raise scram.ScramError(f"unsupported SASL mechanism {mechanism!r}")
            exchange = scram.ServerExchange(verifier, real=found is not None)
            client.send(wire.auth(11, exchange.first(first).encode("utf-8")))
            await self._flush(client)
            kind, payload = await self._read(client, wire.MAX_AUTH_MESSAGE)
            if kind != b"p":
                raise wire.ProtocolViolation("expected a SASLResponse")
            final = exchange.final(payload.decode("utf-8", "replace"))
        except scram.ScramError:
            await asyncio.sleep(self.guard.delay_for(user))
            client.send(wire.error("28P01", f'password authentication failed for user "{user}"', severity="FATAL"))
            await self._flush(client)
            return None
        client.send(wire.auth(12, final.encode("utf-8")))
        client.send(wire.auth(0))
        return user, found[1]

    def _greet(self, client: _Client, params: dict[str, str], user: str, pid: int, secret: int) -> None:
        for name, value in (
            ("server_version", "15.0"), ("server_encoding", "UTF8"), ("client_encoding", "UTF8"),
            ("DateStyle", "ISO, MDY"), ("IntervalStyle", "postgres"), ("TimeZone", "UTC"),
            ("integer_datetimes", "on"), ("standard_conforming_strings", "on"), ("is_superuser", "off"),
            ("session_authorization", user), ("application_name", params.get("application_name", "")),
            ("dpgate_version", __version__),
        ):  # fmt: skip
            client.send(wire.parameter_status(name, value))
        client.send(wire.backend_key(pid, secret))
        client.send(wire.ready("I"))

    # -- the query loop ------------------------------------------------------------------------------
    async def _loop(self, client: _Client) -> None:
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

    def _failed(self, client: _Client, response: bytes, *, extended: bool) -> None:
        client.send(response)
        if client.tx == "T":
            client.tx = "E"
        if extended:
            client.skip_to_sync = True
        else:
            client.send(wire.ready(client.tx))

    async def _message(self, client: _Client, kind: bytes, payload: bytes) -> None:
        r = wire.Reader(payload)
        if kind == b"Q":
            await self._simple(client, r.string())
        elif kind == b"P":
            name, query = r.string(), r.string()
            oids = [r.int32() for _ in range(max(r.int16(), 0))]
            placeholders = parameter_numbers(query)
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
            self._bind(client, r)
        elif kind == b"D":
            what, name = r.raw(1), r.string()
            if what == b"S":
                if name not in client.statements:
                    raise errors.ProgrammingError(f"No prepared statement {name!r}", code="DP705")
                client.send(wire.parameter_description(client.statements[name][1]))
                client.send(wire.NO_DATA)  # the columns are known only once it runs (and is charged)
            else:
                portal = self._portal(client, name)
                outcome = await self._run_portal(client, portal)
                client.send(wire.row_description(outcome.columns, outcome.types) if outcome.columns else wire.NO_DATA)
        elif kind == b"E":
            name, limit = r.string(), r.int32()
            portal = self._portal(client, name)
            outcome = await self._run_portal(client, portal)
            rows = outcome.rows[portal["pos"] :] if limit <= 0 else outcome.rows[portal["pos"] : portal["pos"] + limit]
            for row in rows:
                client.send(wire.data_row(row))
            portal["pos"] += len(rows)
            if limit > 0 and portal["pos"] < len(outcome.rows):
                client.send(wire.PORTAL_SUSPENDED)
            else:
                client.send(wire.command_complete(outcome.tag))
            await self._flush(client)
        elif kind == b"C":
            what, name = r.raw(1), r.string()
            (client.statements if what == b"S" else client.portals).pop(name, None)
            client.send(wire.CLOSE_COMPLETE)
        elif kind == b"S":
            client.skip_to_sync = False
            client.send(wire.ready(client.tx))
        elif kind == b"H":
            pass
        elif kind in (b"p", b"d", b"c", b"f", b"F"):
            raise errors.NotSupportedError(f"Message {kind.decode()!r} is not supported here", code="DP706",
                                           hint="COPY and function calls are not part of dpgate's protocol")  # fmt: skip
        else:
            raise wire.ProtocolViolation(f"unknown message type {kind!r}")

    def _bind(self, client: _Client, r: wire.Reader) -> None:
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
        client.portals[portal] = {"sql": query, "params": params, "outcome": None, "pos": 0}
        client.send(wire.BIND_COMPLETE)

    def _portal(self, client: _Client, name: str) -> dict[str, Any]:
        if name not in client.portals:
            raise errors.ProgrammingError(f"No portal {name!r}", code="DP705")
        return client.portals[name]

    async def _run_portal(self, client: _Client, portal: dict[str, Any]) -> Outcome:
        if portal["outcome"] is None:
            portal["outcome"] = await self._statement(client, portal["sql"], portal["params"])
            for text in portal["outcome"].notices:
                client.send(wire.notice(text))
        return portal["outcome"]

    async def _simple(self, client: _Client, sql: str) -> None:
        parts = await self._call(split_statements, sql) if len(sql) > 4096 else split_statements(sql)
        if not parts:
            client.send(wire.EMPTY_QUERY)
        for part in parts:
            try:
                outcome = await self._statement(client, part, None)
            except errors.Error as e:
                client.send(wire.error_for(e))
                if client.tx == "T":
                    client.tx = "E"
                break
            for text in outcome.notices:
                client.send(wire.notice(text))
            if outcome.columns:
                client.send(wire.row_description(outcome.columns, outcome.types))
                for row in outcome.rows:
                    client.send(wire.data_row(row))
                    if len(client.out) > 512:
                        await self._flush(client)
            client.send(wire.command_complete(outcome.tag))
        client.send(wire.ready(client.tx))

    async def _statement(self, client: _Client, sql: str, params: list[Any] | None) -> Outcome:
        """One statement: transaction control here, everything else in the session's thread."""
        if _BEGIN.match(sql):
            if client.tx == "I":
                client.tx = "T"
            return Outcome([], [], [], "BEGIN")
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
        deallocate, discard = _DEALLOCATE.match(sql), _DISCARD_ALL.match(sql)
        if deallocate is not None or discard is not None:
            # prepared statements (and, for DISCARD ALL, portals) of this connection, as PostgreSQL; nothing
            # reaches DuckDB, and dpgate's session settings stay (red team helper-42: psycopg sends these)
            if deallocate is not None and not deallocate.group(1):  # one statement, by name
                quoted, bare = deallocate.group(2), deallocate.group(3)
                name = quoted.replace('""', '"') if quoted else bare.lower()
                if name not in client.statements:
                    raise errors.ProgrammingError(f"prepared statement {name!r} does not exist", code="DP705")
                del client.statements[name]
                return Outcome([], [], [], "DEALLOCATE")
            # all of them; the unnamed ones stay: this very statement may be in them
            client.statements = {k: v for k, v in client.statements.items() if k == ""}
            if discard is not None:
                client.portals = {k: v for k, v in client.portals.items() if k == ""}
            return Outcome([], [], [], "DISCARD ALL" if discard is not None else "DEALLOCATE ALL")
        future = asyncio.get_running_loop().run_in_executor(self.pool, client.session.run, sql, params)
        timed_out = False
        deadline = time.monotonic() + self.statement_timeout
        try:
            while not future.done():
                await asyncio.wait({future}, timeout=0.25)
                if future.done():
                    break
                # the peer closed its side (EOF seen, even with a Terminate still in the buffer)
                gone = getattr(client.reader, "_eof", False) or client.reader.at_eof() or client.writer.is_closing()
                if gone or time.monotonic() > deadline:  # stop it; its worker is free once it returns
                    timed_out = not gone
                    client.session.interrupt()
                    await asyncio.wait({future})
                    break
            return future.result()
        except errors.Error as e:
            if "interrupted" in e.message.lower():
                why = "statement timeout" if timed_out else "user request"
                raise errors.OperationalError(f"canceling statement due to {why}", code="DP708") from e
            raise
        except Exception as e:
            if "interrupt" in str(e).lower():
                raise errors.OperationalError("canceling statement due to user request", code="DP708") from e
            log.exception("statement failed")
            raise errors.InternalError(f"Internal error: {type(e).__name__}", code="DP709") from e


def parameter_numbers(query: str) -> list[str]:
    """The numbers of the ``$n`` parameters of ``query``, as the statement's parser will read them: not
    inside a string, a quoted name or a comment (psql's ``\\password`` sends ``'SCRAM-SHA-256$4096:...'``,
    which counted as 4,096 parameters, red team helper-42). A statement the tokenizer cannot read
    (an unclosed quote) is counted by pattern; it fails when it is parsed anyway."""
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
    return not re.sub(r"--[^\n]*|/\*.*?\*/", "", s, flags=re.S).strip()


def tls_context(cert: str, key: str) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(cert, key)
    return ctx


def run(path: str, *, host: str = "127.0.0.1", port: int = 5433, tls: ssl.SSLContext | None = None,
        ready: Any = None, **kw: Any) -> None:  # fmt: skip
    """Serve until interrupted (SIGINT / SIGTERM); ``ready(server)`` is called once it listens."""
    import signal

    async def main():
        server = Server(path, host=host, port=port, tls=tls, **kw)
        await server.start()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, stop.set)
            except (NotImplementedError, RuntimeError):
                pass
        if ready is not None:
            ready(server)
        try:
            await stop.wait()
        finally:
            server.close()

    asyncio.run(main())
