"""``dpgate serve``: the gateway behind PostgreSQL's wire protocol (asyncio, one process).

The server owns the database file (DuckDB lets one process open it), so analysts, the owner
and any PostgreSQL client share it while it runs. Each connection:

1. **Startup**: SSLRequest is answered ``S`` and upgraded to TLS when the server has a
   certificate (and then TLS is required), else ``N``; GSSENCRequest ``N``; a CancelRequest
   stops the statement of the session whose (pid, secret) it names, unless it is past its debit.
2. **Authentication**: SCRAM-SHA-256 against the verifier stored for the startup ``user``
   (``dpgate.catalog.logins``). The session's analyst is that authenticated name. Unknown
   names run the same exchange against a fake verifier (from a secret kept in the database, so
   the fake salts survive restarts like real ones). Proofs are checked in turns per name and
   failures answered late (``dpgate.server.guard``: no lockout anyone else can cause).
3. **Queries**: simple and extended query (``dpgate.server.queries``), each statement a
   ``Running`` (``dpgate.server.running``) within its login's slots and its time limits, a public
   statement's rows streamed a batch at a time and capped.

Statements run in worker threads (``Session``); the asyncio loop only moves bytes, so a slow
query, a client that never reads or a malformed message affects only its own connection.
Before login a connection may send at most 64 KB per message, holds one of the pre-login
slots (a newcomer makes room by closing the pending connection that gave least away) and has
``startup_timeout`` to send its startup and ``login_timeout`` in all. ``max_connections``
counts logged-in sessions (at most ``max_sessions_per_login`` of one login). After login a
statement's text is at most 1 MB and any message at most 16 MB. Errors become ErrorResponse
(SQLSTATE from the PEP 249 class, the dpgate code in the detail, the hint in the hint); an
answer's cost, population and notes arrive as NoticeResponse.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import os
import secrets
import ssl
import struct
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from dpgate import __version__, errors, scram
from dpgate.catalog import logins
from dpgate.server import wire
from dpgate.server.guard import LOOPBACK, LoginGuard, LoginRefused, Pending, PreLogin, address_group
from dpgate.server.peer import loopback_uid
from dpgate.server.queries import QueryLoop, parameter_numbers, split_statements
from dpgate.server.running import Running, Slots
from dpgate.server.session import Session

__all__ = ["LoginGuard", "Server", "parameter_numbers", "run", "split_statements", "tls_context"]

log = logging.getLogger("dpgate.server")


class _Client:
    """One connection's protocol state."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, group: str):
        self.reader, self.writer, self.group = reader, writer, group
        self.session: Session | None = None
        self.pending: Pending | None = None  # its pre-login slot, until it logs in
        self.running: Running | None = None  # its latest statement
        self.tx = "I"  # ReadyForQuery status: I idle, T in a transaction, E failed transaction
        self.statements: dict[str, tuple[str, list[int]]] = {}
        self.portals: dict[str, dict[str, Any]] = {}
        self.skip_to_sync = False
        self.out: list[bytes] = []

    def send(self, data: bytes) -> None:
        self.out.append(data)


class Server(QueryLoop):
    def __init__(self, path: str, *, host: str = "127.0.0.1", port: int = 5433, tls: ssl.SSLContext | None = None,
                 workers: int = 64, guard: LoginGuard | None = None, write_timeout: float = 300.0,
                 test_seed: int | None = None, max_connections: int = 100,
                 login_timeout: float = 10.0, startup_timeout: float = 5.0, max_pending: int = 256,
                 max_pending_per_host: int = 64, statement_timeout: float = 600.0, public_timeout: float = 60.0,
                 max_result_rows: int = 1_000_000, max_result_bytes: int = 256 * 2**20,
                 statements_per_login: int = 4, max_sessions_per_login: int = 32):  # fmt: skip
        self.path = os.path.abspath(path)
        self.max_connections = max_connections
        # Connections still logging in hold pre-login slots (in total and per address group) and have
        # startup_timeout, then login_timeout in all, of their client's time; logged-in sessions count
        # against max_connections.
        self.login_timeout, self.startup_timeout = login_timeout, startup_timeout
        self.prelogin = PreLogin(max_pending, max_pending_per_host)
        # Before its debit a statement stops after statement_timeout; a public one after public_timeout;
        # a charged one runs to its end (its work was bounded before the debit).
        self.statement_timeout, self.public_timeout = statement_timeout, public_timeout
        self.max_result_rows, self.max_result_bytes = max_result_rows, max_result_bytes
        self.slots = Slots(statements_per_login)  # one login's statements at once, over its sessions
        # one login holds at most half of the 64 statement workers' sessions
        self.max_sessions_per_login = max_sessions_per_login
        self._per_login: dict[str, int] = {}
        self._open = 0
        self.host, self.port, self.tls = host, port, tls
        self.guard = guard or LoginGuard()
        self.write_timeout = write_timeout
        self.test_seed = test_seed
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dpgate-session")
        # logins have threads of their own: long statements filling the pool never block a login; and
        # opening a session has its own, so that 32 logins at once do not wait for 32 sessions to open
        self._auth_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="dpgate-login")
        self._open_pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="dpgate-open")
        self._secret = b""  # set below: the fake verifiers' key, kept in the database
        self._sessions: dict[int, tuple[int, _Client]] = {}
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
        if not self.host:  # "" listens on every interface, which nobody asks for by leaving the host empty
            raise errors.OperationalError("dpgate serve needs an address to listen on (--host is empty)", code="DP720",
                                          hint="--host 127.0.0.1 (this machine only) or 0.0.0.0 (every interface)")  # fmt: skip
        try:
            self._server = await asyncio.start_server(self._handle, self.host, self.port, limit=2**16)
        except (OSError, OverflowError, UnicodeError) as e:  # in use, not allowed, out of range, no such host
            reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
            raise errors.OperationalError(
                f"dpgate serve cannot listen on {self.host}:{self.port}: {reason}", code="DP720",
                hint="choose another --port (1024-65535 needs no privileges; 0 picks a free one) or an address of "
                "this machine for --host (127.0.0.1, 0.0.0.0)",
            ) from None  # fmt: skip
        self.port = self._server.sockets[0].getsockname()[1]

    async def serve_forever(self) -> None:
        if self._server is None:
            await self.start()
        async with self._server:
            await self._server.serve_forever()

    def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for _, client in list(self._sessions.values()):
            if client.session is not None:
                client.session.interrupt()
        self.pool.shutdown(wait=True, cancel_futures=True)
        self._auth_pool.shutdown(wait=True, cancel_futures=True)
        self._open_pool.shutdown(wait=True, cancel_futures=True)
        for _, client in list(self._sessions.values()):
            if client.session is not None:
                client.session.close()
        self._sessions.clear()
        self._admin.close()

    def logins(self) -> list[tuple[str, str]]:
        with self._admin_lock:
            return logins.names(self._admin.con)

    async def _call(self, fn, *args):
        return await asyncio.get_running_loop().run_in_executor(self.pool, fn, *args)

    # -- one connection ----------------------------------------------------------------------------
    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        client = _Client(reader, writer, self._group(writer))
        pid = None
        # a newcomer is never turned away for want of a pre-login slot: the pending connection that gave
        # least away is closed instead (an idle socket must not block a login)
        client.pending, victims = self.prelogin.admit(client.group, asyncio.current_task(), writer)
        for victim in victims:
            self._evict(victim)
        logged_in = False
        try:
            try:
                # a bound of last resort; the client's own time is bounded inside (startup / login timeouts)
                async with asyncio.timeout(self.login_timeout + self.guard.max_wait + self.guard.max_delay + 5):
                    login = await self._login(client)
            finally:
                self.prelogin.leave(client.pending)
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
            self._sessions[pid] = (secret, client)
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
        except asyncio.CancelledError:  # closed to make room, or the server stops: the connection just ends
            pass
        finally:
            if logged_in:
                self._open -= 1
                self._per_login[name] -= 1
            if pid is not None:
                self._sessions.pop(pid, None)
            if client.session is not None:
                await self._end_session(client)
            writer.close()

    @staticmethod
    def _group(writer: asyncio.StreamWriter) -> str:
        """The client's address group: on loopback, the local user owning its socket when the kernel says."""
        peer = writer.get_extra_info("peername")
        host = peer[0] if isinstance(peer, tuple) else str(peer)
        group = address_group(host)
        if group == LOOPBACK:
            local = writer.get_extra_info("sockname")
            if isinstance(peer, tuple) and isinstance(local, tuple):
                group = address_group(host, loopback_uid(local[:2], peer[:2]))
        return group

    async def _end_session(self, client: _Client) -> None:
        """Stop what the connection still runs (a charged statement runs to its end), then close its session."""
        session = client.session
        try:
            run = client.running
            if run is not None and run.worker is not None and not run.worker.done():
                await asyncio.shield(self._stop(run, "the client going away"))
            job = self.pool.submit(session.close)
        except RuntimeError:  # the pool is shut down
            session.close()
        except asyncio.CancelledError:
            return
        else:
            try:  # the close runs to its end even when the server stops meanwhile
                await asyncio.shield(asyncio.wrap_future(job))
            except asyncio.CancelledError:
                pass

    def _evict(self, victim: Pending) -> None:
        """Close a pending connection to make room: a failed attempt gets its answer early (its turn stays
        taken), anything else says why."""
        if victim.state == "failed":
            data = wire.error("28P01", f'password authentication failed for user "{victim.name}"', severity="FATAL")
        else:
            data = wire.error_for(errors.OperationalError(
                "Too many connections are logging in from this address (or local user): this one was closed "
                "to make room", code="DP717",
                hint="connect again and log in promptly: connections that send nothing, or wait longest on "
                "their client, are closed first",
            ), severity="FATAL")  # fmt: skip
        try:
            victim.writer.write(data)
        except Exception:  # noqa: BLE001 - it is being closed anyway
            pass
        victim.task.cancel()

    async def _login(self, client: _Client) -> tuple[dict[str, str], str, str] | None:
        try:
            params = await self._startup(client)
            if params is None:
                return None
            found = await self._authenticate(client, params)
        except LoginRefused as refused:
            client.send(wire.error_for(refused.error, severity="FATAL"))
            await self._flush(client, quiet=True)
            return None
        return None if found is None else (params, *found)

    async def _from_client(self, client: _Client, aw: Any, limit: float, which: str = "its login") -> Any:
        """Wait on the client, within ``limit`` seconds of its time in all (the server's waits not counted)."""
        rec = client.pending
        rec.enter("client")
        try:
            async with asyncio.timeout(max(0.001, limit - rec.client_time)):  # no task of its own to leak
                return await aw
        except TimeoutError:
            raise LoginRefused(errors.OperationalError(
                f"The client took longer than {limit:g} s over {which}; the connection was closed", code="DP718",
                hint="connect again and answer promptly (a client that waits for a password should ask for it first)",
            )) from None  # fmt: skip
        finally:
            rec.enter("server")

    async def _flush(self, client: _Client, quiet: bool = False) -> None:
        if not client.out:
            return
        data, client.out = b"".join(client.out), []
        try:
            client.writer.write(data)
            async with asyncio.timeout(self.write_timeout):
                await client.writer.drain()
        except Exception:
            if not quiet:
                raise

    async def _login_flush(self, client: _Client) -> None:
        await self._from_client(client, self._flush(client), self.login_timeout)

    async def _read(self, client: _Client, limit: int = wire.MAX_MESSAGE) -> tuple[bytes, bytes]:
        head = await client.reader.readexactly(5)
        kind, n = head[:1], struct.unpack("!i", head[1:])[0]
        if n < 4 or n > limit or (kind in (b"Q", b"P") and n > wire.MAX_QUERY + 4096):
            raise wire.ProtocolViolation(f"message length {n} out of range (at most {limit}; statements "
                                         f"at most {wire.MAX_QUERY} bytes)")  # fmt: skip
        return kind, await client.reader.readexactly(n - 4)

    async def _startup(self, client: _Client) -> dict[str, str] | None:
        tls_done = False

        def within(aw: Any) -> Any:
            return self._from_client(client, aw, min(self.startup_timeout, self.login_timeout), "its startup message")

        for _ in range(4):
            n = struct.unpack("!i", await within(client.reader.readexactly(4)))[0]
            if n < 8 or n > wire.MAX_STARTUP:
                raise wire.ProtocolViolation("startup packet length out of range")
            payload = await within(client.reader.readexactly(n - 4))
            code = struct.unpack("!i", payload[:4])[0]
            if code == wire.SSL_REQUEST and not tls_done:
                if self.tls is None:
                    client.writer.write(b"N")
                    continue
                client.writer.write(b"S")
                await within(client.writer.drain())
                await within(client.writer.start_tls(self.tls))
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
                await self._flush(client, quiet=True)
                return None
            fields = payload[4:].split(b"\x00")
            try:
                words = [f.decode("utf-8") for f in fields]
            except UnicodeDecodeError as e:
                raise wire.ProtocolViolation("startup parameters are not UTF-8") from e
            params = dict(zip(words[0:-1:2], words[1::2]))
            client.pending.started = True
            if not params.get("user"):
                client.send(wire.error("28000", "no user name in the startup message", severity="FATAL"))
                await self._flush(client, quiet=True)
                return None
            return params
        raise wire.ProtocolViolation("too many startup requests")

    def _cancel(self, pid: int, secret: int) -> None:
        """A CancelRequest: the named session's running statement stops, unless it is past its debit (as
        PostgreSQL ignores a cancel that arrives too late)."""
        entry = self._sessions.get(pid)
        if entry is not None and hmac.compare_digest(struct.pack("!i", entry[0]), struct.pack("!i", secret)):
            run = entry[1].running
            if run is not None and (run.worker is None or not run.worker.done()):
                run.cancel()

    async def _authenticate(self, client: _Client, params: dict[str, str]) -> tuple[str, str] | None:
        user = params["user"]

        def lookup():
            with self._admin_lock:
                return logins.lookup(self._admin.con, user)

        found = await asyncio.get_running_loop().run_in_executor(self._auth_pool, lookup)
        verifier = found[0] if found else scram.fake_verifier(user, self._secret)
        client.send(wire.auth(10, wire.cstr(scram.MECHANISM) + b"\x00"))
        await self._login_flush(client)
        kind, payload = await self._from_client(client, self._read(client, wire.MAX_AUTH_MESSAGE), self.login_timeout)
        if kind != b"p":
            raise wire.ProtocolViolation("expected a SASLInitialResponse")
        r = wire.Reader(payload)
        mechanism = r.string()
        length = r.int32()
        first = r.raw(length).decode("utf-8", "replace") if length >= 0 else ""
        exchange = scram.ServerExchange(verifier, real=found is not None)
        try:
            if mechanism != scram.MECHANISM:
                raise scram.ScramError(f"unsupported SASL mechanism {mechanism!r}")
            server_first = exchange.first(first)
        except scram.ScramError:  # no password was tried: answered at once
            return await self._login_failed(client, user)
        client.send(wire.auth(11, server_first.encode("utf-8")))
        await self._login_flush(client)
        kind, payload = await self._from_client(client, self._read(client, wire.MAX_AUTH_MESSAGE), self.login_timeout)
        if kind != b"p":
            raise wire.ProtocolViolation("expected a SASLResponse")
        # The proof is here: it is checked in one of the name's turns (see dpgate.server.guard)
        client.pending.enter("turn", user)
        turn = await self.guard.turn(user, client.group)
        try:
            client.pending.enter("server")
            try:
                final = exchange.final(payload.decode("utf-8", "replace"))
            except scram.ScramError:
                delay = self.guard.failed(turn)  # the turn stays taken for the delay, whatever happens here
                client.pending.enter("failed")
                await asyncio.sleep(delay)
                return await self._login_failed(client, user)
            self.guard.succeeded(turn)
        finally:
            self.guard.abandon(turn)
        client.send(wire.auth(12, final.encode("utf-8")))
        client.send(wire.auth(0))
        return user, found[1]

    async def _login_failed(self, client: _Client, user: str) -> None:
        client.send(wire.error("28P01", f'password authentication failed for user "{user}"', severity="FATAL"))
        await self._flush(client, quiet=True)
        return None

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


def tls_context(cert: str, key: str) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as e:  # missing, a directory, not PEM, or a key that does not match
        reason = e.strerror if isinstance(e, OSError) and e.strerror else (getattr(e, "reason", None) or str(e))
        raise errors.ProgrammingError(
            f"The TLS certificate {cert!r} and key {key!r} cannot be used: {reason}", code="DP721",
            hint="give PEM files: the certificate (chain) and its private key, readable by this user",
        ) from None  # fmt: skip
    return ctx


def run(path: str, *, host: str = "127.0.0.1", port: int = 5433, tls: ssl.SSLContext | None = None,
        ready: Any = None, **kw: Any) -> None:  # fmt: skip
    """Serve until interrupted (SIGINT / SIGTERM); ``ready(server)`` is called once it listens."""
    import signal

    async def main():
        server = Server(path, host=host, port=port, tls=tls, **kw)
        try:
            await server.start()
        except BaseException:  # the file is let go at once (a refused --port must not hold its lock)
            server.close()
            raise
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
