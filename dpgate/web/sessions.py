"""Signed-in browsers: a session per sign-in, kept in memory, ended by idleness, age or sign-out.

A session is what one sign-in opened: the login and its role, the ``dpgate.server.session.Session``
it runs on (an analyst's ``Gateway``, whose name is the login's; or an owner's ``Owner``), a
random cookie token and a random CSRF token. It ends after ``idle`` seconds without a request,
``max_age`` seconds after sign-in, or at sign-out; a server restart ends them all. At most
``per_login`` sessions of one login are open (a new sign-in closes that login's least recently
used one: only the password's holder can open them) and ``max_sessions`` in all (past that a
sign-in is refused, DP729, as ``dpgate serve`` refuses connections past ``max_connections``).
A session runs one request at a time (``lock``); its login's statements at once over all its
sessions are bounded by the server's ``Slots``.

On a loopback listener a session belongs to the local user whose connection signed in (``user``:
their address group, when the kernel says who owns the client's socket): a browser sends its
cookies to every port of the host, so another local user's web server on another port receives
the cookie, and could otherwise use it, or set its own in the victim's browser; a request from
another local user's connection finds no session.
"""

from __future__ import annotations

import asyncio
import dataclasses
import secrets
import time
from typing import Any

from dpgate import errors


@dataclasses.dataclass(eq=False)
class WebSession:
    login: str
    role: str
    db: Any  # dpgate.server.session.Session
    token: str = dataclasses.field(default_factory=lambda: secrets.token_urlsafe(32))
    csrf: str = dataclasses.field(default_factory=lambda: secrets.token_urlsafe(32))
    created: float = dataclasses.field(default_factory=time.monotonic)
    seen: float = dataclasses.field(default_factory=time.monotonic)
    lock: asyncio.Lock = dataclasses.field(default_factory=asyncio.Lock)
    ended: bool = False
    user: str | None = None  # the local user (address group) that signed in, on loopback when known


class Sessions:
    """The open sessions of one server (see the module's docstring)."""

    def __init__(self, *, idle: float = 1800.0, max_age: float = 12 * 3600.0, max_sessions: int = 100,
                 per_login: int = 32):  # fmt: skip
        self.idle, self.max_age, self.max_sessions, self.per_login = idle, max_age, max_sessions, per_login
        self._by_token: dict[str, WebSession] = {}

    def __len__(self) -> int:
        return len(self._by_token)

    def find(self, token: str | None, group: str | None = None) -> WebSession | None:
        """The live session of a cookie's token sent from a connection of address group ``group``
        (None when unknown, ended, expired, or another local user's: it stays as it was)."""
        ws = self._by_token.get(token) if token else None
        if ws is None or ws.ended or self.expired(ws) or (ws.user is not None and group != ws.user):
            return None
        ws.seen = time.monotonic()
        return ws

    def expired(self, ws: WebSession, now: float | None = None) -> bool:
        now = time.monotonic() if now is None else now
        return now - ws.seen > self.idle or now - ws.created > self.max_age

    def room_for(self, login: str) -> list[WebSession]:
        """Sessions to end before ``login`` may open another (its least recently used, past ``per_login``);
        DP729 when the server has ``max_sessions`` open of other logins."""
        own = sorted((s for s in self._by_token.values() if s.login == login), key=lambda s: s.seen)
        out = own[: max(0, len(own) - self.per_login + 1)]
        if len(self._by_token) - len(out) >= self.max_sessions:
            raise errors.OperationalError(
                f"This server has {self.max_sessions} sessions open; no more can sign in now", code="DP729",
                hint="sign out of sessions you no longer use (they also end after "
                f"{self.idle / 60:g} minutes without a request), then sign in again",
            )  # fmt: skip
        return out

    def add(self, ws: WebSession) -> None:
        self._by_token[ws.token] = ws

    def remove(self, ws: WebSession) -> None:
        ws.ended = True
        if self._by_token.get(ws.token) is ws:
            del self._by_token[ws.token]

    def stale(self) -> list[WebSession]:
        """The sessions past their idle time or their age (to be closed)."""
        now = time.monotonic()
        return [ws for ws in self._by_token.values() if self.expired(ws, now)]

    def all(self) -> list[WebSession]:
        return list(self._by_token.values())
