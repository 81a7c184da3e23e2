"""End to end: what a query charges equals the ε its mechanism runs at."""

from __future__ import annotations

import pytest

import dpgate
from conftest import fetch

SETUP = "CREATE TABLE t AS SELECT i AS uid, i % 7 AS x FROM range(2000) r(i)"


@pytest.mark.parametrize("rule", ["sample", "minimum", "partition"])
def test_equal_allowances_below_epsilon_are_used_at_the_allowance(make_db, rule):
    """Every subject has 0.3 left (default budget) and the query asks ε = 1."""
    db = make_db(SETUP, protect={"t": {"unit": "uid", "epsilon": 0.3, "max_rows": 1}})
    with dpgate.connect(str(db), analyst="alice", test_seed=7) as con:
        _, cur = fetch(con, f"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, personalization = '{rule}') "
                            "COUNT(*) AS n FROM t")  # fmt: skip
        info = cur.release
        assert info.columns["n"].epsilon == pytest.approx(0.3)  # the noise ran at the allowance
        assert info.epsilon == pytest.approx(0.3)  # and that is what was charged
        assert info.subjects_charged == 2000
        with pytest.raises(dpgate.BudgetExceededError):
            fetch(con, f"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, personalization = '{rule}') "
                       "COUNT(*) FROM t")  # fmt: skip


def test_sample_rule_thins_when_allowances_differ(make_db):
    db = make_db(
        SETUP + "; CREATE TABLE b AS SELECT i AS uid, CASE WHEN i < 1000 THEN 0.2 ELSE 1.0 END AS eps FROM range(2000) r(i)",
        protect={"t": {"unit": "uid", "budget_table": "b", "budget_table_unit": "uid", "budget_table_column": "eps",
                       "max_rows": 1}},
    )  # fmt: skip
    with dpgate.connect(str(db), analyst="alice", test_seed=7) as con:
        _, cur = fetch(con, "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) COUNT(*) AS n FROM t")
        assert cur.release.columns["n"].epsilon == pytest.approx(1.0)
        assert cur.release.epsilon == pytest.approx(1.0)
