"""A passing test's database files are deleted when it ends.

Most tests copy the demo database (about 23 MB) or build their own; kept until the run ends they
took 12 GB, and a full disk fails tests in odd places (CI's disk is shared). Directories stay, so
that pytest never hands a later test the same path (DuckDB keeps one instance per path: a
connection a test left open would answer for the next test's file). A connection a test left
open on its own files is closed first. A failing test keeps its files to look at.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dpgate import database

#: Names of the files removed: DuckDB's database and write-ahead log, and CSV/Parquet outputs.
_SUFFIXES = (".duckdb", ".duckdb.wal", ".db", ".db.wal", ".wal", ".parquet", ".csv")

_failed = pytest.StashKey[bool]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.failed:
        item.stash[_failed] = True
    return report


def _left_open(root: Path) -> list[str]:
    """Paths of dpgate instances still open on files under ``root``."""
    prefix = os.path.realpath(root) + os.sep
    with database._registry_lock:
        return [p for p in database._instances if p.startswith(prefix)]


@pytest.fixture(autouse=True)
def _free_disk(request):
    root = request.getfixturevalue("tmp_path") if "tmp_path" in request.fixturenames else None
    yield
    if root is None or request.node.stash.get(_failed, False):
        return
    for path in _left_open(root):
        database.forget(path)
    for dirpath, _, files in os.walk(root):
        for name in files:
            if name.endswith(_SUFFIXES):
                try:
                    os.remove(os.path.join(dirpath, name))
                except OSError:
                    pass
