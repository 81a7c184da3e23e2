"""Every interface says what an answer cost, whose data it is about (its population) and its notes.

The CLI in csv and json mode, the DB-API's ``cursor.messages`` and ``PopulationWarning``, and the
plain-words notes. The database ``spent`` has 400 subjects: 100 with a lifetime ε of 0.1 and 300
with 1.0; one query at ε = 0.1 uses up the first hundred.
"""

from __future__ import annotations

import json
import warnings

import pytest

import dpgate
from dpgate import errors
from dpgate.interfaces import cli
from dpgate.release import Population, ReleaseInfo

SETUP = """
CREATE TABLE t (person_id INTEGER, x INTEGER, k VARCHAR);
INSERT INTO t SELECT i, i % 2, 'k' || (i % 3) FROM range(1, 401) r(i);
CREATE TABLE b (person_id INTEGER, epsilon DOUBLE);
INSERT INTO b SELECT i, CASE WHEN i <= 100 THEN 0.1 ELSE 1.0 END FROM range(1, 401) r(i);
"""
COUNT = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1) x, COUNT(*) AS n FROM t GROUP BY x"


@pytest.fixture
def spent(make_db):
    """100 of the 400 subjects have used up their budget."""
    db = make_db(SETUP, {"t": dict(unit="person_id", budget_table="b", domains={"x": [0, 1]})},
                 {"alice": {"epsilon": 100.0, "delta": 1e-3}})  # fmt: skip
    with dpgate.connect(str(db), analyst="alice") as con, warnings.catch_warnings():
        warnings.simplefilter("error", errors.PopulationWarning)  # the first query is about everyone
        con.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1) COUNT(*) FROM t")
    return db


def run(capsys, *args):
    code = cli.main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


# -- the CLI ---------------------------------------------------------------------------------------
def test_csv_mode_rows_on_stdout_cost_population_and_notes_on_stderr(capsys, spent):
    code, out, err = run(capsys, "query", str(spent), "--analyst", "alice", "--mode", "csv", COUNT)
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "x,n,n_ci_low,n_ci_high" and len(lines) == 3
    for line in lines[1:]:
        x, n, lo, hi = (int(v) for v in line.split(","))
        assert lo <= n <= hi
    side = err.splitlines()
    assert all(line.startswith("# ") for line in side)
    assert side[0].startswith("# cost: ε 0.1, δ 0 · your quota left: ε 99.8, δ 0.001")
    assert side[1] == "# population: 300 of 400 subjects on the roster (100 not included: they had no budget left, " \
        "or the threshold rule left them out)" or side[1] == "# population: 300 of 400 subjects on the roster " \
        "(100 had no budget left)"  # the second once the gateway fills subjects_left_out
    assert "# note: 100 people have used up their privacy budget and are not in this answer" in err
    assert "#" not in out, "the csv itself stays clean"


def test_csv_mode_without_intervals_and_for_free_statements(capsys, spent):
    code, out, err = run(capsys, "query", str(spent), "--analyst", "alice", "--mode", "csv", "--no-intervals", COUNT)
    assert code == 0 and out.splitlines()[0] == "x,n" and "# population: 300 of 400" in err
    code, out, err = run(capsys, "query", str(spent), "--analyst", "alice", "--mode", "csv", "SELECT 42 AS answer")
    assert code == 0 and out == "answer\n42\n" and err == ""
    code, out, err = run(capsys, "query", str(spent), "--analyst", "alice", "--mode", "csv", "SET dp_epsilon = 0.2")
    assert code == 0 and out == "" and err == "# SET dp_epsilon = 0.2\n"


def test_json_mode_is_one_envelope(capsys, spent):
    code, out, err = run(capsys, "query", str(spent), "--analyst", "alice", "--mode", "json", COUNT)
    assert code == 0 and err == ""
    env = json.loads(out)
    assert set(env) == {"columns", "types", "rows", "intervals", "cost", "population", "notes"}
    assert env["columns"] == ["x", "n"] and env["types"] == ["INTEGER", "BIGINT"] and len(env["rows"]) == 2
    for (x, n), iv in zip(env["rows"], env["intervals"]):
        assert set(iv) == {"n"} and iv["n"][0] <= n <= iv["n"][1]
    cost = env["cost"]
    assert cost["epsilon"] == 0.1 and cost["delta"] == 0.0 and cost["epsilon_remaining"] == pytest.approx(99.8)
    assert cost["delta_remaining"] == 1e-3 and cost["mechanism"] == "laplace" and cost["confidence"] == 0.95
    assert cost["private"] is True and isinstance(cost["ledger_entry"], int)
    pop = env["population"]
    assert (pop["subjects"], pop["roster"], pop["not_included"], pop["whole_roster"]) == (300, 400, 100, False)
    assert pop["no_budget_left"] in (None, 100) and pop["left_out_by_rule"] in (None, 0)
    assert pop["text"].startswith("300 of 400 subjects on the roster")
    assert any("100 people have used up their privacy budget" in n for n in env["notes"])


def test_json_mode_for_a_whole_roster_and_for_free_statements(capsys, demo_db):
    code, out, _ = run(capsys, "query", str(demo_db), "--analyst", "demo", "--mode", "json", "SELECT COUNT(*) AS n FROM adult")
    env = json.loads(out)
    assert env["population"]["whole_roster"] is True and env["population"]["subjects"] == 32561
    assert env["population"]["text"] == "all 32,561 subjects on the roster" and env["notes"] == []
    code, out, _ = run(capsys, "query", str(demo_db), "--analyst", "demo", "--mode", "json", "--no-intervals",
                       "SELECT region FROM country_regions ORDER BY 1 LIMIT 1")  # fmt: skip
    env = json.loads(out)
    assert env == {"columns": ["region"], "types": ["VARCHAR"], "rows": [["Asia"]], "intervals": None,
                   "cost": None, "population": None, "notes": []}  # fmt: skip


def test_table_mode_prints_the_population_and_plain_notes(capsys, spent):
    code, out, _ = run(capsys, "query", str(spent), "--analyst", "alice", COUNT)
    assert code == 0
    out = " ".join(out.split())  # under xdist COLUMNS is 80: the footer wraps
    assert "population: 300 of 400 subjects on the roster (" in out
    assert "note: 100 people have used up their privacy budget and are not in this answer (they paid nothing)" in out
    assert "partition 0" not in out and "allowance" not in out, "internals stay in EXPLAIN PRIVACY"


def test_the_cli_prints_no_python_warning(capsys, spent):
    with warnings.catch_warnings():
        warnings.simplefilter("error", errors.PopulationWarning)
        code, _, err = run(capsys, "query", str(spent), "--analyst", "alice", COUNT)
    assert code == 0 and "PopulationWarning" not in err


# -- the DB-API ------------------------------------------------------------------------------------
def test_population_warning_is_exported_from_dpgate():
    assert dpgate.PopulationWarning is errors.PopulationWarning
    assert issubclass(dpgate.PopulationWarning, UserWarning)


def test_dbapi_warns_when_the_population_is_not_the_roster(spent):
    with dpgate.connect(str(spent), analyst="alice") as con:
        cur = con.cursor()
        with pytest.warns(errors.PopulationWarning, match="300 of 400 subjects") as record:
            cur.execute(COUNT)
        assert record[0].filename == __file__, "the warning points at the caller's execute"
        pop = cur.release.population
        assert (pop.size, pop.roster, pop.not_included, pop.whole) == (300, 400, 100, False)
        assert cur.messages[0].startswith("cost: ε 0.1, δ 0")
        assert cur.messages[1].startswith("population: 300 of 400 subjects on the roster")
        assert "note: 100 people have used up their privacy budget and are not in this answer (they paid nothing)" \
            in cur.messages  # fmt: skip
        with pytest.warns(errors.PopulationWarning) as record:
            con.execute(COUNT)
        assert record[0].filename == __file__


def test_dbapi_messages_without_a_warning_for_the_whole_roster(con):
    cur = con.cursor()
    with warnings.catch_warnings():
        warnings.simplefilter("error", errors.PopulationWarning)
        cur.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.2) COUNT(*) FROM adult")
    assert cur.messages == [
        "cost: ε 0.2, δ 0 · your quota left: ε 9.8, δ 1e-05 · laplace · 95% intervals",
        "population: all 32,561 subjects on the roster",
    ]
    assert cur.release.population.whole
    cur.execute("SELECT 1")
    assert cur.messages == [], "cleared by every execute"
    cur.execute("SET dp_epsilon = 0.3")
    assert cur.messages == ["SET dp_epsilon = 0.3"]


def test_sample_rule_note_in_plain_words(make_db):
    db = make_db(SETUP, {"t": dict(unit="person_id", budget_table="b", domains={"x": [0, 1]})},
                 {"alice": {"epsilon": 100.0, "delta": 1e-3}})  # fmt: skip
    with dpgate.connect(str(db), analyst="alice") as con, warnings.catch_warnings():
        warnings.simplefilter("error", errors.PopulationWarning)
        cur = con.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5) COUNT(*) FROM t")
    assert cur.release.population.whole, "everyone with budget left is in a sample-rule answer"
    note = next(m for m in cur.messages if m.startswith("note: 100 people have less than ε=0.5 left"))
    assert "each took part with a chance that matches what they have left, and paid that" in note
    assert "the answer is scaled to all subjects with budget left, 400 people, from those who took part" in note
    assert "allowance" not in note and "partition" not in note, "no internals"


def test_threshold_rule_population_and_notes(make_db):
    db = make_db(SETUP, {"t": dict(unit="person_id", budget_table="b", domains={"x": [0, 1]})},
                 {"alice": {"epsilon": 100.0, "delta": 1e-3}})  # fmt: skip
    with dpgate.connect(str(db), analyst="alice") as con:
        with pytest.warns(errors.PopulationWarning, match="300 of 400"):
            cur = con.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5, personalization = 'threshold') "
                              "COUNT(*) FROM t")  # fmt: skip
    assert cur.release.population.size == 300
    assert any(m.startswith("note: 100 people have less than ε=0.5 left and are not in this answer: "
                            "personalization = 'threshold'") for m in cur.messages)  # fmt: skip


# -- the population itself -------------------------------------------------------------------------
def _info(**kw) -> ReleaseInfo:
    base = dict(entry_id=1, query_class="count", mechanism="laplace", epsilon=0.1, delta=0.0, epsilon_remaining=1.0,
                delta_remaining=0.0, alpha=0.05, private=True)  # fmt: skip
    return ReleaseInfo(**{**base, **kw})


def test_population_from_the_release_counts():
    pop = _info(subjects_charged=19537, subjects_excluded=13024, subjects_left_out=0).population
    assert pop == Population(19537, 32561, 13024, 0)
    assert pop.describe() == "19,537 of 32,561 subjects on the roster (13,024 had no budget left)"
    pop = _info(subjects_charged=19537, subjects_excluded=13024, subjects_left_out=9768).population
    assert pop.describe() == ("19,537 of 32,561 subjects on the roster (3,256 had no budget left; "
                              "9,768 left out by the threshold rule)")  # fmt: skip
    pop = _info(subjects_charged=19537, subjects_excluded=13024).population  # the split not given
    assert (pop.no_budget, pop.left_out, pop.not_included) == (None, None, 13024)
    assert _info(subjects_charged=32561).population.describe() == "all 32,561 subjects on the roster"
    graph = _info(query_class="subgraph", edge_level=True, subjects_charged=1).population
    assert graph.whole and graph.edge_level and "edge-level" in graph.describe()
