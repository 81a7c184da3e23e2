"""Answers remembered (``dpgate.answers``): a DP statement asked again is answered free with the
answer already released, until the owner changes what it depends on; ``fresh = true`` pays for a
new draw. Whether it is remembered never depends on a row."""

from __future__ import annotations

import datetime as dt
import math
import time
import uuid
from decimal import Decimal

import duckdb
import pytest

import dpgate
from dpgate import answers
from dpgate.catalog.owner import Owner
from dpgate.frontend.dialect import parse_one
from dpgate.release import ColumnNoise, ReleaseInfo, Result

SETUP = """
CREATE TABLE visits AS SELECT (i % 200)::INTEGER AS uid, ['a', 'b', 'c', 'd'][1 + (i % 4)] AS kind,
       (i % 50)::DOUBLE AS amount, ('note ' || i) AS note FROM range(2000) t(i);
CREATE TABLE kinds AS SELECT * FROM (VALUES ('a', 'A'), ('b', 'B'), ('c', 'C'), ('d', 'D')) v(kind, label);
"""
TABLES = {"visits": {"unit": "uid", "max_rows": 10, "max_groups": 4, "epsilon": 1e6,
                     "domains": {"kind": ["a", "b", "c", "d"]}, "bounds": {"amount": (0, 50)}}}  # fmt: skip
ANALYSTS = {"alice": {"epsilon": 1e6, "delta": 1e-3}, "bob": {"epsilon": 1e6, "delta": 1e-3}}
Q = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) kind, COUNT(*) AS n FROM visits GROUP BY kind"


@pytest.fixture
def db(make_db):
    return make_db(SETUP, protect=TABLES, analysts=ANALYSTS, answers="own")


def ask(con, sql, params=None):
    cur = con.cursor()
    rows = cur.execute(sql, params).fetchall()
    return rows, cur.release


def spent(db, analyst="alice") -> float:
    with Owner(db) as o:
        return float(o.con.execute("SELECT epsilon_spent FROM dpgate.analysts WHERE name = ?", [analyst]).fetchone()[0])


def test_a_repeat_is_free_and_identical_and_says_so(db):
    con = dpgate.connect(str(db), analyst="alice")
    first, rel1 = ask(con, Q)
    again, rel2 = ask(con, Q)
    assert again == first and rel1.epsilon == 1.0 and rel2.epsilon == 0.0 and rel2.delta == 0.0
    assert rel2.remembered is not None and rel2.entry_id == rel1.entry_id
    assert "nothing was charged" in rel2.notes[0] and "ledger entry" in rel2.notes[0]
    assert rel2.intervals == rel1.intervals and rel2.population == rel1.population
    assert spent(db) == pytest.approx(1.0)
    # Whitespace, case of keywords and the order of options do not make a new statement.
    same, rel3 = ask(con, "select with differential_privacy options (epsilon = 1)  kind, count(*) AS n\nFROM visits GROUP BY kind")
    assert same == first and rel3.epsilon == 0.0


def test_a_dashboard_of_100_refreshes_spends_once(db):
    con = dpgate.connect(str(db), analyst="alice")
    rows = {tuple(ask(con, Q)[0]) for _ in range(100)}
    assert len(rows) == 1 and spent(db) == pytest.approx(1.0)
    with Owner(db) as o:
        assert o.con.execute("SELECT count(*) FROM dpgate.ledger").fetchone()[0] == 1  # the ledger: what was paid


@pytest.mark.parametrize("other", [
    Q.replace("epsilon = 1", "epsilon = 2"),
    Q.replace("epsilon = 1", "epsilon = 1, alpha = 0.1"),
    Q.replace("epsilon = 1", "epsilon = 1, clamp_counts = false"),
    Q.replace("GROUP BY kind", "WHERE amount > 3 GROUP BY kind"),
    Q.replace("COUNT(*) AS n", "COUNT(*) AS m"),
])  # fmt: skip
def test_any_change_to_the_statement_or_its_options_is_a_new_draw(db, other):
    con = dpgate.connect(str(db), analyst="alice")
    ask(con, Q)
    _, rel = ask(con, other)
    assert rel.epsilon > 0 and rel.remembered is None


def test_a_session_setting_is_part_of_the_statement_and_fresh_pays_for_a_new_draw(db):
    con = dpgate.connect(str(db), analyst="alice")
    plain = Q.replace("WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) ", "")
    first, _ = ask(con, plain)
    assert ask(con, plain)[0] == first
    con.cursor().execute("SET dp_alpha = 0.2")
    _, rel = ask(con, plain)
    assert rel.epsilon > 0  # another α: another answer
    ask(con, Q)
    fresh, rel = ask(con, Q.replace("epsilon = 1", "epsilon = 1, fresh = true"))
    assert rel.epsilon == 1.0 and rel.remembered is None
    again, rel = ask(con, Q)  # the fresh draw replaced the remembered one
    assert again == fresh and rel.epsilon == 0.0
    con.cursor().execute("SET dp_fresh = true")
    _, rel = ask(con, Q)
    assert rel.epsilon == 1.0


def raw(db, sql):
    """The owner changes rows with plain SQL (no dpgate connection may be open on the file)."""
    con = duckdb.connect(str(db))
    con.execute(sql)
    con.close()


@pytest.mark.parametrize("change", [
    "UPDATE visits SET amount = 7 WHERE uid = 3",  # one person's value, the count unchanged
    "DELETE FROM visits WHERE uid = 3",
    "UPDATE visits SET amount = amount",  # a nightly rewrite of every row that changes nothing
])  # fmt: skip
def test_whether_it_is_remembered_depends_on_no_row(db, change):
    """Were the rows read to decide, an analyst who paid once could ask, free and as often as they
    liked, whether one person's value had changed: the answer is given again whatever the rows are."""
    con = dpgate.connect(str(db), analyst="alice")
    q = Q.replace("COUNT(*) AS n", "COUNT(*) AS n, SUM(amount) AS s")
    first, _ = ask(con, q)
    con.close()
    raw(db, change)
    con = dpgate.connect(str(db), analyst="alice")
    again, rel = ask(con, q)
    assert again == first and rel.epsilon == 0.0
    assert con.gateway.cost(q) is None


@pytest.mark.parametrize("owner_action", ["load", "refresh_roster", "forget_answers"])
def test_a_change_of_data_through_dpgate_is_drawn_afresh_with_a_note(db, tmp_path, owner_action):
    con = dpgate.connect(str(db), analyst="alice")
    ask(con, Q)
    with Owner(db) as o:
        if owner_action == "load":
            (tmp_path / "k.csv").write_text("kind,label\na,A\n")
            o.load("kinds", tmp_path / "k.csv", replace=True)
        elif owner_action == "refresh_roster":
            o.refresh_roster("visits")
        else:
            o.forget_answers()
    _, rel = ask(con, Q)
    assert rel.epsilon == 1.0
    if owner_action != "forget_answers":  # forgotten: nothing to say
        assert "out of date (the owner changed data or declarations it reads since)" in rel.notes[-1]
    assert ask(con, Q)[1].epsilon == 0.0  # and then it is remembered again


def test_an_answer_older_than_max_age_is_drawn_afresh(db):
    con = dpgate.connect(str(db), analyst="alice")
    ask(con, Q)
    with Owner(db) as o:
        o.set_answer_memory(max_age=1)
    time.sleep(1.2)
    _, rel = ask(con, Q)
    assert rel.epsilon == 1.0 and "the owner keeps answers for 1 seconds" in rel.notes[-1]


def test_a_declaration_is_a_change_and_a_quota_is_not(db):
    con = dpgate.connect(str(db), analyst="alice")
    ask(con, Q)
    with Owner(db) as o:
        o.add_analyst("carol", epsilon=1.0)
        o.add_analyst("alice", epsilon=2e6, delta=1e-3)
    assert ask(con, Q)[1].epsilon == 0.0  # quotas are not what the answer depends on
    with Owner(db) as o:
        o.protect("visits", unit="uid", max_rows=5, max_groups=4, epsilon=1e6, domains={"kind": ["a", "b", "c", "d"]},
                  bounds={"amount": (0, 50)}, public_roster=True)  # fmt: skip
    _, rel = ask(con, Q)
    assert rel.epsilon == 1.0


def test_analysts_do_not_see_each_others_answers_unless_the_owner_shares_them(db):
    alice = dpgate.connect(str(db), analyst="alice")
    bob = dpgate.connect(str(db), analyst="bob")
    mine, _ = ask(alice, Q)
    _, rel = ask(bob, Q)
    assert rel.epsilon == 1.0  # bob's own draw, paid by bob
    with Owner(db) as o:
        o.forget_answers("bob")
        o.set_answer_memory("shared")
    theirs, rel = ask(bob, Q)
    assert theirs == mine and rel.epsilon == 0.0 and rel.entry_id is None
    assert "another analyst" in rel.notes[0] and "alice" not in " ".join(rel.notes)
    assert spent(db, "bob") == pytest.approx(1.0)


def test_explain_and_cost_say_whether_it_is_remembered(db):
    con = dpgate.connect(str(db), analyst="alice")
    assert con.gateway.cost(Q) == (1.0, 0.0)
    ask(con, Q)
    assert con.gateway.cost(Q) is None
    (row,) = ask(con, "EXPLAIN PRIVACY " + Q)[0]
    assert row[1] == "remembered" and row[2] == 0.0 and "free" in row[6]
    rows = ask(con, "EXPLAIN PRIVACY " + Q.replace("epsilon = 1", "epsilon = 1, fresh = true"))[0]
    assert rows[0][2] == 1.0 and rows[-1][0] == "remembered" and "charged" in rows[-1][6]
    assert con.gateway.cost(Q.replace("epsilon = 1", "epsilon = 1, fresh = true")) == (1.0, 0.0)


def test_the_owner_turns_it_off_caps_it_and_clears_it(db):
    con = dpgate.connect(str(db), analyst="alice")
    for eps in (1, 2, 3):
        ask(con, Q.replace("epsilon = 1", f"epsilon = {eps}"))
    with Owner(db) as o:
        assert o.answer_memory()["analysts"] == {"alice": 3}
        o.set_answer_memory(max_entries=2)  # the oldest goes
        assert o.answer_memory()["analysts"] == {"alice": 2}
    assert ask(con, Q)[1].epsilon == 1.0  # epsilon = 1 was the oldest
    assert ask(con, Q.replace("epsilon = 1", "epsilon = 3"))[1].epsilon == 0.0
    with Owner(db) as o:
        assert o.forget_answers() == 2
        o.set_answer_memory("off")
        with pytest.raises(dpgate.ProgrammingError, match="modes"):
            o.set_answer_memory("everyone")
    ask(con, Q)
    assert ask(con, Q)[1].epsilon == 1.0
    with Owner(db) as o:
        assert o.answer_memory()["analysts"] == {}


def test_the_clock_random_numbers_and_test_seeds_are_never_remembered(db):
    for sql in ("SELECT count(*) FROM t WHERE d > current_date", "SELECT count(*) FROM t WHERE now() > d",
                "SELECT count(*) FROM t WHERE random() < 0.5", "SELECT count(*) FROM t JOIN u ON gen_random_uuid() = u.id"):  # fmt: skip
        assert answers.volatile(parse_one(sql)), sql
    assert not answers.volatile(parse_one("SELECT count(*) FROM t WHERE d > DATE '2020-01-01'"))
    seeded = dpgate.connect(str(db), analyst="alice", test_seed=7)
    ask(seeded, Q)
    assert ask(seeded, Q)[1].epsilon == 1.0


def test_the_stored_form_keeps_every_type():
    values = (None, True, 3, 2**70, -0.5, float("inf"), float("nan"), Decimal("1.25"), "x", dt.date(2020, 1, 2),
              dt.datetime(2020, 1, 2, 3, 4, 5, 6), dt.datetime(2020, 1, 2, tzinfo=dt.UTC),
              dt.time(1, 2, 3), dt.timedelta(days=1, seconds=2), uuid.uuid4(), b"\x00\xff", [1, (2, 3)], {"a": 1})  # fmt: skip
    info = ReleaseInfo(7, "count", "laplace", 1.0, 0.0, 5.0, 0.0, 0.05, True, 10, 2,
                       {"n": ColumnNoise("laplace", 1.0, "±2")}, [{"n": (1, 3)}], ["a note"])  # fmt: skip
    back = answers.decode_result(answers.encode_result(Result(["v"] * len(values), ["X"] * len(values), [values], info)))
    (row,) = back.rows
    values = values[:-2] + ([1, [2, 3]], {"a": 1})  # json keeps lists, and tuples inside a value as lists
    assert [type(v) for v in row] == [type(v) for v in values]
    assert math.isnan(row[6]) and all(a == b for i, (a, b) in enumerate(zip(row, values)) if i != 6)
    assert back.release == info


def test_a_database_made_before_answers_were_remembered_gets_the_table(db):
    raw = duckdb.connect(str(db))
    raw.execute("DROP TABLE dpgate.answers")
    raw.close()
    con = dpgate.connect(str(db), analyst="alice")
    ask(con, Q)
    assert ask(con, Q)[1].epsilon == 0.0


def test_the_policy_file_and_the_command_line_set_it(db, capsys):
    from dpgate.interfaces import cli

    with Owner(db) as o:
        o.apply_policy({"answers": {"mode": "shared", "max_entries": 5}})
        assert o.answer_memory() == {"mode": "shared", "max_entries": 5, "max_bytes": 16 << 20, "max_age": 0,
                                     "analysts": {}}
        with pytest.raises(dpgate.Error, match="answers"):
            o.apply_policy({"answers": {"share": True}})
    ask(dpgate.connect(str(db), analyst="alice"), Q)
    assert cli.main(["answers", str(db)]) == 0
    assert "shared" in capsys.readouterr().out
    assert cli.main(["answers", str(db), "--forget", "alice", "--mode", "off"]) == 0
    out = capsys.readouterr().out
    assert "forgot 1 of alice's" in out and "no (off)" in out
    assert cli.main(["answers", str(db), "--max", "-1"]) == 1
    assert "DP322" in capsys.readouterr().err


def test_each_analysts_stored_bytes_are_capped(db):
    con = dpgate.connect(str(db), analyst="alice")
    ask(con, Q)
    (size,) = [b for a, _, b, _ in summary(db)]
    with Owner(db) as o:
        o.set_answer_memory(max_bytes=2 * size + size // 2)
    for eps in (2, 3, 4):
        ask(con, Q.replace("epsilon = 1", f"epsilon = {eps}"))
    ((_, n, stored, _),) = summary(db)
    assert n == 2 and stored <= 2 * size + size // 2


def summary(db):
    from dpgate.catalog import remembered

    with Owner(db) as o:
        return remembered.summary(o.con)


def test_what_the_shell_showed_is_the_most_a_statement_charges(db):
    """The shell asks cost() and then runs: an answer that goes out of date in between is refused
    free rather than charged without the question."""
    con = dpgate.connect(str(db), analyst="alice")
    ask(con, Q)
    con.gateway.confirmed = 0.0  # cost() said free
    with pytest.raises(dpgate.OperationalError) as e:
        ask(con, Q.replace("epsilon = 1", "epsilon = 1, fresh = true"))
    assert e.value.code == "DP406" and spent(db) == pytest.approx(1.0)
    con.gateway.confirmed = 1.0
    assert ask(con, Q.replace("epsilon = 1", "epsilon = 1, fresh = true"))[1].epsilon == 1.0


def test_shared_prefers_another_analysts_current_answer_to_ones_own_out_of_date_one(db):
    with Owner(db) as o:
        o.set_answer_memory("shared")
    alice = dpgate.connect(str(db), analyst="alice")
    bob = dpgate.connect(str(db), analyst="bob")
    ask(alice, Q)
    with Owner(db) as o:
        o.refresh_roster("visits")  # alice's answer is out of date now
    theirs, _ = ask(bob, Q)  # bob pays for a current one
    mine, rel = ask(alice, Q)
    assert mine == theirs and rel.epsilon == 0.0 and spent(db) == pytest.approx(1.0)


def test_what_each_analyst_holds_is_kept_beside_the_answers(db):
    alice = dpgate.connect(str(db), analyst="alice")
    for eps in (1, 2):
        ask(alice, Q.replace("epsilon = 1", f"epsilon = {eps}"))
    ask(alice, Q.replace("epsilon = 1", "epsilon = 1, fresh = true"))  # replaces one: still two
    with Owner(db) as o:
        held = o.con.execute("SELECT analyst, answers, bytes FROM dpgate.answers_held").fetchall()
        real = o.con.execute("SELECT analyst, count(*), sum(strlen(result)) FROM dpgate.answers GROUP BY analyst").fetchall()
        assert held == real and held[0][1] == 2
        o.forget_answers("alice")
        assert o.con.execute("SELECT count(*) FROM dpgate.answers_held").fetchone()[0] == 0
