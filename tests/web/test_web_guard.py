"""``dpgate web`` against a hostile neighbour or a hostile signed-in analyst: a session cookie carried
by another local user, a verifier that would make sign-in compute for hours, answers that are never
read, a result cap counted in characters, a body nested past the parser's depth, API reads from
another page of the same site."""

from __future__ import annotations

import json
import socket
import time
from decimal import Decimal

import pytest

from dpgate.catalog.owner import Owner
from dpgate.web.connections import ConnectionLimits
from webserver import ThreadWeb, analysts_db

SETUP = ("CREATE TABLE t AS SELECT i AS uid, i % 5 AS g, (i % 50)::DOUBLE AS x FROM range(200) r(i);"
         "CREATE TABLE pub AS SELECT i FROM range(3000) r(i);")  # fmt: skip
COUNT = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1) g, COUNT(*) AS n FROM t GROUP BY g"


@pytest.fixture
def db(make_db):
    return analysts_db(make_db, SETUP)


def _spent(path, analyst: str) -> Decimal:
    with Owner(path, create=False, read_only=True) as o:
        return {r[0]: r[2] for r in o.budgets()[0]}[analyst]


# -- a session is the local user's who signed in ----------------------------------------------------
def test_a_session_cookie_carried_by_another_local_user_opens_nothing(db, monkeypatch):
    # A browser sends its cookies to every port of the host, so another local user's server on
    # another port receives the session cookie (and may set one of its own in the victim's browser).
    # On loopback the kernel says which user owns a client's socket: the session answers only the
    # user who signed in, and another user's requests with its token find no session.
    from dpgate.web import connections

    uid = {"now": 1000}
    monkeypatch.setattr(connections, "loopback_uid", lambda local, peer: uid["now"])
    server = ThreadWeb(db)
    try:
        alice = server.client()
        assert alice.login("alice")[0] == 200
        assert alice.query(COUNT)[0] == 200
        uid["now"] = 1001  # another local user, holding alice's cookie and CSRF token
        for status, body in (alice.get("/api/session"), alice.get("/api/history"), alice.query(COUNT)):
            assert status == 401 and body["code"] == "DP723", body
        assert alice.request("POST", "/api/logout", {})[0] == 401  # nor end it
        # signing in as bob with alice's cookie in the jar does not end alice's session either
        thief = server.client()
        thief.cookie = alice.cookie
        assert thief.login("bob")[0] == 200
        uid["now"] = 1000
        status, who = alice.get("/api/session")
        assert status == 200 and who["name"] == "alice"
        assert _spent(db, "alice") == Decimal("0.1") and _spent(db, "bob") == 0
    finally:
        server.stop()


# -- sign-in's work is bounded ------------------------------------------------------------------------
def test_a_verifier_with_a_huge_iteration_count_is_neither_stored_nor_run(db):
    # dpgate web checks a password by running the verifier's PBKDF2 iterations on the server (a SCRAM
    # client runs them itself), and an analyst may store their own verifier (ALTER ROLE over dpgate
    # serve). Millions of iterations would hold both sign-in threads per stranger's attempt at that name,
    # so such a verifier is refused when set, and one stored before is never run.
    import threading

    from dpgate import errors, scram
    from dpgate.catalog.tables import SCHEMA

    heavy = scram.make_verifier("alice's own", iterations=2).replace("$2:", "$30000000:", 1)
    with Owner(db, create=False) as o:
        with pytest.raises(errors.PolicyError) as refused:
            o.set_login("alice", verifier=heavy)
        assert refused.value.code == "DP325" and "iterations" in refused.value.message
        o.con.execute(f"UPDATE {SCHEMA}.logins SET verifier = ? WHERE name = 'alice'", [heavy])  # as stored before
    server = ThreadWeb(db)
    try:
        began = time.monotonic()
        guesses = [threading.Thread(target=lambda: server.client().login("alice", "a guess")) for _ in range(2)]
        for g in guesses:
            g.start()
        assert server.client().login("bob")[0] == 200
        for g in guesses:
            g.join(30)
        assert time.monotonic() - began < 10  # 30 million iterations would take tens of seconds each
        assert server.client().login("alice", "alice's own")[0] == 401  # never run: as an unknown name
    finally:
        server.stop()


# -- what one request may cost -------------------------------------------------------------------------
def test_a_body_nested_past_the_parsers_depth_or_with_a_lone_surrogate_is_a_bad_body_not_a_bug(db):
    # json.loads raises RecursionError, not ValueError, on a deeply nested array, and parses "\ud800" to
    # a lone surrogate, which cannot be encoded to look a name up or hash a password: before a login,
    # any stranger could make each request a 500 with a traceback in the server's log
    server = ThreadWeb(db)
    try:
        c = server.client()
        status, body, _ = c.request("POST", "/api/login", raw=b"[" * 60_000)
        assert status == 400 and body["code"] == "DP726"
        for raw in (b'{"name": "\\ud800", "password": "a guess!"}', b'{"name": "alice", "password": "\\udfffguess"}'):
            status, body, _ = c.request("POST", "/api/login", raw=raw)
            assert status == 400 and body["code"] == "DP726", raw
        c.login("alice")
        status, body, _ = c.request("POST", "/api/query", raw=b'{"sql": ' + b"[" * 500_000)
        assert status == 400 and body["code"] == "DP726"
    finally:
        server.stop()


def test_the_result_cap_counts_the_bytes_sent_not_characters(db):
    # each of these rows is 1,000 characters of emoji: 4,000 bytes of UTF-8 in the answer
    server = ThreadWeb(db, max_result_bytes=1_000_000)
    try:
        c = server.client()
        c.login("alice")
        status, body, response = c.request("POST", "/api/query", {"sql": "SELECT i, repeat('😀', 1000) AS s FROM pub LIMIT 200"})
        assert status == 200 and int(response.getheader("content-length")) < 1_000_000
        status, body, response = c.request("POST", "/api/query", {"sql": "SELECT i, repeat('😀', 1000) AS s FROM pub LIMIT 900"})
        assert status == 413 and body["code"] == "DP714", (status, response.getheader("content-length"))
    finally:
        server.stop()


# -- answers the client does not read ---------------------------------------------------------------------
BIG = "SELECT i, repeat('x', 2000) AS s FROM pub"  # 3,000 rows: about 6 MB of JSON, more than the kernel buffers


def _raw_query(port: int, client, *, small_buffer: bool = True) -> socket.socket:
    """A statement sent on a raw socket, its answer left to the caller to read (or not)."""
    body = json.dumps({"sql": BIG}).encode()
    s = socket.socket()
    if small_buffer:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", port))
    s.sendall(f"POST /api/query HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nOrigin: http://127.0.0.1:{port}\r\n"
              f"Content-Type: application/json\r\nX-CSRF-Token: {client.csrf}\r\nCookie: {client.cookie}\r\n"
              f"Content-Length: {len(body)}\r\n\r\n".encode() + body)  # fmt: skip
    return s


def _length(head: bytes) -> int:
    return int(next(h for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")).split(b":")[1])


def test_an_answer_the_client_does_not_read_holds_its_logins_slot_then_is_dropped(db):
    # What a client does not read stayed in the connection's buffer for as long as it kept the socket
    # open (a closing connection still waits to send it all): 64 sockets per address of answers at the
    # result cap held gigabytes. An answer now holds one of its login's statement slots until it is sent,
    # and a client that takes nothing of it for read_timeout seconds is closed.
    server = ThreadWeb(db, statements_per_login=1, limits=ConnectionLimits(read_timeout=1.0))
    try:
        alice = server.client()
        alice.login("alice")
        parked = _raw_query(server.port, alice)
        deadline = time.monotonic() + 30
        while server.web.slots.running("alice") == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        status, body = alice.query("SELECT count(*) AS n FROM pub")  # waits for the slot the parked answer holds
        assert status == 200 and body["rows"] == [[3000]]
        assert server.web.connections.closed_unread == 1  # it ran only once the unread answer was dropped
        parked.settimeout(10)
        data = b""
        while chunk := parked.recv(1 << 20):  # what the kernel had taken, then the end
            data += chunk
        parked.close()
        head, _, payload = data.partition(b"\r\n\r\n")
        assert len(payload) < _length(head)  # the rest of the answer was dropped, not kept to be sent
    finally:
        server.stop()


def test_a_slow_reader_gets_its_whole_answer(db):
    # a client that keeps taking its answer, however slowly, is not "not reading": the kernel's socket
    # buffers hold megabytes, which it drains while the server's own buffer does not move
    server = ThreadWeb(db, limits=ConnectionLimits(read_timeout=0.5))
    try:
        alice = server.client()
        alice.login("alice")
        s = _raw_query(server.port, alice, small_buffer=False)
        s.settimeout(10)
        data = b""
        while chunk := s.recv(64 * 1024):
            data += chunk
            time.sleep(0.02)  # about 3 MB/s at most
            head, _, payload = data.partition(b"\r\n\r\n")
            if payload and len(payload) >= _length(head):
                break
        s.close()
        assert b" 200 " in head.split(b"\r\n")[0]
        assert len(json.loads(payload)["rows"]) == 3000
        assert server.web.connections.closed_unread == 0
    finally:
        server.stop()


# -- who is at the other end of a loopback connection ---------------------------------------------------------
def test_a_client_socket_closed_before_the_lookup_has_no_known_user():
    # The kernel reports a socket its process has closed as root's (with no inode): counted as uid 0,
    # a local user who hangs up right after each request would put its connections and failed sign-ins
    # in root's address group instead of its own.
    from dpgate.server.peer import loopback_uid

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        client = socket.create_connection(listener.getsockname())
        client.sendall(b"POST /api/login HTTP/1.1\r\n")
        conn, peer = listener.accept()
        with conn:
            me = loopback_uid(conn.getsockname(), peer)
            if me is None:
                pytest.skip("the kernel does not say who owns loopback sockets here")
            client.close()
            time.sleep(0.05)
            assert loopback_uid(conn.getsockname(), peer) is None


# -- reads from another page of the same site ---------------------------------------------------------------
def test_an_api_read_from_another_page_of_the_site_is_refused(db):
    # SameSite=Strict does not stop a page on another port of the same host (same site) from sending
    # the cookie with a GET; it cannot read the answer, but the server would compute it (an owner's
    # quality report reads raw rows) and the session would stay alive. Browsers label such requests.
    server = ThreadWeb(db)
    try:
        alice = server.client()
        alice.login("alice")
        for site in ("same-site", "cross-site"):
            status, body, _ = alice.request("GET", "/api/history", headers={"Sec-Fetch-Site": site})
            assert status == 403 and body["code"] == "DP724"
        assert alice.request("GET", "/api/history", headers={"Sec-Fetch-Site": "same-origin"})[0] == 200
        assert alice.get("/api/history")[0] == 200  # a program sends no Sec-Fetch-Site
        status, _, _ = alice.request("GET", "/", headers={"Sec-Fetch-Site": "cross-site"})
        assert status == 200  # the page itself may be opened from a link
    finally:
        server.stop()


def test_a_sign_in_whose_client_hangs_up_while_it_waits_for_its_turn_leaves_the_queue(db):
    # An attempt waiting for its name's turn has learned nothing; a client that sends it and hangs up
    # at once left it queued until its turn or max_wait: thousands a minute from one address, each then
    # checked, and taking one of the name's turns, after its client had gone.
    from dpgate.server.guard import LoginGuard

    server = ThreadWeb(db, guard=LoginGuard(delay=4.0, max_delay=8.0, per_name=1, max_wait=60.0))
    try:
        import threading

        first = threading.Thread(target=lambda: server.client().login("alice", "wrong"))
        first.start()  # a failure: alice's one turn stays taken for its 4 s delay
        deadline = time.monotonic() + 3
        while server.web.guard.delay_for("alice", "") == 4.0 and time.monotonic() < deadline:  # until it counts
            time.sleep(0.02)
        body = json.dumps({"name": "alice", "password": "a guess"}).encode()
        hung_up = []
        for _ in range(5):
            s = socket.create_connection(("127.0.0.1", server.port))
            s.sendall(f"POST /api/login HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nOrigin: http://127.0.0.1:"
                      f"{server.port}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode()
                      + body)  # fmt: skip
            hung_up.append(s)
        deadline = time.monotonic() + 3
        while server.web.guard.waiting("alice") < 5 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert server.web.guard.waiting("alice") == 5
        for s in hung_up:
            s.close()
        deadline = time.monotonic() + 2  # well within the turn's 4 s
        while server.web.guard.waiting("alice") and time.monotonic() < deadline:
            time.sleep(0.02)
        assert server.web.guard.waiting("alice") == 0
        first.join(10)
    finally:
        server.stop()


def test_a_client_that_hangs_up_mid_body_is_not_logged_as_a_bug(db, caplog):
    # Starlette raises ClientDisconnect from the body's stream: as an unexpected error, each hang-up
    # wrote an error with its traceback to the server's log, which any stranger could fill
    server = ThreadWeb(db)
    try:
        for _ in range(3):
            s = socket.create_connection(("127.0.0.1", server.port))
            s.sendall(f"POST /api/login HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nOrigin: http://127.0.0.1:"
                      f"{server.port}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n".encode()
                      + b'{"name": "a')  # fmt: skip
            time.sleep(0.1)
            s.close()
        time.sleep(0.3)
        assert server.client().get("/api/session")[0] == 401  # still serving
    finally:
        server.stop()
    assert not [r for r in caplog.records if r.levelname == "ERROR" and r.name.startswith("dpgate")], caplog.text


# -- the cookie over TLS ---------------------------------------------------------------------------------
def test_over_tls_the_session_cookie_is_a_secure_host_only_cookie(db, tmp_path):
    # Over TLS sessions are not tied to a local user; a "__Host-" cookie is one a browser takes only
    # from a secure page of this host, Secure and for the path /, so a plain-HTTP service on the same
    # host, or a sibling domain, cannot plant its own session in the analyst's browser.
    import http.client
    import ssl
    import subprocess

    from conftest import system_tool
    from webserver import PASSWORD

    openssl = system_tool("openssl", "openssl")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=localhost"], check=True, capture_output=True)  # fmt: skip
    server = ThreadWeb(db, tls_cert=str(cert), tls_key=str(key))
    context = ssl.create_default_context(cafile=str(cert))
    context.check_hostname = False

    def request(method: str, path: str, body: dict | None = None, headers: dict | None = None):
        con = http.client.HTTPSConnection("127.0.0.1", server.port, timeout=30, context=context)
        h = {"Host": f"127.0.0.1:{server.port}", "Origin": f"https://127.0.0.1:{server.port}",
             "Content-Type": "application/json", **(headers or {})}  # fmt: skip
        con.request(method, path, body=None if body is None else json.dumps(body), headers=h)
        response = con.getresponse()
        data = json.loads(response.read())
        con.close()
        return response.status, data, response

    try:
        status, who, response = request("POST", "/api/login", {"name": "alice", "password": PASSWORD})
        assert status == 200
        cookie = response.getheader("set-cookie")
        assert cookie.startswith("__Host-dpgate_session=") and "Secure" in cookie and "Path=/" in cookie
        assert "domain" not in cookie.lower()
        token = cookie.split(";", 1)[0].split("=", 1)[1]
        assert request("GET", "/api/session", headers={"Cookie": f"__Host-dpgate_session={token}"})[0] == 200
        assert request("GET", "/api/session", headers={"Cookie": f"dpgate_session={token}"})[0] == 401
    finally:
        server.stop()
