"""The owner's day on the command line: load, protect, analysts, budget, ledger; precise file errors."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

ROOT = Path(__file__).resolve().parents[2]
OWNERS = ROOT / "docs" / "owners"


def dpgate(*args, cwd=None, stdin=None):
    return subprocess.run([sys.executable, "-m", "dpgate.interfaces.cli", *args], capture_output=True, text=True,
                          cwd=cwd, input=stdin, timeout=120)  # fmt: skip


def test_the_owners_how_tos_run_verbatim(tmp_path):
    """The documentation's pages "Your own data", then "Per-subject budgets" on the same clinic.duckdb
    and analyst: there --budget-column gives each patient the smallest consent_epsilon among their
    rows; then "Budget shares" on the same file (docs/owners/)."""
    outputs = []
    for name, title in (("your-own-data.md", "# Your own data"), ("per-subject-budgets.md", "# Per-subject budgets"),
                        ("budget-shares.md", "# Budget shares: a team on one subject space")):  # fmt: skip
        match = re.search(re.escape(title) + r"\n\n.*?```sh\n(.*?)```", (OWNERS / name).read_text(), re.S)
        assert match, f"docs/owners/{name} has no sh block under {title!r}"
        block = match.group(1)
        for line in block.strip().splitlines():  # COLUMNS: one layout whatever the runner's (xdist's set 80)
            proc = subprocess.run(line.replace("dpgate ", f"{sys.executable} -m dpgate.interfaces.cli ", 1)
                                  if line.startswith("dpgate ") else line,
                                  shell=True, cwd=tmp_path, capture_output=True, text=True, timeout=120,
                                  env=dict(os.environ, COLUMNS="200"))  # fmt: skip
            assert proc.returncode == 0, (line, proc.stderr)
            outputs.append(proc.stdout)
    assert "4 rows loaded" in outputs[1]
    assert "12 rows" in outputs[4] and "population: all 3 subjects" in outputs[4]
    assert "alice" in outputs[5] and "visits" in outputs[5]
    ledger = outputs[6].splitlines()
    assert ledger[0].startswith("entry,at,analyst") and "GROUP BY 1" in ledger[1] and ",1,0," in ledger[1]
    default, own, shown = outputs[-3:]  # the budget shares
    assert "budget share: each analyst may use 1 / (the number of analysts)" in default
    assert "share of each subject's ε: 0.5" in own
    rows = [line.strip("|").split("|") for line in shown.splitlines() if line.startswith("|")]
    columns = [" ".join(r[j].strip() for r in rows if j < len(r)) for j in range(max(map(len, rows)))]
    flat = " ".join(" ".join(columns).split())  # the listing wraps to the terminal's width: read each column down
    assert "visits2: left to you" in flat and "you may use 0.5 of each subject's lifetime ε" in flat
    protect, query, budget = outputs[-6:-3]
    assert "3 subjects on its roster" in protect
    assert "ε charged 0.8" in query and "1 patients have less than ε=0.8 left" in query
    (row,) = [line for line in budget.splitlines() if line.startswith("| visits2 ")]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[3:8] == ["3", "0", "0.2", "2.2", "1"]  # 3 subjects; ε left 0.5 → 0 (sampled or not), 1 → 0.2, 3 → 2.2


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("command", [["ledger"], ["budget"], ["analyst", "list"], ["quality", "x"]])
def test_read_only_commands_leave_a_plain_duckdb_file_byte_identical(tmp_path, command):
    db = tmp_path / "plain.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE t AS SELECT 1 AS x")
    before = _sha(db)
    args = [*command[:1], *(["list"] if command[:2] == ["analyst", "list"] else []), str(db), *command[1:]]
    if command[:2] == ["analyst", "list"]:
        args = ["analyst", "list", str(db)]
    proc = dpgate(*args)
    assert proc.returncode == 1 and "DP321" in proc.stderr, proc.stderr
    assert _sha(db) == before
    assert not (tmp_path / "plain.duckdb.wal").exists()


@pytest.mark.parametrize(
    "setup, code",
    [("missing", "DP101"), ("directory", "DP103"), ("text", "DP104")],
)
def test_files_that_are_not_databases_get_precise_errors(tmp_path, setup, code):
    path = tmp_path / "db"
    if setup == "directory":
        path.mkdir()
    elif setup == "text":
        path.write_text("hello, not a database\n" * 100)
    proc = dpgate("ledger", str(path))
    assert proc.returncode == 1 and f"error {code}" in proc.stderr and "Traceback" not in proc.stderr


def test_a_failed_command_leaves_no_file_behind(tmp_path):
    proc = dpgate("load", str(tmp_path / "new.duckdb"), "t", str(tmp_path / "missing.csv"))
    assert proc.returncode == 1 and "DP611" in proc.stderr
    assert not (tmp_path / "new.duckdb").exists() and not (tmp_path / "new.duckdb.wal").exists()
    proc = dpgate("policy", "apply", str(tmp_path / "new.duckdb"), str(tmp_path / "nope.toml"))
    assert proc.returncode == 1 and "DP324" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "new.duckdb").exists()


def test_analysts_are_added_changed_and_listed(tmp_path):
    db = str(tmp_path / "a.duckdb")
    assert dpgate("analyst", "add", db, "bob", "--epsilon", "2").returncode == 0
    again = dpgate("analyst", "add", db, "bob", "--epsilon", "3")
    assert again.returncode == 1 and "DP323" in again.stderr
    unknown = dpgate("analyst", "set", db, "eve", "--epsilon", "3")
    assert unknown.returncode == 1 and "DP302" in unknown.stderr
    assert dpgate("analyst", "set", db, "bob", "--delta", "1e-6").returncode == 0
    listed = json.loads(dpgate("analyst", "list", db, "--mode", "json").stdout)
    assert listed[0]["analyst"] == "bob" and listed[0]["epsilon quota"] == "2" and listed[0]["delta quota"] == "0.000001"


def test_load_refuses_to_overwrite_unless_asked(tmp_path):
    csv = tmp_path / "x.csv"
    csv.write_text("a,b\n1,x\n2,y\n")
    db = str(tmp_path / "l.duckdb")
    assert dpgate("load", db, "t", str(csv)).returncode == 0
    again = dpgate("load", db, "t", str(csv))
    assert again.returncode == 1 and "DP613" in again.stderr
    assert dpgate("load", db, "t", str(csv), "--replace").returncode == 0
    odd = tmp_path / "x.data"
    odd.write_text("a\n1\n")
    unknown = dpgate("load", db, "u", str(odd))
    assert unknown.returncode == 1 and "DP612" in unknown.stderr
    assert dpgate("load", db, "u", str(odd), "--format", "csv").returncode == 0


def test_protect_keeps_a_stored_sample_order_when_asked(tmp_path):
    csv = tmp_path / "v.csv"
    csv.write_text("pid,cost\n1,10\n1,20\n1,30\n2,5\n")
    db = str(tmp_path / "v.duckdb")
    assert dpgate("load", db, "v", str(csv)).returncode == 0
    done = dpgate("protect", db, "v", "--unit", "pid", "--max-rows", "2", "--sample-order", "stored")
    assert done.returncode == 0, done.stderr
    with duckdb.connect(db, read_only=True) as con:
        assert con.execute("SELECT count(*) FROM dpgate.sample_order_v").fetchone()[0] == 4
    assert dpgate("protect", db, "v", "--unit", "pid", "--sample-order", "often").returncode == 2


def test_the_owner_is_told_when_quotas_can_use_up_the_subjects_budgets(tmp_path, capsys, monkeypatch):
    """Subjects' budgets are shared by every analyst: quotas that together reach the median lifetime
    ε let them exhaust most subjects, and whoever asks later is refused with quota left."""
    from dpgate.catalog.owner import Owner
    from dpgate.interfaces import cli

    monkeypatch.delenv("COLUMNS", raising=False)  # xdist's workers set it: the notes would wrap to it

    db = tmp_path / "shared.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE t AS SELECT i AS uid, CASE WHEN i < 600 THEN 3.0 ELSE 8.0 END AS b FROM range(1000) r(i)")
    assert cli.main(["protect", str(db), "t", "--unit", "uid", "--budget-column", "b", "--public-roster"]) == 0
    assert "note:" not in capsys.readouterr().out  # no analyst yet
    assert cli.main(["analyst", "add", str(db), "alice", "--epsilon", "2"]) == 0
    assert "note:" not in capsys.readouterr().out  # 2 < the median lifetime ε 3
    assert cli.main(["analyst", "add", str(db), "bob", "--epsilon", "1.5"]) == 0
    out = capsys.readouterr().out
    assert "note: the analysts' quotas (ε 3.5 in all) can use up most subjects' lifetime budgets of t (median ε 3)" in out
    assert "alone" not in out  # neither can alone
    assert cli.main(["analyst", "set", str(db), "alice", "--epsilon", "3"]) == 0
    assert "t (median ε 3; alice alone)" in capsys.readouterr().out
    assert cli.main(["budget", str(db)]) == 0
    assert "note: the analysts' quotas (ε 4.5 in all)" in capsys.readouterr().out
    with Owner(db, create=False) as o:
        (space,) = o.overcommitted()
    assert space == {"tables": ["t"], "subjects": 1000, "median_epsilon": 3.0, "quotas": 4.5, "alone": ["alice"]}


def test_protect_refuses_budget_options_that_would_be_ignored_and_counts_the_roster(tmp_path, capsys):
    from dpgate.interfaces import cli

    db = tmp_path / "b.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE t AS SELECT i AS uid, 2.0 AS b FROM range(5) r(i)")
        con.execute("CREATE TABLE bt AS SELECT i AS uid, 3.0 AS epsilon FROM range(8) r(i)")
    for extra in (["--budget-column", "b", "--epsilon", "1"], ["--budget-unit", "uid"],
                  ["--budget-column", "b", "--budget-epsilon-column", "b"]):  # fmt: skip
        assert cli.main(["protect", str(db), "t", "--unit", "uid", *extra]) != 0
        assert "error DP322" in capsys.readouterr().err
    assert cli.main(["protect", str(db), "t", "--unit", "uid", "--budget-table", "bt", "--public-roster"]) == 0
    assert "8 subjects on its roster" in capsys.readouterr().out  # the budget table's registry, not the 5 with rows
