"""dpgate serve with real PostgreSQL clients: psycopg 3 and psql, over loopback."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import threading
import time

import psycopg
import pytest
from conftest import system_tool

import dpgate
from dpgate.catalog.owner import Owner
from dpgate import scram
from dpgate.server.serve import parameter_numbers, split_statements
from pgserver import OWNER_PASSWORD, PASSWORD, ThreadServer, add_logins

DP = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1) "


@pytest.fixture
def server(demo_db):
    with Owner(demo_db, create=False) as o:
        o.add_analyst("bob", epsilon=1.0, epsilon_per_query=1.0)
    add_logins(demo_db, ["demo", "bob"])
    s = ThreadServer(demo_db)
    yield s
    s.stop()


def notices_of(con: psycopg.Connection) -> list[str]:
    out: list[str] = []
    con.add_notice_handler(lambda d: out.append(d.message_primary))
    return out


# -- SCRAM ---------------------------------------------------------------------------------------
def test_scram_matches_rfc7677():
    verifier = scram.make_verifier("pencil", salt=base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ=="))
    ex = scram.ServerExchange(verifier)
    first = ex.first("n,,n=user,r=rOprNGfwEbeRWgbNEkqO", server_nonce="%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    assert first == "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    final = ex.final("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                     "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")  # fmt: skip
    assert final == "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def test_scram_refuses_a_wrong_proof_a_fake_verifier_and_a_replayed_nonce():
    verifier = scram.make_verifier("pencil")
    for password, real, nonce_ok in (("pencil!", True, True), ("pencil", False, True), ("pencil", True, False)):
        ex = scram.ServerExchange(verifier if real else scram.fake_verifier("x", b"k" * 32), real=real)
        server_first = ex.first("n,,n=,r=abc")
        nonce = server_first.split(",")[0][2:] if nonce_ok else "abcdef"
        without = f"c=biws,r={nonce}"
        proof = scram.client_proof(password, "n=,r=abc", server_first, without)
        with pytest.raises(scram.ScramError):
            ex.final(f"{without},p={proof}")
    ex = scram.ServerExchange(verifier)
    server_first = ex.first("n,,n=,r=abc")
    without = f"c=biws,r={server_first.split(',')[0][2:]}"
    assert ex.final(f"{without},p={scram.client_proof('pencil', 'n=,r=abc', server_first, without)}").startswith("v=")


def test_only_verifiers_are_stored(server, demo_db):
    server.stop()
    with Owner(demo_db, create=False) as o:
        rows = o.con.execute("SELECT name, verifier FROM dpgate.logins").fetchall()
    assert rows and all(v.startswith("SCRAM-SHA-256$4096:") and PASSWORD not in v for _, v in rows)
    server.__init__(demo_db)  # the fixture stops it again


# -- logging in -------------------------------------------------------------------------------------
def test_wrong_and_unknown_logins_get_the_same_answer(server):
    messages = []
    for user, password in (("demo", "wrong password"), ("nobody", "wrong password"), ("demo", None)):
        with pytest.raises(psycopg.OperationalError) as e:
            psycopg.connect(server.url(user, password), connect_timeout=5)
        messages.append(str(e.value).replace(user, "USER"))
    assert messages[0] == messages[1] and "password authentication failed" in messages[0]


def test_a_bad_parse_or_bind_is_an_error_not_a_dropped_connection(server):
    from psycopg import pq

    with psycopg.connect(server.url("demo"), autocommit=True) as con:
        with pytest.raises(psycopg.errors.SyntaxErrorOrAccessRuleViolation, match="Parameter numbers go up to"):
            con.execute("SELECT $99999999 AS x", prepare=True)
        for value, oid in ((b"abc", 1700), (b"\xff\xfe", 25), (b"12x", 20)):
            res = con.pgconn.exec_params(b"SELECT count(*) FROM country_regions WHERE $1 IS NOT NULL", [value], [oid])
            assert res.status == pq.ExecStatus.FATAL_ERROR
            assert res.error_field(pq.DiagnosticField.SQLSTATE) == b"22P02"
        assert con.execute("SELECT 1").fetchone() == (1,)  # the session goes on


def test_the_analyst_is_who_logged_in(server, demo_db):
    with psycopg.connect(server.url("bob"), autocommit=True) as con:
        con.execute(DP + "COUNT(*) FROM adult").fetchall()
        (scope, eps, *_), = con.execute("SHOW BUDGET").fetchall()[:1]
        assert scope == "analyst bob" and float(eps) == pytest.approx(0.9)
    server.stop()
    with Owner(demo_db, create=False) as o:
        assert [r[2] for r in o.ledger()] == ["bob"]
    server.__init__(demo_db)


def test_analysts_cannot_read_the_logins(server):
    with psycopg.connect(server.url("demo"), autocommit=True) as con:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            con.execute("SELECT * FROM dpgate.logins")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            con.execute("dpgate ledger")


# -- statements ----------------------------------------------------------------------------------
def test_a_dp_answer_with_parameters_intervals_and_notices(server):
    with psycopg.connect(server.url("demo"), autocommit=True) as con:
        notices = notices_of(con)
        cur = con.execute(DP.replace("0.1", "%s") + "sex, COUNT(*) AS n FROM adult WHERE age > %s GROUP BY sex ORDER BY sex",
                          [0.2, 60])  # fmt: skip
        assert [c.name for c in cur.description] == ["sex", "n", "n_ci_low", "n_ci_high"]
        assert [c.type_code for c in cur.description] == [25, 20, 20, 20]
        rows = cur.fetchall()
        assert [r[0] for r in rows] == ["Female", "Male"] and all(lo <= n <= hi for _, n, lo, hi in rows)
        assert notices[0].startswith("cost: ε 0.2, δ 0 · your quota left: ε 9.8")
        assert notices[1] == "population: all 32,561 subjects on the roster"
        notices.clear()
        con.execute("SET dp_intervals = false")
        assert [c.name for c in con.execute(DP + "COUNT(*) AS n FROM adult").description] == ["n"]
        assert notices[0] == "SET dp_intervals = False"


def test_errors_carry_sqlstate_code_and_hint(server):
    with psycopg.connect(server.url("bob"), autocommit=True) as con:
        cases = [
            ("SELECT age FROM adult", psycopg.errors.FeatureNotSupported, "DP211"),
            ("SELEC 1", psycopg.errors.SyntaxError, "DP201"),
            ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1) COUNT(*) FROM adult",
             psycopg.errors.ConfigurationLimitExceeded, "DP4"),  # after 0.95 of bob's 1.0
        ]  # fmt: skip
        con.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.95) COUNT(*) FROM adult").fetchall()
        for sql, cls, code in cases:
            with pytest.raises(cls) as e:
                con.execute(sql)
            assert e.value.diag.message_detail.startswith(f"dpgate {code}") and e.value.diag.message_hint
        assert con.execute("SELECT 41 + 1").fetchone() == (42,)  # the session goes on


def test_types_round_trip_as_postgresql_types(server):
    import datetime
    from decimal import Decimal

    with psycopg.connect(server.url("demo"), autocommit=True) as con:
        row = con.execute(
            "SELECT true, 7::TINYINT, 2::BIGINT ** 40, 170141183460469231731687303715884105727::HUGEINT, 1.25::DOUBLE, "
            "'inf'::DOUBLE, 12.5::DECIMAL(6, 2), DATE '2024-02-29', TIMESTAMP '2024-02-29 12:00:01', 'x''y', NULL, "
            "[1, 2], TIMESTAMPTZ '2024-01-01 00:00:00+00'"
        ).fetchone()
    assert row[:2] == (True, 7) and row[3] == 2**127 - 1 and row[4] == 1.25 and row[5] == float("inf")
    assert row[6] == Decimal("12.50") and row[7] == datetime.date(2024, 2, 29) and row[9] == "x'y" and row[10] is None
    assert row[8] == datetime.datetime(2024, 2, 29, 12, 0, 1) and row[11] == "[1, 2]"
    assert row[12] == datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)


def test_prepared_statements_run_many_times(server):
    with psycopg.connect(server.url("demo"), autocommit=True, prepare_threshold=0) as con:
        got = [con.execute("SELECT count(*) FROM country_regions WHERE region = %s", [r]).fetchone()[0]
               for r in ("Europe", "Asia", "Europe")]  # fmt: skip
    assert got == [12, 12, 12]


def test_deallocate_and_discard_all_clean_up_prepared_statements(server):
    """psycopg sends DEALLOCATE ALL (and poolers DISCARD ALL); they were refused as unknown statements.
    They drop the connection's prepared statements and reach no database;
    psycopg, seeing their tags, prepares its statements again."""
    with psycopg.connect(server.url("demo"), autocommit=True, prepare_threshold=0) as con:
        sql = "SELECT count(*) FROM country_regions WHERE region = %s"
        assert con.execute(sql, ["Europe"]).fetchone()[0] == 12  # prepared on the server
        assert con.execute("DEALLOCATE ALL").statusmessage == "DEALLOCATE ALL"
        assert con.execute(sql, ["Asia"]).fetchone()[0] == 12
        assert con.execute("DISCARD ALL").statusmessage == "DISCARD ALL"
        assert con.execute(sql, ["Europe"]).fetchone()[0] == 12
        with pytest.raises(psycopg.Error) as e:
            con.execute("DEALLOCATE nothing_of_that_name")
        assert "does not exist" in e.value.diag.message_primary


def test_dollar_numbers_inside_strings_and_comments_are_not_parameters(server):
    """The server counted every ``$n`` of a statement as a parameter, inside strings too: a SCRAM
    verifier ('SCRAM-SHA-256$4096:...') sent over the extended protocol was a statement of 4,096
    parameters, bound with none (DP602). Only ``$n`` outside strings, quoted
    names and comments count, as the statement's parser reads them."""
    assert parameter_numbers("SELECT $1, '$2', \"$3\", $$ $4 $$, $12 -- $5\n/* $6 */") == ["1", "12"]
    with psycopg.connect(server.url("demo"), autocommit=True) as con:
        res = con.pgconn.exec_params(b"SELECT count(*) FROM country_regions WHERE '$99999' <> $1", [b"x"], [25])
        assert res.status == psycopg.pq.ExecStatus.TUPLES_OK, res.error_message
        assert int(res.get_value(0, 0)) == con.execute("SELECT count(*) FROM country_regions").fetchone()[0]
        verifier = scram.make_verifier("a password of demo's")
        res = con.pgconn.exec_params(f"ALTER ROLE demo PASSWORD '{verifier}'".encode(), [])
        assert res.status == psycopg.pq.ExecStatus.COMMAND_OK, res.error_message
    with psycopg.connect(server.url("demo", "a password of demo's"), autocommit=True) as con:
        assert con.execute("SELECT CURRENT_USER").fetchone() == ("demo",)


def test_transactions_are_accepted_and_refund_nothing(server):
    with psycopg.connect(server.url("bob")) as con:  # psycopg opens a transaction by itself
        notices = notices_of(con)
        con.execute(DP + "COUNT(*) FROM adult").fetchall()
        with pytest.raises(psycopg.errors.FeatureNotSupported):
            con.execute("SELECT age FROM adult")
        with pytest.raises(psycopg.errors.InFailedSqlTransaction):
            con.execute("SELECT 1")
        con.rollback()
        assert "a rollback refunds nothing" in notices[-1]
        assert float(con.execute("SHOW BUDGET").fetchone()[1]) == pytest.approx(0.9)


def test_a_simple_query_runs_its_statements_in_order_and_stops_at_an_error(server):
    assert split_statements("SELECT ';' AS a; -- c;\nSELECT 2 /* ; */;; ") == ["SELECT ';' AS a", "-- c;\nSELECT 2 /* ; */"]
    with psycopg.connect(server.url("demo"), autocommit=True) as con:
        cur = con.cursor()
        cur.execute("SET dp_epsilon = 0.05; SELECT 1 AS one")
        assert cur.statusmessage == "SET" and cur.nextset() and cur.fetchall() == [(1,)]
        with pytest.raises(psycopg.errors.FeatureNotSupported):
            cur.execute("SET dp_epsilon = 0.5; SELECT age FROM adult; SET dp_epsilon = 0.7")
        assert cur.execute("SHOW BUDGET").fetchone()[4].endswith("session ε=0.5, δ=1e-06")


def test_cancel_stops_a_running_statement(server):
    with psycopg.connect(server.url("demo"), autocommit=True) as con:
        threading.Timer(0.5, con.cancel_safe).start()
        start = time.monotonic()
        with pytest.raises(psycopg.errors.QueryCanceled):
            con.execute("SELECT count(*) FROM range(100000000000) a")
        assert time.monotonic() - start < 10
        assert con.execute("SELECT 1").fetchone() == (1,)


# -- the owner over the server -------------------------------------------------------------------
def test_the_owner_runs_owner_commands(server, tmp_path):
    with psycopg.connect(server.url("boss", OWNER_PASSWORD), autocommit=True) as con:
        notices = notices_of(con)
        con.execute("dpgate analyst add carol --epsilon 3")
        # the demo's own analyst can use up most subjects' budgets alone: the owner is told so
        assert notices[0] == "analyst carol: ε quota 3, δ quota 1e-05" and len(notices) == 2
        assert notices[1].startswith("note: the analysts' quotas (ε 14 in all) can use up") and "demo alone" in notices[1]
        names = [r[0] for r in con.execute("dpgate budget").fetchall()]
        assert names == ["bob", "carol", "demo"]
        assert notices[-1] == notices[1]  # dpgate budget tells it too
        verifier = scram.make_verifier("carol's password")
        con.execute(f"ALTER ROLE carol PASSWORD '{verifier}'")  # what psql's \password sends
        with pytest.raises(psycopg.errors.SyntaxErrorOrAccessRuleViolation) as e:
            con.execute("SELECT 1")
        assert "owner commands" in e.value.diag.message_primary
        with pytest.raises(psycopg.errors.SyntaxErrorOrAccessRuleViolation):
            con.execute("dpgate analyst add")  # argparse's complaint comes back as an error
    with psycopg.connect(server.url("carol", "carol's password"), autocommit=True) as con:
        assert con.execute("SHOW BUDGET").fetchone()[0] == "analyst carol"
        assert con.execute("SELECT CURRENT_USER").fetchone() == ("carol",)  # psql's \password asks this first
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            con.execute(f"ALTER ROLE bob PASSWORD '{verifier}'")
        con.execute("ALTER USER carol PASSWORD 'a new password'")  # plain text is hashed on arrival
    with psycopg.connect(server.url("carol", "a new password"), autocommit=True) as con:
        con.execute(DP + "COUNT(*) FROM adult").fetchall()
    with psycopg.connect(server.url("boss", OWNER_PASSWORD), autocommit=True) as con:
        ledger = con.execute("dpgate ledger --analyst carol").fetchall()
        assert len(ledger) == 1 and ledger[0][2] == "carol"


def test_a_remembered_answer_over_the_server_and_the_owners_listing(server):
    """The memory is on in the shipped demo (the test fixture turns it off): the owner turns it on
    over the server; a repeat comes back free with its note as a notice, and EXPLAIN PRIVACY says so."""
    with psycopg.connect(server.url("boss", OWNER_PASSWORD), autocommit=True) as con:
        notices = notices_of(con)
        assert con.execute("dpgate answers --mode own").fetchall() == []
        assert "each analyst gets their own again for free (own)" in notices[-1]
    q = DP + "sex, COUNT(*) AS n FROM adult GROUP BY sex"
    with psycopg.connect(server.url("demo"), autocommit=True) as con:
        notices = notices_of(con)
        first = con.execute(q).fetchall()
        again = con.execute(q).fetchall()
        assert again == first and notices[-3].startswith("cost: ε 0, δ 0")
        assert "remembered: nothing was charged" in notices[-1]
        assert con.execute("EXPLAIN PRIVACY " + q).fetchone()[1] == "remembered"
    with psycopg.connect(server.url("boss", OWNER_PASSWORD), autocommit=True) as con:
        (row,) = con.execute("dpgate answers").fetchall()
        assert row[:2] == ("demo", 1)


# -- psql -------------------------------------------------------------------------------------------
def test_psql_asks_and_prints_notices_and_errors(server):
    psql = system_tool("psql", "postgresql-client")
    env = {**os.environ, "PGPASSWORD": PASSWORD, "PGCONNECT_TIMEOUT": "5"}
    run = subprocess.run(
        [psql, f"postgresql://demo@127.0.0.1:{server.port}/dpgate", "-X", "-v", "ON_ERROR_STOP=0",
         "-c", DP + "sex, COUNT(*) AS n FROM adult GROUP BY sex ORDER BY sex", "-c", "SELECT age FROM adult"],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert "NOTICE:  cost: ε 0.1" in run.stderr and "NOTICE:  population: all 32,561 subjects" in run.stderr
    assert " sex " in run.stdout and "n_ci_low" in run.stdout and "(2 rows)" in run.stdout
    assert "ERROR:  This query reads rows of protected table adult" in run.stderr
    assert "DETAIL:  dpgate DP211" in run.stderr and "HINT:  aggregate with COUNT(*)" in run.stderr


# -- dpgate.connect and the shell over a URL ------------------------------------------------------------
def test_dpgate_connect_over_a_url_matches_the_embedded_connection(server):
    with dpgate.connect(server.url("demo", None), password=PASSWORD) as con:
        cur = con.execute(DP + "race, COUNT(*) AS n, AVG(age) AS a FROM adult GROUP BY race ORDER BY race")
        assert [d[0] for d in cur.description] == ["race", "n", "a"]
        rows = cur.fetchall()
        assert len(rows) == 5 and len(cur.release.intervals) == 5
        lo, hi = cur.release.intervals[0]["n"]
        assert lo <= rows[0][1] <= hi and cur.release.epsilon == 0.1 and cur.release.population.whole
        assert cur.messages[0].startswith("cost: ε 0.1")
        assert con.budget() == pytest.approx((9.9, 1e-5))
        assert con.execute("SELECT count(*) FROM country_regions WHERE region = ?", ["Asia"]).fetchone() == (12,)
        with pytest.raises(dpgate.UnsupportedQueryError) as e:
            con.execute("SELECT age FROM adult")
        assert e.value.code == "DP211" and "COUNT(*)" in e.value.hint
        assert con.gateway.cost(DP + "COUNT(*) FROM adult") == (0.1, 0.0)
        assert con.gateway.tables()["adult"][0] == "protected"
        con.execute("SET dp_intervals = true")
        assert "n_ci_low" in [d[0] for d in con.execute(DP + "COUNT(*) AS n FROM adult").description]
    with pytest.raises(dpgate.OperationalError) as e:
        dpgate.connect(server.url("demo", "wrong password"))
    assert e.value.code == "DP712"


def test_the_shell_reads_a_script_from_a_server(server):
    script = DP + "COUNT(*) AS n FROM adult;\nSHOW BUDGET;\n"
    run = subprocess.run(
        [sys.executable, "-m", "dpgate", "shell", server.url("demo")], input=script, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "ε charged 0.1" in run.stdout and "population: all 32,561" in run.stdout and "analyst demo" in run.stdout


def test_tls_is_required_when_the_server_has_a_certificate(demo_db, tmp_path):
    from dpgate.server.serve import tls_context

    openssl = system_tool("openssl", "openssl")  # it makes the test certificate
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=localhost"], check=True, capture_output=True)  # fmt: skip
    add_logins(demo_db, ["demo"])
    s = ThreadServer(demo_db, tls=tls_context(str(cert), str(key)))
    try:
        with psycopg.connect(s.url("demo") + "?sslmode=require", autocommit=True) as con:
            assert con.pgconn.ssl_in_use
            assert con.execute(DP + "COUNT(*) AS n FROM adult").fetchone()[0] > 30000
        with pytest.raises(psycopg.OperationalError, match="requires TLS"):
            psycopg.connect(s.url("demo") + "?sslmode=disable", connect_timeout=5)
    finally:
        s.stop()



def test_a_statement_that_runs_too_long_is_interrupted(demo_db):
    add_logins(demo_db, ["demo"])
    s = ThreadServer(demo_db, statement_timeout=1.0)
    try:
        with psycopg.connect(s.url("demo"), autocommit=True) as con:
            start = time.monotonic()
            with pytest.raises(psycopg.errors.QueryCanceled, match="statement timeout"):
                con.execute("SELECT count(*) FROM range(100000000000) a")
            assert time.monotonic() - start < 10
            assert con.execute("SELECT 1").fetchone() == (1,)
    finally:
        s.stop()


def test_the_owner_cannot_make_the_server_read_its_stdin(server):
    with psycopg.connect(server.url("boss", OWNER_PASSWORD), autocommit=True) as con:
        for flag in ("--password-stdin", "--password-std", "--pass", "--p"):
            with pytest.raises(psycopg.errors.SyntaxErrorOrAccessRuleViolation, match="no stdin"):
                con.execute(f"dpgate login demo {flag}")
