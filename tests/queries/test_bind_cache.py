"""Bind checks are cached per schema: a statement that bound once skips its EXPLAINs until a table,
a view or the owner's declarations change (then it is checked again, before any debit)."""

from __future__ import annotations

import pytest

import dpgate

QUERY = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1) g, COUNT(*) FROM t GROUP BY g"


class Counting:
    """The gateway's connection, counting the EXPLAINs sent through it."""

    def __init__(self, con):
        self._con, self.explains = con, 0

    def execute(self, sql, *args, **kwargs):
        self.explains += sql.startswith("EXPLAIN ")
        return self._con.execute(sql, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._con, name)


def test_a_bound_statement_is_not_bound_again_until_the_schema_changes(make_db):
    db = make_db("CREATE TABLE t AS SELECT i AS uid, CASE WHEN i % 2 = 0 THEN 'a' ELSE 'b' END AS g FROM range(100) r(i)",
                 protect={"t": {"unit": "uid", "epsilon": 100.0, "domains": {"g": ["a", "b"]}}})  # fmt: skip
    with dpgate.connect(str(db), analyst="alice") as con:
        spy = Counting(con.gateway._con)
        con.gateway._con = spy
        con.execute(QUERY)
        first = spy.explains
        assert first >= 1
        con.execute(QUERY)
        assert spy.explains == first  # cached: same statement, same schema
        con.execute(QUERY.replace("0.1", "0.2"))  # another statement text of the plan's SQL is not affected
        after_other = spy.explains
        # the owner changes a table's definition: the fingerprint changes, so the statement binds again
        raw = con.gateway._instance.root.cursor()
        raw.execute("ALTER TABLE t ADD COLUMN note VARCHAR")
        con.execute(QUERY)
        assert spy.explains > after_other
        again = spy.explains
        raw.execute("CREATE VIEW v AS SELECT 1 AS one")  # so does a view
        con.execute(QUERY)
        assert spy.explains > again
        raw.close()


def test_failures_are_never_cached(make_db):
    db = make_db("CREATE TABLE t AS SELECT i AS uid, TIME '10:00:00' AS tm FROM range(10) r(i)",
                 protect={"t": {"unit": "uid", "epsilon": 100.0}})  # fmt: skip
    sql = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1) COUNT(*) FROM t WHERE date_part('year', tm) = 2024"
    with dpgate.connect(str(db), analyst="alice") as con:
        for _ in range(2):
            before = con.budget()
            with pytest.raises(dpgate.Error) as e:  # DuckDB binds date_part('year', TIME) only in its optimizer
                con.execute(sql)
            assert e.value.code == "DP230" and con.budget() == before  # refused free both times


def test_a_schema_change_after_the_catalog_read_is_caught_before_the_debit(make_db, monkeypatch):
    """The owner renames a column between the statement's catalog read and its (cached) bind check:
    the statement starts over under the new catalog and is refused free there (the column is gone),
    never charged and failed after the debit."""
    db = make_db("CREATE TABLE t AS SELECT i AS uid, CASE WHEN i % 2 = 0 THEN 'a' ELSE 'b' END AS g FROM range(100) r(i)",
                 protect={"t": {"unit": "uid", "epsilon": 100.0, "domains": {"g": ["a", "b"]}}})  # fmt: skip
    with dpgate.connect(str(db), analyst="alice") as con:
        con.execute(QUERY)  # cached
        gateway = con.gateway
        real = gateway._prepare

        def prepare_then_rename(*args, **kwargs):
            out = real(*args, **kwargs)  # the plan kept from the first run
            raw = gateway._instance.root.cursor()
            raw.execute("ALTER TABLE t RENAME COLUMN g TO h")
            raw.close()
            return out

        monkeypatch.setattr(gateway, "_prepare", prepare_then_rename)
        before = con.budget()
        with pytest.raises(dpgate.Error) as e:
            con.execute(QUERY)
        assert e.value.code == "DP218" and con.budget() == before
