"""Key selection that does not waste the budget: its threshold and the declaration that avoids it, before the debit."""

from __future__ import annotations

import pytest

import dpgate
from conftest import fetch

SETUP = "CREATE TABLE t AS SELECT i AS pid, i % 7 AS k, 'x' || (i % 3) AS s FROM range(200) r(i)"


@pytest.fixture
def small(make_db):
    return make_db(SETUP, protect={"t": {"unit": "pid", "epsilon": 100.0}})


def _left(con):
    return con.cursor().execute("SHOW BUDGET").fetchall()[0][1]


def test_a_threshold_above_the_roster_is_refused_before_the_debit(small):
    con = dpgate.connect(str(small), analyst="alice")
    before = _left(con)
    with pytest.raises(dpgate.Error) as e:
        fetch(con, "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1, delta = 1e-6) s, COUNT(*) FROM t GROUP BY s")
    assert e.value.code == "DP214"
    assert "would need 264 subjects per key" in str(e.value) and "has 200" in str(e.value)
    assert "t.s (domain = [...]" in e.value.hint
    assert _left(con) == before


def test_delta_zero_says_what_key_selection_would_need(small):
    con = dpgate.connect(str(small), analyst="alice")
    with pytest.raises(dpgate.Error) as e:
        fetch(con, "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1, delta = 0) k, COUNT(*) FROM t GROUP BY k")
    assert e.value.code == "DP214"
    assert "about 264 or more subjects" in e.value.hint
    assert "t.k (domain = [...] or bounds = [lo, hi]" in e.value.hint


def test_explain_names_the_threshold_and_the_declaration(small):
    con = dpgate.connect(str(small), analyst="alice")
    cur = con.cursor()
    cur.execute("EXPLAIN PRIVACY SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 5, delta = 1e-6) "
                "s, COUNT(*) FROM t GROUP BY s")  # fmt: skip
    rows = {r[0]: r[6] for r in cur.fetchall()}
    assert "are never released" in rows["key selection"]
    assert "to avoid key selection: ask the owner to declare t.s" in rows["note"]
