"""The shell's .mode csv and .mode json carry the cost, the population and the notes."""

from __future__ import annotations

import io
import json
import warnings

import pytest
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

import dpgate
from dpgate import errors
from dpgate.interfaces.shell import Shell

SETUP = """
CREATE TABLE t (person_id INTEGER, x INTEGER);
INSERT INTO t SELECT i, i % 2 FROM range(1, 401) r(i);
CREATE TABLE b (person_id INTEGER, epsilon DOUBLE);
INSERT INTO b SELECT i, CASE WHEN i <= 100 THEN 0.1 ELSE 1.0 END FROM range(1, 401) r(i);
"""
SPEND = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1) COUNT(*) AS n FROM t;"
COUNT = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1) x, COUNT(*) AS n FROM t GROUP BY x;"


@pytest.fixture
def db(make_db):
    return make_db(SETUP, {"t": dict(unit="person_id", budget_table="b", domains={"x": [0, 1]})},
                   {"alice": {"epsilon": 100.0, "delta": 1e-3}})  # fmt: skip


def drive(db, tmp_path, lines: list[str]) -> tuple[str, Shell]:
    with dpgate.connect(str(db), analyst="alice") as con, create_pipe_input() as inp, warnings.catch_warnings():
        warnings.simplefilter("error", errors.PopulationWarning)  # the shell shows it, never warns
        out = io.StringIO()
        sh = Shell(con, input=inp, output=DummyOutput(), stdout=out, color=False, history=tmp_path / "history", width=200)
        for line in [*lines, ".quit"]:
            inp.send_text(line + "\r")
        sh.run()
        return out.getvalue(), sh


def test_csv_mode_keeps_cost_population_and_notes(db, tmp_path):
    results = tmp_path / "answer.csv"
    text, _ = drive(db, tmp_path, [SPEND, ".mode csv", f".output {results}", COUNT, ".output"])
    rows = results.read_text().splitlines()
    assert rows[0] == "x,n,n_ci_low,n_ci_high" and len(rows) == 3, "the file gets the rows only"
    assert "# cost: ε 0.1, δ 0 · your quota left: ε 99.8" in text, "the rest goes to the screen"
    assert "# population: 300 of 400 subjects on the roster (" in text
    assert "# note: 100 people have used up their privacy budget and are not in this answer" in text


def test_csv_mode_on_the_screen(db, tmp_path):
    text, _ = drive(db, tmp_path, [".mode csv", COUNT])
    lines = text.splitlines()
    head = lines.index("x,n,n_ci_low,n_ci_high")
    assert lines[head + 3].startswith("# cost: ε 0.1") and lines[head + 4] == "# population: all 400 subjects on the roster"


def test_json_mode_is_one_envelope_with_everything(db, tmp_path):
    text, _ = drive(db, tmp_path, [SPEND, ".mode json", COUNT])
    start = text.index("{\n")
    env, _ = json.JSONDecoder().raw_decode(text[start:])
    assert env["columns"] == ["x", "n"] and len(env["rows"]) == 2 and len(env["intervals"]) == 2
    assert env["cost"]["epsilon"] == 0.1 and env["cost"]["epsilon_remaining"] == pytest.approx(99.8)
    assert env["population"]["subjects"] == 300 and env["population"]["roster"] == 400
    assert env["population"]["whole_roster"] is False
    assert any("100 people have used up their privacy budget" in n for n in env["notes"])


def test_table_mode_and_expanded_display_show_the_population(db, tmp_path):
    text, _ = drive(db, tmp_path, [SPEND, COUNT])
    assert "population: 300 of 400 subjects on the roster (" in text
    with dpgate.connect(str(db), analyst="alice") as con, create_pipe_input() as inp:
        out = io.StringIO()
        sh = Shell(con, input=inp, output=DummyOutput(), stdout=out, color=False, history=tmp_path / "h2", width=20)
        sh.expanded = "on"  # (in twenty columns, auto keeps this two-column table a table)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", errors.PopulationWarning)
            sh.run_sql(COUNT.rstrip(";"))
    words = " ".join(out.getvalue().split())  # twenty columns: the footer wraps
    assert "-[ RECORD 1 ]" in out.getvalue() and "population: 300 of 400" in words
    assert "note: 100 people have used up" in words
    assert all(len(line) <= 20 for line in out.getvalue().splitlines())


def test_the_toolbar_shows_delta_beside_epsilon(db, tmp_path):
    _, sh = drive(db, tmp_path, ["SET dp_delta = 2e-6;"])
    bar = sh.toolbar()
    assert "ε left 100" in bar and "δ left 0.001" in bar and "session ε 0.1, δ 2e-06" in bar
