"""Shared fixtures: the demo database (built once, copied per test) and small custom databases."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
import pytest
from hypothesis import settings

# The suite is CI's gate and must pass the same way on every run: property tests draw a fixed set
# of examples (derandomized). DPGATE_EXPLORE=1 draws fresh ones, as a fuzzing run; a failure it
# finds is a bug, kept afterwards as an @example.
settings.register_profile("fixed", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile("explore" if os.environ.get("DPGATE_EXPLORE") else "fixed")

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


# watchdog: a hung test stops the run with every thread's traceback;
# disk: a passing test's database files are deleted when it ends;
# scheduling: xdist deals Spark's files to one worker and the longest files first.
pytest_plugins = ["watchdog", "disk", "scheduling"]


def _copy_db(src: Path, dst: Path) -> Path:
    shutil.copy(src, dst)
    wal = Path(str(src) + ".wal")
    if wal.exists():
        shutil.copy(wal, str(dst) + ".wal")
    return dst


@pytest.fixture(scope="session")
def demo_template(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("demo") / "demo.duckdb"
    demo.build(path)
    with Owner(path) as owner:
        owner.allow_test_seed("demo")  # the shipped demo policy grants no seeds
        owner.set_answer_memory("off")  # tests count what each statement spends (tests/test_answers.py: memory)
    return path


@pytest.fixture
def demo_db(demo_template, tmp_path) -> Path:
    """A private copy of the demo database (adult, subject_budgets, country_regions; analyst demo)."""
    return _copy_db(demo_template, tmp_path / "demo.duckdb")


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


#: Databases ``make_db`` built in this process, by its arguments: a test asking for the same one again
#: gets a copy (building one costs ~100 ms: two connections, the roster, the stored sample order).
_BUILT: dict[str, Path] = {}


@pytest.fixture
def make_db(tmp_path, tmp_path_factory) -> Callable[..., Path]:
    """Build a database from SQL, then protect tables and add analysts through the Owner API.

    ``make_db(setup_sql, protect={"t": {...}}, analysts={"a": {...}})``; remembered answers are off
    unless ``answers="own"`` or ``"shared"``. The same arguments give a copy of the database built
    first (its stored sample orders too: tests that need other draws build them with a seed).
    """
    counter = iter(range(1000))

    def build(setup_sql: str, protect: dict | None = None, analysts: dict | None = None, allow_seed: bool = True,
              answers: str = "off") -> Path:  # fmt: skip
        path = tmp_path / f"db{next(counter)}.duckdb"
        key = repr((setup_sql, protect, analysts, allow_seed, answers))
        built = _BUILT.get(key)
        if built is not None and built.exists():
            return _copy_db(built, path)
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
            # Tests count what each statement spends, so a repeat is charged unless the test is about
            # remembered answers (``answers="own"``, the product's default).
            owner.set_answer_memory(answers)
        _BUILT[key] = _copy_db(path, tmp_path_factory.mktemp("built") / "db.duckdb")
        return path

    return build


def fetch(con, sql, params=None):
    cur = con.cursor()
    cur.execute(sql, params)
    return cur.fetchall(), cur


#: Set by ``.ci/run``, which installs psql, openssl and Java: there a missing tool fails the tests
#: that need it. Elsewhere (``pytest`` on a machine without them) those tests are skipped, and
#: pytest's summary names what was missing.
REQUIRE_TOOLS = os.environ.get("DPGATE_REQUIRE_TOOLS") == "1"


def system_tool(name: str, package: str, version: Callable[[str], bool] | None = None) -> str:
    """The path of a system program a test needs (``version(path)`` may check it is new enough)."""
    path = shutil.which(name)
    if path is not None and (version is None or version(path)):
        return path
    why = f"{name} is not installed" if path is None else f"{name} is too old"
    if REQUIRE_TOOLS:
        pytest.fail(f"{why}: .ci/run installs {package}")
    pytest.skip(f"{why} (Debian: {package}; .ci/run installs it)")


def _java_17(path: str) -> bool:
    import re
    import subprocess

    out = subprocess.run([path, "-version"], capture_output=True, text=True, timeout=60, check=False).stderr
    found = re.search(r'version "(\d+)', out)
    return found is not None and int(found.group(1)) >= 17


@pytest.fixture(scope="session")
def spark():
    """A local Spark session (2 cores) for the Spark backend's tests, started once per run.

    It needs pyspark (the test extra installs it) and Java 17 or later (``.ci/run`` installs it
    when the machine lacks it); without Java the Spark tests are skipped (``system_tool``).
    """
    system_tool("java", "default-jre-headless (Java 17 or later)", _java_17)
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]").appName("dpgate-tests")
        .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2").config("spark.default.parallelism", "2")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )  # fmt: skip
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def spark_worlds(spark, factory, rows: str, heavy: str, tables: dict[str, dict], *, analysts: dict
                 ) -> dict[str, tuple[Path, Path]]:  # fmt: skip
    """(DuckDB file, Spark twin) pairs: 'within' made by ``rows`` (no subject over its bound) and
    'heavy' by ``rows + heavy`` (subjects over their bounds, sampled); ``factory``: tmp_path_factory."""
    return {
        name: duckdb_and_spark(spark, factory.mktemp(name) / f"{name}.duckdb", sql, tables, analysts=analysts)
        for name, sql in (("within", rows), ("heavy", rows + heavy))
    }


def spark_neighbours(spark, factory, base_sql: str, changes: dict[str, str], tables: dict[str, dict], *,
                     analysts: dict) -> list[tuple[str, Path]]:  # fmt: skip
    """(name, Spark twin) of each neighbour of the database ``base_sql`` makes: ``base_sql; change``."""
    out = []
    for name, change in changes.items():
        path = factory.mktemp(name) / f"{name}.duckdb"
        out.append((name, duckdb_and_spark(spark, path, f"{base_sql}; {change}", tables, analysts=analysts)[1]))
    return out


def fails_on(column: str, unit: int = 5):
    """A deterministic condition that raises under ANSI mode on ``unit``'s rows only (``int('x')``),
    as an opaque call: parsed as a CAST, dpgate would make it a TRY_CAST, which never fails."""
    import sqlglot
    from sqlglot import exp

    case = sqlglot.parse_one(f"CASE WHEN {column} = {unit} THEN 'x' ELSE '1' END", read="spark")
    return exp.EQ(this=exp.Anonymous(this="int", expressions=[case]), expression=exp.Literal.number(1))


@contextmanager
def expressions_may_fail(plane) -> Iterator[None]:
    """The Spark plane's session with ANSI mode on, and its translator letting ``fails_on``'s call
    through: the one way to see on which rows Spark evaluates an expression [charged-only]."""
    from sqlglot import exp

    from dpgate.backends.spark import translate

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(translate, "_SAFE", (*translate._SAFE, exp.Anonymous, exp.Func))
        mp.setattr(translate, "_check_semantics", lambda *a, **k: None)  # int(...) has no kind
        plane.spark.conf.set("spark.sql.ansi.enabled", "true")
        try:
            yield
        finally:
            plane.spark.conf.set("spark.sql.ansi.enabled", "false")


def spark_twin(spark, duck_path: Path, tables: dict[str, dict], *, analysts: dict | None = None) -> Path:
    """A second database whose ``tables`` live in Spark (Parquet copies of ``duck_path``'s rows).

    ``tables`` maps each table to its ``Owner.protect`` arguments (the same as the DuckDB
    database's); the twin has the same analysts (with test seeds). The two files then plan
    every statement alike, and only the data plane differs.
    """
    twin = duck_path.with_name(duck_path.stem + "_spark.duckdb")
    raw = duckdb.connect(str(duck_path), read_only=True)
    try:
        for table in tables:
            out = duck_path.with_name(f"{duck_path.stem}_{table}.parquet")
            raw.execute(f"COPY (SELECT * FROM main.\"{table}\") TO '{out}' (FORMAT parquet)")
    finally:
        raw.close()
    with Owner(twin, spark=spark) as owner:
        owner.set_spark("local[2]")  # analysts' sessions find the running local Spark through the master
        for table, spec in tables.items():
            out = duck_path.with_name(f"{duck_path.stem}_{table}.parquet")
            owner.protect(table, **{"public_roster": True, **spec, "spark": f"parquet:{out}"})
        for name, spec in (analysts or {"alice": {"epsilon": 100.0, "delta": 1e-3}}).items():
            owner.add_analyst(name, **spec)
            owner.allow_test_seed(name)
    couple_sample_keys(twin)
    return twin


#: The sample key every Spark twin's tables get (``couple_sample_keys``).
TEST_SAMPLE_KEY = 0x2D5A_17C3_9E04_B6F1


def couple_sample_keys(path: Path, key: int = TEST_SAMPLE_KEY) -> None:
    """Give every Spark table of ``path`` the same kept sample key. Each file's key is drawn from the
    OS, so two neighbouring worlds would sample every sampled subject apart; the privacy argument
    holds key by key, and the neighbour checks couple the worlds' keys as they couple their salts."""
    con = duckdb.connect(str(path))
    try:
        if con.execute("SELECT count(*) FROM duckdb_tables() WHERE schema_name = 'dpgate' AND table_name = 'sample_keys'").fetchone()[0]:
            con.execute("UPDATE dpgate.sample_keys SET sample_key = ?", [key])
    finally:
        con.close()


def duckdb_and_spark(spark, path: Path, setup_sql: str, tables: dict[str, dict], *, analysts: dict) -> tuple[Path, Path]:
    """A DuckDB database made by ``setup_sql`` with ``tables`` protected and ``analysts`` added (with
    test seeds), and its ``spark_twin``: (DuckDB file, Spark twin)."""
    raw = duckdb.connect(str(path))
    raw.execute(setup_sql)
    raw.close()
    with Owner(path) as owner:
        for table, spec in tables.items():
            owner.protect(table, **{"public_roster": True, **spec})
        for name, spec in analysts.items():
            owner.add_analyst(name, **spec)
            owner.allow_test_seed(name)
    return path, spark_twin(spark, path, tables, analysts=analysts)
