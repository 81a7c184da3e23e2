"""Connections to ``dpgate web`` under hostile load: the server's connection slots and client timeouts.

HTTP has no login per connection, so every open connection holds one of the slots that ``dpgate
serve`` gives connections still logging in (``dpgate.server.guard.PreLogin``: ``max_pending`` in
all, ``per_group`` per address group, with the same address groups: loopback split by the local
user owning the client's socket). A newcomer is never turned away for want of a slot: the
connection that has given least away is closed instead — a failed login waiting out its delay,
then one that has sent nothing since it connected or since its last answer (an idle socket, or a
browser's idle keep-alive connection, which it reopens when it needs one), then a client that
has kept the server waiting half a second or more (a slowloris), ...

While the server waits on its client, the client has ``idle_timeout`` seconds to begin a request
and ``request_timeout`` seconds (its own time, counted as ``dpgate serve`` counts a login's) to
send it whole, head and body; h11 bounds a request's head to 16 KB. Once a request is whole the
time is the server's: statements are bounded by their own time limits (``dpgate.server.running``),
and a response is abandoned after ``response_timeout`` seconds. A response the client stops
reading is abandoned after ``read_timeout`` seconds in which it took nothing (what waits in the
transport's buffer and, on Linux, in the socket's kernel buffer did not shrink: the kernel's
buffer alone holds megabytes, which a slow reader drains for a while): what it did not read
would otherwise stay in the connection's buffer for as long as the client keeps its socket open
(a closing connection still waits to send it all), up to a result's cap per connection.
Time spent sending a response is not the client's: its wait for the next request starts when
the response has gone out.
"""

from __future__ import annotations

import asyncio
import dataclasses
import struct
import time
from typing import Any

try:  # the bytes a socket's kernel buffer still holds unacknowledged (Linux; elsewhere only our own buffer)
    import fcntl
    import termios

    _OUTQ: int | None = termios.TIOCOUTQ
except (ImportError, AttributeError):  # pragma: no cover - not Linux
    _OUTQ = None

from uvicorn.protocols.http.h11_impl import H11Protocol

from dpgate.server.guard import LOOPBACK, Pending, PreLogin, address_group
from dpgate.server.peer import loopback_uid


@dataclasses.dataclass(frozen=True)
class ConnectionLimits:
    idle_timeout: float = 5.0  # as dpgate serve's startup_timeout
    request_timeout: float = 10.0  # as dpgate serve's login_timeout
    response_timeout: float = 900.0  # a statement's limit, then time to send its answer
    read_timeout: float = 10.0  # a response the client takes nothing of for this long is abandoned
    max_connections: int = 256
    per_group: int = 64


class Connections:
    """The open connections of one ``dpgate web`` server, by client address, in their slots."""

    def __init__(self, limits: ConnectionLimits = ConnectionLimits()):
        self.limits = limits
        self.slots = PreLogin(limits.max_connections, limits.per_group)
        self._by_client: dict[Any, Pending] = {}
        self.closed_idle = 0  # connections closed for their client's time (tests and logs read it)
        self.closed_unread = 0  # connections closed because their client stopped reading a response

    def __len__(self) -> int:
        return len(self._by_client)

    def record(self, client: Any) -> Pending | None:
        """The slot of the connection from ``client`` (the ASGI scope's ``client``), if it is open."""
        return self._by_client.get(tuple(client) if client else None)

    def group(self, client: Any) -> str:
        rec = self.record(client)
        return rec.group if rec is not None else address_group(str(client[0]) if client else "")

    def protocol(self) -> type[H11Protocol]:
        """uvicorn's HTTP/1.1 protocol, holding a slot of these connections and timing its client."""
        return type("GuardedH11Protocol", (GuardedH11Protocol,), {"guarded": self})


def _group(transport: Any) -> str:
    peer, local = transport.get_extra_info("peername"), transport.get_extra_info("sockname")
    host = peer[0] if isinstance(peer, tuple) else str(peer)
    group = address_group(host)
    if group == LOOPBACK and isinstance(peer, tuple) and isinstance(local, tuple):
        group = address_group(host, loopback_uid(local[:2], peer[:2]))
    return group


class GuardedH11Protocol(H11Protocol):
    """One connection: its slot, its client's time, and its response's time (module docstring)."""

    guarded: Connections

    def connection_made(self, transport) -> None:  # type: ignore[override]
        self._stall: asyncio.TimerHandle | None = None
        self._unsent = 0
        super().connection_made(transport)
        conns = self.guarded
        self.slot, victims = conns.slots.admit(_group(transport), None, self)
        self.slot.enter("client")
        conns._by_client[tuple(self.client) if self.client else None] = self.slot
        for victim in victims:
            victim.writer.evict()
        self._deadline: asyncio.TimerHandle | None = None
        self._watch()

    def connection_lost(self, exc: Exception | None) -> None:
        self._leave()
        super().connection_lost(exc)

    def evict(self) -> None:
        """Closed to make room for a newer connection."""
        self._leave()
        self.transport.abort()

    def _leave(self) -> None:
        conns = self.guarded
        conns.slots.leave(self.slot)
        key = tuple(self.client) if self.client else None
        if conns._by_client.get(key) is self.slot:
            del conns._by_client[key]
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        if self._stall is not None:
            self._stall.cancel()
            self._stall = None

    def data_received(self, data: bytes) -> None:
        if self.slot.state == "client" and not self.slot.started:
            self.slot.started = True
            self._watch()
        super().data_received(data)
        cycle = self.cycle
        if self.slot.state == "client" and cycle is not None and not cycle.more_body and not cycle.response_complete:
            self.slot.enter("server")  # the request is whole: the time is the server's now
            self._watch()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            # a new wait on the client: it has sent nothing of its next request yet
            self.slot.enter("client")
            self.slot.started, self.slot.client_time = False, 0.0
            self._watch()

    # -- a response the client does not read ---------------------------------------------------------
    def pause_writing(self) -> None:
        """The transport holds more than its high-water mark unsent: the client must take some of it
        within ``read_timeout`` seconds."""
        super().pause_writing()
        self._unsent = self._not_taken()
        self._arm_stall()

    def _not_taken(self) -> int:
        """Bytes sent that the client has not taken yet: the transport's buffer and the socket's."""
        n = self.transport.get_write_buffer_size()
        sock = self.transport.get_extra_info("socket")
        if _OUTQ is not None and sock is not None:
            try:
                n += struct.unpack("i", fcntl.ioctl(sock.fileno(), _OUTQ, b"\0\0\0\0"))[0]
            except (OSError, ValueError):  # closed meanwhile, or not a TCP socket
                pass
        return n

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._stall is not None:
            self._stall.cancel()
            self._stall = None

    def _arm_stall(self) -> None:
        if self._stall is not None:
            self._stall.cancel()
        self._stall = self.loop.call_later(self.guarded.limits.read_timeout, self._stalled)

    def _stalled(self) -> None:
        self._stall = None
        if self.transport.get_write_buffer_size() == 0:
            return
        unsent = self._not_taken()
        if unsent < self._unsent:  # the client took some: another period
            self._unsent = unsent
            self._arm_stall()
            return
        self.guarded.closed_unread += 1
        self._leave()
        self.transport.abort()  # what it did not read is dropped (close() would wait to send it)

    # -- the client's time ---------------------------------------------------------------------------
    def _watch(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        limits, slot = self.guarded.limits, self.slot
        if slot.state == "client":
            left = (limits.request_timeout if slot.started else limits.idle_timeout) - slot.client_wait()
        elif slot.state == "server":
            left = limits.response_timeout - (time.monotonic() - slot.since)
        else:  # a login waiting for its turn, or out its failure's delay: the guard bounds those
            left = limits.request_timeout
        self._deadline = self.loop.call_later(max(left, 0.0) + 0.01, self._check)

    def _check(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        limits, slot = self.guarded.limits, self.slot
        if slot.state == "client" and not slot.started and self.transport.get_write_buffer_size():
            slot.since = time.monotonic()  # the last response is still going out: not the client's time
            over = False
        elif slot.state == "client":
            over = slot.client_wait() > (limits.request_timeout if slot.started else limits.idle_timeout)
        elif slot.state == "server":
            over = time.monotonic() - slot.since > limits.response_timeout
        else:
            over = False
        if over:
            self.guarded.closed_idle += 1
            self._leave()
            self.transport.abort()
        else:
            self._watch()
