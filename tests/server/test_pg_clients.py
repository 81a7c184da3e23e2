"""PostgreSQL clients' introspection against dpgate serve: psql's \\dt, \\d, \\l; SQLAlchemy's engine,
its inspector and pandas.read_sql; the PostgreSQL JDBC driver's DatabaseMetaData. The catalogs show
what SHOW TABLES and DESCRIBE show to the analyst who logged in, and no row."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import psycopg
import pytest
from conftest import REQUIRE_TOOLS, system_tool

from dpgate.catalog.owner import Owner
from pgserver import PASSWORD, ThreadServer, add_logins

DP = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1) "
JDBC_JAR = Path("/usr/share/java/postgresql.jar")
#: A catalog query that runs for minutes (a count over a fourfold product of the columns' catalog).
LONG = ("SELECT count(*) FROM pg_catalog.pg_attribute a, pg_catalog.pg_attribute b, pg_catalog.pg_attribute c, "
        "pg_catalog.pg_attribute d")


@pytest.fixture
def server(demo_db):
    add_logins(demo_db, ["demo"])
    s = ThreadServer(demo_db, public_timeout=2.0)
    yield s
    s.stop()


def _visible(con: psycopg.Connection) -> dict[str, list[tuple[str, str]]]:
    """What SHOW TABLES and DESCRIBE show the analyst: each table's columns and types."""
    names = [r[0] for r in con.execute("SHOW TABLES").fetchall()]
    return {n: [(r[0], r[1]) for r in con.execute(f'DESCRIBE "{n}"').fetchall()] for n in names}


def _budget(con: psycopg.Connection) -> list[tuple]:
    return con.execute("SHOW BUDGET").fetchall()


def _remaining(con: psycopg.Connection) -> float:
    """The analyst's ε left (SHOW BUDGET's first row)."""
    return float(con.execute("SHOW BUDGET").fetchone()[1])


def test_the_catalogs_list_what_show_tables_lists_and_no_row(server):
    with psycopg.connect(server.url("demo"), autocommit=True) as con:
        visible = _visible(con)
        before = _budget(con)
        assert "subject_budgets" not in visible  # the demo's budget table is the owner's
        listed = con.execute("SELECT c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n "
                             "ON n.oid = c.relnamespace WHERE c.relkind IN ('r', 'v') ORDER BY 1").fetchall()  # fmt: skip
        assert [r[0] for r in listed] == sorted(visible)
        info = con.execute("SELECT table_name FROM information_schema.tables ORDER BY 1").fetchall()
        assert [r[0] for r in info] == sorted(visible)
        cols = con.execute("SELECT column_name FROM information_schema.columns WHERE table_name = 'adult' "
                           "ORDER BY ordinal_position").fetchall()  # fmt: skip
        assert [r[0] for r in cols] == [c for c, _ in visible["adult"]]
        # A catalog query that names a table reads an empty one: the catalogs hold no row.
        assert con.execute("SELECT count(*) FROM pg_catalog.pg_class, adult").fetchone() == (0,)
        assert con.execute("SELECT count(*), max(age) FROM adult WHERE version() <> ''").fetchone() == (0, None)
        assert con.execute("SELECT version()").fetchone()[0].startswith("PostgreSQL 15.0 (dpgate ")
        assert con.execute("SELECT current_database(), current_schema()").fetchone() == ("dpgate", "main")
        assert _budget(con) == before  # free


def test_catalog_queries_run_locked_down_and_stop_at_the_public_time_limit(server):
    with psycopg.connect(server.url("demo"), autocommit=True) as con:
        for refused in ("SELECT * FROM pg_catalog.pg_class, read_csv('/etc/passwd')",  # files
                        "SELECT * FROM duckdb_settings(), pg_catalog.pg_class",  # the server's settings, paths
                        "SELECT current_setting('temp_directory'), version()",
                        "SELECT len(range(600000000)), version()",  # a value as large as a number
                        "SELECT len(generator(1000000000)), version()",  # ... under another name (sqlglot's)
                        "SELECT length(replace(replace('xx', 'x', 'xxxx'), 'x', 'xxxx')), version()",
                        'SELECT "current_setting"(\'secret_directory\'), version()',  # quoted
                        "SELECT * FROM pg_catalog.pg_namespace n, LATERAL enable_logging(storage := 'file') x",
                        "SELECT * FROM pg_catalog.pg_namespace n, LATERAL json_execute_serialized_sql("
                        "json_serialize_sql('SELECT 1')) j",  # SQL from a string
                        "SELECT count(*) FROM " + ", ".join(f"pg_catalog.pg_namespace a{i}" for i in range(30)),
                        "SELECT * INTO copied FROM pg_catalog.pg_class",  # a CREATE TABLE
                        # a VARIANT as deep as the JSON text string_agg gathers: DuckDB's work on it recursed per
                        # level and killed the server (1.5 and 2.0)
                        "SELECT CAST(CAST(string_agg('[', '') || string_agg(']', '') AS JSON) AS VARIANT)::VARCHAR "
                        "FROM generate_series(1, 200000) g, pg_catalog.pg_class c"):
            with pytest.raises(psycopg.errors.FeatureNotSupported) as e:
                con.execute(refused)
            assert "DP220" in e.value.diag.message_detail, refused
        assert con.execute("SELECT name FROM pg_catalog.pg_settings").fetchall() == []  # not DuckDB's settings
        # a catalog query does not wait (outside one, pg_sleep is refused like any function that reaches the server)
        assert con.execute("SELECT pg_sleep(30), 1 FROM pg_catalog.pg_namespace").fetchone() == (None, 1)
        start = time.monotonic()
        with pytest.raises(psycopg.errors.QueryCanceled):
            con.execute(LONG)
        assert time.monotonic() - start < 30
        threading.Timer(0.5, con.cancel_safe).start()  # a cancel reaches it too
        with pytest.raises(psycopg.errors.QueryCanceled):
            con.execute(LONG)
        assert con.execute("SELECT 1").fetchone() == (1,)


def test_savepoints_inside_a_transaction_refund_nothing(server):
    with psycopg.connect(server.url("demo")) as con:  # psycopg opens a transaction; nested ones are savepoints
        before = _remaining(con)
        with con.transaction():
            con.execute(DP + "COUNT(*) FROM adult")
            with pytest.raises(psycopg.errors.FeatureNotSupported), con.transaction():
                con.execute("SELECT age FROM adult LIMIT 1 FOR UPDATE")
            con.execute(DP + "COUNT(*) FROM adult")  # the transaction goes on after ROLLBACK TO SAVEPOINT
        assert _remaining(con) == pytest.approx(before - 0.2)  # both charged: a rollback refunds nothing


def test_psql_lists_and_describes_tables(server):
    psql = system_tool("psql", "postgresql-client")
    env = {**os.environ, "PGPASSWORD": PASSWORD, "PGCONNECT_TIMEOUT": "5"}

    def run(command: str) -> subprocess.CompletedProcess:
        return subprocess.run([psql, f"postgresql://demo@127.0.0.1:{server.port}/dpgate", "-X", "-c", command],
                              capture_output=True, text=True, env=env, timeout=60)  # fmt: skip

    dt = run("\\dt")
    assert dt.returncode == 0, dt.stderr
    assert " adult " in dt.stdout and " country_regions " in dt.stdout and "subject_budgets" not in dt.stdout
    d = run("\\d adult")
    assert d.returncode == 0, d.stderr
    assert 'Table "main.adult"' in d.stdout
    assert " age " in d.stdout and "integer" in d.stdout and "character varying" in d.stdout
    listing = run("\\l")
    assert listing.returncode == 0 and " dpgate " in listing.stdout, listing.stderr
    assert run("\\dn").stdout.count(" main ") == 1


def test_sqlalchemy_connects_inspects_and_pandas_reads_a_dp_answer(server):
    sa = pytest.importorskip("sqlalchemy")
    pd = pytest.importorskip("pandas")
    engine = sa.create_engine(server.url("demo").replace("postgresql://", "postgresql+psycopg://"))
    try:
        inspector = sa.inspect(engine)
        assert "adult" in inspector.get_table_names() and "subject_budgets" not in inspector.get_table_names()
        columns = {c["name"]: c["type"] for c in inspector.get_columns("adult")}
        assert isinstance(columns["age"], sa.Integer) and isinstance(columns["sex"], sa.String)
        frame = pd.read_sql(DP + "sex, COUNT(*) AS n FROM adult GROUP BY sex ORDER BY sex", engine)
        assert list(frame.columns) == ["sex", "n", "n_ci_low", "n_ci_high"] and list(frame["sex"]) == ["Female", "Male"]
    finally:
        engine.dispose()


def test_the_jdbc_driver_lists_tables_and_columns_and_runs_a_query(server):
    system_tool("java", "default-jre-headless (Java 17 or later)")
    if not JDBC_JAR.exists():
        if REQUIRE_TOOLS:
            pytest.fail(f"{JDBC_JAR} is missing: .ci/run installs libpostgresql-jdbc-java")
        pytest.skip("the PostgreSQL JDBC driver is not installed (Debian: libpostgresql-jdbc-java)")
    pytest.importorskip("jpype")
    client = Path(__file__).with_name("jdbcclient.py")
    run = subprocess.run(
        [sys.executable, str(client), str(JDBC_JAR), str(server.port), "demo", PASSWORD,
         DP + "sex, COUNT(*) AS n FROM adult GROUP BY sex ORDER BY sex"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    out = json.loads(run.stdout)
    assert out["product"] == "PostgreSQL"
    tables = {name: kind for _, name, kind in out["tables"]}
    assert tables["adult"] == "TABLE" and "subject_budgets" not in tables
    assert ["age", "int4", 4] in out["columns"] or out["tables"][0][1] != "adult"
    assert [r[0] for r in out["rows"]] == ["Female", "Male"] and len(out["rows"][0]) == 4


def test_an_owner_session_runs_owner_commands_not_catalog_queries(server, demo_db):
    add_logins(demo_db, [], owner="boss")
    from pgserver import OWNER_PASSWORD

    with Owner(demo_db, create=False):
        pass
    with psycopg.connect(server.url("boss", OWNER_PASSWORD), autocommit=True) as con:
        with pytest.raises(psycopg.Error) as e:
            con.execute("SELECT relname FROM pg_catalog.pg_class")
        assert "DP702" in str(e.value.diag.message_detail)


def test_long_runs_of_spaces_are_read_in_linear_time(server):
    """The server's statement patterns ran in time growing with the square (or cube) of a run of
    spaces, holding every session: each of these is answered at once."""
    with psycopg.connect(server.url("demo"), autocommit=True) as con, psycopg.connect(server.url("demo"), autocommit=True) as other:
        pad = " " * 100_000
        for text in (f"SAVEPOINT x{pad}y", f"dpgate x{pad}y", f"SHOW password_encryption{pad}x",
                     f"SELECT version(){pad}x", f"DEALLOCATE x{pad}y", "SELECT 1 " + "/* " * 20_000):
            start = time.monotonic()
            try:
                con.execute(text)
            except psycopg.Error:
                pass  # most are refused; what matters is how soon
            assert time.monotonic() - start < 5, text[:20]
            assert other.execute("SELECT 1").fetchone() == (1,)
        with pytest.raises(psycopg.Error) as e:  # a simple query's whole text is bounded before it is read
            con.execute("SELECT 1" + " " * 300_000)
        assert "DP259" in e.value.diag.message_detail
