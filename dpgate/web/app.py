"""``dpgate web``'s server: the pages, the JSON API they use, and the protections of ``dpgate serve``.

Every statement goes through the signed-in analyst's ``Gateway`` (``dpgate.server.session.Session``,
as over ``dpgate serve``), run as a ``dpgate.server.running.Running``: within its login's
statement slots, its time limits (before the debit; a charged statement runs to its end) and, for
a public statement, the result caps, its rows streamed out of the worker a batch at a time.

What a stranger can do is bounded as on ``dpgate serve``, with the same modules:

- **sign-in**: the password is checked in one of its name's turns, a failure answered after its
  delay (``dpgate.server.guard.LoginGuard``; unknown names do the same work against a fake
  verifier, so timing does not say which names exist);
- **connections**: slots and client timeouts (``dpgate.web.connections``);
- **requests**: a body is at most 64 KB (1 MB for a statement), read as it comes and refused
  past its cap (DP722); a state-changing request (POST) must come from the page's own origin
  (``Origin``), as JSON, and, once signed in, carry the session's CSRF token in a header that a
  cross-site form cannot set (DP724); the session cookie is HttpOnly and SameSite=Strict;
- **sessions** expire (``dpgate.web.sessions``), and on loopback answer only the local user who
  signed in (a browser sends the cookie to every port of the host); on a loopback address the
  ``Host`` must name loopback (a DNS-rebound page is refused);
- **answers**: every page is served with a strict Content-Security-Policy (scripts, styles and
  the charting library from the package only), and every error is JSON with its code and hint,
  never a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hmac
import ipaddress
import json
import logging
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.datastructures import Headers, MutableHeaders
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Route

from dpgate import errors, scram
from dpgate.catalog import logins
from dpgate.catalog.owner import Owner
from dpgate.frontend.dialect import MAX_STATEMENT_BYTES
from dpgate.server import wire
from dpgate.server.guard import LOOPBACK, LoginGuard, LoginRefused
from dpgate.server.queries import QueryLoop, split_statements
from dpgate.server.running import RowStream, Running, Slots
from dpgate.server.session import Session
from dpgate.web import views
from dpgate.web.connections import ConnectionLimits, Connections
from dpgate.web.sessions import Sessions, WebSession

log = logging.getLogger("dpgate.web")

COOKIE = "dpgate_session"
#: The cookie's name over TLS: a browser takes a ``__Host-`` cookie only from a secure page of this very
#: host, Secure, for the path /, so a plain-HTTP service on the host or a sibling domain cannot set one.
TLS_COOKIE = "__Host-dpgate_session"
CSRF_HEADER = "x-csrf-token"
MAX_BODY = 64 * 1024  # a request's body (as dpgate serve's messages before login)
MAX_QUERY_BODY = wire.MAX_QUERY  # a statement's request: its text is at most MAX_STATEMENT_BYTES
STATIC = Path(__file__).resolve().parent / "static"
#: The files the pages load (nothing else under static/ is served), and their types.
FILES = {
    "app.css": "text/css", "app.js": "text/javascript", "charts.js": "text/javascript",
    "analyst.js": "text/javascript", "owner.js": "text/javascript",
    "vendor/d3.min.js": "text/javascript", "vendor/plot.umd.min.js": "text/javascript",
}  # fmt: skip
#: Sent with every response: the page runs only the package's scripts and styles, in no frame.
SECURITY_HEADERS = {
    "content-security-policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "cross-origin-opener-policy": "same-origin",
    "cross-origin-resource-policy": "same-origin",
}
#: HTTP status per error class (codes that say more get their own below).
STATUS = {errors.PolicyError: 403, errors.BudgetExceededError: 403, errors.InternalError: 500,
          errors.OperationalError: 409, errors.Error: 400}  # fmt: skip
STATUS_BY_CODE = {"DP712": 401, "DP723": 401, "DP724": 403, "DP725": 404, "DP722": 413, "DP714": 413,
                  "DP716": 429, "DP715": 503, "DP708": 503, "DP729": 503, "DP709": 500}  # fmt: skip


def error_response(e: errors.Error, status: int | None = None) -> JSONResponse:
    """An error as the API answers it: its code, class, message and hint (never a traceback)."""
    if status is None:
        status = STATUS_BY_CODE.get(e.code) or next(s for cls, s in STATUS.items() if isinstance(e, cls))
    body = {"code": e.code, "error": type(e).__name__, "message": e.message, "hint": e.hint or ""}
    return JSONResponse(body, status, headers={"cache-control": "no-store"})


def _refused(message: str, hint: str) -> errors.ProgrammingError:
    return errors.ProgrammingError(message, code="DP724", hint=hint)


class JsonRowStream(RowStream):
    """A public statement's rows as JSON values; the caps count the bytes of their JSON as sent, in
    UTF-8 (counted in characters, text of emoji or CJK would send three or four times the cap)."""

    def encode(self, row: tuple) -> tuple[Any, int]:
        values = views.plain(list(row))
        return values, len(json.dumps(values, ensure_ascii=False, separators=(",", ":")).encode("utf-8")) + 1


class WebRunning(Running):
    stream_type = JsonRowStream


class _Work:
    """What a ``Running`` runs for a page: one call on a session, stopped through the session."""

    def __init__(self, session: Session, call: Callable[[], Any], *, statement: bool):
        self.session, self.call = session, call
        self.gateway = session.gateway if statement else None  # a statement's public rows are streamed

    def run(self, sql: str, params: Any) -> Any:
        return self.call()

    def interrupt(self) -> bool:
        return self.session.interrupt()


class WebServer:
    """One database served to browsers (see the module's docstring)."""

    def __init__(self, path: str, *, host: str = "127.0.0.1", port: int = 8765, tls: bool = False,
                 guard: LoginGuard | None = None, test_seed: int | None = None, workers: int = 64,
                 statement_timeout: float = 600.0, public_timeout: float = 60.0, max_result_rows: int = 10_000,
                 max_result_bytes: int = 16 * 2**20, statements_per_login: int = 4, idle: float = 1800.0,
                 limits: ConnectionLimits = ConnectionLimits(), max_sessions: int = 100,
                 max_sessions_per_login: int = 32):  # fmt: skip
        self.path = os.path.abspath(path)
        self.host, self.port, self.tls = host, port, tls
        self.cookie = TLS_COOKIE if tls else COOKIE
        self.guard = guard or LoginGuard()
        self.test_seed = test_seed
        self.statement_timeout, self.public_timeout = statement_timeout, public_timeout
        self.max_result_rows, self.max_result_bytes = max_result_rows, max_result_bytes
        self.slots = Slots(statements_per_login)
        self.sessions = Sessions(idle=idle, max_sessions=max_sessions, per_login=max_sessions_per_login)
        if limits.response_timeout < statement_timeout + 60:  # a statement's answer may take its whole limit
            limits = dataclasses.replace(limits, response_timeout=statement_timeout + 300)
        self.connections = Connections(limits)
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dpgate-web")
        # sign-ins have threads of their own, as on dpgate serve: long statements never block one
        self._auth_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="dpgate-web-login")
        self._admin = Owner(self.path, create=False, read_only=True)  # holds the file for the server's life
        logins.ensure(self._admin.con)
        self._secret = logins.server_secret(self._admin.con)
        self._reaper: asyncio.Task | None = None
        self.app = self._build()

    # -- the application ------------------------------------------------------------------------------
    def _build(self) -> Any:
        api = self._api
        routes = [
            Route("/", self.page, methods=["GET"]),
            Route("/static/{name:path}", self.static, methods=["GET"]),
            Route("/favicon.ico", lambda request: Response(status_code=204), methods=["GET"]),  # none: no 404 logged
            Route("/api/login", api(self.login), methods=["POST"]),
            Route("/api/logout", api(self.logout), methods=["POST"]),
            Route("/api/session", api(self.session), methods=["GET"]),
            Route("/api/query", api(self.query), methods=["POST"]),
            Route("/api/budget", api(self.budget), methods=["GET"]),
            Route("/api/history", api(self.history), methods=["GET"]),
            Route("/api/tables", api(self.tables), methods=["GET"]),
            Route("/api/owner/overview", api(self.overview), methods=["GET"]),
            Route("/api/owner/quality/{name}", api(self.quality), methods=["GET"]),
            Route("/api/owner/leaves/{name}", api(self.leaves), methods=["GET"]),
        ]

        async def not_found(request: Request, exc: HTTPException) -> Response:
            what = "method" if exc.status_code == 405 else "page or API route"
            return error_response(errors.ProgrammingError(
                f"No such {what}: {request.method} {request.url.path}", code="DP725",
                hint="the page is at /; the API: POST /api/login, /api/query, /api/logout; GET /api/session, "
                "/api/budget, /api/history, /api/tables, /api/owner/overview",
            ), exc.status_code if exc.status_code in (404, 405) else 404)  # fmt: skip

        @contextlib.asynccontextmanager
        async def lifespan(app):
            self._reaper = asyncio.create_task(self._reap())
            try:
                yield
            finally:
                self._reaper.cancel()
                for ws in self.sessions.all():
                    await self._end(ws)

        async def failed(request: Request, exc: Exception) -> Response:
            log.error("request failed: %s %s", request.method, request.url.path, exc_info=exc)
            return error_response(errors.InternalError(
                "Internal error in dpgate web; this is a bug in dpgate, please report it", code="DP709",
                hint="the server's log has the details",
            ))  # fmt: skip

        app = Starlette(routes=routes, exception_handlers={HTTPException: not_found, Exception: failed},
                        lifespan=lifespan)  # fmt: skip
        return _Guard(app, self)

    def _api(self, handler: Callable) -> Callable:
        """A route that answers JSON: dpgate's errors with their code and hint, anything else as DP709."""

        async def endpoint(request: Request) -> Response:
            try:
                out = await handler(request)
            except errors.Error as e:
                return error_response(e)
            except Exception:
                log.exception("request failed: %s %s", request.method, request.url.path)
                return error_response(errors.InternalError(
                    "Internal error in dpgate web; this is a bug in dpgate, please report it", code="DP709",
                    hint="the server's log has the details; nothing was charged unless the answer said so",
                ))  # fmt: skip
            if isinstance(out, Response):
                return out
            return JSONResponse(out, headers={"cache-control": "no-store"})

        return endpoint

    # -- pages ------------------------------------------------------------------------------------------
    async def page(self, request: Request) -> Response:
        return FileResponse(STATIC / "index.html", media_type="text/html; charset=utf-8",
                            headers={"cache-control": "no-cache"})  # fmt: skip

    async def static(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name not in FILES:
            raise HTTPException(404)
        return FileResponse(STATIC / name, media_type=FILES[name] + "; charset=utf-8",
                            headers={"cache-control": "no-cache"})  # fmt: skip

    # -- signing in -------------------------------------------------------------------------------------
    async def login(self, request: Request) -> Response:
        body = await read_json(request, MAX_BODY)
        name, password = body.get("name"), body.get("password")
        if not isinstance(name, str) or not isinstance(password, str) or not name or not password:
            raise _bad_body('POST /api/login takes {"name": "...", "password": "..."}')
        slot = self.connections.record(request.client)
        group = self.connections.group(request.client)
        if slot is not None:
            slot.enter("turn", name)
        try:
            turn = await self._turn_unless_gone(request, name, group)
        except LoginRefused as refused:
            raise refused.error from None
        try:
            if slot is not None:
                slot.enter("server")
            role = await asyncio.get_running_loop().run_in_executor(self._auth_pool, self._check, name, password)
            if role is None:
                delay = self.guard.failed(turn)  # the turn stays taken for the delay, whatever happens here
                if slot is not None:
                    slot.enter("failed")
                await asyncio.sleep(delay)
                raise errors.OperationalError(
                    "Sign-in failed: the name or the password is wrong", code="DP712",
                    hint="the data owner sets logins (dpgate login DB NAME --password-stdin); after failures "
                    "each attempt waits longer",
                )  # fmt: skip
            self.guard.succeeded(turn)
        finally:
            self.guard.abandon(turn)
            if slot is not None and slot.state != "client":
                slot.enter("server")
        previous = self.sessions.find(request.cookies.get(self.cookie), group)
        if previous is not None:  # this browser signs in again: its old session ends
            await self._end(previous)
        for old in self.sessions.room_for(name):
            await self._end(old)
        db = await asyncio.get_running_loop().run_in_executor(
            self.pool, lambda: Session(self.path, name, role, test_seed=self.test_seed))
        if db.gateway is not None:
            db.gateway.session.values["intervals"] = False  # the intervals travel beside the rows
        try:
            for old in self.sessions.room_for(name):  # other sign-ins may have come meanwhile
                await self._end(old)
        except errors.Error:
            await asyncio.get_running_loop().run_in_executor(self.pool, db.close)
            raise
        # on loopback the session is the signing-in local user's: their browser sends its cookie to any
        # port of the host, where another user's server may listen (see dpgate.web.sessions)
        ws = WebSession(name, role, db, user=group if group.startswith(f"{LOOPBACK} uid ") else None)
        self.sessions.add(ws)
        response = JSONResponse({"name": name, "role": role, "csrf": ws.csrf}, headers={"cache-control": "no-store"})
        response.set_cookie(self.cookie, ws.token, max_age=int(self.sessions.max_age), path="/", secure=self.tls,
                            httponly=True, samesite="strict")  # fmt: skip
        return response

    async def _turn_unless_gone(self, request: Request, name: str, group: str) -> Any:
        """A turn for ``name`` (``LoginGuard.turn``), unless the client goes away while it waits: an
        attempt waiting for its turn has learned nothing, and a client that hangs up after sending must
        not leave it queued (thousands a minute, each checked in its turn once the client is gone)."""
        waiting = asyncio.ensure_future(self.guard.turn(name, group))

        async def gone() -> None:
            while (await request.receive())["type"] != "http.disconnect":
                pass

        watcher = asyncio.ensure_future(gone())
        try:
            await asyncio.wait({waiting, watcher}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            waiting.cancel()
            raise
        finally:
            watcher.cancel()
        if waiting.done():
            return waiting.result()
        waiting.cancel()
        try:
            self.guard.abandon(await waiting)  # given a turn just as the client went: hand it back
        except asyncio.CancelledError:
            pass
        raise LoginRefused(errors.OperationalError("The client went away while its sign-in waited for its turn",
                                                   code="DP716", hint="nothing was checked"))  # fmt: skip

    def _check(self, name: str, password: str) -> str | None:
        """The login's role when ``password`` is its password, else None (the same work for unknown names).
        A verifier stored with more iterations than ``scram.MAX_ITERATIONS`` (from before the cap) is not
        run: anyone could make the server run it at each attempt; the login answers as an unknown name."""
        with self._admin_con() as con:
            found = logins.lookup(con, name)
        if found and scram.parse_verifier(found[0])[0] > scram.MAX_ITERATIONS:
            log.warning("login %r cannot sign in to dpgate web: its verifier asks for more than %d PBKDF2 "
                        "iterations (set its password again)", name, scram.MAX_ITERATIONS)  # fmt: skip
            found = None
        verifier = found[0] if found else scram.fake_verifier(name, self._secret)
        return found[1] if scram.check_password(verifier, password, real=found is not None) else None

    @contextlib.contextmanager
    def _admin_con(self):
        con = self._admin.con.cursor()  # a cursor per thread: the admin handle is shared
        try:
            yield con
        finally:
            con.close()

    async def logout(self, request: Request) -> dict:
        ws = self._session(request, write=True)
        await self._end(ws)
        return {"signed_out": ws.login}

    async def session(self, request: Request) -> dict:
        ws = self._session(request)
        return {"name": ws.login, "role": ws.role, "csrf": ws.csrf}

    def _session(self, request: Request, *, write: bool = False, role: str | None = None) -> WebSession:
        ws = self.sessions.find(request.cookies.get(self.cookie), self.connections.group(request.client))
        if ws is None:
            raise errors.InterfaceError("Not signed in, or the session has ended", code="DP723",
                                        hint="sign in again (POST /api/login); a session ends after "
                                        f"{self.sessions.idle / 60:g} minutes without a request")  # fmt: skip
        if write and not hmac.compare_digest(request.headers.get(CSRF_HEADER, "").encode(), ws.csrf.encode()):
            raise _refused("This request does not carry the session's CSRF token", "send the token that sign-in "
                           f"answered (GET /api/session has it) in the {CSRF_HEADER} header")  # fmt: skip
        if role == "analyst" and ws.role != "analyst":
            raise errors.ProgrammingError(
                f"{ws.login} is an owner login; owners see the owner page, analysts ask SQL", code="DP702",
                hint="sign in with an analyst's login to ask questions; the owner page shows budgets and releases",
            )  # fmt: skip
        if role == "owner" and ws.role != "owner":
            raise errors.PolicyError(f"This is the owner's page; you are signed in as analyst {ws.login}",
                                     code="DP713", hint="the data owner signs in with an owner login")  # fmt: skip
        return ws

    async def _end(self, ws: WebSession) -> None:
        """End a session: no new request finds it; its running request ends first, then it is closed."""
        self.sessions.remove(ws)
        async with ws.lock:
            await asyncio.get_running_loop().run_in_executor(self.pool, ws.db.close)

    async def _reap(self) -> None:
        while True:
            await asyncio.sleep(min(15.0, self.sessions.idle / 4))
            for ws in self.sessions.stale():
                try:
                    await self._end(ws)
                except Exception:  # noqa: BLE001 - the next round tries again; the reaper must go on
                    log.exception("closing an expired session failed")

    # -- an analyst ------------------------------------------------------------------------------------
    async def query(self, request: Request) -> dict:
        ws = self._session(request, write=True, role="analyst")
        body = await read_json(request, MAX_QUERY_BODY)
        sql = body.get("sql")
        if not isinstance(sql, str) or not sql.strip():
            raise _bad_body('POST /api/query takes {"sql": "SELECT ..."}')
        if len(sql) > MAX_STATEMENT_BYTES or len(sql.encode("utf-8", "surrogatepass")) > MAX_STATEMENT_BYTES:
            raise errors.ParseError(f"The statement is longer than {MAX_STATEMENT_BYTES:,} bytes", code="DP259",
                                    hint="send a shorter statement")  # fmt: skip
        parts = await asyncio.to_thread(split_statements, sql) if len(sql) > 4096 else split_statements(sql)
        if len(parts) != 1:
            raise errors.ProgrammingError(
                f"A run takes one statement; this text has {len(parts)}", code="DP730",
                hint="select the statement to run (the page runs the selection), or run them one after another: "
                "settings such as SET dp_epsilon = 0.5 stay for the session's next statements",
            )  # fmt: skip
        gateway = ws.db.gateway
        result, streamed, release = await self._run(ws, request, lambda: gateway.run(parts[0]), statement=True,
                                                    keep_slot=True)  # fmt: skip
        try:  # tens of MB of JSON for a public result at its caps: not on the event loop
            body = await asyncio.get_running_loop().run_in_executor(
                self.pool, lambda: _json_bytes(views.answer(result, streamed)))
        except BaseException:
            release()
            raise
        return Answer(body, release)

    async def budget(self, request: Request) -> dict:
        ws = self._session(request)
        if ws.role == "owner":
            out, _ = await self._run(ws, request, lambda: views.analysts(ws.db.owner))
            return out
        out, _ = await self._run(ws, request, lambda: views.budget(ws.db.gateway))
        return out

    async def history(self, request: Request) -> dict:
        ws = self._session(request, role="analyst")
        out, _ = await self._run(ws, request, lambda: views.history(ws.db.gateway))
        return out

    async def tables(self, request: Request) -> dict:
        ws = self._session(request, role="analyst")
        out, _ = await self._run(ws, request, lambda: views.tables(ws.db.gateway))
        return out

    # -- the owner -------------------------------------------------------------------------------------
    async def overview(self, request: Request) -> dict:
        ws = self._session(request, role="owner")
        out, _ = await self._run(ws, request, lambda: views.overview(ws.db.owner))
        return out

    async def quality(self, request: Request) -> dict:
        ws = self._session(request, role="owner")
        name = request.path_params["name"]
        out, _ = await self._run(ws, request, lambda: views.quality(ws.db.owner, name))
        return out

    async def leaves(self, request: Request) -> dict:
        ws = self._session(request, role="owner")
        name = request.path_params["name"]
        out, _ = await self._run(ws, request, lambda: views.leaves(ws.db.owner, name))
        return out

    # -- running ---------------------------------------------------------------------------------------
    async def _run(self, ws: WebSession, request: Request, call: Callable[[], Any], *, statement: bool = False,
                   keep_slot: bool = False) -> tuple:  # fmt: skip
        """``call`` in a worker thread as a ``Running`` of the session: one at a time per session, in its
        login's slots, within the time limits; a statement's public rows come through the row stream,
        within the result caps. Returns its value and the streamed rows (None when nothing streamed).

        With ``keep_slot``, the login's slot stays taken after the call, until the third value returned
        (``release``) is called: once its answer is sent. An answer the client does not read then holds
        a slot, so a login holds at most ``--statements-per-login`` answers in memory at once."""
        gone = asyncio.Event()

        async def watch() -> None:  # the browser going away stops a statement not yet charged
            while (await request.receive())["type"] != "http.disconnect":
                pass
            gone.set()

        watcher = asyncio.create_task(watch())
        try:
            async with ws.lock:
                if ws.ended:
                    raise errors.InterfaceError("The session has ended", code="DP723", hint="sign in again")
                run = WebRunning(_Work(ws.db, call, statement=statement), "", None,
                                 statement_timeout=self.statement_timeout, public_timeout=self.public_timeout,
                                 max_rows=self.max_result_rows, max_bytes=self.max_result_bytes,
                                 gone=gone.is_set)  # fmt: skip
                await self.slots.acquire(ws.login, lambda: QueryLoop._slot_refusal(self, run, ws.login))
                release = _once(lambda: self.slots.release(ws.login))
                worker = run.start(self.pool)
                if not keep_slot:
                    worker.add_done_callback(lambda _: release())
                try:
                    rows: list = []
                    while (item := await run.stream.next(run.worker)) is not None:
                        if item[0] == "rows":
                            rows.extend(item[1])
                    try:
                        value = await run.result()
                    except errors.Error:
                        raise
                    except Exception as e:
                        log.exception("statement failed")
                        raise errors.InternalError(
                            "Internal error in dpgate web; this is a bug in dpgate, please report it", code="DP709",
                            hint="the server's log has the details; nothing was charged unless the answer said so",
                        ) from e  # fmt: skip
                except BaseException:
                    worker.add_done_callback(lambda _: release())  # no answer to send: free once the worker ends
                    raise
                streamed = rows if run.stream.columns is not None else None
                return (value, streamed, release) if keep_slot else (value, streamed)
        finally:
            watcher.cancel()

    # -- lifecycle -------------------------------------------------------------------------------------
    def close(self) -> None:
        for ws in self.sessions.all():
            self.sessions.remove(ws)
            ws.db.interrupt()
            ws.db.close()
        self.pool.shutdown(wait=True, cancel_futures=True)
        self._auth_pool.shutdown(wait=True, cancel_futures=True)
        self._admin.close()

    def logins(self) -> list[tuple[str, str]]:
        with self._admin_con() as con:
            return logins.names(con)


def _once(call: Callable[[], None]) -> Callable[[], None]:
    done = False

    def once() -> None:
        nonlocal done
        if not done:
            done = True
            call()

    return once


def _json_bytes(value: Any) -> bytes:
    """As Starlette's JSONResponse renders a value."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":")).encode("utf-8")


class Answer(Response):
    """A statement's JSON answer, sent a part at a time: each part waits until the client has taken
    the one before, so an answer it does not read stays here, where its login's slot counts it, not
    in the connection's buffer. ``done`` (the slot's release) is called once it is sent or the
    connection is gone (``dpgate.web.connections`` closes one whose client stops reading)."""

    media_type = "application/json"
    PART = 256 * 1024

    def __init__(self, body: bytes, done: Callable[[], None]):
        super().__init__(body, headers={"cache-control": "no-store"})
        self.done = done

    async def __call__(self, scope, receive, send) -> None:
        try:
            await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
            body = memoryview(self.body)
            for at in range(0, max(len(body), 1), self.PART):
                more = at + self.PART < len(body)
                await send({"type": "http.response.body", "body": bytes(body[at : at + self.PART]), "more_body": more})
        finally:
            self.done()


def _bad_body(what: str) -> errors.ProgrammingError:
    return errors.ProgrammingError(f"The request's body is not what this route takes: {what}", code="DP726",
                                   hint=what)  # fmt: skip


def _too_large(cap: int) -> errors.ProgrammingError:
    return errors.ProgrammingError(f"The request's body is larger than this route takes ({cap:,} bytes)",
                                   code="DP722", hint="send a shorter body; a statement may be up to "
                                   f"{MAX_STATEMENT_BYTES:,} bytes")  # fmt: skip


async def read_json(request: Request, cap: int) -> dict:
    """The request's JSON object, read as it comes and refused past ``cap`` bytes (DP722)."""
    length = request.headers.get("content-length")
    if length is not None and (not length.isdigit() or int(length) > cap):
        raise _too_large(cap)
    chunks, n = [], 0
    try:
        async for chunk in request.stream():
            n += len(chunk)
            if n > cap:
                raise _too_large(cap)
            chunks.append(chunk)
    except ClientDisconnect:  # nobody to answer; not a bug to log with its traceback (anyone can hang up)
        raise _bad_body("a whole body: the client went away before sending it") from None
    try:
        data = json.loads(b"".join(chunks))
    except (ValueError, UnicodeDecodeError, RecursionError):  # arrays nested past the parser's depth too
        raise _bad_body("a JSON object") from None
    if not isinstance(data, dict):
        raise _bad_body("a JSON object")
    try:  # JSON's \ud800 escape parses to a lone surrogate, which no UTF-8 text (a name, a password) holds
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise _bad_body("a JSON object of Unicode text (a lone surrogate such as \\ud800 is not a character)") from None
    return data


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return host.lower() == "localhost" or host.lower().endswith(".localhost")


class _Guard:
    """Before any route: the Host (on a loopback listener, a loopback name: no DNS-rebound page), for
    an API read that a browser says comes from elsewhere, a refusal, and for a state-changing request,
    its Origin and JSON body; after: the security headers."""

    def __init__(self, app: Any, server: WebServer):
        self.app, self.server = app, server

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def secured(message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for k, v in SECURITY_HEADERS.items():
                    headers[k] = v
            await send(message)

        refusal = self.refusal(scope)
        if refusal is not None:
            return await error_response(refusal)(scope, receive, secured)
        await self.app(scope, receive, secured)

    def refusal(self, scope) -> errors.Error | None:
        headers = Headers(scope=scope)
        host = headers.get("host", "")
        name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        if _loopback(self.server.host) and not _loopback(name):
            return _refused(f"This server answers on loopback only, not as {host!r}",
                            "open it as http://127.0.0.1:PORT/ or http://localhost:PORT/")  # fmt: skip
        if scope["method"] in ("GET", "HEAD"):
            # another page of the same site (any port of the host) sends the session cookie with its
            # requests: it cannot read the answers, but could make the server compute them (an owner's
            # quality report reads the source) and keep a session alive; browsers say where a request
            # comes from, and the page's own calls are same-origin
            if scope["path"].startswith("/api/") and headers.get("sec-fetch-site", "same-origin") not in (
                    "same-origin", "none"):  # fmt: skip
                return _refused("The API answers only this server's own page (Sec-Fetch-Site)",
                                "call it from the page, or from a program (which sends no Sec-Fetch-Site)")  # fmt: skip
            return None
        scheme = "https" if self.server.tls else "http"
        if headers.get("origin") != f"{scheme}://{host}" or headers.get("sec-fetch-site", "same-origin") not in (
                "same-origin", "none"):  # fmt: skip
            return _refused("A state-changing request must come from this server's own page (its Origin)",
                            f"send it from {scheme}://{host}/ with an Origin header")  # fmt: skip
        if headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
            return _refused("A state-changing request must send JSON (Content-Type: application/json)",
                            "a cross-site form cannot send JSON; the page's requests do")  # fmt: skip
        return None
