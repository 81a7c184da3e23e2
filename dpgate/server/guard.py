"""Logins under hostile load: failed attempts slow the guesser, and nobody can lock anyone out.

What a stranger can do before logging in is bounded here, for one process serving a team on
one port (often a loopback port, where every local user has the same address).

**Address groups.** Limits count an address *group*: 127.0.0.0/8 and ::1 are one group
(``loopback``: a local program can bind any 127.x.y.z as its source), split by the local user
that owns the client's socket where the kernel says (``dpgate.server.peer``: on a loopback
listener every local client has a loopback address, and users are what tell a colleague from a
stranger on the machine); an IPv6 address counts as its /64 (what one host is usually given),
an IPv4-mapped IPv6 address as its IPv4 address. Rotating source addresses inside a group buys
nothing.

**Turns** (``LoginGuard``). A password proof is checked only inside one of its name's
``per_name`` turns. A right proof hands its turn back at once and logs in; a wrong one keeps
the turn for its failure's delay, and its answer is sent when the delay ends. The turn is kept
by the server's clock, not by the connection: a guesser that closes the connection early, or
whose connection the server closes to make room, frees nothing. So however many connections
and addresses a guesser has, one name is tried at most ``per_name`` times per delay: two per
8 s under a sustained attack (about 21,600 a day), from anywhere. Waiting for a turn happens
after the client sent its proof and before the proof is checked, so a waiting connection has
learned nothing and may be closed to make room. Waiters are served fewest recent failures of
their address group first, then in arrival order: a user on another address than the guesser's
gets the next turn.

**Delays.** A failure's delay is ``delay``, doubled for every ``name_doubling`` recent failures
of the name and for every ``address_doubling`` recent failures of the address group (the longer
of the two), up to ``max_delay``. Recent means an exponential decay over ``decay`` seconds, so a
name under attack stays slow for a while after the attack ends. Unknown names go through the
same exchange, turns and delays, so timing does not tell which names exist.

**No lockout.** Nothing refuses a name or an address. Failures only lengthen the answers to
*failed* attempts and take their name's turns. A right password that finds a free turn for
its name logs in at once, whatever failed before on other names or addresses: a sprayer of
many names, or five typos of a colleague, slow only failures. What a stranger can still do is
take one name's turns by guessing *that* name in parallel. The rightful user then waits for a
turn: at most a delay when the guesser is on another address group, behind the guesser's
waiting connections when both share one (on a loopback listener, everyone). After ``max_wait``
seconds the attempt is refused free (DP716) and may be retried. Nothing that checks passwords
in bounded turns can do better: until its proof is checked, a right attempt looks like any
guess.

**Pre-login slots** (``PreLogin``). Connections that have not logged in yet hold at most
``max_pending`` slots (``per_group`` of one address group). A newcomer is never turned away for
want of a slot. Instead the server closes the pending connection that has cost it the most
for the least: a failed attempt waiting out its delay (its turn stays taken), else one that
has sent nothing since it connected (an idle socket), else a client that has kept the server
waiting half a second or more (a slowloris), else the latest waiter of the name with the most
waiters (a crowd of guesses for one name must not push out logins for others), else the
client waited on longest. A client that answers promptly has been waited on for
milliseconds, so it outlasts idle sockets opened before or after it, unless sockets arrive
faster than ``per_group`` in those milliseconds. The server also
closes a connection whose client has used up ``startup_timeout`` before its startup message,
or ``login_timeout`` in all (time the server owes the client is not counted).
"""

from __future__ import annotations

import asyncio
import dataclasses
import ipaddress
import itertools
import math
import time
from typing import Any

from dpgate import errors

LOOPBACK = "loopback"
#: A pending connection whose client has kept the server waiting this long goes before waiters for a turn.
SLOW_CLIENT = 0.5


def address_group(host: str, uid: int | None = None) -> str:
    """The group a client address counts in (see the module's docstring); ``uid``: the local user
    owning a loopback client's socket, when known."""
    try:
        addr = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return host  # not an IP address (a Unix socket's path): itself
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    if addr.is_loopback:
        return LOOPBACK if uid is None else f"{LOOPBACK} uid {uid}"
    if isinstance(addr, ipaddress.IPv6Address):
        return str(ipaddress.IPv6Network((addr, 64), strict=False))
    return str(addr)


class _Decaying:
    """Failure counts that decay exponentially, for a bounded number of keys."""

    def __init__(self, decay: float, max_keys: int = 50_000):
        self.decay, self.max_keys = decay, max_keys
        self._counts: dict[str, tuple[float, float]] = {}

    def get(self, key: str, now: float) -> float:
        c, t = self._counts.get(key, (0.0, now))
        return c * math.exp(-(now - t) / self.decay) if self.decay > 0 else 0.0

    def add(self, key: str, now: float) -> None:
        self._counts[key] = (self.get(key, now) + 1.0, now)
        if len(self._counts) > self.max_keys:
            # the faded keys first, then the smallest: a name under attack keeps its count, so
            # spraying many other names cannot wash it out
            values = sorted((self.get(k, now), k) for k in self._counts)
            for _, k in values[: len(values) // 2]:
                del self._counts[k]


class LoginRefused(Exception):
    """A login attempt refused before its proof was checked (free; the client may retry)."""

    def __init__(self, error: errors.Error):
        super().__init__(error.message)
        self.error = error


@dataclasses.dataclass(eq=False)
class Turn:
    """One proof check of ``name``: given back at once on success, kept for the delay on failure."""

    name: str
    group: str
    released: bool = False


class LoginGuard:
    """Turns per name and failure delays (see the module's docstring)."""

    def __init__(self, delay: float = 0.5, max_delay: float = 8.0, per_name: int = 2, name_doubling: float = 2.0,
                 address_doubling: float = 10.0, decay: float = 600.0, max_wait: float = 60.0):  # fmt: skip
        self.delay, self.max_delay, self.per_name = delay, max_delay, per_name
        self.name_doubling, self.address_doubling, self.max_wait = name_doubling, address_doubling, max_wait
        self._names = _Decaying(decay)
        self._groups = _Decaying(decay)
        self._busy: dict[str, int] = {}  # turns in use per name
        self._waiters: dict[str, list[tuple[float, int, asyncio.Future]]] = {}
        self._seq = itertools.count()

    # -- delays ----------------------------------------------------------------------------------
    def delay_for(self, name: str, group: str) -> float:
        """How long a failed attempt of ``name`` from ``group`` would wait now (and keep its turn)."""
        if not self.delay:
            return 0.0
        now = time.monotonic()
        doublings = max(self._names.get(name, now) / self.name_doubling,
                        self._groups.get(group, now) / self.address_doubling)  # fmt: skip
        return min(self.delay * 2 ** min(doublings, 64), self.max_delay)

    # -- turns -----------------------------------------------------------------------------------
    def waiting(self, name: str) -> int:
        return len(self._waiters.get(name, ()))

    async def turn(self, name: str, group: str) -> Turn:
        """A turn to check one proof of ``name``; waits while the name's turns are taken (then
        ``LoginRefused`` after ``max_wait`` seconds)."""
        if self._busy.get(name, 0) < self.per_name and not self._waiters.get(name):
            self._busy[name] = self._busy.get(name, 0) + 1
            return Turn(name, group)
        fut = asyncio.get_running_loop().create_future()
        entry = (self._groups.get(group, time.monotonic()), next(self._seq), fut)
        self._waiters.setdefault(name, []).append(entry)
        try:
            await asyncio.wait_for(asyncio.shield(fut), self.max_wait)
        except (asyncio.TimeoutError, asyncio.CancelledError) as e:
            if fut.done() and not fut.cancelled():  # handed a turn just as it gave up: hand it on
                self._release(name)
            else:
                fut.cancel()
                self._drop_waiter(name, entry)
            if isinstance(e, asyncio.CancelledError):
                raise
            raise LoginRefused(errors.OperationalError(
                f"Too many logins for {name!r} are being tried at once; nothing was checked", code="DP716",
                hint=f"try again: each of a name's failed attempts takes one of its {self.per_name} turns for "
                "up to its delay, and someone may be guessing this name's password",
            )) from None  # fmt: skip
        return Turn(name, group)

    def succeeded(self, turn: Turn) -> None:
        if not turn.released:
            turn.released = True
            self._release(turn.name)

    def failed(self, turn: Turn) -> float:
        """Count the failure; the turn stays taken for the returned delay (by the clock, whatever
        becomes of the connection), when the failure may be answered."""
        wait = self.delay_for(turn.name, turn.group)
        now = time.monotonic()
        self._names.add(turn.name, now)
        self._groups.add(turn.group, now)
        if not turn.released:
            turn.released = True
            if wait > 0:
                asyncio.get_running_loop().call_later(wait, self._release, turn.name)
            else:
                self._release(turn.name)
        return wait

    def abandon(self, turn: Turn) -> None:
        """A turn whose proof was never checked (the connection ended first)."""
        self.succeeded(turn)

    def _release(self, name: str) -> None:
        waiters = self._waiters.get(name)
        while waiters:
            best = min(waiters, key=lambda w: (w[0], w[1]))
            waiters.remove(best)
            if not waiters:
                del self._waiters[name]
            if not best[2].done():
                best[2].set_result(None)  # the turn passes to it, still counted as busy
                return
        n = self._busy.get(name, 0) - 1
        if n > 0:
            self._busy[name] = n
        else:
            self._busy.pop(name, None)

    def _drop_waiter(self, name: str, entry: tuple) -> None:
        waiters = self._waiters.get(name)
        if waiters and entry in waiters:
            waiters.remove(entry)
            if not waiters:
                del self._waiters[name]


# -- pre-login slots ---------------------------------------------------------------------------------
@dataclasses.dataclass(eq=False)
class Pending:
    """A connection that has not logged in: what it waits for, and for how long it kept the server
    waiting on its client."""

    group: str
    task: Any
    writer: Any
    seq: int
    state: str = "client"  # client: waiting on the client | server | turn | failed
    name: str = ""
    started: bool = False  # its startup message has arrived
    since: float = dataclasses.field(default_factory=time.monotonic)
    client_time: float = 0.0  # finished waits on the client

    def client_wait(self, now: float | None = None) -> float:
        """Seconds the server has waited on this client so far."""
        now = time.monotonic() if now is None else now
        return self.client_time + (now - self.since if self.state == "client" else 0.0)

    def enter(self, state: str, name: str = "") -> None:
        now = time.monotonic()
        if self.state == "client":
            self.client_time += now - self.since
        self.state, self.since = state, now
        if name:
            self.name = name


class PreLogin:
    """The pre-login slots (see the module's docstring)."""

    def __init__(self, max_pending: int = 256, per_group: int = 64):
        self.max_pending, self.per_group = max(1, max_pending), max(1, per_group)
        self._pending: dict[str, list[Pending]] = {}
        self._seq = itertools.count()
        self.evicted = 0

    def __len__(self) -> int:
        return sum(len(v) for v in self._pending.values())

    def count(self, group: str) -> int:
        return len(self._pending.get(group, ()))

    def admit(self, group: str, task: Any, writer: Any) -> tuple[Pending, list[Pending]]:
        """Register a new connection; returns it and the connections to close to make room for it."""
        victims: list[Pending] = []
        while self.count(group) >= self.per_group or len(self) >= self.max_pending:
            pool = group if self.count(group) >= self.per_group else max(self._pending, key=self.count)
            victim = self._victim(self._pending[pool])
            self.leave(victim)
            victims.append(victim)
        rec = Pending(group, task, writer, next(self._seq))
        self._pending.setdefault(group, []).append(rec)
        self.evicted += len(victims)
        return rec, victims

    def leave(self, rec: Pending) -> None:
        members = self._pending.get(rec.group)
        if members and rec in members:
            members.remove(rec)
            if not members:
                del self._pending[rec.group]

    @staticmethod
    def _victim(members: list[Pending]) -> Pending:
        failed = [p for p in members if p.state == "failed"]
        if failed:
            return min(failed, key=lambda p: p.since)
        now = time.monotonic()
        idle = [p for p in members if p.state == "client"]

        def most_idle(candidates: list[Pending]) -> Pending:
            return max(candidates, key=lambda p: p.client_wait(now))

        silent = [p for p in idle if not p.started]
        if silent:  # nothing sent since it connected
            return most_idle(silent)
        slow = [p for p in idle if p.client_wait(now) >= SLOW_CLIENT]
        if slow:
            return most_idle(slow)
        waiting = [p for p in members if p.state == "turn"]
        if waiting:  # before a client that answers promptly: a crowd of guesses must not push out other names
            per_name: dict[str, int] = {}
            for p in waiting:
                per_name[p.name] = per_name.get(p.name, 0) + 1
            crowded = max(per_name, key=per_name.__getitem__)
            return max((p for p in waiting if p.name == crowded), key=lambda p: p.seq)
        if idle:
            return most_idle(idle)
        return max(members, key=lambda p: p.seq)
