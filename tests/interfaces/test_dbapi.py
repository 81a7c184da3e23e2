"""PEP 249 conformance, in the style of DuckDB's test_dbapi*.py."""

from __future__ import annotations

import decimal

import pytest

import dpgate
from dpgate import errors


def test_module_globals():
    assert dpgate.apilevel == "2.0"
    assert dpgate.threadsafety == 1
    assert dpgate.paramstyle == "qmark"


def test_exception_hierarchy():
    assert issubclass(dpgate.InterfaceError, dpgate.Error)
    assert issubclass(dpgate.DatabaseError, dpgate.Error)
    for cls in (dpgate.DataError, dpgate.OperationalError, dpgate.IntegrityError, dpgate.InternalError,
                dpgate.ProgrammingError, dpgate.NotSupportedError):  # fmt: skip
        assert issubclass(cls, dpgate.DatabaseError)
    assert issubclass(dpgate.UnsupportedQueryError, dpgate.ProgrammingError)
    assert issubclass(dpgate.PolicyError, dpgate.ProgrammingError)
    assert issubclass(dpgate.BudgetExceededError, dpgate.OperationalError)
    assert not issubclass(dpgate.Warning, dpgate.Error)
    e = dpgate.BudgetExceededError("x", code="DP401", hint="h", requested=1.0)
    assert (e.code, e.hint, e.details) == ("DP401", "h", {"requested": 1.0})


def test_connect_errors(demo_db, tmp_path):
    with pytest.raises(dpgate.InterfaceError):
        dpgate.connect(str(tmp_path / "missing.duckdb"), analyst="demo")
    with pytest.raises(dpgate.PolicyError) as info:
        dpgate.connect(str(demo_db), analyst="mallory")
    assert info.value.code == "DP302"
    with pytest.raises(dpgate.InterfaceError):
        dpgate.connect(str(demo_db), analyst="")


def test_test_seed_needs_the_owner(make_db):
    db = make_db("CREATE TABLE t (uid INT); INSERT INTO t VALUES (1)", {"t": dict(unit="uid")}, allow_seed=False)
    with pytest.raises(dpgate.PolicyError) as info:
        dpgate.connect(str(db), analyst="alice", test_seed=1)
    assert info.value.code == "DP305"


def test_seeded_results_are_marked_not_private(seeded):
    cur = seeded.cursor().execute("SELECT COUNT(*) FROM adult")
    assert cur.release.private is False
    assert any("NOT PRIVATE" in n for n in cur.release.notes)


def test_description_and_fetch(con):
    cur = con.cursor()
    assert cur.description is None
    cur.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5) sex, COUNT(*) AS n FROM adult GROUP BY sex")
    assert cur.description == [("sex", "VARCHAR", None, None, None, None, None), ("n", "BIGINT", None, None, None, None, None)]
    assert cur.rowcount == -1
    first = cur.fetchone()
    assert first[0] == "Female"
    rest = cur.fetchmany(5)
    assert len(rest) == 1 and rest[0][0] == "Male"
    assert cur.fetchone() is None
    cur.execute("SELECT region FROM country_regions ORDER BY region")
    cur.arraysize = 3
    assert len(cur.fetchmany()) == 3
    rest = list(cur)
    assert len(rest) == 38 and cur.fetchall() == []


def test_fetch_without_execute(con):
    with pytest.raises(dpgate.ProgrammingError):
        con.cursor().fetchall()


def test_closed_objects_raise_interface_error(demo_db):
    con = dpgate.connect(str(demo_db), analyst="demo")
    cur = con.cursor()
    cur.close()
    with pytest.raises(dpgate.InterfaceError):
        cur.execute("SELECT 1")
    cur2 = con.cursor()
    con.close()
    with pytest.raises(dpgate.InterfaceError):
        cur2.execute("SELECT 1")
    with pytest.raises(dpgate.InterfaceError):
        con.cursor().execute("SELECT 1")
    con.close()  # closing twice is fine


def test_context_managers_close(demo_db):
    with dpgate.connect(str(demo_db), analyst="demo") as con:
        with con.cursor() as cur:
            cur.execute("SELECT 1")
        with pytest.raises(dpgate.InterfaceError):
            cur.fetchall()
    assert con.closed


def test_commit_is_a_no_op_and_rollback_never_refunds(con):
    con.cursor().execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5) COUNT(*) FROM adult")
    con.commit()
    con.rollback()
    assert con.budget()[0] == pytest.approx(9.5)


def test_public_queries_pass_through_with_parameters(con):
    cur = con.cursor()
    cur.execute("SELECT count(*) FROM country_regions WHERE region = ?", ["Europe"])
    assert cur.fetchone() == (12,)
    cur.execute("SELECT count(*) FROM country_regions WHERE region = $r", {"r": "Asia"})
    assert cur.fetchone() == (12,)
    assert cur.release is None
    assert con.budget() == (10.0, 1e-5)


def test_dp_query_parameters(seeded):
    cur = seeded.cursor()
    cur.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = ?) COUNT(*) FROM adult WHERE age > ?", [0.5, 60])
    assert cur.release.epsilon == 0.5
    cur.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = $e) COUNT(*) FROM adult WHERE sex = $s", {"e": 0.25, "s": "Female"})
    assert cur.release.epsilon == 0.25
    with pytest.raises(dpgate.ProgrammingError) as info:
        cur.execute("SELECT COUNT(*) FROM adult WHERE age > ?", [1, 2])
    assert info.value.code == "DP602"
    with pytest.raises(dpgate.ProgrammingError) as info:
        cur.execute("SELECT COUNT(*) FROM adult WHERE age > ?")
    assert info.value.code == "DP603"


def test_parameters_cannot_inject_sql(seeded):
    cur = seeded.cursor()
    cur.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5) COUNT(*) FROM adult WHERE sex = ?", ["x' OR '1'='1"])
    assert cur.release.intervals[0]["count_star()"][0] <= 0 <= cur.release.intervals[0]["count_star()"][1]


def test_executemany(con):
    cur = con.cursor()
    cur.executemany("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1) COUNT(*) FROM adult WHERE age > ?", [[20], [30], [40]])
    assert len(cur.fetchall()) == 1
    assert con.budget()[0] == pytest.approx(9.7)


def test_intervals_on_request(seeded):
    cur = seeded.cursor()
    cur.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5, intervals = true) sex, COUNT(*) AS n, ROUND(AVG(age), 1) AS a FROM adult GROUP BY sex")
    names = [d[0] for d in cur.description]
    assert names == ["sex", "n", "a", "n_ci_low", "n_ci_high", "a_ci_low", "a_ci_high"]
    for row in cur.fetchall():
        assert row[3] <= row[1] <= row[4]
        assert row[5] <= row[2] <= row[6]
    seeded.cursor().execute("SET dp_intervals = true")
    cur.execute("SELECT COUNT(*) AS n FROM adult")
    assert [d[0] for d in cur.description] == ["n", "n_ci_low", "n_ci_high"]


def test_release_metadata(seeded):
    cur = seeded.cursor()
    cur.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.6) education, COUNT(*) AS n, SUM(hours_per_week) AS h FROM adult GROUP BY education")
    rel = cur.release
    rows = cur.fetchall()
    assert rel.epsilon == 0.6 and rel.delta == 0.0 and rel.alpha == 0.05
    assert rel.epsilon_remaining == pytest.approx(9.4)
    assert rel.columns["n"].epsilon == pytest.approx(0.3) and rel.columns["h"].epsilon == pytest.approx(0.3)
    assert len(rel.intervals) == len(rows) == 16
    for row, iv in zip(rows, rel.intervals):
        assert iv["n"][0] <= row[1] <= iv["n"][1]
        assert "education" not in iv
    assert rel.entry_id is not None and rel.query_class == "count"


def test_set_and_session_defaults(seeded):
    cur = seeded.cursor()
    cur.execute("SET dp_epsilon = 0.25")
    assert cur.description is None and "dp_epsilon = 0.25" in cur.message
    cur.execute("SELECT COUNT(*) FROM adult")
    assert cur.release.epsilon == 0.25
    with pytest.raises(dpgate.ProgrammingError) as info:
        cur.execute("SET dp_epsilon = 'lots'")
    assert info.value.code == "DP205"
    with pytest.raises(dpgate.ProgrammingError) as info:
        cur.execute("SET dp_nonsense = 1")
    assert info.value.code == "DP204"


def test_show_tables_and_describe(con):
    cur = con.cursor()
    rows = cur.execute("SHOW TABLES").fetchall()
    kinds = {r[0]: r[1] for r in rows}
    assert kinds == {
        "adult": "protected", "baskets": "protected", "basket_flags": "protected", "country_regions": "public",
        "karate": "graph", "wormnet": "graph", "wormnet_genes": "public", "cities": "protected",
        "careers": "protected",
    }  # fmt: skip
    desc = cur.execute("DESCRIBE adult").fetchall()
    by_name = {r[0]: r for r in desc}
    assert by_name["person_id"][2] == "privacy unit"
    assert by_name["age"][3] == "[17, 90]"
    assert by_name["sex"][4] == "'Female', 'Male'"


def test_refusals_are_pep249_classes(con):
    with pytest.raises(errors.NotSupportedError):
        con.cursor().execute("DELETE FROM adult")
    with pytest.raises(errors.ProgrammingError):
        con.cursor().execute("SELECT * FROM adult")


def test_test_seeds_are_granted_per_analyst(make_db):
    db = make_db("CREATE TABLE t (uid INT); INSERT INTO t VALUES (1)", {"t": dict(unit="uid")},
                 analysts={"alice": {"epsilon": 1.0}, "bob": {"epsilon": 1.0}}, allow_seed=False)  # fmt: skip
    with dpgate.Owner(db) as owner:
        owner.allow_test_seed("alice")
    dpgate.connect(str(db), analyst="alice", test_seed=1).close()
    with pytest.raises(dpgate.PolicyError):
        dpgate.connect(str(db), analyst="bob", test_seed=1)


def test_non_finite_parameters_keep_their_meaning(seeded):
    cur = seeded.cursor()
    cur.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.2, alpha = 1e-6, clamp_counts = false) COUNT(*) FROM adult WHERE age < ?", [float("inf")])
    lo, hi = cur.release.intervals[0]["count_star()"]
    assert lo <= 32561 <= hi  # every row: age < inf, not "age < inf-the-column"
    cur.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.2, alpha = 1e-6) COUNT(*) FROM adult WHERE age < ?", [float("nan")])
    lo, hi = cur.release.intervals[0]["count_star()"]
    assert lo <= 32561 <= hi  # DuckDB orders NaN above every number


def test_decimal_parameters_are_values(seeded):
    """Decimal('NaN') was written as a bare NaN and read back as a column name (DP218)."""
    import decimal

    cur = seeded.cursor()
    sql = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.2, alpha = 1e-6, clamp_counts = false) COUNT(*) FROM adult WHERE age < ?"
    cur.execute(sql, [decimal.Decimal("NaN")])
    lo, hi = cur.release.intervals[0]["count_star()"]
    assert lo <= 32561 <= hi  # the NaN DOUBLE, as for float("nan")
    cur.execute(sql, [decimal.Decimal("Infinity")])
    lo, hi = cur.release.intervals[0]["count_star()"]
    assert lo <= 32561 <= hi
    cur.execute(sql, [decimal.Decimal("1E+2")])  # a finite Decimal: its digits
    lo, hi = cur.release.intervals[0]["count_star()"]
    assert lo <= 32561 <= hi
    before = seeded.budget()
    with pytest.raises(dpgate.DataError) as info:
        cur.execute(sql, [decimal.Decimal("sNaN")])
    assert info.value.code == "DP604" and seeded.budget() == before


def test_post_processing_that_cannot_run_is_refused_before_the_debit(seeded):
    """HAVING n > 'abc' fails whatever the data and the noise: it was charged, then failed (DP231). It
    is now run over a row of NULLs before the debit, and refused free."""
    cur = seeded.cursor()
    before = seeded.budget()
    for sql in ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5) sex, COUNT(*) AS n FROM adult GROUP BY sex HAVING n > 'abc'",
                "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5) sex, COUNT(*) AS n FROM adult GROUP BY sex ORDER BY n + 'x'"):
        with pytest.raises(dpgate.ProgrammingError) as info:
            cur.execute(sql)
        assert info.value.code == "DP231" and "nothing was charged" in info.value.hint
    assert seeded.budget() == before
    cur.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5) sex, COUNT(*) AS n FROM adult GROUP BY sex "
                "HAVING n > 10 ORDER BY n DESC")  # what can run runs
    assert len(cur.fetchall()) == 2


def test_public_timestamptz_values_come_back_as_aware_utc_datetimes(con):
    # DuckDB converts TIMESTAMPTZ through pytz, which dpgate does not need: the values arrive in UTC.
    import datetime

    row = con.execute(
        "SELECT TIMESTAMPTZ '2024-03-01 12:30:00+02' AS t, 7 AS x, NULL::TIMESTAMPTZ AS n, now() AS t"
    ).fetchone()
    assert row[0] == datetime.datetime(2024, 3, 1, 10, 30, tzinfo=datetime.timezone.utc)
    assert row[1] == 7 and row[2] is None and row[3].tzinfo is datetime.timezone.utc


def test_a_parameter_bound_as_an_element_index_keeps_its_value():
    """sqlglot keeps element indexes 0-based and adds DuckDB's 1 when it writes an integer one: x[?]
    bound to 1 was written x[2]. Slices and map keys are not shifted."""
    from dpgate.frontend.dialect import parse_one, to_sql
    from dpgate.frontend.parameters import bind_parameters

    bound = bind_parameters(parse_one("SELECT x[?], x[?], m[?], x[?:?], x[$1] FROM t"), [1, -1, "k", 1, 2])
    assert to_sql(bound) == "SELECT x[1], x[-1], m['k'], x[1:2], x[1] FROM t"
    # a string's or a map's [?] is not shifted
    bound = bind_parameters(parse_one("SELECT 'abc'[?], MAP {1: 2}[?] FROM t"), [2, 1])
    assert to_sql(bound) == "SELECT 'abc'[2], MAP {1: 2}[1] FROM t"


@pytest.mark.parametrize("sql", ["SELECT a FROM t WHERE a > $1.5", "SELECT a FROM t WHERE a > ?.5", "SELECT $²"])
def test_what_is_not_a_parameter_is_refused(sql):
    """$1.5 read as the parameter, a dot and 5 (bound to 30 it ran as 30.5; DuckDB refuses it), and $²
    raised Python's ValueError."""
    from dpgate.frontend.dialect import parse_one
    from dpgate.frontend.parameters import bind_parameters

    with pytest.raises(errors.ProgrammingError) as e:
        bind_parameters(parse_one(sql), [30])
    assert e.value.code == "DP602"


@pytest.mark.parametrize("value", [decimal.Decimal("1e999999999"), decimal.Decimal("-1e-5000"), 10**5000],
                         ids=["1e999999999", "-1e-5000", "10**5000"])
def test_a_number_of_too_many_digits_is_refused_before_it_is_written(con, value):
    """Written out digit by digit, 1e999999999 was a gigabyte of text built under the interpreter's lock
    (16-19 s in which every other session of a server waited)."""
    before = con.budget()
    with pytest.raises(errors.DataError) as e:
        con.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1) COUNT(*) FROM adult WHERE age < ?", [value])
    assert e.value.code == "DP604" and "digits" in e.value.message and con.budget() == before


def test_a_timestamptz_outside_python_years_comes_back_as_text(con):
    """DuckDB gives a year before 1 as text, which datetime cannot hold (it raised a TypeError)."""
    (bc, ad), = con.execute("SELECT '0044-03-15 (BC)'::TIMESTAMPTZ, '2020-01-01'::TIMESTAMPTZ").fetchall()
    assert "(BC)" in bc and ad.year == 2020 and ad.tzinfo is not None
