"""Joins: lookups on unique public keys, and protected tables of one subject space on the unit."""

from __future__ import annotations

import duckdb
import pytest

import dpgate
from conftest import fetch

DP = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) "

SETUP = """
CREATE TABLE customers AS SELECT i AS cid, ['north', 'south'][1 + i % 2] AS region FROM range(1, 401) r(i);
CREATE TABLE purchases AS SELECT 1 + (p * 7) % 400 AS cid, 1 + p % 5 AS store, (p % 50)::DOUBLE AS amount
  FROM range(0, 2000) r(p);
CREATE TABLE stores AS SELECT s AS store, ['a', 'b'][1 + s % 2] AS city FROM range(1, 6) r(s);
CREATE TABLE cities AS SELECT * FROM (VALUES ('a', 'x'), ('b', 'y'), ('b', 'z')) t(city, country);
CREATE TABLE visits AS SELECT i AS vid, 1 + i % 5 AS store FROM range(0, 50) r(i);
CREATE TABLE patients AS SELECT i AS pid FROM range(1, 11) r(i);
"""


@pytest.fixture
def company(make_db):
    return make_db(
        SETUP,
        protect={
            "customers": {"unit": "cid", "subjects": "people", "epsilon": 50.0, "domains": {"region": ["north", "south"]}},
            "purchases": {"unit": "cid", "subjects": "people", "max_rows": 10, "epsilon": 50.0,
                          "bounds": {"amount": (0, 50)}},
            "patients": {"unit": "pid", "epsilon": 50.0},
        },
    )  # fmt: skip


def test_protected_tables_of_one_subject_space_join_on_the_unit(company):
    with duckdb.connect(str(company), read_only=True) as raw:
        truth = dict(raw.execute("SELECT region, count(*) FROM customers JOIN purchases USING (cid) GROUP BY 1").fetchall())
    con = dpgate.connect(str(company), analyst="alice", test_seed=7)
    rows, cur = fetch(con, DP + "c.region, COUNT(*) AS n FROM customers c JOIN purchases p USING (cid) GROUP BY c.region")
    assert [r[0] for r in rows] == ["north", "south"]
    for (region, n), iv in zip(rows, cur.release.intervals):
        # 5 purchases per customer (under max_rows 10): nothing is cut, so the interval covers the truth.
        assert iv["n"][0] <= truth[region] <= iv["n"][1]


def test_the_joined_relation_is_bounded_by_the_largest_declared_max_rows(company):
    con = dpgate.connect(str(company), analyst="alice")
    cur = con.cursor()
    cur.execute("EXPLAIN PRIVACY " + DP + "COUNT(*) FROM purchases p JOIN customers c ON p.cid = c.cid")
    text = " ".join(str(v) for r in cur.fetchall() for v in r if v is not None)
    assert "at most 10 row(s) per subject" in text


@pytest.mark.parametrize(
    "sql, code",
    [
        ("COUNT(*) FROM customers c JOIN purchases p ON c.cid = p.store", "DP215"),  # not on the unit
        ("COUNT(*) FROM customers c JOIN purchases p ON c.cid < p.cid", "DP215"),
        ("COUNT(*) FROM customers c CROSS JOIN purchases p", "DP215"),
        ("COUNT(*) FROM customers c JOIN patients q ON c.cid = q.pid", "DP215"),  # another subject space
        ("COUNT(*) FROM purchases p JOIN purchases q USING (cid)", "DP215"),  # self-join
        ("COUNT(*) FROM purchases p CROSS JOIN stores s", "DP215"),
        ("COUNT(*) FROM purchases p JOIN stores s ON p.store < s.store", "DP215"),
        ("COUNT(*) FROM purchases p JOIN visits v USING (store)", "DP215"),  # store repeats in visits
        ("COUNT(*) FROM purchases p JOIN stores s USING (store) JOIN cities c USING (city)", "DP215"),
        ("COUNT(*) FROM purchases p, stores s WHERE p.store = s.store", "DP215"),
    ],
)
def test_joins_that_could_multiply_a_persons_rows_are_refused(company, sql, code):
    con = dpgate.connect(str(company), analyst="alice")
    left = con.cursor().execute("SHOW BUDGET").fetchall()
    with pytest.raises(dpgate.Error) as e:
        fetch(con, DP + sql)
    assert e.value.code == code, e.value
    assert con.cursor().execute("SHOW BUDGET").fetchall() == left  # nothing charged


@pytest.mark.parametrize(
    "sql",
    [
        "s.city, COUNT(*) FROM purchases p JOIN stores s USING (store) GROUP BY s.city",
        "s.city, COUNT(*) FROM stores s JOIN purchases p ON s.store = p.store GROUP BY s.city",
        "COUNT(*) FROM purchases p LEFT JOIN stores s ON p.store = s.store AND p.cid > s.store",
        "COUNT(*) FROM purchases p JOIN stores s USING (store) JOIN stores t ON t.store = s.store",
    ],
)
def test_lookup_joins_on_unique_public_keys_are_answered(company, sql):
    con = dpgate.connect(str(company), analyst="alice")
    rows, _ = fetch(con, DP + sql)
    assert rows


def test_a_lookup_that_stops_being_unique_is_refused_before_any_charge(company):
    con = dpgate.connect(str(company), analyst="alice")
    fetch(con, DP + "COUNT(*) FROM purchases p JOIN stores s USING (store)")
    con.close()
    raw = duckdb.connect(str(company))
    raw.execute("INSERT INTO stores VALUES (1, 'b')")
    raw.close()
    con = dpgate.connect(str(company), analyst="alice")
    with pytest.raises(dpgate.Error) as e:
        fetch(con, DP + "COUNT(*) FROM purchases p JOIN stores s USING (store)")
    assert e.value.code == "DP215" and "unique" in str(e.value)


def test_joined_rows_of_a_subject_are_cut_to_each_tables_bound_before_the_join(make_db):
    """A person with 30 rows in each table would have 900 joined rows; each side keeps 3 first."""
    path = make_db(
        "CREATE TABLE a AS SELECT 1 AS pid, i AS x FROM range(30) r(i) UNION ALL SELECT 2, 0;"
        "CREATE TABLE b AS SELECT 1 AS pid, i AS y FROM range(30) r(i) UNION ALL SELECT 2, 0;",
        protect={"a": {"unit": "pid", "subjects": "s", "max_rows": 3, "epsilon": 50.0},
                 "b": {"unit": "pid", "subjects": "s", "max_rows": 3, "epsilon": 50.0}},
    )  # fmt: skip
    from dpgate.backends.charged import restrict_to_charged
    from dpgate.frontend.dialect import parse_one

    from dpgate.catalog.tables import load

    raw = duckdb.connect(str(path), read_only=True)
    catalog = load(raw)
    a, b = catalog.protected("a"), catalog.protected("b")
    src = parse_one("SELECT a.pid FROM a JOIN b USING (pid)")
    sql = restrict_to_charged(src, a, "(SELECT pid AS unit FROM (VALUES (1), (2)) v(pid))", (b,), salt=12345)
    per = dict(raw.execute(f"SELECT pid, count(*) FROM ({sql}) GROUP BY pid").fetchall())
    assert per == {1: 9, 2: 1}
