"""Output that fits: tables narrow their text columns to the terminal; --wide and pipes keep everything."""

from __future__ import annotations

import io
import os
import subprocess
import sys

from dpgate.interfaces.progress import ProgressBar
from dpgate.interfaces.render import format_table

EXPLAIN = "SELECT education, COUNT(*), AVG(age) FROM adult GROUP BY education"


def _cli(*args, columns=None):
    env = dict(os.environ)
    env.pop("COLUMNS", None)
    if columns:
        env["COLUMNS"] = str(columns)
    return subprocess.run([sys.executable, "-m", "dpgate.interfaces.cli", *args], capture_output=True, text=True,
                          env=env, timeout=120)  # fmt: skip


def test_a_table_fits_and_never_cuts_a_number():
    # A little too wide: the text column wraps within the table, a rule between the rows.
    rows = [["alpha beta gamma delta epsilon", "123456789012", "short"], ["x", "7", "y"]]
    text = format_table(["text", "n", "more"], rows, [False, True, False], max_width=40)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 40 and "…" not in text
    assert "123456789012" in text, "a number keeps its whole width"
    words = " ".join(line.split("|")[1].strip() for line in lines if line.startswith("|"))
    assert "alpha beta gamma delta epsilon" in words, "every word is there, in order"
    assert len(lines) == 9 and lines[6] == lines[0], "header, three lines of row 1, a rule, row 2"
    # Far too wide: one field per line (psql's expanded display), still every character.
    rows = [["a" * 100, "123456789012", "b" * 50]]
    text = format_table(["text", "n", "more"], rows, [False, True, False], max_width=60)
    assert max(len(line) for line in text.splitlines()) <= 60 and "…" not in text
    assert text.splitlines()[0].startswith("-[ RECORD 1 ]") and "n    | 123456789012" in text
    assert text.count("a") == 100 and text.count("b") == 50
    assert format_table(["text"], [["a" * 100]]) == format_table(["text"], [["a" * 100]], max_width=None)


def test_the_cli_fits_the_terminal_width(demo_db):
    proc = _cli("explain", str(demo_db), "--analyst", "demo", EXPLAIN, columns=80)
    assert proc.returncode == 0
    assert max(len(line) for line in proc.stdout.splitlines()) <= 80 and "…" not in proc.stdout
    assert proc.stdout.startswith("-[ RECORD 1 ]"), "seven columns in 80: one field per line"
    assert "predicted root-mean-square error" in " ".join(line.split("| ", 1)[-1] for line in proc.stdout.splitlines())
    proc = _cli("query", str(demo_db), "--analyst", "demo", "SELECT sex, COUNT(*) AS n FROM adult GROUP BY sex",
                columns=80)  # fmt: skip
    assert proc.stdout.startswith("+--") and "| sex " in proc.stdout, "a table that fits stays a table"


def test_wide_and_pipes_keep_every_character(demo_db):
    for args in ((), ("--wide",)):
        proc = _cli("explain", str(demo_db), "--analyst", "demo", EXPLAIN, *args, columns=80 if args else None)
        assert "predicted root-mean-square error" in proc.stdout and "…" not in proc.stdout


def test_progress_off_a_terminal_prints_a_start_and_an_end():
    out = io.StringIO()
    bar = ProgressBar(out)
    for k in range(11):
        bar(k / 10, f"step {k}")
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and "0%" in lines[0] and "100%" in lines[1]


def test_expanded_on_and_off_in_the_cli(demo_db):
    proc = _cli("query", str(demo_db), "--analyst", "demo", "SHOW TABLES", "--expanded", "on", columns=80)
    assert proc.returncode == 0 and proc.stdout.startswith("-[ RECORD 1 ]") and "name         | adult" in proc.stdout
    assert max(len(line) for line in proc.stdout.splitlines()) <= 80
    proc = _cli("explain", str(demo_db), "--analyst", "demo", EXPLAIN, "--expanded", "off", columns=100)
    assert proc.stdout.startswith("+--"), "off: a table even for seven columns (wrapped to fit 100)"
    assert max(len(line) for line in proc.stdout.splitlines()) <= 100
    proc = _cli("query", str(demo_db), "--analyst", "demo", "SHOW BUDGET", "--expanded", "sideways")
    assert proc.returncode == 2 and "--expanded" in proc.stderr


def test_a_pipe_gets_the_table_as_it_always_was(demo_db):
    """No terminal and no COLUMNS: scripts that parse the table see no wrapping and no records."""
    import dpgate
    from dpgate.interfaces.render import format_result

    proc = _cli("query", str(demo_db), "--analyst", "demo", "SHOW BUDGET")
    with dpgate.connect(str(demo_db), analyst="demo") as con:
        plain = format_result(con.execute("SHOW BUDGET").result)
    assert proc.stdout == plain + "\n" and max(len(line) for line in plain.splitlines()) > 200
    proc = _cli("query", str(demo_db), "--analyst", "demo", "SHOW TABLES", "--expanded", "on")
    assert proc.stdout.startswith("-[ RECORD 1 ]"), "unless asked for"
