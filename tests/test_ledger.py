"""The ledger: exact debits, refusals that change nothing, debit before release, crash safety."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dpgate
from dpgate import errors, ledger
from dpgate.catalog.owner import Owner

SUBJECTS_SQL = """
CREATE TABLE t (uid INTEGER, x INTEGER);
INSERT INTO t SELECT i, i % 5 FROM range(1, 21) r(i);
CREATE TABLE budgets (uid INTEGER, epsilon DOUBLE);
INSERT INTO budgets SELECT i, [0.3, 0.5, 1.0, 2.0][1 + i % 4] FROM range(1, 21) r(i);
"""


def roster(db) -> dict[int, tuple[Decimal, Decimal]]:
    with Owner(db, create=False) as o:
        return {u: (b, s) for u, b, s in o.con.execute("SELECT unit, epsilon_budget, epsilon_spent FROM dpgate.subjects_t").fetchall()}


def analyst_spent(db, name="alice") -> tuple[Decimal, Decimal]:
    with Owner(db, create=False) as o:
        return o.con.execute("SELECT epsilon_spent, delta_spent FROM dpgate.analysts WHERE name = ?", [name]).fetchone()


@pytest.fixture
def db(make_db):
    return make_db(
        SUBJECTS_SQL,
        {"t": dict(unit="uid", budget_table="budgets", bounds={"x": (0, 4)})},
        analysts={
            "alice": {"epsilon": 3.0, "delta": 1e-5, "epsilon_per_query": 1.0, "delta_per_query": 1e-6},
            "bob": {"epsilon": 1.0, "delta": 0.0},
        },
    )


def count(con, epsilon):
    return con.cursor().execute(
        f"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = {epsilon}, personalization = 'threshold') COUNT(*) FROM t"
    )


@pytest.mark.parametrize(
    "epsilon, outcome",
    [
        (1.0, "ok"),  # exactly the per-query cap
        (1.0 + 1e-9, "DP303"),  # just above it
        (float("inf"), "DP205"),
        (0, "DP205"),
        (1e-300, "DP205"),  # below the smallest ε dpgate accepts
        (1e-6, "ok"),  # the smallest accepted
    ],
)
def test_per_query_cap_edges(db, epsilon, outcome):
    with dpgate.connect(str(db), analyst="alice") as con:
        sql = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = ?, personalization = 'threshold') COUNT(*) FROM t"
        if outcome == "ok":
            con.cursor().execute(sql, [epsilon])
            assert con.budget()[0] == pytest.approx(3.0 - epsilon)
        else:
            with pytest.raises(errors.Error) as info:
                con.cursor().execute(sql, [epsilon])
            assert info.value.code == outcome
            assert con.budget() == (3.0, 1e-5)


def test_quota_edges_exactly_remaining_then_over(db):
    with dpgate.connect(str(db), analyst="bob") as con:
        for _ in range(10):
            count(con, 0.1)  # 10 × 0.1 = exactly 1.0, no floating-point drift
        assert con.budget() == (0.0, 0.0)
        with pytest.raises(errors.BudgetExceededError) as info:
            count(con, 1e-6)
        assert info.value.code == "DP401"
        assert "Remaining: ε=0" in info.value.hint
    assert analyst_spent(db, "bob") == (Decimal(1), Decimal(0))


def test_threshold_rule_charges(db):
    before = roster(db)
    with dpgate.connect(str(db), analyst="alice") as con:
        cur = count(con, 0.5)
        rel = cur.release
        eligible = [u for u, (b, s) in before.items() if b - s >= Decimal("0.5")]
        assert rel.subjects_charged == len(eligible) == 15
        assert rel.subjects_excluded == 5
    after = roster(db)
    for u, (b, s) in after.items():
        assert s == (Decimal("0.5") if u in eligible else 0)
        assert s <= b


def test_subject_budgets_are_exhausted_one_query_at_a_time(db):
    with dpgate.connect(str(db), analyst="alice") as con:
        count(con, 0.3)
        count(con, 0.3)
        # subjects with 0.3 are now empty, those with 0.5 have 0.2 left: both excluded from a 0.3 query
        cur = count(con, 0.3)
        assert cur.release.subjects_excluded == 10
    spent = roster(db)
    assert all(s <= b for b, s in spent.values())
    assert {float(b - s) for b, s in spent.values()} == {0.0, 0.2, 0.1, 1.1}


def test_no_subject_left_refuses_and_charges_nothing(db):
    with dpgate.connect(str(db), analyst="alice") as con:
        count(con, 1.0)
        count(con, 1.0)  # subjects with 1.0 or 2.0 now have 0 left; the others have 0.3 or 0.5
        before = roster(db), con.budget()
        with pytest.raises(errors.BudgetExceededError) as info:
            count(con, 0.6)
        assert info.value.code == "DP403"
        assert (roster(db), con.budget()) == before


def test_ledger_rows_and_release_log(db):
    with dpgate.connect(str(db), analyst="alice") as con:
        count(con, 0.25)
        with pytest.raises(errors.Error):
            con.cursor().execute("SELECT * FROM t")
    with Owner(db, create=False) as o:
        rows = o.ledger()
    assert len(rows) == 1
    entry = rows[0]
    assert entry[2] == "alice" and entry[6] == Decimal("0.25") and entry[11] is True  # released


def test_explain_and_show_budget_spend_nothing(db):
    with dpgate.connect(str(db), analyst="alice") as con:
        before = con.budget(), roster(db)
        con.cursor().execute("EXPLAIN PRIVACY SELECT COUNT(*) FROM t")
        con.cursor().execute("SHOW BUDGET")
        assert (con.budget(), roster(db)) == before


def test_show_budget_never_shows_an_individual(db):
    with dpgate.connect(str(db), analyst="alice") as con:
        rows = con.cursor().execute("SHOW BUDGET").fetchall()
    text = repr(rows)
    assert "uid" not in text
    buckets = {r[0]: r[3] for r in rows if r[0].startswith("t: remaining")}
    assert sum(buckets.values()) == 20


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from([0.05, 0.1, 0.25, 0.3, 0.5, 0.7, 1.0]), min_size=1, max_size=12))
def test_random_sequences_never_overspend(make_db, epsilons):
    """Model-based: the DB's charges equal the threshold rule's, nobody ever exceeds a budget."""
    db = make_db(
        SUBJECTS_SQL,
        {"t": dict(unit="uid", budget_table="budgets", bounds={"x": (0, 4)})},
        analysts={"alice": {"epsilon": 3.0, "delta": 1e-5, "epsilon_per_query": 1.0}},
    )
    model = {u: [b, Decimal(0)] for u, (b, _) in roster(db).items()}
    quota_left = Decimal(3)
    with dpgate.connect(str(db), analyst="alice") as con:
        for eps in epsilons:
            e = Decimal(repr(eps))
            eligible = [u for u, (b, s) in model.items() if b - s >= e]
            try:
                count(con, eps)
                ok = True
            except errors.BudgetExceededError:
                ok = False
            assert ok == (e <= quota_left and bool(eligible))
            if ok:
                quota_left -= e
                for u in eligible:
                    model[u][1] += e
            assert Decimal(repr(con.budget()[0])) == quota_left
    actual = roster(db)
    for u, (b, s) in actual.items():
        assert s == model[u][1]
        assert s <= b
    assert analyst_spent(db)[0] == Decimal(3) - quota_left


CRASH_SCRIPT = textwrap.dedent(
    """
    import os, signal, sys
    import dpgate
    from dpgate.backends import duckdb as execute

    def killed(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGKILL)   # the process dies between debit and release

    execute.run = killed
    con = dpgate.connect(sys.argv[1], analyst="alice")
    con.cursor().execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.4) COUNT(*) FROM t")
    print("not reached")
    """
)


def test_debit_survives_a_kill_between_debit_and_release(db, tmp_path):
    script = tmp_path / "crash.py"
    script.write_text(CRASH_SCRIPT)
    # The child imports the dpgate under test (a script's own directory, not the working directory,
    # leads its path: it found another checkout's installed dpgate).
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.dirname(os.path.dirname(dpgate.__file__)), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, str(script), str(db)], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == -9, proc.stderr
    assert "not reached" not in proc.stdout
    assert analyst_spent(db)[0] == Decimal("0.4")
    with Owner(db, create=False) as o:
        ledger = o.ledger()
        assert len(ledger) == 1 and ledger[0][11] is False  # debited, never released
        charged = o.con.execute("SELECT count(*) FROM dpgate.subjects_t WHERE epsilon_spent = 0.4").fetchone()[0]
    assert charged == 15


def test_a_subject_added_after_the_debit_is_not_used(make_db, monkeypatch):
    """A query charged to 'everyone' uses exactly the subjects on the roster when it was charged."""
    db = make_db("CREATE TABLE t (uid INT, x INT); INSERT INTO t VALUES (1, 1), (2, 1), (3, 1)",
                 {"t": dict(unit="uid", epsilon=100.0)}, analysts={"alice": {"epsilon": 1000.0}})  # fmt: skip
    from dpgate.backends import duckdb as execute

    original = execute.run

    def owner_adds_a_subject_then_run(con, plan, charged, salt, n_parts=1, **kwargs):
        with Owner(db, create=False) as o:
            o.con.execute("INSERT INTO t VALUES (99, 1)")
            o.refresh_roster("t")
        return original(con, plan, charged, salt, n_parts, **kwargs)

    monkeypatch.setattr(execute, "run", owner_adds_a_subject_then_run)
    with dpgate.connect(str(db), analyst="alice", test_seed=5) as con:
        cur = con.cursor().execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 50, clamp_counts = false) COUNT(*) FROM t")
        lo, hi = cur.release.intervals[0]["count_star()"]
    assert lo <= 3 <= hi and not lo <= 4 <= hi
    with Owner(db, create=False) as o:
        spent = dict(o.con.execute("SELECT unit, epsilon_spent FROM dpgate.subjects_t").fetchall())
    assert spent == {1: Decimal(50), 2: Decimal(50), 3: Decimal(50), 99: Decimal(0)}


def test_charges_are_rounded_up_to_the_ledgers_resolution(make_db):
    """A δ below the ledger's 18 decimals is charged one quantum, never 0: else key
    selection run at δ = 4e-19 would be recorded as nothing spent."""
    assert ledger.charge(4e-19) == Decimal("1E-18")
    assert ledger.charge(1.5e-18) == Decimal("2E-18")
    assert ledger.charge(0.25) == Decimal("0.25") and ledger.charge(0) == 0
    db = make_db("CREATE TABLE s (uid INTEGER, city VARCHAR); INSERT INTO s SELECT i, 'c' || (i % 3) FROM range(1, 2001) r(i)",
                 {"s": dict(unit="uid", epsilon=5.0)}, analysts={"alice": {"epsilon": 9.0, "delta": 1e-5}})  # fmt: skip
    with dpgate.connect(str(db), analyst="alice") as con:
        cur = con.cursor().execute(
            "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 4, delta = 4e-19, personalization = 'threshold') "
            "city, COUNT(*) FROM s GROUP BY city"
        )  # no declared domain for city: DP key selection spends δ
        assert cur.release.delta == 4e-19
    eps, delta = analyst_spent(db)
    assert eps == Decimal("4") and delta == Decimal("1E-18")
