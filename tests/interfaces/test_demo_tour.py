"""The demo survives itself: after any number of tours nobody in adult is exhausted, and the
query the demo suggests (``Try:``) answers about everyone on the roster."""

from __future__ import annotations

import json
import shlex

import pytest

from dpgate import errors
from dpgate.catalog.owner import Owner
from dpgate.interfaces import cli, demo

ROSTER = 32561


def tour(capsys, db, *flags) -> str:
    assert cli.main(["demo", "--db", str(db), *flags]) == 0
    return capsys.readouterr().out


def smallest_left_and_entries(db) -> tuple[float, int]:
    with Owner(db, create=False) as owner:
        table = owner.catalog().tables["adult"]
        (left,) = owner.con.execute(f"SELECT min(epsilon_budget - epsilon_spent) FROM {table.roster_sql}").fetchone()
        (entries,) = owner.con.execute("SELECT count(*) FROM dpgate.ledger").fetchone()
    return float(left), entries


def try_line(capsys, out: str) -> dict:
    """Run the suggested query exactly as printed, in json mode; return its envelope."""
    line = next(line for line in out.splitlines() if line.startswith("Try:"))
    words = shlex.split(line.removeprefix("Try:"))
    assert words[:2] == ["dpgate", "query"] and words[-1] == demo.TRY_QUERY
    assert cli.main([*words[1:], "--mode", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def check_after_tour(capsys, db, out: str) -> int:
    assert "refused: [DP252]" in out and "population: all 32,561 subjects on the roster" in out
    assert "Heads-up" not in out
    left, entries = smallest_left_and_entries(db)
    assert left >= 0.1, "no adult subject is exhausted: everyone still has the session ε"
    env = try_line(capsys, out)
    assert env["population"]["whole_roster"] is True and env["population"]["subjects"] == ROSTER
    remembered = env["cost"]["remembered"] is not None  # asked in an earlier tour (--keep): given again free
    assert env["cost"]["epsilon"] == (0.0 if remembered else 0.1)
    assert env["notes"] == [] if not remembered else "nothing was charged" in env["notes"][0]
    return entries


def test_the_tour_twice_fresh_and_then_kept(capsys, tmp_path):
    db = tmp_path / "demo.duckdb"
    first = check_after_tour(capsys, db, tour(capsys, db))
    again = check_after_tour(capsys, db, tour(capsys, db))
    assert again == first, "a second `dpgate demo` starts from a fresh database (the same ledger entries)"
    out = tour(capsys, db, "--keep")
    assert "adult_syn exists from an earlier tour" in out
    kept = check_after_tour(capsys, db, out)
    # --keep kept the database (and the Try query's entry after the last tour); the tour asks the same
    # statements, so their answers are remembered and free: no entry more
    assert kept == again + 1 and "nothing was charged" in out
    out = tour(capsys, db, "--keep")
    check_after_tour(capsys, db, out)
    assert smallest_left_and_entries(db)[0] == pytest.approx(3 - 1.1 - 0.1), "one tour and one Try paid for"


def test_a_worn_out_kept_database_says_so(capsys, tmp_path):
    db = tmp_path / "demo.duckdb"
    demo.build(db)
    with Owner(db, create=False) as owner:
        table = owner.catalog().tables["adult"]
        owner.con.execute(f"UPDATE {table.roster_table_sql} SET epsilon_spent = epsilon_budget - 0.5")
    out = tour(capsys, db, "--keep")
    assert "Heads-up: this demo database was used before (--keep)" in out and "without --keep" in out
    out = tour(capsys, db)
    assert "Heads-up" not in out, "without --keep: fresh budgets"


def test_demo_never_replaces_a_file_that_is_not_a_demo_database(capsys, tmp_path):
    import duckdb

    path = tmp_path / "mine.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE precious AS SELECT 1 AS x")
    con.close()
    assert cli.main(["demo", "--db", str(path), "--no-tour"]) == 1
    assert "is not a dpgate demo database" in capsys.readouterr().err
    con = duckdb.connect(str(path))
    assert con.execute("SELECT * FROM precious").fetchall() == [(1,)]
    assert con.execute("SELECT count(*) FROM duckdb_schemas() WHERE schema_name = 'dpgate'").fetchone() == (0,)
    con.close()
    with pytest.raises(errors.InterfaceError):
        demo.build(path, force=True)
