"""Logins under hostile load: turns per name, failure delays, address groups, pre-login slots.

Nobody can lock a name out: failures slow failed answers and take their name's turns, never
refuse a right password; rotating loopback source addresses counts as one address; idle sockets
make room for a login instead of blocking it.
"""

from __future__ import annotations

import asyncio
import threading
import time

import psycopg
import pytest

import rawclient
from dpgate import scram
from dpgate.server.guard import LoginGuard, PreLogin, _Decaying, address_group
from pgserver import OWNER_PASSWORD, PASSWORD, ThreadServer, two_analysts


# -- the guard on its own ------------------------------------------------------------------------------
def test_address_groups_count_loopback_as_one_and_ipv6_by_its_64():
    assert {address_group(h) for h in ("127.0.0.1", "127.5.6.7", "127.255.255.254", "::1", "::ffff:127.0.0.2")} == {
        "loopback"
    }
    assert address_group("10.0.0.1") == address_group("::ffff:10.0.0.1") == "10.0.0.1"
    assert address_group("10.0.0.1") != address_group("10.0.0.2")
    assert address_group("2001:db8::1") == address_group("2001:db8::ffff:1234") == "2001:db8::/64"
    assert address_group("2001:db8:0:1::1") != address_group("2001:db8::1")
    assert address_group("/tmp/socket") == "/tmp/socket"


def test_a_failure_keeps_its_turn_for_its_delay_and_a_success_gives_it_back():
    async def main():
        guard = LoginGuard(delay=0.3, max_delay=0.3, per_name=2)
        a, b = await guard.turn("alice", "loopback"), await guard.turn("alice", "loopback")
        assert guard.failed(a) == pytest.approx(0.3) and guard.failed(b) == pytest.approx(0.3)
        bob = await asyncio.wait_for(guard.turn("bob", "loopback"), 0.1)  # other names are not touched
        guard.succeeded(bob)
        start = time.monotonic()
        c = await guard.turn("alice", "loopback")  # waits for a failure's delay to end
        assert time.monotonic() - start >= 0.25
        guard.succeeded(c)
        d = await asyncio.wait_for(guard.turn("alice", "loopback"), 0.1)  # a success gave its turn back at once
        guard.abandon(d)

    asyncio.run(main())


def test_waiters_from_an_address_without_failures_go_first():
    async def main():
        guard = LoginGuard(delay=0.2, max_delay=0.2, per_name=1)
        for _ in range(3):  # the guesser's address has failures
            guard.failed(await guard.turn("alice", "10.0.0.9"))
        order: list[str] = []

        async def attempt(group: str):
            turn = await guard.turn("alice", group)
            order.append(group)
            guard.succeeded(turn)

        tasks = [asyncio.ensure_future(attempt("10.0.0.9"))]
        await asyncio.sleep(0.01)
        tasks.append(asyncio.ensure_future(attempt("10.0.0.1")))  # arrives later, from a quiet address
        await asyncio.gather(*tasks)
        assert order == ["10.0.0.1", "10.0.0.9"]

    asyncio.run(main())


def test_a_waiter_gives_up_after_max_wait_and_a_closed_waiter_takes_no_turn():
    from dpgate.server.guard import LoginRefused

    async def main():
        guard = LoginGuard(delay=5, max_delay=5, per_name=1, max_wait=0.2)
        guard.failed(await guard.turn("alice", "loopback"))
        with pytest.raises(LoginRefused) as e:
            await guard.turn("alice", "loopback")
        assert e.value.error.code == "DP716"
        waiter = asyncio.ensure_future(guard.turn("alice", "loopback"))  # its connection is closed while it waits
        await asyncio.sleep(0.05)
        assert guard.waiting("alice") == 1
        waiter.cancel()
        await asyncio.gather(waiter, return_exceptions=True)
        assert guard.waiting("alice") == 0 and guard._busy == {"alice": 1}  # only the failure's turn

    asyncio.run(main())


def test_delays_double_with_a_name_s_and_an_address_s_failures():
    async def main():
        guard = LoginGuard(delay=0.5, max_delay=8.0, per_name=100, name_doubling=2, address_doubling=10)
        delays = [guard.failed(await guard.turn("alice", f"10.0.0.{i}")) for i in range(10)]
        assert delays[0] == 0.5 and delays[2] == pytest.approx(1.0, rel=0.01) and delays[-1] == 8.0
        assert guard.delay_for("bob", "10.0.0.99") == 0.5  # a fresh name from a fresh address
        for i in range(40):  # one address tries many names: four doublings
            guard.failed(await guard.turn(f"user{i}", "10.9.9.9"))
        assert guard.delay_for("carol", "10.9.9.9") > 7.9 and guard.delay_for("carol", "10.0.0.50") == 0.5

    asyncio.run(main())


def test_spraying_names_cannot_wash_out_a_name_under_attack():
    counts = _Decaying(decay=600, max_keys=100)
    for _ in range(20):
        counts.add("alice", 0.0)
    for i in range(1000):
        counts.add(f"sprayed{i}", 0.0)
    assert counts.get("alice", 0.0) == pytest.approx(20) and len(counts._counts) <= 100


class _Conn:
    def __init__(self):
        self.cancelled = False
        self.written = b""

    def cancel(self):
        self.cancelled = True

    def write(self, data):
        self.written += data


def test_a_newcomer_closes_a_failed_attempt_then_the_longest_idle_then_a_crowded_waiter():
    slots = PreLogin(max_pending=100, per_group=3)
    a, _ = slots.admit("g", _Conn(), _Conn())
    time.sleep(0.02)
    b, _ = slots.admit("g", _Conn(), _Conn())
    c, _ = slots.admit("g", _Conn(), _Conn())
    c.enter("failed")
    _, victims = slots.admit("g", _Conn(), _Conn())
    assert victims == [c]
    _, victims = slots.admit("g", _Conn(), _Conn())
    assert victims == [a]  # idle longest (b is younger; the others are newer still)
    assert slots.count("g") == 3 and slots.count("other") == 0
    _, victims = slots.admit("other", _Conn(), _Conn())  # another group has room of its own
    assert victims == []
    # waiters for a turn go after slow clients and before prompt ones, the newest of the most crowded name first
    slots = PreLogin(max_pending=100, per_group=4)
    w = [slots.admit("g", _Conn(), _Conn())[0] for _ in range(4)]
    w[0].enter("turn", "alice")
    w[1].enter("turn", "bob")
    w[2].enter("turn", "bob")
    w[3].started = True  # a prompt client in the middle of its exchange
    newcomer, victims = slots.admit("g", _Conn(), _Conn())
    assert victims == [w[2]]
    newcomer.started = True
    w[3].since -= 1.0  # now it has kept the server waiting a second
    _, victims = slots.admit("g", _Conn(), _Conn())
    assert victims == [w[3]]
    slots = PreLogin(max_pending=2, per_group=10)  # the total cap: from the largest group
    x, _ = slots.admit("g1", _Conn(), _Conn())
    slots.admit("g2", _Conn(), _Conn())
    _, victims = slots.admit("g1", _Conn(), _Conn())
    assert len(victims) == 1 and len(slots) == 2


# -- over the wire ------------------------------------------------------------------------------------
@pytest.fixture
def db(make_db):
    return two_analysts(make_db)


def test_typos_slow_their_answers_but_never_lock_the_name_out(db):
    # Five wrong passwords locked the name out for a minute; now each waits for its delay, and the
    # right password, finding a free turn, logs in without waiting for any delay.
    delay = 1.5  # far above a login's own time on a loaded machine (0.1-0.5 s), so "no wait" stays visible
    server = ThreadServer(db, guard=LoginGuard(delay=delay, max_delay=delay, per_name=2))
    try:
        for _ in range(5):
            verdict, seconds, _ = rawclient.login(server.port, "alice", "wrong password")
            assert verdict == "failed" and seconds >= delay * 0.9
        verdict, seconds, _ = rawclient.login(server.port, "alice", PASSWORD)
        assert verdict == "ok" and seconds < delay  # one turn is still held by the last failure; the other is free
        with psycopg.connect(server.url("alice"), autocommit=True, connect_timeout=5) as con:
            assert con.execute("SELECT 1").fetchone() == (1,)
    finally:
        server.stop()


def test_sprayed_names_from_rotating_loopback_addresses_lock_nobody_out(db):
    # 60 names sprayed from 127.x.y.z (the old guard locked everyone out after 50): every address is
    # loopback, so one group, whose failures are slow now; nobody is refused
    server = ThreadServer(db, guard=LoginGuard(delay=0.01, max_delay=0.02))
    try:
        verdicts = [rawclient.login(server.port, f"user{i}", "guess", source=f"127.{i}.0.{1 + i}")[0]
                    for i in range(60)]  # fmt: skip
        assert verdicts == ["failed"] * 60
        (group,) = server.server.guard._groups._counts  # 60 addresses, one group (one local user)
        assert group.startswith("loopback") and server.server.guard.delay_for("nobody", group) == 0.02  # max_delay
        for user, password in (("alice", PASSWORD), ("boss", OWNER_PASSWORD), ("bob", PASSWORD)):
            assert rawclient.login(server.port, user, password, source="127.9.9.9")[0] == "ok"
    finally:
        server.stop()


def test_a_guesser_s_parallel_connections_and_addresses_get_only_the_name_s_turns(db, monkeypatch):
    # 16 connections at once, each from its own 127.x address, guess alice: proofs are checked two
    # per delay whatever the connections do, and alice's right password still logs in.
    checks: list[float] = []
    final = scram.ServerExchange.final

    def counted(self, message):
        checks.append(time.monotonic())
        return final(self, message)

    monkeypatch.setattr(scram.ServerExchange, "final", counted)
    delay = 0.4
    server = ThreadServer(db, guard=LoginGuard(delay=delay, max_delay=delay, per_name=2))
    try:
        verdicts: list[str] = []
        threads = [threading.Thread(target=lambda k=k: verdicts.append(
            rawclient.login(server.port, "alice", f"guess {k}", source=f"127.0.{k}.1")[0])) for k in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert verdicts == ["failed"] * 16
        checks.sort()
        # never a third check within one delay: each failure kept its turn for the delay, by the clock
        assert all(b - a >= delay * 0.95 for a, b in zip(checks, checks[2:])), checks
        assert rawclient.login(server.port, "alice", PASSWORD, source="127.3.3.3")[0] == "ok"
    finally:
        server.stop()


def test_the_kernel_says_which_local_user_owns_a_loopback_client():
    import os
    import socket

    from dpgate.server.peer import loopback_uid

    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        with socket.socket() as mine:
            mine.bind(("127.4.5.6", 0))
            mine.connect(srv.getsockname())
            conn, peer = srv.accept()
            with conn:
                me = loopback_uid(conn.getsockname(), peer)
        if me is None:
            pytest.skip("no sock_diag netlink here")
        assert me == os.getuid()
        if os.getuid() != 0:
            return
        pid = os.fork()
        if pid == 0:  # a client of another local user (only C-level calls after the fork)
            try:
                os.setuid(65534)
                s = socket.socket()
                s.connect(srv.getsockname())
                time.sleep(0.5)
            finally:
                os._exit(0)
        conn, peer = srv.accept()
        with conn:
            assert loopback_uid(conn.getsockname(), peer) == 65534
        os.waitpid(pid, 0)


def test_another_local_user_s_guesses_and_idle_sockets_do_not_hold_up_a_user(db, monkeypatch):
    # On loopback the local user owning a client's socket is its group: a stranger on the machine
    # (here: clients from 127.0.9.x, as another uid) guessing alice in parallel and holding idle
    # sockets takes neither alice's pre-login slots nor her place in line for a turn.
    import socket

    import dpgate.server.serve as serve_mod

    monkeypatch.setattr(serve_mod, "loopback_uid",
                        lambda local, peer: 65534 if peer[0].startswith("127.0.9.") else 1000)  # fmt: skip
    delay = 0.6
    server = ThreadServer(db, guard=LoginGuard(delay=delay, max_delay=delay, per_name=2), max_pending_per_host=16)
    try:
        # What a login itself takes on this machine now, nobody else in line (SCRAM, a session):
        # on a loaded machine it alone can exceed the delay.
        alone = []
        for _ in range(2):
            verdict, seconds, _ = rawclient.login(server.port, "alice", PASSWORD, source="127.0.0.1")
            assert verdict == "ok"
            alone.append(seconds)
        stop = time.monotonic() + 2.5
        idle = [socket.create_connection(("127.0.0.1", server.port), source_address=(f"127.0.9.{200 + i % 50}", 0))
                for i in range(20)]  # more than the stranger's 16 slots  # fmt: skip

        def guess(k):
            n = 0
            while time.monotonic() < stop:
                rawclient.login(server.port, "alice", f"g {k} {n}", source=f"127.0.9.{1 + k}")
                n += 1

        threads = [threading.Thread(target=guess, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        time.sleep(1.0)  # eight guesses wait in line for alice's two turns
        assert server.server.guard.waiting("alice") >= 4
        took = []
        for _ in range(2):
            verdict, seconds, _ = rawclient.login(server.port, "alice", PASSWORD, source="127.0.0.1")
            assert verdict == "ok"
            took.append(seconds)
        # the next turn, at most a failure's delay away, plus the login's own time (at least one more
        # delay of slack, as on an idle machine); in line behind the stranger's guesses (four or more
        # over two turns) it would have been two delays more
        assert max(took) < delay + max(delay, 2 * max(alone)), (took, alone)
        for t in threads:
            t.join(30)
        for s in idle:
            s.close()
    finally:
        server.stop()
