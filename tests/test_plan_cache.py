"""The session's plan cache: a DP statement asked again is not planned, probed or bind-checked again,
and gets the same answer a newly planned statement would; whatever its plan depends on moves its key."""

from __future__ import annotations

import pytest

import dpgate
from conftest import fetch
from dpgate.catalog.owner import Owner
from dpgate.queries.counting import CountingQuery

SETUP = """
CREATE TABLE t AS SELECT i % 40 AS uid, ['a', 'b', 'c'][1 + i % 3] AS k, (i % 10)::DOUBLE AS x FROM range(400) r(i);
CREATE TABLE regions AS SELECT * FROM (VALUES ('a', 'north'), ('b', 'south'), ('c', 'south')) v(k, region);
"""
Q = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) k, COUNT(*) AS n, AVG(x) AS m FROM t GROUP BY k"


@pytest.fixture
def db(make_db):
    return make_db(SETUP, protect={"t": {"unit": "uid", "max_rows": 10, "epsilon": 1000.0,
                                         "domains": {"k": ["a", "b", "c"]}, "bounds": {"x": (0, 10)}}})  # fmt: skip


@pytest.fixture
def plans(monkeypatch):
    """How many times the counting class planned a statement."""
    calls = []
    original = CountingQuery.plan

    def counted(self, classified, ctx):
        calls.append(classified.kind)
        return original(self, classified, ctx)

    monkeypatch.setattr(CountingQuery, "plan", counted)
    return calls


def test_a_statement_asked_again_is_not_planned_again_and_answers_as_a_new_plan_would(db, plans, monkeypatch):
    cached = dpgate.connect(str(db), analyst="alice", test_seed=3)
    first = [fetch(cached, Q) for _ in range(3)]
    assert len(plans) == 1
    # The same statements in a session whose plans are never kept: the same answers, draw for draw.
    monkeypatch.setattr(CountingQuery, "reusable", lambda self, plan: False)
    uncached = dpgate.connect(str(db), analyst="alice", test_seed=3)
    second = [fetch(uncached, Q) for _ in range(3)]
    assert len(plans) == 4
    for (rows_a, cur_a), (rows_b, cur_b) in zip(first, second):
        assert rows_a == rows_b
        assert cur_a.release.intervals == cur_b.release.intervals
        assert cur_a.release.epsilon == cur_b.release.epsilon == 1.0
    # Each statement was charged and its release logged, planned anew or not.
    with Owner(db) as owner:
        assert [(r[6], r[11]) for r in owner.ledger("alice")] == [(1.0, True)] * 6


def test_a_setting_or_another_text_plans_anew(db, plans):
    con = dpgate.connect(str(db), analyst="alice")
    fetch(con, Q)
    fetch(con, Q.replace("k, COUNT", "k,  COUNT"))  # another text: its own entry
    assert len(plans) == 2
    rows, cur = fetch(con, Q)
    assert len(cur.description) == 3
    con.cursor().execute("SET dp_intervals = true")
    rows, cur = fetch(con, Q)
    assert len(plans) == 3 and len(cur.description) == 7  # k, n, m and each aggregate's interval


def test_a_changed_declaration_plans_anew(db, plans):
    con = dpgate.connect(str(db), analyst="alice")
    fetch(con, Q)
    with Owner(db) as owner:
        owner.protect("t", unit="uid", max_rows=10, epsilon=1000.0, domains={"k": ["a", "b", "c", "d"]},
                      bounds={"x": (0, 10)}, public_roster=True)  # fmt: skip
    rows, _ = fetch(con, Q)
    assert len(plans) == 2
    assert [r[0] for r in rows] == ["a", "b", "c", "d"]  # the new domain, not the kept plan's


def test_a_plan_that_read_a_public_tables_rows_is_not_kept(db, plans):
    """A key's domain read from a public table's rows changes with them, not with the schema."""
    con = dpgate.connect(str(db), analyst="alice")
    q = ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) r.region, COUNT(*) AS n "
         "FROM t JOIN regions r USING (k) GROUP BY r.region")  # fmt: skip
    rows, _ = fetch(con, q)
    assert sorted(r[0] for r in rows) == ["north", "south"]
    con.gateway._instance.root.cursor().execute("UPDATE regions SET region = 'east' WHERE k = 'a'")
    rows, _ = fetch(con, q)
    assert sorted(r[0] for r in rows) == ["east", "south"]
    assert len(plans) == 2


def test_a_kept_plan_is_bind_checked_once_per_schema(db, monkeypatch):
    from dpgate.backends import duckdb as plane

    built = []
    original = plane.bind_check

    def counted(*args, **kwargs):
        built.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(plane, "bind_check", counted)
    con = dpgate.connect(str(db), analyst="alice")
    for _ in range(3):
        fetch(con, Q)
    assert len(built) == 1
    con.gateway._instance.root.cursor().execute("CREATE TABLE unrelated (a INTEGER)")  # the schema moved
    fetch(con, Q)
    assert len(built) == 2


def test_a_long_statement_is_not_kept(db, plans):
    """A plan holds its trees (about 150 bytes a character): a long statement's, kept per session, would
    let refused statements fill the server's memory for free."""
    from dpgate.gateway import PLAN_TEXT

    con = dpgate.connect(str(db), analyst="alice")
    values = ", ".join(str(i) for i in range(PLAN_TEXT // 4))
    long = Q.replace("FROM t GROUP BY k", f"FROM t WHERE uid IN ({values}) GROUP BY k")
    assert len(long) > PLAN_TEXT
    fetch(con, long)
    fetch(con, long)
    assert len(plans) == 2 and len(con.gateway._planned) == 0
