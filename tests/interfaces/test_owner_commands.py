"""Owner commands are functions returning replies: the CLI prints them, the server sends them."""

from __future__ import annotations

import ast
import threading
from pathlib import Path

import pytest

from dpgate.catalog.owner import Owner
from dpgate.interfaces import owner_commands
from dpgate.server.session import Session

SERVER = Path(__file__).resolve().parents[2] / "dpgate" / "server"


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "o.duckdb"
    with Owner(path):
        pass
    return str(path)


def _imported(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return found


@pytest.mark.parametrize("path", sorted(SERVER.glob("*.py")), ids=lambda p: p.name)
def test_the_server_never_imports_the_command_line(path):
    assert "dpgate.interfaces.cli" not in _imported(path)
    assert "redirect_stdout" not in path.read_text()


def test_a_command_returns_its_reply_and_prints_nothing(db, capsys):
    args = owner_commands.parser().parse_args(["analyst", "add", db, "carol", "--epsilon", "3"])
    reply = owner_commands.run(args, read_password=lambda: pytest.fail("no password asked"))
    assert reply.lines == ["analyst carol: ε quota 3, δ quota 1e-05"] and reply.listings == []
    args = owner_commands.parser().parse_args(["budget", db])
    analysts, tables = owner_commands.run(args, read_password=lambda: "").listings
    assert analysts.names[0] == "analyst" and [r[0] for r in analysts.rows] == ["carol"] and tables.rows == []
    assert capsys.readouterr() == ("", "")


def test_argparse_complaints_and_help_are_raised_not_printed(capsys):
    with pytest.raises(owner_commands.ArgumentsExit) as e:
        owner_commands.parser().parse_args(["analyst", "add"])
    assert e.value.status == 2 and e.value.err.startswith("usage: dpgate analyst add")
    assert "dpgate analyst add: error: the following arguments are required: database, name" in e.value.err
    with pytest.raises(owner_commands.ArgumentsExit) as e:
        owner_commands.parser().parse_args(["protect", "--help"])
    assert e.value.status == 0 and "Declare a table protected" in e.value.out
    assert capsys.readouterr() == ("", "")


def test_a_password_is_read_only_through_the_reader(db):
    args = owner_commands.parser().parse_args(["analyst", "add", db, "dave", "--epsilon", "1", "--password-stdin"])
    with pytest.raises(owner_commands.errors.PolicyError) as e:
        owner_commands.run(args, read_password=lambda: "short")
    assert e.value.code == "DP325"
    assert owner_commands.run(args, read_password=lambda: "a long password").lines[0].endswith("can log in to dpgate serve")


def test_another_threads_output_never_lands_in_an_owner_reply(db):
    stop = threading.Event()

    def chatter():
        while not stop.is_set():
            print("another thread's output")

    session = Session(db, "boss", "owner")
    talker = threading.Thread(target=chatter, daemon=True)
    talker.start()
    try:
        for name in ("carol", "dave", "erin"):
            out = session.run(f"dpgate analyst add {name} --epsilon 3")
            assert out.notices == [f"analyst {name}: ε quota 3, δ quota 1e-05"] and out.tag == "DPGATE ANALYST"
    finally:
        stop.set()
        talker.join()
        session.close()
