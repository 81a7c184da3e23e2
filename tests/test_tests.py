"""The suite itself: a floor on the number of collected tests, so that a silently skipped file is
noticed; a hung test stops the run and says where; a passing test leaves no database files."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

MINIMUM = 300
TESTS = Path(__file__).resolve().parent


def test_enough_tests_are_collected(request):
    args = [Path(a.split("::")[0]).resolve() for a in request.config.args]
    full_run = not args or all(a in (TESTS, TESTS.parent) for a in args)
    n = len(request.session.items)
    assert n >= (MINIMUM if full_run else 1), f"only {n} tests collected"


def test_a_hung_test_stops_the_run_with_its_traceback(tmp_path):
    (tmp_path / "test_hangs.py").write_text(
        "import time\n\ndef test_fine():\n    pass\n\ndef test_sleeps_forever():\n    time.sleep(3600)\n"
    )
    env = dict(os.environ, DPGATE_TEST_HANG_SECONDS="2", PYTHONPATH=str(TESTS))
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "watchdog", "-p", "no:cacheprovider", "-n", "0", "-q",
         "--rootdir", str(tmp_path), "-c", os.devnull, str(tmp_path / "test_hangs.py")],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "Timeout" in out and "in test_sleeps_forever" in out, out


def test_a_passing_tests_database_files_are_deleted_and_a_failing_tests_kept(tmp_path):
    (tmp_path / "test_files.py").write_text(
        "import dpgate.database as database\n\n"
        "def test_passes(tmp_path):\n"
        "    (tmp_path / 'a.duckdb').write_bytes(b'x' * 1000)\n"
        "    (tmp_path / 'notes.txt').write_text('kept')\n"
        "    database.acquire(tmp_path / 'b.duckdb', create=True)  # left open: closed, then deleted\n\n"
        "def test_fails(tmp_path):\n"
        "    (tmp_path / 'c.duckdb').write_bytes(b'x')\n"
        "    assert False\n"
    )
    base = tmp_path / "base"
    env = dict(os.environ, PYTHONPATH=str(TESTS))
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "disk", "-p", "no:cacheprovider", "-n", "0", "-q",
         "--basetemp", str(base), "--rootdir", str(tmp_path), "-c", os.devnull, str(tmp_path / "test_files.py")],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert "1 failed, 1 passed" in out, out
    left = sorted(p.relative_to(base).as_posix() for p in base.rglob("*") if p.is_file())
    assert left == ["test_fails0/c.duckdb", "test_passes0/notes.txt"], (left, out)


def test_every_file_that_starts_spark_is_dealt_with_the_others():
    """A file using the ``spark`` fixture outside ``scheduling.SPARK_FILES`` would start a second
    local Spark (a JVM of about 1.5 GB) on the other worker."""
    import re

    import scheduling

    uses = re.compile(r"def \w+\([^)]*\bspark\b")
    found = sorted(p.relative_to(TESTS.parent).as_posix() for p in TESTS.rglob("test_*.py") if uses.search(p.read_text()))
    assert found == sorted(scheduling.SPARK_FILES)


def test_the_second_duckdb_step_leaves_out_every_spark_privacy_file():
    """.ci/run's run on DuckDB 1.x leaves out tests/privacy's Spark files by a name pattern (Spark
    computes those answers; starting Spark again there took minutes of CI): each must match it."""
    import fnmatch

    import scheduling

    run = (TESTS.parent / ".ci" / "run").read_text()
    assert "--ignore-glob='tests/privacy/test_*spark*.py'" in run
    privacy = [f for f in scheduling.SPARK_FILES if f.startswith("tests/privacy/")]
    assert len(privacy) >= 8 and all(fnmatch.fnmatch(f, "tests/privacy/test_*spark*.py") for f in privacy)
