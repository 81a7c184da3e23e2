"""The dpgate command line, in-process and as a real process."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from dpgate.interfaces import cli
from dpgate.catalog.owner import Owner


def run(capsys, *args):
    code = cli.main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_query_prints_intervals_and_status(capsys, demo_db):
    code, out, _ = run(capsys, "query", str(demo_db), "--analyst", "demo",
                       "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5) sex, COUNT(*) AS n FROM adult GROUP BY sex")  # fmt: skip
    assert code == 0
    assert "| sex " in out and "Female" in out and "[" in out
    assert "2 rows · ε charged 0.5 · remaining ε 9.5 · 95% intervals" in out


def test_query_modes(capsys, demo_db):
    code, out, _ = run(capsys, "query", str(demo_db), "--analyst", "demo", "--mode", "csv",
                       "SELECT region, count(*) AS n FROM country_regions GROUP BY 1 ORDER BY 1")  # fmt: skip
    assert code == 0 and out.splitlines()[0] == "region,n" and "Asia,12" in out
    code, out, _ = run(capsys, "query", str(demo_db), "--analyst", "demo", "--mode", "json",
                       "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1) COUNT(*) AS n FROM adult")  # fmt: skip
    env = json.loads(out)
    assert env["columns"] == ["n"] and env["intervals"][0]["n"][0] <= env["rows"][0][0] <= env["intervals"][0]["n"][1]
    assert env["cost"]["epsilon"] == 0.1 and env["population"]["whole_roster"] is True


def test_refusal_exit_code_and_hint(capsys, demo_db):
    code, out, err = run(capsys, "query", str(demo_db), "--analyst", "demo", "SELECT * FROM adult")
    assert code == 1 and out == ""
    assert err.startswith("error DP252: * would return rows of protected data")
    assert "hint:" in err


def test_explain_spends_nothing(capsys, demo_db, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # the table is cut to the terminal's width, which differs per runner
    code, out, _ = run(capsys, "explain", str(demo_db), "--analyst", "demo", "SELECT AVG(age) FROM adult")
    assert code == 0 and "discrete Laplace" in out and "centered sum" in out
    with Owner(demo_db, create=False) as o:
        assert o.con.execute("SELECT count(*) FROM dpgate.ledger").fetchone() == (0,)


def test_policy_apply_and_ledger(capsys, tmp_path, demo_db):
    code, out, _ = run(capsys, "query", str(demo_db), "--analyst", "demo", "SELECT COUNT(*) FROM adult")
    code, out, _ = run(capsys, "ledger", str(demo_db))
    assert code == 0 and "demo" in out and "count" in out
    pol = tmp_path / "p.toml"
    pol.write_text('[analysts.carol]\nepsilon = 2.5\n')
    code, out, _ = run(capsys, "policy", "apply", str(demo_db), str(pol))
    assert code == 0 and "analyst carol" in out


def test_init_creates_the_schema(capsys, tmp_path):
    path = tmp_path / "fresh.duckdb"
    code, out, _ = run(capsys, "init", str(path))
    assert code == 0 and path.exists()


def test_demo_command_as_a_real_process(tmp_path):
    """`dpgate demo --db PATH` builds the database and runs the tour; other commands use PATH."""
    db = tmp_path / "demo.duckdb"
    env = dict(os.environ, XDG_DATA_HOME=str(tmp_path / "xdg"))
    proc = subprocess.run([sys.executable, "-m", "dpgate", "demo", "--db", str(db)], capture_output=True, text=True,
                          env=env, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "ε charged 0.1" in proc.stdout and "refused: [DP252]" in proc.stdout and "SHOW BUDGET" in proc.stdout
    again = subprocess.run([sys.executable, "-m", "dpgate", "query", str(db), "--analyst", "demo", "SHOW BUDGET"],
                           capture_output=True, text=True, env=env, timeout=120)  # fmt: skip
    assert again.returncode == 0 and "analyst demo" in again.stdout


def test_help_lists_commands(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    for command in ("query", "explain", "demo", "init", "policy", "ledger"):
        assert command in out


def test_version():
    import subprocess
    import sys

    import dpgate

    out = subprocess.run([sys.executable, "-m", "dpgate.interfaces.cli", "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == f"dpgate {dpgate.__version__}"


@pytest.mark.parametrize("how", ["out of range", "in use", "no such host"])
def test_serve_on_a_bad_address_is_one_error_line(demo_db, capsys, how):
    """A port outside 0-65535, a port in use and a host that does not resolve are DP720 with a hint,
    no traceback, and the file is let go (the owner can open it for writing at once)."""
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        args = {"out of range": ["--port", "99999"], "in use": ["--port", str(taken.getsockname()[1])],
                "no such host": ["--host", "no-such-host.invalid", "--port", "0"]}[how]  # fmt: skip
        assert cli.main(["serve", str(demo_db), *args]) != 0
    err = capsys.readouterr().err
    assert err.startswith("error DP720: dpgate serve cannot listen on") and "hint: choose another --port" in err
    assert "Traceback" not in err
    with Owner(demo_db, create=False) as o:
        o.con.execute("SELECT 1")


@pytest.mark.parametrize("files", ["missing", "directory", "not pem"])
def test_serve_with_unusable_tls_files_is_one_error_line(demo_db, tmp_path, capsys, files):
    bad = {"missing": str(tmp_path / "nope.pem"), "directory": str(tmp_path), "not pem": str(tmp_path / "x.txt")}[files]
    (tmp_path / "x.txt").write_text("not a certificate\n")
    assert cli.main(["serve", str(demo_db), "--port", "0", "--tls-cert", bad, "--tls-key", bad]) != 0
    err = capsys.readouterr().err
    assert err.startswith("error DP721: The TLS certificate") and "Traceback" not in err
