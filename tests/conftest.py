"""Shared fixtures: the demo database (built once, copied per test) and small custom databases."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest

import dpgate
from dpgate.interfaces import demo
from dpgate.catalog.owner import Owner

#: Seed of every statistical test (fixed, so failures reproduce).
TEST_SEED = 20261122

#: A table of visits with DATE and TIMESTAMP columns (2,000 patients, 5 rows each) and its bounds,
#: shared by the date tests and their neighbour checks.
VISITS_SQL = """
CREATE TABLE visits AS SELECT i % 2000 AS pid,
  DATE '2020-01-01' + ((i * 37) % 1800)::INTEGER AS visit_date,
  DATE '2020-01-01' + ((i * 37) % 1800 + i % 30)::INTEGER AS discharge,
  TIMESTAMP '2020-01-01 00:00:00' + to_seconds(i * 7919 % 50000000) AS ts
FROM range(10000) r(i);
"""
VISITS_BOUNDS = {
    "visit_date": ("2020-01-01", "2024-12-31"),
    "discharge": ("2020-01-01", "2025-03-31"),
    "ts": ("2020-01-01 00:00:00", "2021-12-31 23:59:59"),
}


@pytest.fixture(scope="session")
def demo_template(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("demo") / "demo.duckdb"
    demo.build(path)
    with Owner(path) as owner:
        owner.allow_test_seed("demo")  # the shipped demo policy grants no seeds
    return path


@pytest.fixture
def demo_db(demo_template, tmp_path) -> Path:
    """A private copy of the demo database (adult, subject_budgets, country_regions; analyst demo)."""
    dst = tmp_path / "demo.duckdb"
    shutil.copy(demo_template, dst)
    wal = Path(str(demo_template) + ".wal")
    if wal.exists():
        shutil.copy(wal, str(dst) + ".wal")
    return dst


@pytest.fixture
def con(demo_db):
    c = dpgate.connect(str(demo_db), analyst="demo")
    yield c
    c.close()


@pytest.fixture
def seeded(demo_db):
    c = dpgate.connect(str(demo_db), analyst="demo", test_seed=TEST_SEED)
    yield c
    c.close()


@pytest.fixture
def make_db(tmp_path) -> Callable[..., Path]:
    """Build a database from SQL, then protect tables and add analysts through the Owner API.

    ``make_db(setup_sql, protect={"t": {...}}, analysts={"a": {...}})``
    """
    counter = iter(range(1000))

    def build(setup_sql: str, protect: dict | None = None, analysts: dict | None = None, allow_seed: bool = True) -> Path:
        path = tmp_path / f"db{next(counter)}.duckdb"
        raw = duckdb.connect(str(path))
        raw.execute(setup_sql)
        raw.close()
        with Owner(path) as owner:
            for table, spec in (protect or {}).items():
                owner.protect(table, **{"public_roster": True, **spec})
            for name, spec in (analysts or {"alice": {"epsilon": 100.0, "delta": 1e-3}}).items():
                owner.add_analyst(name, **spec)
            if allow_seed:
                for name in analysts or {"alice": None}:
                    owner.allow_test_seed(name)
        return path

    return build


def fetch(con, sql, params=None):
    cur = con.cursor()
    cur.execute(sql, params)
    return cur.fetchall(), cur
