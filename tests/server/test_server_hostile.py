"""dpgate serve with hostile clients beside honest ones, all on loopback, for a few seconds.

Strangers hold idle pre-login sockets (more than an address group's slots, reopened as the
server closes them) and spray password guesses over many names — the honest ones among them — from rotating
127.x.y.z source addresses; an analyst asks for large public results it never reads and for
endless public statements. Meanwhile honest analysts and the owner log in and get their answers,
each login and each statement within a bound, and nobody is refused. Every hostile loop stops by
itself at a deadline.
"""

from __future__ import annotations

import random
import socket
import struct
import threading
import time

import psycopg

import rawclient
from dpgate.catalog.owner import Owner
from dpgate.server.guard import LoginGuard
from pgserver import OWNER_PASSWORD, PASSWORD, ThreadServer, add_logins, rss_mb

DP = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.001) g, COUNT(*) AS n FROM t GROUP BY g"
HOSTILE_SECONDS = 8.0
LOGIN_BOUND = 5.0  # seconds: an honest login, even while its own name is among the sprayed ones
STATEMENT_BOUND = 5.0


def test_honest_clients_are_served_beside_hostile_ones(make_db):
    path = make_db("CREATE TABLE t AS SELECT i AS uid, i % 5 AS g FROM range(1000) r(i)",
                   protect={"t": {"unit": "uid", "epsilon": 1000.0, "domains": {"g": [0, 1, 2, 3, 4]}}},
                   analysts={name: {"epsilon": 100.0} for name in ("alice", "bob", "mallory")},
                   allow_seed=False)  # fmt: skip
    add_logins(path, ["alice", "bob", "mallory"])
    server = ThreadServer(path, guard=LoginGuard(delay=0.2, max_delay=1.0), public_timeout=2.0)
    rng = random.Random(20261124)
    # What an honest login and statement take on this machine now, with nobody attacking: on a loaded
    # machine they alone can approach the bounds, which are then ten times these instead.
    start = time.monotonic()
    with psycopg.connect(server.url("boss", OWNER_PASSWORD), autocommit=True, connect_timeout=30) as con:
        login_alone = time.monotonic() - start
        start = time.monotonic()
        con.execute("dpgate budget").fetchall()
        statement_alone = time.monotonic() - start
    login_bound = max(LOGIN_BOUND, 10 * login_alone)
    statement_bound = max(STATEMENT_BOUND, 10 * statement_alone)
    start = time.monotonic()

    def running() -> bool:
        """The attack lasts HOSTILE_SECONDS, and on a slow machine until every honest client has logged
        in three times (at most a minute): what is checked is their turns beside the attack, not how
        many fit in a fixed time."""
        now = time.monotonic()
        if now < start + HOSTILE_SECONDS:
            return True
        done = [u for u, _ in honest_logins]
        return now < start + 60 and any(done.count(u) < 3 for u in ("alice", "bob", "boss"))

    rss_before = rss_mb()
    counts = {"idle": 0, "guesses": 0, "unread": 0, "endless": 0}
    lock = threading.Lock()

    def idle_sockets():
        held: list[socket.socket] = []
        while running():  # 80 silent sockets from 127.0.1.x, reopened as the server closes them
            held = [s for s in held if not _closed(s)]
            while len(held) < 80:  # more than the group's 64 slots
                try:
                    held.append(rawclient.connect(server.port, f"127.0.1.{1 + counts['idle'] % 250}", timeout=5))
                except OSError:
                    break
                counts["idle"] += 1
            time.sleep(0.01)
        for s in held:
            s.close()

    names = [f"user{i}" for i in range(50)] + ["alice", "bob", "boss"]

    def guesser(k: int):
        n = 0
        while running():
            name = names[rng.randrange(len(names))]
            source = f"127.{k}.{n % 250}.{1 + (n // 250) % 250}"
            verdict, _, _ = rawclient.login(server.port, name, f"guess {k} {n}", source=source, timeout=30)
            assert verdict != "ok"
            n += 1
            with lock:
                counts["guesses"] += 1

    def hostile_session() -> psycopg.Connection:
        while True:  # its own login may be closed to make room for the idle sockets' newcomers: again
            try:
                return psycopg.connect(server.url("mallory"), autocommit=True, connect_timeout=30)
            except psycopg.OperationalError:
                time.sleep(0.05)

    def unread():
        # asks for 10M rows and reads none; asks again once the public timeout ended it
        with hostile_session() as con:
            sock = socket.socket(fileno=socket.dup(con.pgconn.socket))
            while running():
                body = b"SELECT range AS a, range AS b FROM range(10000000)\x00"
                sock.sendall(b"Q" + struct.pack("!i", len(body) + 4) + body)
                with lock:
                    counts["unread"] += 1
                time.sleep(2.5)
            sock.close()

    def endless():
        with hostile_session() as con:
            while running():
                try:
                    con.execute("SELECT count(*) FROM range(100000000000000)")
                except psycopg.errors.QueryCanceled:
                    with lock:
                        counts["endless"] += 1

    honest_logins: list[tuple[str, float]] = []
    honest_statements: list[float] = []
    failures: list[str] = []

    def honest(user: str, password: str, statements: list[str]):
        time.sleep(1.0)  # the attack is under way
        while running():
            start = time.monotonic()
            try:
                with psycopg.connect(server.url(user, password), autocommit=True, connect_timeout=30) as con:
                    honest_logins.append((user, time.monotonic() - start))
                    for sql in statements:
                        t = time.monotonic()
                        rows = con.execute(sql).fetchall()
                        honest_statements.append(time.monotonic() - t)
                        if not rows:
                            failures.append(f"{user}: no rows for {sql}")
            except psycopg.Error as e:
                failures.append(f"{user}: {e}")
            time.sleep(0.3)

    threads = [threading.Thread(target=idle_sockets)]
    threads += [threading.Thread(target=guesser, args=(k,)) for k in range(1, 9)]
    threads += [threading.Thread(target=unread) for _ in range(3)] + [threading.Thread(target=endless)]
    threads += [
        threading.Thread(target=honest, args=("alice", PASSWORD, [DP, "SELECT count(*) FROM range(1000)"])),
        threading.Thread(target=honest, args=("bob", PASSWORD, [DP])),
        threading.Thread(target=honest, args=("boss", OWNER_PASSWORD, ["dpgate budget"])),
    ]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not any(t.is_alive() for t in threads)
        grown = rss_mb() - rss_before
        assert failures == []
        by_user = {u for u, _ in honest_logins}
        assert by_user == {"alice", "bob", "boss"} and len(honest_logins) >= 9
        assert max(s for _, s in honest_logins) < login_bound, sorted(honest_logins, key=lambda x: -x[1])[:3]
        assert max(honest_statements) < statement_bound
        assert counts["guesses"] > 20 and counts["idle"] > 80 and counts["unread"] >= 6 and counts["endless"] >= 2
        assert server.server.prelogin.evicted > 0  # idle sockets made room for logins
        assert grown < 500, grown  # three clients of 10M unread rows each held 4 GB when results were built whole
        with Owner(path, create=False, read_only=True) as o:  # every guess failed, every answer was charged once
            n = o.con.execute("SELECT count(*) FROM dpgate.ledger WHERE analyst IN ('alice', 'bob')").fetchone()[0]
        assert n == sum(1 for u, _ in honest_logins if u != "boss")
    finally:
        server.stop()


def _closed(s: socket.socket) -> bool:
    """The server closed it (it says why first: made room, or timed out)."""
    s.setblocking(False)
    try:
        s.recv(4096, socket.MSG_PEEK)
        return True
    except BlockingIOError:
        return False
    except OSError:
        return True
    finally:
        s.setblocking(True)
