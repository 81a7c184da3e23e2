"""``dpgate web``'s JSON API without a browser: sign-in, CSRF and Origin, the CSP, whose history an
analyst sees, the body cap, unknown routes, result caps, sessions ending, hostile connections, and
the quota spent exactly under concurrent requests."""

from __future__ import annotations

import json
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal

import pytest

from dpgate.catalog.owner import Owner
from dpgate.server.guard import LoginGuard
from dpgate.web.connections import ConnectionLimits
from webserver import OWNER_PASSWORD, PASSWORD, ThreadWeb, analysts_db

SETUP = ("CREATE TABLE t AS SELECT i AS uid, i % 5 AS g, (i % 50)::DOUBLE AS x FROM range(200) r(i);"
         "CREATE TABLE pub AS SELECT i FROM range(50) r(i);")  # fmt: skip
COUNT = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = {e}) g, COUNT(*) AS n, AVG(x) AS mean_x FROM t GROUP BY g"


@pytest.fixture
def db(make_db):
    return analysts_db(make_db, SETUP)


@pytest.fixture
def web(db):
    server = ThreadWeb(db)
    yield server
    server.stop()


def _spent(path, analyst: str) -> Decimal:
    with Owner(path, create=False, read_only=True) as o:
        return {r[0]: r[2] for r in o.budgets()[0]}[analyst]


# -- signing in ---------------------------------------------------------------------------------------
def test_a_wrong_password_is_401_and_a_right_one_sets_a_strict_session_cookie(web):
    c = web.client()
    status, body = c.login("alice", "not the password")
    assert status == 401 and body["code"] == "DP712" and body["hint"]
    status, body = c.login("nobody", "not the password")  # an unknown name answers alike
    assert status == 401 and body["code"] == "DP712"
    status, body, response = c.request("POST", "/api/login", {"name": "alice", "password": PASSWORD})
    assert status == 200 and body["role"] == "analyst" and len(body["csrf"]) >= 32
    cookie = response.getheader("set-cookie").lower()
    assert "httponly" in cookie and "samesite=strict" in cookie and "path=/" in cookie


def test_a_failed_sign_in_waits_its_delay_and_the_right_password_does_not(db):
    server = ThreadWeb(db, guard=LoginGuard(delay=0.4, max_delay=0.4))
    try:
        c = server.client()
        t = time.monotonic()
        assert c.login("alice", "wrong password")[0] == 401
        assert time.monotonic() - t >= 0.4
        t = time.monotonic()
        assert c.login("alice")[0] == 200
        assert time.monotonic() - t < 0.4
    finally:
        server.stop()


# -- what a state-changing request must carry --------------------------------------------------------
def test_a_statement_without_the_csrf_token_or_from_another_origin_is_refused_free(web, db):
    c = web.client()
    c.login("alice")
    sql = COUNT.format(e=0.1)
    for headers in ({"X-CSRF-Token": None}, {"X-CSRF-Token": "forged"}, {"Origin": "http://evil.example"},
                    {"Origin": None}, {"Content-Type": "text/plain"}, {"Sec-Fetch-Site": "cross-site"}):  # fmt: skip
        status, body, _ = c.request("POST", "/api/query", {"sql": sql}, headers=headers)
        assert status == 403 and body["code"] == "DP724", (headers, body)
    assert _spent(db, "alice") == 0
    status, body = c.query(sql)
    assert status == 200 and _spent(db, "alice") == Decimal("0.1")


def test_a_page_named_by_another_host_is_refused(web):
    status, body, _ = web.client().request("GET", "/", headers={"Host": "rebound.example:80"})
    assert status == 403 and body["code"] == "DP724"


def test_the_page_and_the_api_carry_a_strict_content_security_policy(web):
    for path in ("/", "/api/session", "/static/app.js", "/nope"):
        _, _, response = web.client().request("GET", path)
        csp = response.getheader("content-security-policy")
        assert "script-src 'self'" in csp and "style-src 'self'" in csp and "default-src 'none'" in csp, path
        assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
        assert response.getheader("x-frame-options") == "DENY"
        assert response.getheader("x-content-type-options") == "nosniff"
    status, html, _ = web.client().request("GET", "/")
    assert status == 200 and "<script>" not in html and " style=" not in html and "<style" not in html
    assert web.client().request("GET", "/static/../app.py")[0] == 404  # only the listed files


# -- answers and refusals ----------------------------------------------------------------------------------
def test_an_answer_has_its_rows_intervals_cost_population_and_notes(web):
    c = web.client()
    c.login("alice")
    status, a = c.query(COUNT.format(e=0.2))
    assert status == 200
    assert a["columns"] == ["g", "n", "mean_x"] and len(a["rows"]) == 5
    assert len(a["intervals"]) == 5
    for row, iv in zip(a["rows"], a["intervals"]):
        assert iv["n"][0] <= row[1] <= iv["n"][1] and iv["mean_x"][0] <= row[2] <= iv["mean_x"][1]
    assert a["cost"]["epsilon"] == pytest.approx(0.2) and a["cost"]["epsilon_remaining"] == pytest.approx(0.8)
    assert a["population"]["subjects"] == 200 and "200" in a["population"]["text"]
    assert isinstance(a["notes"], list)
    status, budget = c.get("/api/budget")
    assert status == 200 and budget["epsilon_remaining"] == pytest.approx(0.8)


def test_a_refusal_has_its_code_and_hint_and_charges_nothing(web, db):
    c = web.client()
    c.login("alice")
    status, body = c.query("SELECT uid FROM t")
    assert status == 400 and body["code"] == "DP211" and body["hint"] and "Traceback" not in json.dumps(body)
    status, body = c.query(COUNT.format(e=5))  # over the per-query cap
    assert status == 403 and body["code"] == "DP303"
    status, body = c.query("SELECT 1; SELECT 2")
    assert status == 400 and body["code"] == "DP730"
    assert _spent(db, "alice") == 0


def test_a_public_result_over_the_row_cap_is_refused(db):
    server = ThreadWeb(db, max_result_rows=10)
    try:
        c = server.client()
        c.login("alice")
        status, a = c.query("SELECT i FROM pub WHERE i < 10")
        assert status == 200 and a["rows"] == [[i] for i in range(10)] and a["cost"] is None
        status, body = c.query("SELECT i FROM pub")
        assert status == 413 and body["code"] == "DP714"
    finally:
        server.stop()


def test_an_owner_login_sees_the_owner_api_and_an_analyst_does_not(web):
    owner, analyst = web.client(), web.client()
    owner.login("boss", OWNER_PASSWORD)
    analyst.login("alice")
    assert analyst.get("/api/owner/overview")[1]["code"] == "DP713"
    assert owner.query("SELECT 1")[1]["code"] == "DP702"
    status, o = owner.get("/api/owner/overview")
    assert status == 200 and {r[0] for r in o["analysts"]["rows"]} == {"alice", "bob"}
    assert [h["table"] for h in o["histograms"]] == ["t"] and sum(b[2] for b in o["histograms"][0]["bins"]) == 200


# -- whose history ------------------------------------------------------------------------------------------
def test_an_analyst_sees_only_their_own_history(web):
    alice, bob = web.client(), web.client()
    alice.login("alice")
    bob.login("bob")
    secret = COUNT.format(e=0.3) + " -- alice's question"
    assert alice.query(secret)[0] == 200
    assert bob.query(COUNT.format(e=0.1))[0] == 200
    mine = alice.get("/api/history")[1]["rows"]
    theirs = bob.get("/api/history?analyst=alice")[1]["rows"]  # no parameter picks another analyst
    statement = -1
    assert [r[statement] for r in mine] == [secret]
    assert len(theirs) == 1 and "alice" not in theirs[0][statement]
    assert bob.get("/api/budget")[1]["analyst"] == "bob"


# -- requests the server will not take ---------------------------------------------------------------------
def test_a_body_over_the_cap_is_refused_before_it_is_read_whole(web):
    c = web.client()
    big = {"name": "alice", "password": "x" * 70_000}
    status, body, _ = c.request("POST", "/api/login", big)
    assert status == 413 and body["code"] == "DP722"
    # without a Content-Length (chunked), the cap holds while the body comes
    status, body, _ = c.request("POST", "/api/login", raw=iter([b'{"name": "alice", "password": "', b"x" * 70_000, b'"}']),
                                chunked=True)  # fmt: skip
    assert status == 413 and body["code"] == "DP722"
    status, body, _ = c.request("POST", "/api/login", raw=b"not json")
    assert status == 400 and body["code"] == "DP726"


def test_an_unknown_route_is_404_and_a_wrong_method_405_both_as_json(web):
    status, body = web.client().get("/api/nothing-here")
    assert status == 404 and body["code"] == "DP725"
    status, body, _ = web.client().request("DELETE", "/api/query")
    assert status in (403, 405)  # a DELETE without the page's Origin is refused before routing
    c = web.client()
    status, body, _ = c.request("PUT", "/api/query", {"sql": "x"})
    assert status == 405 and body["code"] == "DP725"


def test_an_internal_error_is_json_without_a_traceback(web, monkeypatch):
    from dpgate.web import views

    def broken(gateway):
        raise KeyError("sentinel-7f3a")

    monkeypatch.setattr(views, "history", broken)
    c = web.client()
    c.login("alice")
    status, body = c.get("/api/history")
    assert status == 500 and body["code"] == "DP709" and "bug in dpgate" in body["message"]
    assert "Traceback" not in json.dumps(body) and "sentinel-7f3a" not in json.dumps(body)


def test_a_session_ends_after_its_idle_time(db):
    server = ThreadWeb(db, idle=0.5)
    try:
        c = server.client()
        c.login("alice")
        assert c.get("/api/session")[0] == 200
        time.sleep(0.8)
        status, body = c.get("/api/session")
        assert status == 401 and body["code"] == "DP723"
        assert c.request("POST", "/api/logout", {})[0] == 401
    finally:
        server.stop()


def test_signing_out_ends_the_session(web):
    c = web.client()
    c.login("alice")
    assert c.request("POST", "/api/logout", {})[0] == 200
    assert c.get("/api/budget")[1]["code"] == "DP723"


# -- hostile connections ------------------------------------------------------------------------------------
def test_idle_sockets_make_room_and_a_slow_request_is_closed(db):
    limits = ConnectionLimits(idle_timeout=0.6, request_timeout=1.0, max_connections=4, per_group=4)
    server = ThreadWeb(db, limits=limits)
    try:
        idle = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(4)]
        time.sleep(0.1)
        assert server.client().get("/api/session")[0] == 401  # served: an idle socket was closed for it
        slow = socket.create_connection(("127.0.0.1", server.port))
        slow.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # a head that never ends
        time.sleep(1.4)
        for s in [*idle, slow]:
            s.settimeout(2)
            assert s.recv(100) == b"", "the server should have closed it"
            s.close()
        assert server.web.connections.closed_idle >= 1
    finally:
        server.stop()


# -- the quota under concurrent requests -----------------------------------------------------------------
def test_the_quota_is_spent_exactly_under_concurrent_requests(web, db):
    clients = [web.client() for _ in range(3)]  # three sessions of one analyst
    for c in clients:
        assert c.login("alice")[0] == 200
    sql = COUNT.format(e=0.25)
    with ThreadPoolExecutor(12) as pool:
        outcomes = list(pool.map(lambda i: clients[i % 3].query(sql), range(12)))
    answered = [body for status, body in outcomes if status == 200]
    refused = [body for status, body in outcomes if status != 200]
    assert len(answered) == 4 and len(refused) == 8
    assert {b["code"] for b in refused} == {"DP401"}, refused
    assert _spent(db, "alice") == Decimal("1")
    assert sorted(b["cost"]["epsilon_remaining"] for b in answered) == pytest.approx([0.0, 0.25, 0.5, 0.75])


def test_listening_elsewhere_than_loopback_needs_tls_and_a_port_in_use_is_refused(db, web):
    from dpgate import errors
    from dpgate.web.serve import Running

    with pytest.raises(errors.ProgrammingError) as refused:
        Running(str(db), host="0.0.0.0", port=0)
    assert refused.value.code == "DP728" and "--tls-cert" in refused.value.hint
    web.stop()  # the file is free again; its port is taken by another socket below
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    try:
        with pytest.raises(errors.OperationalError) as refused:
            Running(str(db), host="127.0.0.1", port=taken.getsockname()[1])
        assert refused.value.code == "DP720"
    finally:
        taken.close()
    web.stop = lambda: None  # stopped above
