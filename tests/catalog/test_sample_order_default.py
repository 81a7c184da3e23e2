"""The stored sample order is the owner's default for a table of the database file, and a statement
that finds it stale rebuilds it with a progress line instead of stalling without a word."""

from __future__ import annotations

import json

import duckdb
import pytest

import dpgate
from dpgate.catalog import sample_order
from dpgate.catalog.owner import Owner

SETUP = """
CREATE TABLE t AS SELECT (i % 50)::INTEGER AS uid, 'c' || (i % 3)::VARCHAR AS cat FROM range(600) r(i);
CREATE VIEW v AS SELECT * FROM t;
"""
SQL = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5) cat, COUNT(*) FROM t GROUP BY cat"


def _choice(path, table: str) -> str | None:
    con = duckdb.connect(str(path), read_only=True)
    try:
        (options,) = con.execute("SELECT options FROM dpgate.protected_tables WHERE table_name = ?", [table]).fetchone()
    finally:
        con.close()
    return json.loads(options or "{}").get("sample_order")


def _build_id(path, table: str) -> int | None:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return sample_order.registered(con, table)
    finally:
        con.close()


def test_a_base_table_keeps_an_order_by_default_and_a_view_samples_per_query(make_db):
    path = make_db(SETUP, protect={"t": {"unit": "uid", "max_rows": 5}, "v": {"unit": "uid", "max_rows": 5}})
    assert _choice(path, "t") == sample_order.STORED and _build_id(path, "t") is not None
    assert _choice(path, "v") == sample_order.PER_QUERY and _build_id(path, "v") is None


def test_the_owner_chooses_per_query_and_a_repeated_declaration_keeps_the_choice(make_db):
    path = make_db(SETUP, protect={"t": {"unit": "uid", "max_rows": 5, "sample_order": "per_query"}})
    assert _choice(path, "t") == sample_order.PER_QUERY and _build_id(path, "t") is None
    with Owner(path) as owner:
        owner.protect("t", unit="uid", max_rows=6, public_roster=True)  # sample_order not repeated: kept
    assert _choice(path, "t") == sample_order.PER_QUERY
    with Owner(path) as owner:
        owner.protect("t", unit="uid", max_rows=6, public_roster=True, sample_order="default")
    assert _choice(path, "t") == sample_order.STORED and _build_id(path, "t") is not None


def test_a_policy_entry_without_the_key_gets_the_default(make_db, tmp_path):
    path = make_db(SETUP, protect={"t": {"unit": "uid", "max_rows": 5, "sample_order": "per_query"}})
    policy = tmp_path / "policy.toml"
    policy.write_text('[tables.t]\nunit = "uid"\nmax_rows = 5\npublic_roster = true\n')
    with Owner(path) as owner:
        owner.apply_policy(policy)
    assert _choice(path, "t") == sample_order.STORED


@pytest.mark.parametrize(
    "change, finds_it",
    [
        # a row more: the count tells the statement before its debit, in any process
        ("INSERT INTO t VALUES (7, 'c1')", "first"),
        # the same count, a unit moved: the first statement's own check finds it (and samples per
        # query); the next statement of the process rebuilds it
        ("UPDATE t SET uid = 8 WHERE rowid = 3", "second"),
    ],
)
def test_a_stale_order_is_rebuilt_with_a_progress_line(make_db, change, finds_it):
    path = make_db(SETUP, protect={"t": {"unit": "uid", "max_rows": 5, "epsilon": 10.0, "domains": {"cat": ["c0", "c1", "c2"]}}})
    before = _build_id(path, "t")
    raw = duckdb.connect(str(path))
    raw.execute(change)  # the order no longer lines up with the rows
    raw.close()
    lines: list[tuple[float, str]] = []
    with dpgate.connect(str(path), analyst="alice") as con:
        con.progress = lambda fraction, message: lines.append((fraction, message))
        if finds_it == "second":
            con.cursor().execute(SQL).fetchall()  # finds the order stale in its snapshot: samples per query
            assert lines == []
        con.cursor().execute(SQL).fetchall()  # rebuilds it before its debit, and says so
        assert [f for f, _ in lines] == [0.0, 1.0], lines
        assert "drawing the stored sample order of t (the table changed since it was drawn)" in lines[0][1]
        assert "done in" in lines[1][1]
        lines.clear()
        con.cursor().execute(SQL).fetchall()  # the order lines up again: nothing to announce
        assert lines == []
    after = _build_id(path, "t")
    assert after is not None and after != before
