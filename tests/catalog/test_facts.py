"""The planner's DESCRIBE answers are kept per schema: repeated under an unchanged catalog, read
afresh when the owner changes a table, never kept for a statement that failed to bind."""

from __future__ import annotations

import pytest

import dpgate
from dpgate.catalog import facts as facts_mod

SETUP = "CREATE TABLE t AS SELECT i AS uid, i % 7 AS x, 'k' || (i % 3) AS k FROM range(200) r(i)"
PROTECT = {"t": {"unit": "uid", "max_rows": 1, "epsilon": 100.0, "bounds": {"x": (0, 10)}}}


def _describes(monkeypatch) -> list[str]:
    """The DESCRIBE statements the facts send to DuckDB from now on."""
    sent: list[str] = []
    original = facts_mod.DuckDBFacts.describe

    def spy(self, sql):
        hit = self.schema_key is not None and (self.schema_key, sql) in facts_mod._DESCRIBED
        if not hit:
            sent.append(sql)
        return original(self, sql)

    monkeypatch.setattr(facts_mod.DuckDBFacts, "describe", spy)
    return sent


def test_a_statement_is_described_once_per_schema(make_db, monkeypatch):
    path = make_db(SETUP, protect=PROTECT)
    sql = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) k, AVG(x) FROM t GROUP BY k"
    with dpgate.connect(str(path), analyst="alice") as con:
        sent = _describes(monkeypatch)
        con.cursor().execute(sql).fetchall()
        first = len(sent)
        assert first >= 1
        con.cursor().execute(sql).fetchall()
        assert len(sent) == first  # the same schema: answered from the cache
        owner = con.gateway._instance.root.cursor()
        owner.execute("ALTER TABLE t ALTER COLUMN x TYPE DOUBLE")
        con.cursor().execute(sql).fetchall()
        assert len(sent) > first  # a changed table: described afresh
        key = con.gateway.facts.schema_key
        described = [v for (k, _), v in facts_mod._DESCRIBED.items() if k == key]
        assert any(("x", "DOUBLE") in v or ("__v1", "DOUBLE") in v or any(t == "DOUBLE" for _, t in v) for v in described)


def test_a_statement_that_fails_to_bind_is_not_kept(make_db):
    path = make_db(SETUP, protect=PROTECT)
    with dpgate.connect(str(path), analyst="alice") as con:
        facts = con.gateway.facts
        con.gateway.catalog()
        for _ in range(2):
            with pytest.raises(dpgate.ProgrammingError) as e:
                facts.describe("SELECT no_such_column FROM t")
            assert e.value.code == "DP230"
        assert not [k for k in facts_mod._DESCRIBED if k[1] == "SELECT no_such_column FROM t"]
