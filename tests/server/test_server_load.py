"""The server under load: concurrent spending of one quota, kill -9 mid-load, and hostile bytes."""

from __future__ import annotations

import random
import socket
import struct
import threading
import time
from decimal import Decimal

import psycopg
import pytest

from dpgate.catalog.owner import Owner
from pgserver import ProcessServer, ThreadServer, add_logins

QUERY = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.001) g, COUNT(*) AS n FROM t GROUP BY g"
SETUP = "CREATE TABLE t AS SELECT i AS uid, i % 5 AS g FROM range(200) r(i)"


def _small(make_db, quota: float):
    path = make_db(SETUP, protect={"t": {"unit": "uid", "epsilon": 1000.0, "domains": {"g": [0, 1, 2, 3, 4]}}},
                   analysts={"alice": {"epsilon": quota, "epsilon_per_query": 0.01}}, allow_seed=False)  # fmt: skip
    add_logins(path, ["alice"])
    return path


@pytest.fixture
def small_db(make_db):
    return _small(make_db, 0.5)


def _check_ledger(path) -> tuple[int, Decimal]:
    """The ledger agrees with itself: quotas, subjects' spending and releases all match the debits."""
    with Owner(path, create=False, read_only=True) as o:
        con = o.con
        n, total = con.execute("SELECT count(*), coalesce(sum(epsilon), 0) FROM dpgate.ledger WHERE analyst = 'alice'").fetchone()
        (spent,) = con.execute("SELECT epsilon_spent FROM dpgate.analysts WHERE name = 'alice'").fetchone()
        assert spent == total, "the analyst's spent total is the sum of its ledger entries"
        orphans = con.execute("SELECT count(*) FROM dpgate.releases r ANTI JOIN dpgate.ledger l USING (entry_id)").fetchone()
        assert orphans == (0,), "no release exists without its debit"
        analysts, tables = o.budgets()
        (row,) = [r for r in tables if r[0] == "t"]
        assert Decimal(str(row[4])) == Decimal(str(row[6])) == Decimal(1000) - total, "every subject paid every debit"
    return n, total


def test_32_clients_spend_one_quota_exactly(make_db):
    small_db = _small(make_db, 0.2)
    server = ThreadServer(small_db)
    answers, refusals, other = [], [], []

    def client():
        with psycopg.connect(server.url("alice"), autocommit=True) as con:
            for _ in range(10):  # 320 statements for a quota of 200 answers
                try:
                    rows = con.execute(QUERY).fetchall()
                    answers.append(len(rows))
                except psycopg.errors.ConfigurationLimitExceeded as e:
                    refusals.append(e.diag.message_detail)
                except Exception as e:  # anything else is a failure of the test
                    other.append(repr(e))

    threads = [threading.Thread(target=client) for _ in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    server.stop()
    assert other == []
    assert len(answers) == 200 and set(answers) == {5}  # 0.2 / 0.001: the quota, exactly
    assert len(refusals) == 320 - 200 and all(d.startswith("dpgate DP4") for d in refusals)
    assert _check_ledger(small_db) == (200, Decimal("0.2"))


def test_kill_9_mid_load_loses_no_debit(small_db):
    rng = random.Random(20261124)
    received = 0
    for round_ in range(4):  # four kills at random moments under load
        server = ProcessServer(small_db)
        stop, served = threading.Event(), threading.Event()
        counts = []

        def client():
            got = 0
            try:
                with psycopg.connect(server.url("alice"), autocommit=True, connect_timeout=5) as con:
                    while not stop.is_set():
                        try:
                            con.execute(QUERY).fetchall()
                            got += 1
                        except psycopg.errors.ConfigurationLimitExceeded:
                            pass  # the quota is spent (a later round): still a statement served
                        served.set()
            except psycopg.Error:
                pass  # the server died under us
            counts.append(got)

        threads = [threading.Thread(target=client) for _ in range(6)]
        for t in threads:
            t.start()
        # The kill falls at a random moment *under load*: once the server has answered the round's
        # first statement (on a loaded machine logging the clients in can take longer than any fixed
        # delay, and a kill before the first answer tests nothing), then a random while later.
        deadline = time.monotonic() + 60
        while not served.wait(0.05) and time.monotonic() < deadline and any(t.is_alive() for t in threads):
            pass
        time.sleep(rng.uniform(0.0, 0.8))
        server.kill()
        stop.set()
        for t in threads:
            t.join(30)
        received += sum(counts)
        entries, _ = _check_ledger(small_db)
        assert entries >= received, f"round {round_}: an answer was received whose debit is missing"
        assert entries - received <= 6 * (round_ + 1), "at most the answers in flight at each kill are lost"
    assert received > 0


# -- hostile clients -----------------------------------------------------------------------------
def _startup(user: str = "alice") -> bytes:
    body = struct.pack("!i", 196608) + b"user\x00" + user.encode() + b"\x00database\x00x\x00\x00"
    return struct.pack("!i", len(body) + 4) + body


def _raw(server, payload: bytes, read: bool = True) -> bytes:
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        s.sendall(payload)
        s.shutdown(socket.SHUT_WR)  # and then nothing more: the server sees the end
        if not read:
            return b""
        out = b""
        try:
            while chunk := s.recv(65536):
                out += chunk
        except (TimeoutError, ConnectionResetError):
            pass
        return out


def _still_serves(server) -> None:
    with psycopg.connect(server.url("alice"), autocommit=True, connect_timeout=5) as con:
        assert con.execute("SELECT 1").fetchone() == (1,)


def test_malformed_and_hostile_bytes_leave_the_server_serving(small_db):
    server = ThreadServer(small_db, write_timeout=2.0)
    rng = random.Random(7)
    try:
        cases = [
            b"",  # connect and close
            b"\x00\x00",  # truncated length
            struct.pack("!i", 2**30) + b"junk",  # oversized startup
            struct.pack("!ii", 8, 12345678),  # unknown protocol
            struct.pack("!ii", 16, 80877102) + b"\x00\x00\x00\x01",  # short cancel request
            _startup() + b"p" + struct.pack("!i", 2**31 - 1),  # oversized SASL message
            _startup() + b"Q" + struct.pack("!i", 3),  # length below 4
        ]
        for _ in range(40):  # random garbage, and random corruptions of a valid startup
            n = rng.randrange(1, 200)
            cases.append(bytes(rng.randrange(256) for _ in range(n)))
            good = bytearray(_startup())
            good[rng.randrange(len(good))] = rng.randrange(256)
            cases.append(bytes(good[: rng.randrange(1, len(good) + 1)]))
        for payload in cases:
            _raw(server, payload)
        _still_serves(server)

        # a logged-in client sends garbage messages, truncated messages, then oversized ones
        for payload in (b"Z" + struct.pack("!i", 4), b"Q" + struct.pack("!i", 100) + b"SELE",
                        b"P" + struct.pack("!i", 6) + b"\x00\x00", b"Q" + struct.pack("!i", 2**30)):  # fmt: skip
            with psycopg.connect(server.url("alice"), autocommit=True) as con:
                sock = socket.socket(fileno=socket.dup(con.pgconn.socket))
                sock.sendall(payload)
                sock.close()
        _still_serves(server)

        # a client that asks and never reads: its writes time out, others are served meanwhile
        with psycopg.connect(server.url("alice"), autocommit=True) as con:
            sock = socket.socket(fileno=socket.dup(con.pgconn.socket))
            query = b"SELECT * FROM range(200000)\x00"
            sock.sendall((b"Q" + struct.pack("!i", len(query) + 4) + query) * 20)
            _still_serves(server)
            time.sleep(3)
            _still_serves(server)
            sock.close()

        # a client that disconnects in the middle of a query
        with socket.create_connection(("127.0.0.1", server.port)):
            with psycopg.connect(server.url("alice"), autocommit=True) as con:
                sock = socket.socket(fileno=socket.dup(con.pgconn.socket))
                query = b"SELECT count(*) FROM range(300000000)\x00"
                sock.sendall(b"Q" + struct.pack("!i", len(query) + 4) + query)
                sock.close()
        _still_serves(server)
    finally:
        server.stop()


def test_connections_beyond_the_limit_are_refused_and_the_rest_served(small_db):
    server = ThreadServer(small_db, max_connections=3, login_timeout=1.0)
    try:
        held = _fill_then_refuse_one_more(server, 3, "too many connections")
        assert all(c.execute("SELECT 1").fetchone() == (1,) for c in held)
        with socket.create_connection(("127.0.0.1", server.port)) as idle:  # says nothing: timed out
            assert b"DP718" in idle.recv(1000)
        _free_one_and_serve(server, held)
    finally:
        server.stop()


def _fill_then_refuse_one_more(server, n: int, refusal: str) -> list:
    """``n`` sessions of alice, and the refusal of one more (``refusal``: the expected message)."""
    held = [psycopg.connect(server.url("alice"), autocommit=True) for _ in range(n)]
    with pytest.raises(psycopg.OperationalError, match=refusal):
        psycopg.connect(server.url("alice"), connect_timeout=5)
    return held


def _free_one_and_serve(server, held: list) -> None:
    """Close one held session: the server takes a new one again; then close the rest."""
    held.pop().close()
    time.sleep(0.2)
    _still_serves(server)
    for c in held:
        c.close()


def test_idle_sockets_cannot_keep_a_client_from_logging_in(small_db):
    # Three silent sockets fill this address's pre-login slots: a real client still logs in (the socket
    # waited on longest is closed to make room, and told why), and the rest are cut at login_timeout.
    # Logged-in sessions are not pre-login slots.
    server = ThreadServer(small_db, max_pending_per_host=3, login_timeout=1.0)
    try:
        held = psycopg.connect(server.url("alice"), autocommit=True)  # logged in: not a pending slot
        idle = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(3)]
        time.sleep(0.2)
        _still_serves(server)
        idle[0].settimeout(5)
        assert b"DP717" in idle[0].recv(1000)  # the oldest made room
        assert held.execute("SELECT 1").fetchone() == (1,)
        time.sleep(1.5)  # the silent ones are cut at login_timeout
        for sock in idle[1:]:
            sock.settimeout(5)
            assert b"DP718" in sock.recv(1000)
        _still_serves(server)
        for sock in idle:
            sock.close()
        held.close()
    finally:
        server.stop()


def test_oversized_messages_are_refused_before_they_are_read(small_db):
    server = ThreadServer(small_db)
    try:
        # a SASL message over 64 KB before login, a statement over 1 MB after it
        sasl = _startup("nobody") + b"p" + struct.pack("!i", 10_000_000)
        assert b"08P01" in _raw(server, sasl)
        # closed, not left by a with block: the server refuses the statement while the client is
        # still sending it, so libpq may keep the connection busy, and leaving the block would send
        # a COMMIT on it (another OperationalError, outside the one expected)
        con = psycopg.connect(server.url("alice"), autocommit=True)
        try:
            with pytest.raises(psycopg.OperationalError):
                con.execute("SELECT 1 " + " " * (2 * 1024 * 1024))
        finally:
            con.close()
        _still_serves(server)
    finally:
        server.stop()


def test_one_login_holds_at_most_its_share_of_sessions(small_db):
    server = ThreadServer(small_db, max_sessions_per_login=2)
    try:
        _free_one_and_serve(server, _fill_then_refuse_one_more(server, 2, "at most 2 for alice"))
    finally:
        server.stop()


def test_a_statement_stops_when_its_client_goes_away(small_db):
    server = ThreadServer(small_db)
    try:
        con = psycopg.connect(server.url("alice"), autocommit=True)
        sock = socket.socket(fileno=socket.dup(con.pgconn.socket))
        query = b"SELECT count(*) FROM range(100000000000)\x00"
        sock.sendall(b"Q" + struct.pack("!i", len(query) + 4) + query)
        time.sleep(0.5)
        sock.close()
        con.close()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and server.server._open:
            time.sleep(0.1)
        assert server.server._open == 0  # the session ended: its statement was interrupted
        _still_serves(server)
    finally:
        server.stop()
