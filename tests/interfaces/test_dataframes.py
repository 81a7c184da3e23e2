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


def test_two_seeded_connections_give_the_same_noise_as_tuples_and_as_arrow(demo_db):
    # The same seed and the same (first) query: the same noisy answer, once as tuples, once as Arrow.
    with dpgate.connect(str(demo_db), analyst="demo", test_seed=TEST_SEED) as a:
        rows = a.execute(QUERY).fetchall()
    with dpgate.connect(str(demo_db), analyst="demo", test_seed=TEST_SEED) as b:
        cur = b.execute(QUERY)
        table = cur.fetch_arrow_table(intervals=True)
        intervals = cur.release.intervals
    assert [tuple(r[c] for c in ("education", "n", "mean_age", "med")) for r in table.to_pylist()] == rows
    assert [(r["n_ci_low"], r["n_ci_high"]) for r in table.to_pylist()] == [iv["n"] for iv in intervals]
    assert len(rows) == 16


def test_intervals_of_the_remaining_rows_after_having_order_by_and_a_fetchone(seeded):
    cur = seeded.execute(DP + "education, COUNT(*) AS n FROM adult GROUP BY education "
                              "HAVING COUNT(*) > 500 ORDER BY n DESC")  # fmt: skip
    first = cur.fetchone()
    df = cur.fetchdf(intervals=True)
    assert len(df) == len(cur.release.intervals) - 1 >= 5
    assert list(df["n"]) == sorted(df["n"], reverse=True) and first[1] >= df["n"].max()
    bars = list(zip(df["n_ci_low"], df["n_ci_high"]))
    assert bars == [iv["n"] for iv in cur.release.intervals[1:]]
    assert cur.fetchall() == [] and len(cur.pl()) == 0


def test_answers_that_carry_their_interval_columns_get_no_second_pair(seeded):
    cur = seeded.execute(DP.replace("epsilon = 0.5", "epsilon = 0.5, intervals = true") + "COUNT(*) AS n FROM adult")
    rows = cur.fetchall()
    cur._pos = 0
    table = cur.fetch_arrow_table(intervals=True)
    assert table.schema.names == ["n", "n_ci_low", "n_ci_high"]
    assert [tuple(r.values()) for r in table.to_pylist()] == rows
    assert rows[0][1:] == cur.release.intervals[0]["n"]


def test_a_top_k_answer(seeded):
    cur = seeded.execute(DP + "education, COUNT(*) AS n FROM adult GROUP BY education ORDER BY COUNT(*) DESC LIMIT 3")
    assert cur.release.query_class == "top_k"
    rows = cur.fetchall()
    cur._pos = 0
    pl = cur.pl(intervals=True)
    assert pl.columns == ["education", "n", "n_ci_low", "n_ci_high"]
    assert [r[:2] for r in pl.iter_rows()] == rows
    assert [r[2:] for r in pl.iter_rows()] == [iv["n"] for iv in cur.release.intervals]


@pytest.mark.parametrize("sql", [
    "SELECT region, COUNT(*) AS n FROM country_regions GROUP BY region ORDER BY region",
    "SHOW BUDGET",
    "EXPLAIN PRIVACY " + DP + "COUNT(*) FROM adult",
])  # fmt: skip
def test_public_answers_and_statements(con, sql):
    rows = con.execute(sql).fetchall()
    cur = con.execute(sql)
    table = cur.fetch_arrow_table(intervals=True)  # nothing is noisy: no interval columns
    assert table.schema.names == [d[0] for d in cur.description]
    assert [tuple(r.values()) for r in table.to_pylist()] == rows
    assert len(rows) >= 1 and cur.release is None
    assert len(con.execute(sql).fetchdf()) == len(rows)


def test_a_statement_without_a_result_set_gives_empty_frames(con):
    cur = con.execute("SET dp_epsilon = 0.2")
    assert cur.fetch_arrow_table().num_columns == 0 and cur.fetchdf().shape == (0, 0)
    assert cur.pl().shape == (0, 0) and cur.fetchnumpy() == {}


@pytest.mark.parametrize(("method", "module", "extra"), [
    ("fetchdf", "pandas", "pandas"),
    ("df", "pandas", "pandas"),
    ("pl", "polars", "polars"),
    ("pl", "pyarrow", "arrow"),
    ("fetch_arrow_table", "pyarrow", "arrow"),
    ("arrow", "pyarrow", "arrow"),
])  # fmt: skip
def test_a_missing_library_takes_no_row(answered, monkeypatch, method, module, extra):
    cur, rows = answered
    _again(cur).fetchone()
    real = builtins.__import__

    def without(name, *args, **kwargs):
        if name == module or name.startswith(module + "."):
            raise ImportError(f"no {module} here")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", without)
    with pytest.raises(dpgate.NotSupportedError) as e:
        getattr(cur, method)()
    assert e.value.code == "DP105" and f"pip install 'dpgate[{extra}]'" == e.value.hint
    monkeypatch.undo()
    assert cur.fetchall() == rows[1:]  # the rows are still there


def test_fetching_needs_an_open_cursor_with_a_result(con):
    cur = con.cursor()
    with pytest.raises(dpgate.ProgrammingError):
        cur.fetchdf()
    cur.close()
    with pytest.raises(dpgate.InterfaceError):
        cur.fetch_arrow_table()
