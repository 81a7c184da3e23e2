"""Classification: what a statement is, and the refusals that keep raw data in (DESIGN.md 1.8)."""

from __future__ import annotations

import duckdb
import pytest

import dpgate
from dpgate import errors
from dpgate.frontend.classify import classify, is_forbidden_function
from dpgate.frontend.dialect import parse_one


@pytest.fixture
def views_db(make_db, tmp_path):
    db = make_db(
        "CREATE TABLE t (uid INT, x INT); INSERT INTO t VALUES (1, 2), (2, 3);"
        "CREATE TABLE pub (k INT, name VARCHAR); INSERT INTO pub VALUES (1, 'one'), (2, 'two');"
        "CREATE VIEW pub_view AS SELECT k, upper(name) AS name FROM pub;"
        "CREATE VIEW leak AS SELECT * FROM t;"
        "CREATE VIEW leak2 AS SELECT * FROM pub_view JOIN leak ON pub_view.k = leak.uid;"
        "CREATE VIEW hidden AS SELECT * FROM (SELECT x FROM t) s;"
        "CREATE MACRO peek() AS (SELECT max(x) FROM t);"
        "CREATE MACRO rows_of_t() AS TABLE SELECT * FROM t;",
        {"t": dict(unit="uid")},
    )
    return db


def kind(con, sql):
    g = con.gateway
    return classify(parse_one(sql), g.catalog()).kind


def test_statement_kinds(con):
    assert kind(con, "SELECT COUNT(*) FROM adult") == "dp"
    assert kind(con, "SELECT * FROM country_regions") == "public"
    assert kind(con, "SELECT 1") == "public"
    assert kind(con, "SHOW BUDGET") == "show_budget"
    assert kind(con, "SHOW TABLES") == "show_tables"
    assert kind(con, "DESCRIBE adult") == "describe"
    assert kind(con, "SET dp_epsilon = 1") == "set"
    assert kind(con, "EXPLAIN PRIVACY SELECT COUNT(*) FROM adult") == "explain"


@pytest.mark.parametrize("view", ["leak", "leak2", "hidden"])
def test_views_over_protected_tables_are_refused(views_db, view):
    with dpgate.connect(str(views_db), analyst="alice") as con:
        with pytest.raises(errors.NotSupportedError) as info:
            con.cursor().execute(f"SELECT * FROM {view}")
        assert info.value.code == "DP224"


def test_views_over_public_tables_pass(views_db):
    with dpgate.connect(str(views_db), analyst="alice") as con:
        assert con.cursor().execute("SELECT name FROM pub_view ORDER BY k").fetchall() == [("ONE",), ("TWO",)]


@pytest.mark.parametrize("sql", ["SELECT peek()", "SELECT * FROM rows_of_t()"])
def test_owner_macros_are_refused(views_db, sql):
    with dpgate.connect(str(views_db), analyst="alice") as con:
        with pytest.raises(errors.NotSupportedError) as info:
            con.cursor().execute(sql)
        assert info.value.code == "DP220"


def test_a_view_redefined_behind_our_back_is_seen(views_db):
    """The catalog is re-read when any view changes, so a public view turned into a leak is caught."""
    with dpgate.connect(str(views_db), analyst="alice") as con:
        assert con.cursor().execute("SELECT count(*) FROM pub_view").fetchone() == (2,)
        raw = con.gateway._instance.root.cursor()
        raw.execute("CREATE OR REPLACE VIEW pub_view AS SELECT uid AS k, CAST(x AS VARCHAR) AS name FROM t")
        with pytest.raises(errors.NotSupportedError):
            con.cursor().execute("SELECT * FROM pub_view")


def test_a_view_replaced_while_the_file_was_closed_is_seen(views_db):
    """Views are fingerprinted by their catalog oids, which another opening of the file can repeat:
    a new opening reads the catalog afresh (and its bind cache is its own)."""
    import duckdb

    with dpgate.connect(str(views_db), analyst="alice") as con:
        assert con.cursor().execute("SELECT count(*) FROM pub_view").fetchone() == (2,)
    raw = duckdb.connect(str(views_db))
    raw.execute("CREATE OR REPLACE VIEW pub_view AS SELECT uid AS k, CAST(x AS VARCHAR) AS name FROM t")
    raw.close()
    with dpgate.connect(str(views_db), analyst="alice") as con:
        with pytest.raises(errors.NotSupportedError):
            con.cursor().execute("SELECT * FROM pub_view")


def _once(monkeypatch, target, name, action):
    """Wrap ``target.name`` so that ``action()`` runs right after its first call."""
    original = getattr(target, name)
    done = []

    def wrapped(*args, **kwargs):
        out = original(*args, **kwargs)
        if not done:
            done.append(True)
            action()
        return out

    monkeypatch.setattr(target, name, wrapped)


def test_a_view_replaced_between_classification_and_execution_is_never_read(views_db, monkeypatch):
    """A statement was classified against the public view and could be executed
    against its replacement over protected t. The catalog read, the classification and the execution
    now share one transaction: the view is expanded as it was classified, and the next statement
    sees (and refuses) the replacement."""
    import dpgate.gateway as gateway_mod

    with dpgate.connect(str(views_db), analyst="alice") as con:
        owner = con.gateway._instance.root.cursor()
        _once(monkeypatch, gateway_mod, "classify", lambda: owner.execute(
            "CREATE OR REPLACE VIEW pub_view AS SELECT uid AS k, CAST(x AS VARCHAR) AS name FROM t"))
        rows = con.cursor().execute("SELECT name FROM pub_view ORDER BY k").fetchall()
        assert rows == [("ONE",), ("TWO",)]  # the public view as classified, never t's values
        with pytest.raises(errors.NotSupportedError) as info:
            con.cursor().execute("SELECT * FROM pub_view")
        assert info.value.code == "DP224"


def test_a_catalog_change_after_the_debit_fails_closed(views_db, monkeypatch):
    """The exact pass runs in a snapshot whose catalog is the one the query was planned against:
    a change the owner makes after the debit is never half-seen; the debit stands, nothing leaves."""
    from dpgate.ledger import Ledger

    with dpgate.connect(str(views_db), analyst="alice") as con:
        owner = con.gateway._instance.root.cursor()
        before = con.gateway.ledger.remaining("alice")
        _once(monkeypatch, Ledger, "reserve", lambda: owner.execute(
            "CREATE OR REPLACE VIEW pub_view AS SELECT k, lower(name) AS name FROM pub"))
        with pytest.raises(errors.OperationalError) as info:
            con.cursor().execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5) COUNT(*) FROM t")
        assert info.value.code == "DP404"
        assert con.gateway.ledger.remaining("alice")[0] == pytest.approx(before[0] - 0.5)
        monkeypatch.undo()
        assert con.cursor().execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5) COUNT(*) FROM t").fetchall()


def test_a_schema_changed_and_changed_back_leaves_no_stale_bind(make_db, monkeypatch):
    """An EXPLAIN that succeeded against a schema of the moment was cached
    under the catalog the statement had read; the owner changed the column back, and another
    connection's statement took the cached success and failed after its debit (DP404)."""
    import dpgate.gateway as gateway_mod

    path = make_db("CREATE TABLE t (uid INT, x TIME); INSERT INTO t VALUES (1, TIME '10:00:00'), (2, TIME '11:00:00');",
                   {"t": dict(unit="uid")})  # fmt: skip
    q = "SELECT count(*) FROM t WHERE date_part('year', x) > 1990"
    with dpgate.connect(str(path), analyst="alice") as con:
        owner = con.gateway._instance.root.cursor()
        _once(monkeypatch, gateway_mod, "classify", lambda: owner.execute(
            "ALTER TABLE t ALTER x TYPE TIMESTAMP USING DATE '2000-01-01' + x"))
        con.cursor().execute(q).fetchall()  # planned again under the TIMESTAMP column
        owner.execute("ALTER TABLE t ALTER x TYPE TIME USING CAST(x AS TIME)")
        with dpgate.connect(str(path), analyst="alice") as con2:
            before = con2.gateway.ledger.remaining("alice")
            with pytest.raises(errors.ProgrammingError) as info:
                con2.cursor().execute(q)
            assert info.value.code == "DP230"  # refused before the debit
            assert con2.gateway.ledger.remaining("alice") == before


@pytest.mark.parametrize("macro, sql", [
    ("CREATE MACRO lower(a) AS (SELECT string_agg(CAST(x AS VARCHAR), ',') FROM t)", "SELECT lower('X')"),
    ("CREATE MACRO range(a) AS TABLE SELECT * FROM t", "SELECT * FROM range(3)"),
])  # fmt: skip
def test_a_macro_named_like_a_built_in_stops_every_statement(views_db, monkeypatch, macro, sql):
    """DuckDB resolves a function in the main schema
    before its built-ins, so an owner's macro named lower() ran as lower() and returned t's rows.
    Such a macro stops the gateway (DP307), at connect and within SHADOW_RECHECK seconds after."""
    import duckdb

    from dpgate.catalog import tables

    raw = duckdb.connect(str(views_db))
    raw.execute(macro)
    raw.close()
    with pytest.raises(errors.PolicyError) as info:
        dpgate.connect(str(views_db), analyst="alice")
    assert info.value.code == "DP307" and "2" not in str(info.value).split(":")[1]  # names, never values
    raw = duckdb.connect(str(views_db))
    raw.execute("DROP MACRO " + ("TABLE range" if "range" in macro else "lower"))
    raw.close()
    monkeypatch.setattr(tables, "SHADOW_RECHECK", 0.0)
    with dpgate.connect(str(views_db), analyst="alice") as con:
        con.cursor().execute("SELECT count(*) FROM pub").fetchall()
        con.gateway._instance.root.cursor().execute(macro)  # created while the analyst is connected
        with pytest.raises(errors.PolicyError) as info:
            con.cursor().execute(sql)
        assert info.value.code == "DP307"


@pytest.mark.parametrize("explain", [False, True])
def test_planning_reads_public_tables_in_the_classified_catalog(views_db, monkeypatch, explain):
    """Planning read a public view's distinct values (a GROUP BY domain) after
    the owner had replaced it by one over protected t: a conversion error quoted a protected value.
    Planning now runs pinned too: the replacement is classified, and refused, before any charge."""
    import dpgate.gateway as gateway_mod

    with dpgate.connect(str(views_db), analyst="alice") as con:
        owner = con.gateway._instance.root.cursor()
        before = con.gateway.ledger.remaining("alice")
        _once(monkeypatch, gateway_mod, "classify", lambda: owner.execute(
            "CREATE OR REPLACE VIEW pub_view AS SELECT uid AS k, CAST(CAST(x * 1000 AS VARCHAR) || '-secret' AS INT) "
            "AS name FROM t"))  # planning its domain fails, quoting t's values
        sql = ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5) pv.name, COUNT(*) FROM t "
               "JOIN pub_view pv ON t.uid = pv.k GROUP BY pv.name")  # fmt: skip
        if explain:  # planned in the classified catalog: the public view's domain, never t's values
            sql = "EXPLAIN PRIVACY " + sql.replace("WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5) ", "")
            assert "secret" not in str(con.cursor().execute(sql).fetchall())
        else:  # its bind check meets the replacement: it starts over, and the replacement is refused
            with pytest.raises(errors.NotSupportedError) as info:
                con.cursor().execute(sql)
            assert "secret" not in str(info.value)
        with pytest.raises(errors.NotSupportedError) as info:
            con.cursor().execute(sql)
        assert info.value.code == "DP224" and "secret" not in str(info.value)
        assert con.gateway.ledger.remaining("alice") == before


def test_an_unrelated_table_created_after_the_debit_does_not_fail_the_query(views_db, monkeypatch):
    """Any change to the catalog after a debit failed the query closed, so
    another analyst's new synthetic table cost this one an answer. Only what the statement names
    (and every view) counts."""
    from dpgate.ledger import Ledger

    with dpgate.connect(str(views_db), analyst="alice") as con:
        owner = con.gateway._instance.root.cursor()
        _once(monkeypatch, Ledger, "reserve", lambda: owner.execute("CREATE TABLE unrelated AS SELECT 1 AS a"))
        rows = con.cursor().execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5) COUNT(*) FROM t").fetchall()
        assert len(rows) == 1


def test_cte_named_like_a_table_is_refused(con):
    with pytest.raises(errors.UnsupportedQueryError) as info:
        con.cursor().execute("WITH adult AS (SELECT 1 AS x) SELECT * FROM adult")
    assert info.value.code == "DP216"


def test_public_ctes_and_subqueries_pass(con):
    rows = con.cursor().execute(
        "WITH r AS (SELECT region FROM country_regions) SELECT count(*) FROM (SELECT DISTINCT region FROM r)"
    ).fetchall()
    assert rows == [(5,)]


def test_dp_clause_on_public_query_is_refused(con):
    with pytest.raises(errors.UnsupportedQueryError) as info:
        con.cursor().execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) COUNT(*) FROM country_regions")
    assert info.value.code == "DP207"


@pytest.mark.parametrize(
    "name, forbidden",
    [("read_csv_auto", True), ("parquet_metadata", True), ("sqlite_scan", True), ("duckdb_settings", True),
     ("glob", True), ("upper", False), ("date_trunc", False), ("regexp_matches", False)],  # fmt: skip
)
def test_forbidden_function_names(name, forbidden):
    assert is_forbidden_function(name) is forbidden


def test_external_access_is_disabled_underneath(demo_db):
    """Defence in depth: even if a check were missed, DuckDB itself refuses file access."""
    with dpgate.connect(str(demo_db), analyst="demo") as con:
        raw = con.gateway._con
        with pytest.raises(duckdb.PermissionException):
            raw.execute("SELECT * FROM read_csv('/etc/hostname')")
        with pytest.raises(duckdb.Error):
            raw.execute("SET enable_external_access = true")


def test_a_view_that_shadows_a_table_with_a_cte_is_refused(make_db):
    db = make_db(
        "CREATE TABLE t (uid INT, x INT); INSERT INTO t VALUES (1, 2);"
        "CREATE VIEW shadow AS WITH t AS (SELECT * FROM t WHERE x > 0) SELECT * FROM t;",
        {"t": dict(unit="uid")},
    )
    with dpgate.connect(str(db), analyst="alice") as con:
        with pytest.raises(errors.NotSupportedError) as info:
            con.cursor().execute("SELECT * FROM shadow")
        assert info.value.code == "DP224"


@pytest.mark.parametrize("sql", [
    'SELECT * FROM (WITH "/tmp/secret.csv" AS (SELECT 1 AS z) SELECT z FROM "/tmp/secret.csv") AS a, "/tmp/secret.csv" AS b',
    "WITH q AS (SELECT 1) SELECT * FROM (WITH subjects_adult AS (SELECT 1 AS z) SELECT * FROM subjects_adult), subjects_adult",
])  # fmt: skip
def test_a_cte_name_outside_its_scope_is_a_table_name(con, sql):
    """A CTE's name used outside the CTE's scope was taken for the CTE, while
    DuckDB binds it to a real relation (a file; a view of dpgate's schema)."""
    with pytest.raises(errors.ProgrammingError) as info:
        con.cursor().execute(sql)
    assert info.value.code == "DP225"


def test_ctes_in_scope_still_read_as_ctes(con):
    cur = con.cursor()
    assert cur.execute("WITH a AS (SELECT 1 AS x), b AS (SELECT x FROM a) SELECT * FROM b").fetchall() == [(1,)]
    assert cur.execute("WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t WHERE n < 3) "
                       "SELECT count(*) FROM t").fetchall() == [(3,)]  # fmt: skip
    assert cur.execute("WITH a AS (SELECT 1 AS x) SELECT * FROM (SELECT * FROM a) s JOIN a USING (x)").fetchall() == [(1,)]
