"""The owner's declarations: Python API, policy files, rosters, and how analysts see changes."""

from __future__ import annotations

import tomllib
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest

import dpgate
from dpgate import errors
from dpgate.catalog.owner import Owner

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def raw_db(tmp_path):
    path = tmp_path / "o.duckdb"
    c = duckdb.connect(str(path))
    c.execute("CREATE TABLE t (uid INTEGER, city VARCHAR, x DOUBLE, eps DOUBLE); "
              "INSERT INTO t VALUES (1, 'a', 1.0, 0.5), (1, 'b', 2.0, 0.7), (2, 'a', 3.0, 2.0), (3, NULL, 4.0, NULL);"
              "CREATE TABLE b (person INTEGER, epsilon DOUBLE); INSERT INTO b VALUES (1, 3.0), (2, 4.0)")  # fmt: skip
    c.close()
    return path


def roster(owner):
    return dict(owner.con.execute("SELECT unit, epsilon_budget FROM dpgate.subjects_t ORDER BY unit").fetchall())


@pytest.mark.parametrize(
    "kwargs, code",
    [
        (dict(unit="nope"), "DP311"),
        (dict(unit="uid", max_rows=0), "DP312"),
        (dict(unit="uid", budget_column="eps", budget_table="b"), "DP313"),
        (dict(unit="uid", budget_column="nope"), "DP313"),
        (dict(unit="uid", budget_table="b"), "DP313"),  # b has no uid column
        (dict(unit="uid", bounds={"city": (0, 1)}), "DP315"),
        (dict(unit="uid", bounds={"x": (5, 1)}), "DP315"),
        (dict(unit="uid", domains={"x": ["high"]}), "DP316"),
        (dict(unit="uid", domains={"city": ["a", "a"]}), "DP316"),
        (dict(unit="uid", domains={"city": []}), "DP316"),
    ],
)
def test_bad_declarations(raw_db, kwargs, code):
    with Owner(raw_db) as o:
        with pytest.raises(errors.PolicyError) as info:
            o.protect("t", **kwargs)
        assert info.value.code == code
        assert "t" not in o.catalog().tables


def test_unknown_table(raw_db):
    with Owner(raw_db) as o, pytest.raises(errors.PolicyError) as info:
        o.protect("missing", unit="uid")
    assert info.value.code == "DP310"


def test_budget_sources(raw_db):
    with Owner(raw_db) as o:
        o.protect("t", unit="uid", epsilon=1.5)
        assert roster(o) == {1: Decimal("1.5"), 2: Decimal("1.5"), 3: Decimal("1.5")}
        o.unprotect("t")
        o.protect("t", unit="uid", budget_column="eps")
        assert roster(o) == {1: Decimal("0.5"), 2: Decimal(2), 3: Decimal(0)}  # smallest per subject; NULL -> 0
        o.unprotect("t")
        o.protect("t", unit="uid", budget_table="b", budget_table_unit="person")
        assert roster(o) == {1: Decimal(3), 2: Decimal(4)}  # subject 3 has no budget: never used
        o.unprotect("t")
        o.protect("t", unit="uid", budget_table="b", budget_table_unit="person", epsilon=0.25)
        assert roster(o) == {1: Decimal(3), 2: Decimal(4), 3: Decimal("0.25")}


def test_refresh_keeps_what_was_spent(raw_db):
    with Owner(raw_db) as o:
        o.protect("t", unit="uid", epsilon=2.0)
        o.add_analyst("al", epsilon=10)
    with dpgate.connect(str(raw_db), analyst="al") as con:
        con.cursor().execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5) COUNT(*) FROM t")
    with Owner(raw_db) as o:
        o.con.execute("INSERT INTO t VALUES (4, 'c', 1.0, 1.0)")
        assert o.refresh_roster("t") == 4
        spent = dict(o.con.execute("SELECT unit, epsilon_spent FROM dpgate.subjects_t").fetchall())
    assert spent == {1: Decimal("0.5"), 2: Decimal("0.5"), 3: Decimal("0.5"), 4: Decimal(0)}


def test_changing_the_unit_is_refused(raw_db):
    with Owner(raw_db) as o:
        o.protect("t", unit="uid")
        with pytest.raises(errors.PolicyError) as info:
            o.protect("t", unit="city")
        assert info.value.code == "DP314"


def test_redeclaring_updates_declarations(raw_db):
    with Owner(raw_db) as o:
        o.protect("t", unit="uid", bounds={"x": (0, 10)})
        o.declare("t", "city", domain=["a", "b", None])
        o.protect("t", unit="uid", max_rows=3)
        col = o.catalog().tables["t"].column("x")
        assert (col.lower, col.upper) == (0, 10)
        assert o.catalog().tables["t"].column("city").domain == ("a", "b", None)
        assert o.catalog().tables["t"].max_rows == 3


def test_analysts_see_owner_changes_without_reconnecting(raw_db):
    with Owner(raw_db) as o:
        o.protect("t", unit="uid")
        o.add_analyst("al", epsilon=10)
    with dpgate.connect(str(raw_db), analyst="al") as con:
        with pytest.raises(errors.PolicyError):
            con.cursor().execute("SELECT SUM(x) FROM t")
        with Owner(raw_db) as o:
            o.declare("t", "x", bounds=(0, 5))
        con.cursor().execute("SELECT SUM(x) FROM t")
        with Owner(raw_db) as o:
            o.add_analyst("al", epsilon=20)
        assert con.budget()[0] == pytest.approx(20 - 0.1)


def test_policy_file_errors(raw_db, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[tables.t]\nunit = "uid"\nmax_rowz = 3\n')
    with Owner(raw_db) as o, pytest.raises(errors.PolicyError) as info:
        o.apply_policy(bad)
    assert info.value.code == "DP330" and "max_rowz" in info.value.message and "max_rows" in info.value.hint
    broken = tmp_path / "broken.toml"
    broken.write_text("[tables.t\n")
    with Owner(raw_db) as o, pytest.raises(errors.PolicyError):
        o.apply_policy(broken)


def test_example_policy_file_applies(tmp_path):
    """examples/policy.toml is the annotated policy of docs/owners/declarations.md; it must work as written."""
    path = tmp_path / "ex.duckdb"
    c = duckdb.connect(str(path))
    c.execute((EXAMPLES / "company.sql").read_text())
    c.close()
    with Owner(path) as o:
        done = o.apply_policy(EXAMPLES / "policy.toml")
        cat = o.catalog()
    policy = tomllib.loads((EXAMPLES / "policy.toml").read_text())
    assert set(cat.tables) == set(policy["tables"])
    assert any(line.startswith("analyst alice") for line in done)


def test_tables_sharing_subjects_share_one_budget(tmp_path):
    path = tmp_path / "c.duckdb"
    c = duckdb.connect(str(path))
    c.execute((EXAMPLES / "company.sql").read_text())
    c.close()
    with Owner(path) as o:
        o.apply_policy(EXAMPLES / "policy.toml")
        cat = o.catalog()
        assert cat.tables["customers"].roster == cat.tables["purchases"].roster == "roster_customer"
    with dpgate.connect(str(path), analyst="alice") as con:
        con.cursor().execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) COUNT(*) FROM customers")
        con.cursor().execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) COUNT(*) FROM purchases")
        # every customer has now spent 2.0 = their whole budget: nothing is left for either table
        with pytest.raises(dpgate.BudgetExceededError):
            con.cursor().execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5) COUNT(*) FROM customers")
    with Owner(path) as o:
        spent = o.con.execute("SELECT min(epsilon_spent), max(epsilon_spent) FROM dpgate.subjects_customer").fetchone()
        assert spent == (Decimal(2), Decimal(2))
        with pytest.raises(errors.PolicyError) as info:
            o.protect("purchases", unit="customer_id", subjects="customer", epsilon=3.0)
        assert info.value.code == "DP317"


def test_a_roster_from_the_rows_is_announced_public(tmp_path):
    import warnings

    import duckdb

    path = tmp_path / "r.duckdb"
    raw = duckdb.connect(str(path))
    raw.execute("CREATE TABLE t AS SELECT i AS uid FROM range(7) r(i); CREATE TABLE u AS SELECT * FROM t")
    raw.close()
    with Owner(path) as owner:
        with pytest.warns(dpgate.RosterWarning, match=r"its size \(7 subjects\) becomes public"):
            owner.protect("t", unit="uid", epsilon=1.0)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            owner.protect("u", unit="uid", epsilon=1.0, public_roster=True)


def test_a_table_name_with_a_double_quote_is_queried_and_charged(tmp_path):
    """Its roster and subjects view are quoted in every statement (unquoted, SHOW BUDGET and
    every DP query on it failed)."""
    import duckdb

    import dpgate

    path = tmp_path / "q.duckdb"
    raw = duckdb.connect(str(path))
    raw.execute('CREATE TABLE "we""ird" AS SELECT i AS uid, i % 5 AS x FROM range(100) r(i)')
    raw.close()
    with Owner(path) as owner:
        owner.protect('we"ird', unit="uid", max_rows=1, epsilon=10.0, bounds={"x": (0, 5)}, public_roster=True)
        owner.add_analyst("a", epsilon=10.0, delta=1e-6)
    with dpgate.connect(str(path), analyst="a") as con:
        con.execute('SELECT COUNT(*) FROM "we""ird"').fetchall()
        rows = con.execute("SHOW BUDGET").fetchall()
        assert rows[0][1] == 9.9 and any(r[0] == 'we"ird: subjects' and r[3] == 100 for r in rows)


@pytest.mark.parametrize("declaration, domain, ok", [
    ("DECIMAL(10, 2)", [0.14, 0.15], True),
    ("DECIMAL(10, 2)", [0.145], False),  # 0.14 from the double, 0.15 from the text
    ("DECIMAL(10, 2)", ["0.145"], True),  # text: read one way only
    ("DECIMAL(10, 2)", [1, 1.0], False),  # one value twice
    ("FLOAT", [0.1, 0.5], True),  # both routes give the FLOAT nearest to 0.1
    ("FLOAT", [1.0000000596046448], False),  # 1 + 2^-24: 1.0 through a double, 1.00000012 from text
    ("INTEGER", [1, 2.0, 3.5], True),  # 3.5 is 4 both ways
    ("INTEGER", [2.5], False),  # 2 through a double (ties to even), 3 from text
    ("DOUBLE", [0.1, float("nan"), 1e300], True),
])  # fmt: skip
def test_domain_values_must_read_alike_as_numbers_and_as_text(tmp_path, declaration, domain, ok):
    """A domain reaches DuckDB as numbers (counting, top-k) or as text (releases, Spark): both must give
    the same values of the column's type, or the query classes and engines disagree on a cell's rows."""
    path = tmp_path / "d.duckdb"
    with duckdb.connect(str(path)) as c:
        c.execute(f"CREATE TABLE t (uid INTEGER, v {declaration})")
    with Owner(path) as o:
        if ok:
            o.protect("t", unit="uid", domains={"v": domain}, public_roster=True)
            return
        with pytest.raises(errors.PolicyError) as info:
            o.protect("t", unit="uid", domains={"v": domain}, public_roster=True)
        assert info.value.code == "DP316" and "t" not in o.catalog().tables


def test_a_domain_that_no_longer_fits_its_column_stops_the_tables_statements_free(tmp_path):
    """protect checks a domain against the column's type (above), but a domain declared before that
    check (dpgate < 0.17), or a column whose type an ALTER changed since, escaped it: the catalog checks
    every domain when it loads, and no statement over the table runs (DP316, nothing charged) until the
    owner declares the domain again."""
    path = tmp_path / "d.duckdb"
    with duckdb.connect(str(path)) as c:
        c.execute("CREATE TABLE t AS SELECT i AS uid, CAST((i % 3) * 0.05 + 0.1 AS DOUBLE) AS v, i % 2 AS w FROM range(300) r(i)")
    with Owner(path) as o:
        o.protect("t", unit="uid", max_rows=1, epsilon=10.0, domains={"v": [0.1, 0.145, 0.2], "w": [0, 1]},
                  public_roster=True)  # fmt: skip
        o.add_analyst("a", epsilon=10.0, delta=1e-6)
    query = "SELECT w, COUNT(*) FROM t GROUP BY w"
    with dpgate.connect(str(path), analyst="a") as con:
        con.execute(query).fetchall()
        before = con.budget()
    for change in ("ALTER TABLE t ALTER v TYPE DECIMAL(10, 2)",  # 0.145 reads 0.14 or 0.15
                   "UPDATE dpgate.columns SET domain = '[0, 1, 1.0]' WHERE column_name = 'w'"):  # as before 0.17
        with duckdb.connect(str(path)) as c:
            c.execute(change)
        with dpgate.connect(str(path), analyst="a") as con:
            with pytest.raises(errors.PolicyError) as info:
                con.execute(query)
            assert info.value.code == "DP316" and con.budget() == before
            assert "does not fit its type" in str(info.value) and "declares the domain" in info.value.hint
    with Owner(path) as o:
        o.declare("t", "v", domain=[0.1, 0.15, 0.2])
        o.declare("t", "w", domain=[0, 1])
    with dpgate.connect(str(path), analyst="a") as con:
        assert len(con.execute(query).fetchall()) == 2


def test_a_login_does_not_move_the_catalog_version(raw_db):
    """A login is not a declaration: an analyst changing their password (ALTER ROLE over the server) moved
    the catalog version, which restarted other analysts' statements in flight or failed them after
    their debit (1.37 of bob's 2.32 ε spent on failures)."""
    with Owner(raw_db) as o:
        o.protect("t", unit="uid", epsilon=1.0)
        o.add_analyst("alice", epsilon=1.0)

        def version():
            return o.con.execute("SELECT value FROM dpgate.settings WHERE key = 'catalog_version'").fetchone()[0]

        v = version()
        o.set_login("alice", password="a password long enough")
        o.set_login("alice", password="another password, also long")
        assert version() == v
        o.add_analyst("bob", epsilon=1.0)  # a declaration still moves it
        assert version() != v


def test_an_owner_login_and_an_analyst_never_share_a_name(raw_db):
    """An analyst added under an owner login's name logged in as the owner, and a later analyst login
    of that name replaced the owner's."""
    with Owner(raw_db) as o:
        o.set_login("boss", password="the owner's long password", owner=True)
        with pytest.raises(errors.PolicyError) as info:
            o.add_analyst("boss", epsilon=1.0)
        assert info.value.code == "DP326"
        assert ("boss", "owner") in o.logins()
        o.add_analyst("alice", epsilon=1.0)  # other names as before


@pytest.mark.parametrize("setup, kwargs, words", [
    ("CREATE VIEW bv AS SELECT * FROM b", {"budget_table": "bv"}, "is a view"),
    ("", {"budget_table": "t"}, "is a protected table"),
    ("", {"budget_column": "uid"}, "is the privacy unit"),
    ("", {"budget_column": "label"}, "not a number"),
    ("UPDATE t SET eps = 'NaN'::DOUBLE WHERE uid = 2", {"budget_column": "eps"}, "not finite numbers"),
    ("UPDATE b SET epsilon = 'Infinity'::DOUBLE WHERE uid = 1", {"budget_table": "b"}, "not finite numbers"),
])  # fmt: skip
def test_budget_sources_that_cannot_hold_budgets_are_refused(tmp_path, setup, kwargs, words):
    """A view's own tables would stay readable by analysts; a protected table, the unit, text, NaN or
    infinity cannot be lifetime ε values (NaN and text failed the declaration with a traceback)."""
    path = tmp_path / "b.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE t AS SELECT i AS uid, 2.0::DOUBLE AS eps, 'x' AS label FROM range(1, 5) r(i)")
        con.execute("CREATE TABLE b AS SELECT i AS uid, 3.0::DOUBLE AS epsilon FROM range(1, 5) r(i)")
        if setup:
            con.execute(setup)
    with Owner(path) as o:
        if kwargs.get("budget_table") == "t":
            o.protect("t", unit="uid", epsilon=1.0, public_roster=True)
        with pytest.raises(errors.PolicyError) as e:
            o.protect("t", unit="uid", public_roster=True, **kwargs)
        assert e.value.code == "DP313" and words in e.value.message, e.value


def test_a_unit_listed_twice_in_a_budget_table_gets_the_smaller_budget(tmp_path):
    path = tmp_path / "b.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE t AS SELECT i AS uid FROM range(1, 4) r(i)")
        con.execute("CREATE TABLE b AS SELECT * FROM (VALUES (1, 0.1), (1, 9.0), (2, 5.0), (3, 5.0)) v(uid, epsilon)")
    with Owner(path) as o:
        o.protect("t", unit="uid", budget_table="b", public_roster=True)
        roster = o.catalog().tables["t"].roster_sql
        assert float(o.con.execute(f"SELECT epsilon_budget FROM {roster} WHERE unit = 1").fetchone()[0]) == pytest.approx(0.1)
