"""Every budget is visible: SHOW BUDGET shows subjects' δ as well as ε, and a refusal names the
budget that ran out — the analyst's ε or δ quota, a per-query cap, the subjects' ε or δ."""

from __future__ import annotations

import warnings

import pytest

import dpgate
from dpgate import errors

SETUP = """
CREATE TABLE t (uid INTEGER, x INTEGER, k VARCHAR);
INSERT INTO t SELECT i, i % 2, 'k' || (i % 3) FROM range(1, 2001) r(i);
"""
#: GROUP BY an undeclared column: DP key selection, which spends δ.
SELECTION = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1, delta = 1e-6) k, COUNT(*) FROM t GROUP BY k"


def make(make_db, *, subject_epsilon=10.0, **analyst):
    spec = {"epsilon": 100.0, "delta": 1e-3, "delta_per_query": 1e-4, **analyst}
    return make_db(SETUP, {"t": dict(unit="uid", epsilon=subject_epsilon, domains={"x": [0, 1]})}, {"alice": spec})


def refused(con, sql) -> errors.Error:
    before = con.budget()
    with pytest.raises(errors.Error) as info:
        con.execute(sql)
    assert con.budget() == before, "a refusal charges nothing"
    return info.value


def show_budget(con) -> dict[str, tuple]:
    return {r[0]: r for r in con.execute("SHOW BUDGET").fetchall()}


def test_subjects_delta_runs_out_and_the_refusal_says_delta(make_db):
    db = make(make_db)
    with dpgate.connect(str(db), analyst="alice") as con:
        budget = show_budget(con)
        assert budget["t: δ for key selection: left"][3] == 2000
        assert "room for 10 more key selection(s)" in budget["t: δ for key selection: left"][4]
        assert budget["t: δ for key selection: spent"][3] == 0
        for _ in range(10):  # the subjects' lifetime δ (1e-5) allows ten selections at δ = 1e-6
            con.execute(SELECTION)
        e = refused(con, SELECTION)
        assert isinstance(e, errors.BudgetExceededError) and e.code == "DP403"
        assert e.message.startswith("No subject of t has δ left for key selection: every subject's lifetime δ (1e-05) "
                                    "is spent")  # fmt: skip
        assert "SHOW BUDGET shows δ" in e.hint and "declared domain" in e.hint
        budget = show_budget(con)
        assert budget["t: δ for key selection: left"][3] == 0
        assert budget["t: δ for key selection: spent"][3] == 2000
        assert budget["t: subjects"][3] == 2000 and "2000 with at least the session ε=0.1 left" in budget["t: subjects"][4]
        # ε is not what ran out: a query over a declared domain (no δ) is still answered
        with warnings.catch_warnings():
            warnings.simplefilter("error", errors.PopulationWarning)
            cur = con.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1) x, COUNT(*) FROM t GROUP BY x")
        assert cur.release.population.whole


def test_explain_shows_the_delta_refusal(make_db):
    db = make(make_db)
    with dpgate.connect(str(db), analyst="alice") as con:
        for _ in range(10):
            con.execute(SELECTION)
        rows = con.execute("EXPLAIN PRIVACY " + SELECTION).fetchall()
    assert any("would be refused: No subject of t has δ left for key selection" in (r[6] or "") for r in rows)


def test_subjects_epsilon_runs_out_and_the_refusal_says_epsilon(make_db):
    db = make(make_db, subject_epsilon=0.2)
    with dpgate.connect(str(db), analyst="alice") as con:
        con.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.2) COUNT(*) FROM t")
        e = refused(con, "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1) COUNT(*) FROM t")
        assert isinstance(e, errors.BudgetExceededError) and e.code == "DP403"
        assert e.message == "No subject of t has ε left: every subject's lifetime ε is spent"
        assert "SHOW BUDGET" in e.hint
        budget = show_budget(con)
        assert budget["t: remaining ε 0 (exhausted)"][3] == 2000
        assert budget["t: δ for key selection: left"][3] == 2000, "their δ is untouched"


def test_both_subject_budgets_run_out(make_db):
    db = make_db(SETUP + "CREATE TABLE b (uid INTEGER, epsilon DOUBLE); "
                 "INSERT INTO b SELECT i, CASE WHEN i <= 1000 THEN 0.1 ELSE 10 END FROM range(1, 2001) r(i);",
                 {"t": dict(unit="uid", budget_table="b")}, {"alice": {"epsilon": 100.0, "delta": 1e-3,
                                                                       "delta_per_query": 1e-4}})  # fmt: skip
    with dpgate.connect(str(db), analyst="alice") as con, warnings.catch_warnings():
        warnings.simplefilter("ignore", errors.PopulationWarning)
        con.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1, personalization = 'threshold') "
                    "COUNT(*) FROM t")  # fmt: skip
        for _ in range(10):
            con.execute(SELECTION)  # only the 1000 with ε left take part, and spend their δ
        e = refused(con, SELECTION)
    assert e.code == "DP403"
    assert "1,000 have spent their ε and 1,000 have less than the δ=1e-06 this query needs" in e.message


def test_analyst_quotas_and_caps_are_named(make_db):
    db = make(make_db, epsilon=0.3, delta=1.5e-6, epsilon_per_query=0.25, delta_per_query=1e-6)
    with dpgate.connect(str(db), analyst="alice") as con:
        e = refused(con, "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.26) COUNT(*) FROM t")
        assert e.code == "DP303" and "per-query cap" in e.message
        e = refused(con, "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1, delta = 2e-6) k, COUNT(*) FROM t "
                         "GROUP BY k")  # fmt: skip
        assert e.code == "DP304" and "per-query cap" in e.message and "δ" in e.message
        con.execute(SELECTION)  # δ quota: 0.5e-6 left
        e = refused(con, SELECTION)
        assert isinstance(e, errors.BudgetExceededError) and e.code == "DP402"
        assert e.message.startswith("Answering would exceed your analyst δ quota")
        con.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.15) COUNT(*) FROM t")  # ε quota: 0.05 left
        e = refused(con, "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1) COUNT(*) FROM t")
        assert isinstance(e, errors.BudgetExceededError) and e.code == "DP401"
        assert e.message.startswith("Answering would exceed your analyst ε quota: ε=0.1 asked")
        analyst = show_budget(con)["analyst alice"]
        assert analyst[1] == pytest.approx(0.05) and analyst[2] == pytest.approx(0.5e-6)
        assert "session ε=0.1, δ=1e-06" in analyst[4]
