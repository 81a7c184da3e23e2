"""Results as Arrow, pandas, polars and numpy, and as HTML in a notebook."""

from __future__ import annotations

import builtins
import datetime
import decimal

import pytest

import dpgate
from conftest import TEST_SEED

DP = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5) "
QUERY = DP + "education, COUNT(*) AS n, AVG(age) AS mean_age, MEDIAN(age) AS med FROM adult GROUP BY education"


@pytest.fixture
def answered(demo_db):
    con = dpgate.connect(str(demo_db), analyst="demo", test_seed=TEST_SEED)
    cur = con.cursor()
    cur.execute(QUERY)
    rows = cur.fetchall()
    yield cur, rows
    con.close()


def _again(cur):
    cur._pos = 0  # the same answer again (no new query, no new noise)
    return cur


def test_arrow_pandas_polars_numpy_equal_the_tuples(answered):
    cur, rows = answered
    table = _again(cur).fetch_arrow_table()
    assert [tuple(r.values()) for r in table.to_pylist()] == rows
    assert table.schema.names == ["education", "n", "mean_age", "med"]
    assert str(table.schema.field("n").type) == "int64"
    df = _again(cur).fetchdf()
    assert [tuple(r) for r in df.itertuples(index=False)] == rows
    pl = _again(cur).pl()
    assert [tuple(r) for r in pl.iter_rows()] == rows
    arrays = _again(cur).fetchnumpy()
    assert list(arrays["n"]) == [r[1] for r in rows]


def test_interval_columns_follow_their_column(answered):
    cur, rows = answered
    df = _again(cur).fetchdf(intervals=True)
    assert list(df.columns) == ["education", "n", "n_ci_low", "n_ci_high", "mean_age", "mean_age_ci_low",
                                "mean_age_ci_high", "med", "med_ci_low", "med_ci_high"]  # fmt: skip
    for (_, r), iv in zip(df.iterrows(), cur.release.intervals):
        assert (r["n_ci_low"], r["n_ci_high"]) == iv["n"]
        assert (r["mean_age_ci_low"], r["mean_age_ci_high"]) == pytest.approx(iv["mean_age"])
    assert df["med_ci_low"].isna().all()  # a quantile has no interval of values


def test_a_frame_takes_the_remaining_rows(answered):
    cur, rows = answered
    _again(cur).fetchone()
    assert len(cur.fetch_arrow_table()) == len(rows) - 1
    assert len(cur.fetchdf()) == 0  # nothing left, as fetchall would say


def test_types_survive(demo_db):
    con = dpgate.connect(str(demo_db), analyst="demo")
    cur = con.cursor()
    cur.execute("SELECT DATE '2024-01-02' AS d, 1.25::DECIMAL(10, 2) AS x, 170141183460469231731687303715884105727::HUGEINT AS h")
    row = cur.fetch_arrow_table().to_pylist()[0]
    assert row["d"] == datetime.date(2024, 1, 2) and row["x"] == decimal.Decimal("1.25")
    assert row["h"] == 170141183460469231731687303715884105727


def test_a_missing_library_names_the_extra(answered, monkeypatch):
    cur, _ = answered
    real = builtins.__import__

    def no_pandas(name, *args, **kwargs):
        if name == "pandas":
            raise ImportError("no pandas here")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pandas)
    with pytest.raises(dpgate.NotSupportedError) as e:
        _again(cur).fetchdf()
    assert e.value.code == "DP105" and "dpgate[pandas]" in e.value.hint


def test_a_notebook_shows_values_intervals_and_cost(answered):
    cur, rows = answered
    html = cur._repr_html_()
    assert "<table>" in html and f"<td>{rows[0][0]}</td>" in html
    n_lo, n_hi = cur.release.intervals[0]["n"]
    assert f"[{n_lo}, {n_hi}]" in html
    assert "cost: ε 0.5" in html and "population:" in html


def test_html_is_escaped(demo_db):
    con = dpgate.connect(str(demo_db), analyst="demo")
    cur = con.cursor()
    cur.execute("SELECT '<script>alert(1)</script>' AS \"<b>\"")
    html = cur._repr_html_()
    assert "<script>" not in html and "&lt;script&gt;" in html and "&lt;b&gt;" in html
