"""The README is tested: its quick start, its SQL, and that it documents every command and clause."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dpgate import codes
from dpgate.interfaces import cli
from dpgate.frontend import dialect
from dpgate.frontend.settings import SPECS

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def test_quick_start_is_two_commands_and_ci_runs_the_second():
    block = re.search(r"## Quick start\n\n```sh\n(.*?)```", README, re.S).group(1)
    commands = [line for line in block.splitlines() if line.strip()]
    assert len(commands) == 2
    assert "dpgate demo" in commands[0] and commands[0].startswith("pip install")
    assert "pytest" in commands[1] and commands[1].startswith("pip install")
    assert commands[1] in (ROOT / ".ci" / "run").read_text()


def test_every_cli_command_is_documented():
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name in sub.choices:
        assert f"dpgate {name}" in README, name


@pytest.mark.parametrize("clause", ["WITH DIFFERENTIAL_PRIVACY OPTIONS", "SET dp_epsilon", "SHOW BUDGET", "EXPLAIN PRIVACY", "SHOW TABLES", "DESCRIBE"])
def test_dp_clauses_are_documented(clause):
    assert clause in README


def test_every_option_is_documented():
    for name, spec in SPECS.items():
        assert f"`{name}`" in README or f"dp_{name}" in README, name


def test_sql_in_the_readme_parses():
    snippets = re.findall(r"`((?:SELECT|SHOW|SET|EXPLAIN|DESCRIBE)[^`]*)`", README)
    snippets += re.findall(r'cur\.execute\("([^"]+)"\)', README)
    assert len(snippets) >= 5
    checked = 0
    for sql in snippets:
        if "..." in sql or "<" in sql or not (" FROM " in sql or sql.startswith(("SET ", "SHOW "))):
            continue  # a clause named in prose, not a statement
        dialect.parse_one(sql)
        checked += 1
    assert checked >= 5


def test_the_error_codes_section_is_the_generated_table():
    # dpgate/codes.py is the one table of codes; the README holds its output verbatim, under the
    # one-line intro (regenerate with: python -m dpgate.codes). tests/test_error_codes.py checks
    # the table against the raise sites.
    section = re.search(r"\n### Errors\n\n(.*?)\n(?=#)", README, re.S).group(1)
    intro = "Every error is a PEP 249 class with a stable `.code`, a `.hint` and a `.details` dict:\n\n"
    assert section == intro + codes.section()


def test_every_dot_command_is_documented():
    from dpgate.interfaces.shell.commands import COMMANDS

    for name in COMMANDS:
        assert f"`{name}" in README, name
