"""A NaN travels as NaN through every list dpgate hands DuckDB.

DuckDB's Python binding turns a float NaN inside a list parameter into NULL (a scalar keeps it). A
declared NaN domain value then matched no row (its cell counted 0 of 1,000 rows), an image domain
lost its NaN, a top-k item NaN counted the rows whose key is NULL, ``dpgate load`` stored NULL for a
file's NaN and a DataFrame showed NULL for a released NaN key.
"""

from __future__ import annotations

import math

import duckdb
import pytest

import dpgate
from dpgate import database
from dpgate.catalog.owner import Owner

from conftest import TEST_SEED, fetch

SETUP = """
CREATE TABLE r AS SELECT i AS pid,
    CASE WHEN i % 4 = 0 THEN 'NaN'::DOUBLE WHEN i % 4 = 1 THEN 0.0 WHEN i % 4 = 2 THEN 2.5 ELSE NULL END AS x
FROM range(4000) r(i)
"""
DP = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1000{opts}) "


@pytest.fixture
def alice(make_db):
    path = make_db(SETUP, protect={"r": {"unit": "pid", "max_rows": 1, "max_groups": 1, "epsilon": 1e6,
                                         "domains": {"x": [0.0, 2.5, float("nan")]}}},
                   analysts={"alice": {"epsilon": 1e7, "epsilon_per_query": 1e4}})  # fmt: skip
    con = dpgate.connect(str(path), analyst="alice", test_seed=TEST_SEED)
    yield con
    con.close()


def _by_key(rows):
    return {("nan" if isinstance(k, float) and math.isnan(k) else k): n for k, n in rows}


def test_a_nan_domain_value_counts_its_rows(alice):
    rows, _ = fetch(alice, DP.format(opts="") + "x, COUNT(*) FROM r GROUP BY x")
    counts = _by_key(rows)
    assert set(counts) == {0.0, 2.5, "nan"}
    assert all(abs(n - 1000) <= 20 for n in counts.values())  # the NaN cell counted 0 before


def test_an_image_domain_keeps_nan(alice):
    rows, _ = fetch(alice, DP.format(opts="") + "x / 0 AS y, COUNT(*) FROM r GROUP BY 1")
    counts = _by_key(rows)
    assert set(counts) == {math.inf, "nan"}  # 0 / 0 and NaN / 0 are NaN, 2.5 / 0 is Infinity
    assert abs(counts["nan"] - 2000) <= 20 and abs(counts[math.inf] - 1000) <= 20


def test_a_top_k_item_nan_counts_nan_rows_not_null_ones(alice):
    rows, cur = fetch(alice, DP.format(opts="") + "x, COUNT(*) AS n FROM r GROUP BY x ORDER BY n DESC LIMIT 3")
    assert cur.release.query_class == "top_k"
    counts = _by_key(rows)
    assert set(counts) == {0.0, 2.5, "nan"} and all(abs(n - 1000) <= 20 for n in counts.values())


def test_a_released_nan_key_stays_nan_in_a_data_frame(alice):
    pd = pytest.importorskip("pandas")
    cur = alice.cursor()
    cur.execute(DP.format(opts="") + "x, COUNT(*) FROM r GROUP BY x")
    frame = cur.fetchdf()
    assert isinstance(frame, pd.DataFrame) and frame["x"].isna().sum() == 1
    assert sorted(str(v) for v in frame["x"]) == ["0.0", "2.5", "nan"]  # NaN, not None


def test_load_keeps_a_files_nan(tmp_path):
    src = tmp_path / "v.csv"
    src.write_text("pid,x\n1,NaN\n2,0.5\n3,\n")
    path = tmp_path / "l.duckdb"
    with Owner(path) as owner:
        assert owner.load("v", src) == 3
    with duckdb.connect(str(path)) as con:
        rows = con.execute("SELECT pid, isnan(x), x FROM v ORDER BY pid").fetchall()
    assert rows[0][1] is True and rows[1] == (2, False, 0.5) and rows[2][2] is None


@pytest.mark.parametrize("sql_type", ["DOUBLE", "FLOAT"])
def test_typed_list_reads_every_double_back_exactly(sql_type):
    big = 1.7976931348623157e308 if sql_type == "DOUBLE" else 3.4028234663852886e38  # the largest of each type
    values = [0.1, -0.0, float("nan"), float("inf"), -float("inf"), 5e-324, big, None, 2.0**60 + 1, 1 / 3]
    sql, value = database.typed_list("l", values, sql_type)
    plain, plain_value = database.typed_list("l", [v for v in values if not (isinstance(v, float) and math.isnan(v))],
                                             sql_type)  # fmt: skip
    con = duckdb.connect()
    got = con.execute(f"SELECT {sql}", {"l": value}).fetchone()[0]
    want = con.execute(f"SELECT {plain}", {"l": plain_value}).fetchone()[0]  # the plain list: every value but NaN
    assert math.isnan(got[2]) and [v for i, v in enumerate(got) if i != 2] == want
    assert str(got[1]) == "-0.0"


def test_typed_list_takes_any_value_beside_a_nan():
    """An integer too large for a DOUBLE beside a NaN raised OverflowError in Python;
    a NaN in a text domain is the text 'nan', as protect read it, not NULL."""
    con = duckdb.connect()
    sql, value = database.typed_list("l", [float("nan"), 1, 10**400], "DOUBLE")
    got = con.execute(f"SELECT {sql}", {"l": value}).fetchone()[0]
    assert math.isnan(got[0]) and got[1:] == [1.0, math.inf]
    sql, value = database.typed_list("l", [float("nan"), "a"], "VARCHAR")
    assert con.execute(f"SELECT {sql}", {"l": value}).fetchone()[0] == ["nan", "a"]
