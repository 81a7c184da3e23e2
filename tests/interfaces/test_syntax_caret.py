"""Syntax errors point at the problem: a caret under the token, plain words, no parser internals."""

from __future__ import annotations

import subprocess
import sys

import pytest

import dpgate

BROKEN = [
    "SELECT COUNT(*) FROM adult WHERE age > 3 AND",
    "SELECT (1 + 2 FROM adult",
    "SELECT 'abc FROM adult",
    'SELECT "abc FROM adult',
    "SELEC 1",
    "SELECT a,\n  b FROM adult WHERE AND x",
    "SELECT COUNT(* FROM adult",
    "SELECT FROM WHERE",
    "SELECT COUNT(*) FROM adult WHERE age BETWEEN 1",
    "SELECT COUNT(*) FROM adult GROUP BY",
    "SELECT CASE WHEN age > 1 THEN 1 FROM adult",
    "SELECT COUNT(*) FROM adult WHERE age IN (1, 2",
    "SELECT COUNT(*) FROM adult ORDER BY",
    "SELECT * FROM adult JOIN",
    "SELECT COUNT(*) FROM adult WHERE OR age > 3",
    "SELECT WITH DIFFERENTIAL_PRIVACY COUNT(*) FROM adult",
    "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = ) COUNT(*) FROM adult",
    "SELECT COUNT(*) FROM adult LIMIT",
    "SELECT COUNT(*) FROM adult WHERE age >",
    "SELECT 1 +",
    "SELECT CAST(age AS) FROM adult",
    "SELECT COUNT(*) FROM adult WHERE NOT",
]


@pytest.mark.parametrize("sql", BROKEN)
def test_no_parser_internals_in_messages(demo_db, sql):
    con = dpgate.connect(str(demo_db), analyst="demo")
    with pytest.raises(dpgate.Error) as e:
        con.cursor().execute(sql)
    text = str(e.value)
    assert "sqlglot" not in text and "<class" not in text and "expressions." not in text, text
    assert e.value.code in ("DP201", "DP202", "DP203", "DP204", "DP205", "DP211", "DP212", "DP230", "DP250", "DP252", "DP253")


def _caret_column(text: str) -> tuple[str, int]:
    lines = text.splitlines()
    i = next(k for k, line in enumerate(lines) if line.strip() and set(line.strip()) == {"^"})
    return lines[i - 1], lines[i].index("^")


def test_the_caret_lands_under_the_token():
    from dpgate.frontend.dialect import parse_one

    with pytest.raises(dpgate.Error) as e:
        parse_one("SELECT COUNT(*) FROM adult WHERE age > 3 AND")
    shown, at = _caret_column(str(e.value))
    assert shown[at : at + 3] == "AND"
    assert "(line 1, column 42)" in str(e.value)


def test_the_caret_on_a_second_line():
    from dpgate.frontend.dialect import parse_one

    with pytest.raises(dpgate.Error) as e:
        parse_one("SELECT a,\n  b FROM t WHERE AND x")
    shown, at = _caret_column(str(e.value))
    assert "line 2" in str(e.value) and shown.strip() == "b FROM t WHERE AND x" and shown[at] == "x"


def test_an_unclosed_quote_points_at_it():
    from dpgate.frontend.dialect import parse_one

    with pytest.raises(dpgate.Error) as e:
        parse_one("SELECT a FROM t\nWHERE s = 'abc")
    shown, at = _caret_column(str(e.value))
    assert "not closed" in str(e.value) and shown[at] == "'" and "line 2" in str(e.value)


def test_the_cli_shows_the_caret(demo_db):
    proc = subprocess.run([sys.executable, "-m", "dpgate.interfaces.cli", "query", str(demo_db), "--analyst", "demo",
                           "SELECT COUNT(*) FROM adult WHERE age > 3 AND"], capture_output=True, text=True)  # fmt: skip
    assert proc.returncode == 1 and "^^^" in proc.stderr and "sqlglot" not in proc.stderr
