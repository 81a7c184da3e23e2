"""DuckDB 1.x and 2.x behave alike under dpgate: what 2.0 changed, and what dpgate does about it.

dpgate runs on DuckDB 1.4-1.5 and 2.x. DuckDB 2 streams query results, fails a transaction on every
error, raises on integer division by zero and writes new files in a format 1.x cannot open; each
test here holds on both versions (CI runs the privacy and allowlist tests on 1.x as well), and says
which version it is about. ``database.LOCKED_CONFIG`` and ``database.register`` are the fixes.
"""

from __future__ import annotations

import re

import duckdb
import numpy as np
import pytest

import dpgate
from dpgate import database, errors
from dpgate.catalog.owner import Owner

TWO = database.DUCKDB_MAJOR >= 2


def test_register_ends_a_result_left_open(tmp_path):
    """DuckDB 2 streams results: one read with fetchone() stays open while it has rows, and register()
    then raised ResourceInUseException -- depending on how many rows it had (a synthetic release
    registers its arrays after reading the catalog). ``database.register`` ends it first."""
    con = duckdb.connect(str(tmp_path / "r.duckdb"))
    try:
        con.execute("CREATE TABLE t AS SELECT range AS i FROM range(3000)")
        for where in ("i > 9999", "i >= 0"):  # no row (the result ends), rows (on 2.x it stays open)
            con.execute(f"SELECT i FROM t WHERE {where}").fetchone()
            database.register(con, "v", {"k": np.arange(2)})
            assert con.execute("SELECT count(*) FROM v").fetchall() == [(2,)]
            con.unregister("v")
        if TWO:  # the hazard itself, so that this test keeps testing something
            con.execute("SELECT i FROM t").fetchone()
            with pytest.raises(duckdb.Error, match="unfinished result"):
                con.register("v", {"k": np.arange(2)})
    finally:
        con.close()


def test_dpgate_calls_register_only_through_database_register():
    """A direct ``register`` or ``create_function`` on a connection fails on DuckDB 2 whenever the statement
    before it left rows unread: dpgate goes through ``database.register``."""
    import ast
    from pathlib import Path

    root = Path(database.__file__).resolve().parent
    direct = [f"{path.relative_to(root.parent)}:{node.lineno}"
              for path in sorted(root.rglob("*.py")) if path.name != "database.py"
              for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
              if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in ("register", "create_function")
              and not (isinstance(node.func.value, ast.Name) and node.func.value.id == "database")]  # fmt: skip
    assert direct == []


def test_integer_division_by_zero_is_null_over_a_released_answer(seeded):
    """DuckDB 2 raises on integer ``//`` and ``%`` by zero where 1.x gives NULL. The post-processing runs
    over the noisy values after the debit, so a statement whose divisor the noise makes zero would fail
    once charged (DP231), depending on the noise: the instance keeps 1.x's NULL (``error_on_division_by_zero``)."""
    cur = seeded.cursor()
    cur.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5) COUNT(*) // 0 AS q, COUNT(*) % 0 AS r, "
                "COUNT(*) // (COUNT(*) - COUNT(*)) AS z FROM adult")  # fmt: skip
    assert cur.fetchall() == [(None, None, None)]
    cur.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5) sex, COUNT(*) AS n FROM adult GROUP BY sex "
                "HAVING n // 0 IS NULL AND n % 0 IS NULL")  # fmt: skip
    assert len(cur.fetchall()) == 2
    # a public statement answers as on 1.x too
    assert seeded.cursor().execute("SELECT 7 // 0, 7 % 0, CAST(7 AS DECIMAL(9, 2)) % 0").fetchall() == [(None, None, None)]


def test_a_catalog_error_leaves_dpgates_transaction_usable(demo_db):
    """dpgate asks the catalog inside its transactions and goes on after a catalog or binder error (a table
    that may not exist); DuckDB 2 failed the whole transaction on it unless told otherwise."""
    inst = database.acquire(demo_db)
    con = inst.root.cursor()
    try:
        with database.transaction(con):
            for sql in ("SELECT * FROM no_such_table", "SELECT no_such_column FROM adult", "SELEC 1"):
                with pytest.raises(duckdb.Error):
                    con.execute(sql)
            assert con.execute("SELECT count(*) FROM country_regions").fetchone()[0] > 0
        with pytest.raises(duckdb.ConversionException):  # an error while running still fails it, on both
            with database.transaction(con):
                con.execute("SELECT CAST('x' AS INTEGER)").fetchall()
    finally:
        con.close()
        database.release(inst)


def _storage_version(path) -> tuple[int, ...] | None:
    """The storage format a file is written in (``v1.0.0+`` -> (1, 0, 0)); None if DuckDB does not say."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        (tags,) = con.execute("SELECT tags FROM duckdb_databases() WHERE database_name = current_database()").fetchone()
    finally:
        con.close()
    m = re.fullmatch(r"v(\d+)\.(\d+)\.(\d+)\+?", (tags or {}).get("storage_version", ""))
    return tuple(int(g) for g in m.groups()) if m else None


def test_a_file_dpgate_creates_is_readable_by_duckdb_1_4(tmp_path, demo_template):
    """DuckDB 2 writes a new file in a format DuckDB 1.x cannot open; dpgate's own new files (the owner's,
    the demo's) are written so that 1.4 and later read them (``database.STORAGE_CONFIG``)."""
    path = tmp_path / "new.duckdb"
    with Owner(path, create=True) as owner:
        owner.add_analyst("alice", epsilon=1.0)
    for made in (path, demo_template):
        version = _storage_version(made)
        if version is None:
            pytest.skip(f"DuckDB {duckdb.__version__} does not tag a file's storage version")
        assert version <= (1, 4, 0), (made.name, version)


@pytest.mark.skipif(not TWO, reason="DuckDB 1.x writes 1.x files only")
def test_a_file_that_exists_keeps_its_format(tmp_path):
    """A file DuckDB 2 made in its own format stays in it (dpgate does not rewrite files); dpgate opens it."""
    path = tmp_path / "v2.duckdb"
    raw = duckdb.connect(str(path))
    raw.execute("CREATE TABLE t AS SELECT range AS uid FROM range(10)")
    raw.close()
    with Owner(path) as owner:
        owner.protect("t", unit="uid", public_roster=True)
    assert _storage_version(path) >= (2, 0, 0)


def test_a_file_from_a_newer_duckdb_is_refused_with_what_to_do(tmp_path, monkeypatch):
    """DuckDB 1.x cannot open a file DuckDB 2 created in its own format: DP104, naming the versions, not a
    bare 'not a DuckDB database'."""
    path = tmp_path / "newer.duckdb"
    path.write_bytes(b"\0" * 4096)

    def connect(*args, **kwargs):
        raise duckdb.IOException("IO Error: Trying to read a database file with version number 69, but we can only "
                                 "read versions between 64 and 68.\nThe database file was created with a newer "
                                 "version of DuckDB.")  # fmt: skip

    monkeypatch.setattr(database.duckdb, "connect", connect)
    with pytest.raises(errors.InterfaceError) as info:
        dpgate.connect(str(path), analyst="alice")
    assert info.value.code == "DP104" and "newer DuckDB" in info.value.message and "duckdb>=2" in info.value.hint


def test_the_servers_catalog_gives_postgresqls_type_oids():
    """pg_attribute.atttypid is DuckDB's own type id on 1.x and PostgreSQL's oid on 2.x (one of its own for a
    type PostgreSQL lacks): psql's \\d, SQLAlchemy and JDBC read PostgreSQL's on both (a list: text)."""
    from dpgate.server.pgcatalog import CatalogDatabase

    db = CatalogDatabase()
    try:
        con = db._connection({"t": ("table", [("a", "INTEGER"), ("b", "DOUBLE"), ("c", "VARCHAR"), ("d", "DECIMAL(10,2)"),
                                              ("e", "INTEGER[]"), ("f", "BOOLEAN"), ("g", "DATE")])})  # fmt: skip
        rows = con.execute("SELECT a.attname, a.atttypid, a.atttypmod FROM memory.pg_more.pg_attribute a "
                           "JOIN pg_catalog.pg_class c ON a.attrelid = c.oid WHERE c.relname = 't' ORDER BY a.attnum").fetchall()  # fmt: skip
    finally:
        db.close()
    assert rows == [("a", 23, -1), ("b", 701, -1), ("c", 1043, -1), ("d", 1700, (10 << 16 | 2) + 4), ("e", 1043, -1),
                    ("f", 16, -1), ("g", 1082, -1)]  # fmt: skip
