"""The shell fits results and what follows them to the screen; \\x and .expanded; files and pipes stay plain."""

from __future__ import annotations

import io
from contextlib import contextmanager

import pytest
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

import dpgate
from dpgate.interfaces.fit import display_width
from dpgate.interfaces.render import format_result
from dpgate.interfaces.shell import Shell

DP = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.2) education, COUNT(*) AS n FROM adult GROUP BY education"


@contextmanager
def shell(db, tmp_path, width=80):
    with dpgate.connect(str(db), analyst="demo") as con, create_pipe_input() as inp:
        out = io.StringIO()
        sh = Shell(con, input=inp, output=DummyOutput(), stdout=out, color=False, history=tmp_path / "history",
                   width=width)  # fmt: skip
        yield sh, inp, out


def run(sh, inp, lines):
    for line in [*lines, ".quit"]:
        inp.send_text(line + "\r")
    sh.run()


def widest(text: str) -> int:
    return max(display_width(line) for line in text.splitlines())


def test_backslash_x_toggles_the_expanded_display(demo_db, tmp_path):
    with shell(demo_db, tmp_path) as (sh, inp, out):
        run(sh, inp, ["\\x", "SELECT 42 AS answer;", "\\x", "SELECT 43 AS answer;", "\\x auto", ".expanded on",
                      ".expanded", ".expanded sideways", "\\?"])  # fmt: skip
        assert sh.expanded == "off"
    text = out.getvalue()
    assert "Expanded display is on." in text and "-[ RECORD 1 ]" in text and "answer | 42" in text
    assert "Expanded display is off." in text and "| answer |" in text and "|     43 |" in text
    assert "Expanded display is used automatically." in text
    assert "error DP241: .expanded takes on, off or auto" in text
    assert ".expanded [on|off|auto]" in text and "\\x [on|off|auto]" in text  # \? lists both
    assert widest(text) <= 80, "the help wraps too"


@pytest.mark.parametrize("width", (40, 80, 100, 200))
def test_show_budget_and_a_dp_answer_fit_the_screen(demo_db, tmp_path, width):
    with shell(demo_db, tmp_path, width) as (sh, inp, out):
        run(sh, inp, ["SHOW BUDGET;", DP + ";", "SELECT * FROM adult;"])
    text = out.getvalue()
    assert widest(text) <= width, "tables, the footer, errors and hints"
    words = " ".join(text.split())
    assert "population: all 32,561 subjects on the roster" in words and "error DP252" in words
    if width >= 80:
        assert "| scope" in text, "SHOW BUDGET is a table from 80 columns up"


def test_a_file_and_a_pipe_get_the_plain_table(demo_db, tmp_path, monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    results = tmp_path / "budget.txt"
    with shell(demo_db, tmp_path, width=40) as (sh, inp, out):
        run(sh, inp, [f"\\o {results}", "SHOW BUDGET;", "\\o", "SHOW BUDGET;"])
        plain = format_result(sh.connection.execute("SHOW BUDGET").result)
    assert results.read_text() == plain + "\n", "a file is not fitted to the screen"
    assert widest(out.getvalue()) <= 40, "the screen is"
    with dpgate.connect(str(demo_db), analyst="demo") as con:
        out = io.StringIO()
        Shell(con, interactive=False, stdout=out, stderr=io.StringIO(), color=False).run_script("SHOW BUDGET;\n")
    assert out.getvalue() == plain + "\n", "a script's output through a pipe: as it always was"


def test_columns_says_how_wide(demo_db, monkeypatch):
    monkeypatch.setenv("COLUMNS", "60")
    with dpgate.connect(str(demo_db), analyst="demo") as con:
        out = io.StringIO()
        Shell(con, interactive=False, stdout=out, stderr=io.StringIO(), color=False).run_script("SHOW BUDGET;\n")
    assert widest(out.getvalue()) <= 60
