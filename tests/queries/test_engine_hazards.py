"""DuckDB calls that crash the process, invalidate the database or fail on some values only
(DuckDB 1.4-1.5): each accepted shape must behave the same whatever the data, so dpgate rewrites
or refuses them before the debit (``allowlist.rewrite_for_engine``, ``check_engine_hazards``).
Each test puts one extreme person in the table, so the answer must not depend on whether they
are there."""

from __future__ import annotations

import duckdb
import pytest

import dpgate
from conftest import fetch

EXTREME = "('290309-12-22 (BC) 00:00:00+00'::TIMESTAMPTZ, '294247-01-10 04:00:54.775806'::TIMESTAMP, " \
          "'5881580-07-10'::DATE, INTERVAL 3 DAY)"  # fmt: skip


@pytest.fixture(params=[False, True], ids=["ordinary", "with an extreme person"])
def con(make_db, request):
    extreme = f"INSERT INTO t SELECT 9999, {EXTREME[1:-1]}, TIME '23:59';" if request.param else ""
    db = make_db(
        "CREATE TABLE t (uid INTEGER, z TIMESTAMPTZ, ts TIMESTAMP, d DATE, iv INTERVAL, tm TIME);"
        "INSERT INTO t SELECT i, TIMESTAMPTZ '2020-01-01 00:00:00+00' + i * INTERVAL 1 HOUR, "
        "TIMESTAMP '2020-01-01' + i * INTERVAL 1 DAY, DATE '2020-01-01' + CAST(i AS INTEGER), i * INTERVAL 1 MINUTE, TIME '10:00' FROM range(300) r(i);"
        + extreme,
        protect={"t": {"unit": "uid", "epsilon": 100.0}},
    )
    with dpgate.connect(str(db), analyst="alice") as c:
        yield c


DP = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1) "


@pytest.mark.parametrize("expr", [
    "COALESCE(z, ts)",  # a failing implicit cast inside COALESCE crashed the process
    "COALESCE(d, ts)",
    "date_part('dow', iv)",  # failed on every non-NULL interval
    "datepart('dow', iv)",  # the alias escaped the rewrite: a 1-bit oracle after the debit
    "extract(doy FROM iv)",
    "date_part('isodow', z)",
])  # fmt: skip
def test_rewritten_shapes_answer_whatever_the_data(con, expr):
    rows, _ = fetch(con, DP + f"COUNT({expr}) AS n FROM t")
    assert len(rows) == 1


def test_date_diff_of_zoned_timestamps_is_refused_for_free(con):
    before = con.budget()
    with pytest.raises(dpgate.Error) as e:
        con.execute(DP + "COUNT(date_diff('hour', z, TIMESTAMPTZ '2020-01-01 00:00:00+00')) FROM t")
    assert e.value.code == "DP256" and "CAST(a AS TIMESTAMP)" in e.value.hint
    assert con.budget() == before
    rows, _ = fetch(con, DP + "COUNT(date_diff('hour', CAST(z AS TIMESTAMP), TIMESTAMP '2020-01-01')) AS n FROM t")
    assert len(rows) == 1


def test_coalesce_with_a_null_argument_is_refused(con):
    with pytest.raises(dpgate.Error) as e:
        con.execute(DP + "COUNT(COALESCE(NULL, d, ts)) FROM t")
    assert e.value.code == "DP254"


def test_every_alias_of_date_part_is_rewritten():
    from dpgate.frontend import allowlist
    from dpgate.frontend.dialect import parse_one

    names = [n for n, rule in allowlist.FUNCTIONS.items() if isinstance(n, str) and rule is allowlist.FUNCTIONS["date_part"]]
    assert set(names) >= {"date_part", "datepart"}
    for name in names:
        st = parse_one(f"SELECT {name}('dow', iv) FROM t")
        allowlist.rewrite_for_engine(st)
        assert "CAST(iv AS TIMESTAMP)" in st.sql(dialect="duckdb"), name


def test_deeply_nested_coalesce_is_refused_before_the_rewrite(con):
    """The rewrite copies each argument twice: 18 nested levels took a minute."""
    fetch(con, DP + "COUNT(COALESCE(d, COALESCE(d, COALESCE(d, d)))) AS n FROM t")  # two levels inside: fine
    with pytest.raises(dpgate.Error) as e:
        con.execute(DP + "COUNT(COALESCE(d, COALESCE(d, COALESCE(d, COALESCE(d, d))))) FROM t")
    assert e.value.code == "DP257" and "flatten" in e.value.hint


@pytest.mark.parametrize("name", ["date_part", "datepart"])
def test_a_part_a_time_has_not_is_refused_for_free_in_every_spelling(con, name):
    """DuckDB turns date_part('year', TIME) into year(TIME), a bind error; it left the datepart
    spelling alone, which then failed at run time on every non-NULL TIME."""
    before = con.budget()
    with pytest.raises(dpgate.Error) as e:
        con.execute(DP + f"COUNT({name}('year', CASE WHEN uid > 100 THEN tm END)) FROM t")
    assert e.value.code == "DP230"
    assert con.budget() == before


def test_a_sum_over_a_huge_unsigned_input_never_fails_on_one_subjects_value(make_db):
    """With a negative bound, the clamp compared a UHUGEINT with a BIGINT
    bound, DuckDB cast the value to BIGINT, and a value ≥ 2^63 failed the query after the debit."""
    db = make_db("CREATE TABLE t AS SELECT i AS uid, CAST(i AS UHUGEINT) AS y FROM range(50) r(i); "
                 "INSERT INTO t VALUES (999, 18446744073709551615::UHUGEINT)",
                 protect={"t": {"unit": "uid", "epsilon": 100.0, "bounds": {"y": (0, 100)}}})  # fmt: skip
    with dpgate.connect(str(db), analyst="alice", test_seed=1) as con:
        for where in ("", " WHERE uid <> 999"):  # D and its neighbour without the subject
            got = con.execute(f"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) SUM(y - 50) AS s FROM t{where}")
            assert got.fetchone()[0] is not None


def test_a_domain_that_no_longer_casts_is_refused_before_the_debit(make_db):
    """The owner changed a column's type and its declared domain no longer
    casts; every query was charged and then failed. The domain's cast is now part of the free check
    (and since 0.17.1 the catalog finds the domain does not fit its column: DP316, free)."""
    db = make_db("CREATE TABLE t AS SELECT i AS uid, CAST(i % 2 AS VARCHAR) AS g FROM range(50) r(i)",
                 protect={"t": {"unit": "uid", "epsilon": 100.0, "domains": {"g": ["0", "1", "x"]}}})  # fmt: skip
    raw = duckdb.connect(str(db))
    raw.execute("ALTER TABLE t ALTER g TYPE INTEGER")
    raw.close()
    with dpgate.connect(str(db), analyst="alice") as con:
        before = con.budget()
        with pytest.raises(dpgate.Error) as e:
            con.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) g, COUNT(*) FROM t GROUP BY g")
        assert e.value.code == "DP316" and con.budget() == before
