"""The README is tested: its quick start, its length, its SQL, and that its owner's first steps are the
how-to that tests/interfaces/test_owner_cli.py runs. What the documentation pages hold is tested in
tests/test_docs.py (its links too)."""

from __future__ import annotations

import re
from pathlib import Path

from dpgate.frontend import dialect

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def _sh_block_after(text: str, title: str) -> str:
    match = re.search(re.escape(title) + r"\n\n.*?```sh\n(.*?)```", text, re.S)
    assert match, f"no sh block under {title!r}"
    return match.group(1)


def test_quick_start_is_two_commands_and_ci_runs_the_second():
    block = _sh_block_after(README, "## Quick start")
    commands = [line for line in block.splitlines() if line.strip()]
    assert len(commands) == 2
    assert "dpgate demo" in commands[0] and commands[0].startswith("pip install")
    assert "pytest" in commands[1] and commands[1].startswith("pip install")
    assert commands[1] in (ROOT / ".ci" / "run").read_text()


def test_the_readme_is_at_most_400_lines():
    assert len(README.splitlines()) <= 400


def test_the_owners_first_steps_are_the_tested_how_to():
    # The README's block is the first one of docs/owners/your-own-data.md, which
    # tests/interfaces/test_owner_cli.py runs line by line.
    how_to = (ROOT / "docs" / "owners" / "your-own-data.md").read_text()
    assert _sh_block_after(README, "### An owner's first steps") == _sh_block_after(how_to, "# Your own data")


def test_sql_in_the_readme_parses():
    snippets = re.findall(r"`((?:SELECT|SHOW|SET|EXPLAIN|DESCRIBE)[^`]*)`", README)
    snippets += re.findall(r'cur\.execute\("([^"]+)"\)', README)
    snippets += re.findall(r'"(SELECT WITH DIFFERENTIAL_PRIVACY [^"]+)"', README)  # in the shell commands
    checked = 0
    for sql in snippets:
        if "..." in sql or "<" in sql or not (" FROM " in sql or sql.startswith(("SET ", "SHOW "))):
            continue  # a clause named in prose, not a statement
        dialect.parse_one(sql)
        checked += 1
    assert checked >= 3
