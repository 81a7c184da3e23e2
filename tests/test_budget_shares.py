"""Budget shares: an analyst may use at most a share of each subject's lifetime ε, so one analyst
cannot spend a subject space for everyone; refusals for a used share are free and say so."""

from __future__ import annotations

import pytest

import dpgate
from dpgate.catalog.owner import Owner
from dpgate.interfaces import cli

SETUP = "CREATE TABLE t AS SELECT i AS uid, i % 3 AS k, CASE WHEN i < 200 THEN 2.0 ELSE 4.0 END AS b FROM range(300) r(i)"
Q = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = {e}, fresh = true, personalization = 'threshold') k, COUNT(*) FROM t GROUP BY k"


@pytest.fixture
def db(make_db):
    return make_db(SETUP, protect={"t": {"unit": "uid", "budget_column": "b", "domains": {"k": [0, 1, 2]}}},
                   analysts={"alice": {"epsilon": 100.0}, "bob": {"epsilon": 100.0}})  # fmt: skip


def _ask(con, eps: float):
    cur = con.cursor()
    cur.execute(Q.format(e=eps))
    return cur.release


def _spent(path) -> dict[int, float]:
    """Each subject's ε spent (owner's view), by budget."""
    with Owner(path, create=False) as o:
        rows = o.con.execute("SELECT epsilon_budget, max(epsilon_spent) FROM dpgate.subjects_t GROUP BY 1").fetchall()
    return {int(b): float(s) for b, s in rows}


def test_an_equal_share_keeps_half_of_every_subject_for_the_other_analyst(db):
    with Owner(db, create=False) as o:
        o.set_budget_share("equal")
        assert o.budget_share("alice") == "equal (default)"
        assert o.overcommitted() == []  # two halves cannot use up anyone
    alice = dpgate.connect(str(db), analyst="alice")
    for _ in range(2):
        assert _ask(alice, 0.5).population.size == 300  # everyone has 0.5 of their share left
    # budget 2 → a share of 1.0, used up by alice; budget 4 → 2.0, 1.0 of it left
    release = _ask(alice, 0.5)
    assert release.population.size == 100 and release.population.no_budget == 200
    _ask(alice, 0.5)
    before = alice.budget()
    with pytest.raises(dpgate.BudgetExceededError) as e:
        _ask(alice, 0.5)
    assert e.value.code == "DP403" and "share" in str(e.value) and "other analysts" in e.value.hint
    assert alice.budget() == before  # free
    assert _spent(db) == {2: 1.0, 4: 2.0}  # alice's half of each subject, no more
    bob = dpgate.connect(str(db), analyst="bob")
    assert _ask(bob, 1.0).population.size == 300  # bob's half is untouched
    left = {r[0]: r for r in bob.cursor().execute("SHOW BUDGET").fetchall()}
    # bob's half of a budget of 2 is used by that one query: only the budgets of 4 have ε left for him
    assert left["t: left to you"][3] == 100 and "you may use 0.5 of each" in left["t: left to you"][4]
    assert _spent(db) == {2: 2.0, 4: 3.0}


def test_an_analysts_own_share_and_none(db):
    with Owner(db, create=False) as o:
        o.set_budget_share(0.25, "alice")
        o.set_budget_share("none", "bob")
        assert (o.budget_share("alice"), o.budget_share("bob")) == ("0.25", "none")
    alice, bob = (dpgate.connect(str(db), analyst=n) for n in ("alice", "bob"))
    assert _ask(alice, 0.5).population.size == 300
    with pytest.raises(dpgate.BudgetExceededError):  # 0.25 × 2 = 0.5 used on the small budgets...
        _ask(alice, 0.6)  # ...and 0.25 × 4 - 0.5 = 0.5 < 0.6 on the large ones: nobody has 0.6 left for her
    assert _ask(alice, 0.5).population.size == 100  # the budgets of 4 still have 0.5 for her
    assert not any(r[0] == "t: left to you" for r in bob.cursor().execute("SHOW BUDGET").fetchall())
    assert _ask(bob, 1.0).population.size == 300  # no share: the whole budget (2 - 0.5 left on the small)
    with Owner(db, create=False) as o:
        o.set_budget_share(None, "alice")  # back to the database's default: none
        assert o.budget_share("alice") == "none (default)"
    assert _ask(alice, 0.5).population.size == 300


def test_shares_are_set_from_the_command_line_and_the_policy_file(db, tmp_path, capsys):
    assert cli.main(["analyst", "set", str(db), "alice", "--share", "0.3"]) == 0
    assert "share of each subject's ε: 0.3" in capsys.readouterr().out
    assert cli.main(["budget", str(db), "--share", "equal"]) == 0
    out = capsys.readouterr().out
    assert "budget share: each analyst may use 1 / (the number of analysts)" in out
    with Owner(db, create=False) as o:
        assert o.budgets()[0][0][-1] == "0.3" and o.budgets()[0][1][-1] == "equal (default)"  # the listing's column
    assert cli.main(["analyst", "set", str(db), "alice", "--share", "2"]) != 0
    assert "DP347" in capsys.readouterr().err
    policy = tmp_path / "p.toml"
    policy.write_text('budget_share = 0.4\n[analysts.alice]\nepsilon = 100\nshare = "equal"\n[analysts.bob]\nepsilon = 100\n')
    assert cli.main(["policy", "apply", str(db), str(policy)]) == 0
    with Owner(db, create=False) as o:
        assert (o.budget_share("alice"), o.budget_share("bob")) == ("equal", "0.4 (default)")


def test_without_a_share_one_analyst_can_spend_everyone_and_the_owner_is_told(db, capsys):
    assert cli.main(["budget", str(db)]) == 0
    # the note wraps to the terminal's width (COLUMNS is set under xdist): compare its words
    assert "can use up most subjects' lifetime budgets" in " ".join(capsys.readouterr().out.split())
    alice = dpgate.connect(str(db), analyst="alice")
    _ask(alice, 2.0)
    bob = dpgate.connect(str(db), analyst="bob")
    assert _ask(bob, 2.0).population.size == 100  # only the budgets of 4 are left, for anyone


def test_unprotecting_or_moving_a_table_gives_no_share_back(make_db):
    """A ledger entry records the subject space it charged: what alice used there stays used."""
    path = make_db(
        "CREATE TABLE patients AS SELECT i AS pid FROM range(50) r(i);"
        "CREATE TABLE visits AS SELECT i % 50 AS pid, i % 2 AS k FROM range(100) r(i)",
        protect={"patients": {"unit": "pid", "epsilon": 1.0, "subjects": "patients"},
                 "visits": {"unit": "pid", "epsilon": 1.0, "subjects": "patients", "max_rows": 2}},
        analysts={"alice": {"epsilon": 100.0}},
    )  # fmt: skip
    with Owner(path, create=False) as o:
        o.set_budget_share(0.5, "alice")
    q = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5, fresh = true) COUNT(*) FROM {}"
    with dpgate.connect(str(path), analyst="alice") as alice:
        alice.execute(q.format("visits"))
        with pytest.raises(dpgate.BudgetExceededError):
            alice.execute(q.format("patients"))
    with Owner(path, create=False) as o:
        o.protect("visits", unit="pid", epsilon=1.0, subjects="elsewhere", max_rows=2, public_roster=True)
    with dpgate.connect(str(path), analyst="alice") as alice, pytest.raises(dpgate.BudgetExceededError) as e:
        alice.execute(q.format("patients"))
    assert "share" in str(e.value)


def test_large_budgets_tiny_shares_and_bad_values(db, make_db, capsys):
    path = make_db("CREATE TABLE t AS SELECT i AS uid FROM range(20) r(i)", protect={"t": {"unit": "uid", "epsilon": 1e15}},
                   analysts={"alice": {"epsilon": 1e18}})  # fmt: skip
    with Owner(path, create=False) as o:
        o.set_budget_share("0.5", "alice")
    with dpgate.connect(str(path), analyst="alice") as alice:  # 0.5 × 1e15 has room in the DECIMAL
        assert alice.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) COUNT(*) FROM t").release.epsilon == 1.0
    with Owner(db, create=False) as o:
        for bad in ("0", "-1", "nan", "inf", "1e-9", "", "half", "1.5"):
            with pytest.raises(dpgate.PolicyError) as e:
                o.set_budget_share(bad, "alice")
            assert e.value.code == "DP347", bad
        with pytest.raises(dpgate.PolicyError) as e:
            o.set_budget_share(0.5, "nobody")
        assert e.value.code == "DP302"
        assert o.budget_share("alice") == "none (default)"
    # a bad share changes nothing else: the quota stays
    assert cli.main(["analyst", "set", str(db), "alice", "--epsilon", "1", "--share", "0.5x"]) != 0
    assert "DP347" in capsys.readouterr().err
    with Owner(db, create=False) as o:
        assert float(o.budgets()[0][0][1]) == 100.0


def test_the_threshold_rule_says_when_the_share_is_what_is_spent(db):
    with Owner(db, create=False) as o:
        o.set_budget_share(0.25, "alice")  # 0.5 of the budgets of 2, 1.0 of those of 4
    alice = dpgate.connect(str(db), analyst="alice")
    _ask(alice, 0.3)
    _ask(alice, 0.3)  # the budgets of 4 still have 0.4 for her
    with pytest.raises(dpgate.BudgetExceededError) as e:
        _ask(alice, 0.5)  # nobody has 0.5 left for her; everyone has more than that left
    assert "You have used your share" in str(e.value)


def test_a_ledger_from_before_shares_gets_its_subject_spaces(db):
    """A database made before 0.24.0 has no roster column in its ledger: opening it adds one, filled
    from each entry's table as it is now, so what an analyst spent before counts against a share."""
    with dpgate.connect(str(db), analyst="alice") as alice:
        _ask(alice, 0.5)
    with Owner(db, create=False) as o:
        o.con.execute("ALTER TABLE dpgate.ledger DROP COLUMN roster")
        o.set_budget_share(0.25, "alice")
    with dpgate.connect(str(db), analyst="alice") as alice:
        release = _ask(alice, 0.5)  # 0.25 × 2 - 0.5 = 0 for the small budgets, 1.0 - 0.5 for the large
        assert release.population.size == 100
    with Owner(db, create=False) as o:
        assert [r[0] for r in o.con.execute("SELECT roster FROM dpgate.ledger ORDER BY entry_id").fetchall()] == [
            "roster_t", "roster_t"]
