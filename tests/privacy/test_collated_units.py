"""A privacy unit whose column carries a collation is refused.

DuckDB applies a collation (``COLLATE NOCASE``, NOACCENT, NFC, ICU) to grouping, joins and ``IN``,
but not to ``count(DISTINCT ...)`` nor to a PRIMARY KEY / UNIQUE index. With a case-insensitive unit,
'a' and 'A' were one subject to the roster and the row bound but two to the subject count (one
subject moved COUNT(DISTINCT uid) by 4, declared sensitivity 1) and to the index, which dpgate read
as "one row per subject" (one subject kept two rows with max_rows = 1). Refused at ``protect``, and
for every statement when an ALTER puts a collation on the unit later (free, DP329).
"""

from __future__ import annotations

import duckdb
import pytest

import dpgate
from dpgate import errors
from dpgate.catalog.owner import Owner

DP = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) "


def _db(tmp_path, setup: str):
    path = tmp_path / "c.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute(setup)
    return path


@pytest.mark.parametrize("declaration", ["uid VARCHAR COLLATE NOCASE PRIMARY KEY", "uid VARCHAR COLLATE NOACCENT",
                                         "uid VARCHAR COLLATE nocase.noaccent", "uid VARCHAR COLLATE NFC"])  # fmt: skip
def test_protect_refuses_a_collated_unit(tmp_path, declaration):
    path = _db(tmp_path, f"CREATE TABLE t ({declaration}, x INTEGER); INSERT INTO t VALUES ('a', 1), ('b', 2)")
    with Owner(path) as owner, pytest.raises(errors.PolicyError) as e:
        owner.protect("t", unit="uid", epsilon=1.0, public_roster=True)
    assert e.value.code == "DP329" and "COLLATE" in e.value.message and 'COLLATE "binary"' in e.value.hint


def test_a_view_that_inherits_a_collation_is_refused_and_binary_is_accepted(tmp_path):
    path = _db(tmp_path, "CREATE TABLE t (uid VARCHAR COLLATE NOCASE, x INTEGER); INSERT INTO t VALUES ('a', 1), ('A', 2);"
               "CREATE VIEW v AS SELECT lower(uid) AS uid, x FROM t;"
               "CREATE VIEW w AS SELECT lower(uid) COLLATE \"binary\" AS uid, x FROM t")  # fmt: skip
    with Owner(path) as owner:
        with pytest.raises(errors.PolicyError) as e:
            owner.protect("v", unit="uid", epsilon=1.0, public_roster=True)
        assert e.value.code == "DP329" and "'a' and 'A'" in e.value.message
        owner.protect("w", unit="uid", max_rows=2, epsilon=10.0, public_roster=True)  # case folded, compared as bytes
        owner.add_analyst("alice", epsilon=10.0)
    with dpgate.connect(str(path), analyst="alice") as con:
        cur = con.cursor()
        cur.execute(DP + "COUNT(*) FROM w")
        assert cur.release.subjects_charged == 1  # 'a' and 'A' are one subject, everywhere


@pytest.mark.parametrize("unique", ["", " PRIMARY KEY"])
def test_a_collation_added_after_protect_refuses_every_statement_free(tmp_path, unique):
    path = _db(tmp_path, f"CREATE TABLE t (uid VARCHAR{unique}, x INTEGER); "
                         "INSERT INTO t SELECT 'u' || i, i % 7 FROM range(20) r(i)")  # fmt: skip
    with Owner(path) as owner:
        owner.protect("t", unit="uid", epsilon=10.0, bounds={"x": (0, 6)}, public_roster=True)
        owner.add_analyst("alice", epsilon=10.0)
    with duckdb.connect(str(path)) as con:
        if unique:  # DuckDB cannot change the type of an indexed column: make the table again
            con.execute("CREATE OR REPLACE TABLE t (uid VARCHAR COLLATE NOCASE PRIMARY KEY, x INTEGER); "
                        "INSERT INTO t SELECT 'u' || i, i % 7 FROM range(20) r(i); INSERT INTO t VALUES ('U1', 6)")  # fmt: skip
        else:
            con.execute("ALTER TABLE t ALTER COLUMN uid SET DATA TYPE VARCHAR COLLATE NOCASE; INSERT INTO t VALUES ('U1', 6)")
    with dpgate.connect(str(path), analyst="alice") as con:
        before = con.budget()
        for sql in (DP + "COUNT(*), SUM(x) FROM t", DP + "COUNT(DISTINCT uid) FROM t",
                    "EXPLAIN PRIVACY " + DP + "COUNT(*) FROM t"):  # fmt: skip
            with pytest.raises(dpgate.Error) as e:
                con.cursor().execute(sql)
            assert e.value.code == "DP329", sql
        assert con.budget() == before


def test_a_unique_key_over_a_collated_column_proves_nothing(tmp_path):
    """Under PRIMARY KEY (uid, item) with item COLLATE NOCASE the index holds a subject's 'a' and 'A' as
    two rows; top-k read the key as "each subject holds each item once", skipped its DISTINCT, and its
    domain join (which applies the collation) counted the subject twice for item 'a' (one
    subject moved an item by 2^length). A unique set with a collated column no longer
    counts as one; the subject counts once."""
    path = _db(tmp_path, "CREATE TABLE t (uid INTEGER, item VARCHAR COLLATE NOCASE, PRIMARY KEY (uid, item));"
                         "INSERT INTO t VALUES (1, 'a'), (1, 'A'), (1, 'b'), (2, 'b'), (3, 'b'), (4, 'b')")  # fmt: skip
    with Owner(path) as owner:
        owner.protect("t", unit="uid", max_rows=5, epsilon=1e6, domains={"item": ["a", "b", "c"]}, public_roster=True)
        owner.add_analyst("x", epsilon=1e6, epsilon_per_query=1e4)
        assert owner.catalog().tables["t"].unique_keys == ()
    with dpgate.connect(str(path), analyst="x") as con:
        # ε = 2,000, half of it for the counts: their discrete Laplace noise is 0 but with probability ~e^-1000
        rows = con.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 2000) item, COUNT(*) AS n FROM t "
                           "GROUP BY item ORDER BY n DESC LIMIT 3").fetchall()  # fmt: skip
    assert dict(rows) == {"b": 4, "a": 1, "c": 0}
