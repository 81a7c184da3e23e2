"""DATE and TIMESTAMP columns: bounds, GROUP BY domains from them, date differences, releases."""

from __future__ import annotations

import datetime

import duckdb
import pytest

import dpgate
from conftest import TEST_SEED, VISITS_BOUNDS, VISITS_SQL, fetch
from dpgate.catalog.owner import Owner

DP = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) "

SETUP, BOUNDS = VISITS_SQL, VISITS_BOUNDS


@pytest.fixture
def visits(make_db):
    return make_db(SETUP, protect={"visits": {"unit": "pid", "max_rows": 5, "epsilon": 1e6, "bounds": BOUNDS}})


def _truth(path, sql):
    with duckdb.connect(str(path), read_only=True) as raw:
        return raw.execute(sql).fetchall()


def test_bounds_on_dates_are_shown_as_dates(visits):
    con = dpgate.connect(str(visits), analyst="alice")
    rows, _ = fetch(con, "DESCRIBE visits")
    shown = {r[0]: r[3] for r in rows}
    assert shown["visit_date"] == "[2020-01-01, 2024-12-31]"
    assert shown["ts"] == "[2020-01-01 00:00:00, 2021-12-31 23:59:59]"


@pytest.mark.parametrize("bad", [("2020-01-01", "soon"), ("2020-13-01", "2021-01-01")])
def test_a_bound_that_is_not_a_date_is_refused(make_db, bad):
    path = make_db(SETUP)
    with Owner(path) as owner, pytest.raises(dpgate.Error) as e:
        owner.protect("visits", unit="pid", public_roster=True, bounds={"visit_date": bad})
    assert e.value.code == "DP315"


@pytest.mark.parametrize(
    "key, cells",
    [
        ("year(visit_date)", 5),
        ("month(ts)", 12),
        ("date_trunc('month', visit_date)", 60),
        ("ts::DATE", 731),
        ("strftime(visit_date, '%Y-%m')", 60),
        ("visit_date", 1827),
    ],
)
def test_group_by_a_date_expression_gets_its_domain_from_the_bounds(visits, key, cells):
    con = dpgate.connect(str(visits), analyst="alice")
    cur = con.cursor()
    cur.execute("EXPLAIN PRIVACY " + DP + f"{key} AS k, COUNT(*) FROM visits GROUP BY 1")
    rows = cur.fetchall()
    assert not any(r[0] == "key selection" for r in rows)
    (dom,) = [r[6] for r in rows if r[0] == "key k"]
    assert f"({cells} values)" in dom
    rows, cur = fetch(con, DP + f"{key} AS k, COUNT(*) AS n FROM visits GROUP BY 1")
    assert len(rows) == cells  # every cell released, zeros included, no δ spent
    assert cur.release.delta == 0


def test_years_are_counted_within_their_intervals(visits):
    truth = dict(_truth(visits, "SELECT year(visit_date), count(*) FROM visits GROUP BY 1"))
    con = dpgate.connect(str(visits), analyst="alice", test_seed=TEST_SEED)
    rows, cur = fetch(con, DP + "year(visit_date) AS y, COUNT(*) AS n FROM visits GROUP BY 1")
    assert [r[0] for r in rows] == [2020, 2021, 2022, 2023, 2024]
    for (y, _), iv in zip(rows, cur.release.intervals):
        assert iv["n"][0] <= truth[y] <= iv["n"][1]


@pytest.mark.parametrize(
    "key",
    [
        "hour(ts)",
        "date_part('hour', ts)",
        # constant at 00:00, 12:00 and 23:59:59.999999 of every day, but not in between: a probe of
        # three instants gave it the domain {false} and dropped the 06:xx rows
        "hour(ts) = 6",
        "minute(ts) = 17",
        "year(ts + INTERVAL 1 HOUR)",
        "strftime(ts, '%Y-%m-%d %H')",
        "date_trunc('hour', ts)",
    ],
)
def test_an_expression_that_varies_within_a_day_has_no_domain(visits, key):
    con = dpgate.connect(str(visits), analyst="alice")
    cur = con.cursor()
    cur.execute("EXPLAIN PRIVACY SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-6) "
                f"{key} AS h, COUNT(*) FROM visits GROUP BY 1")  # fmt: skip
    assert any(r[0] == "key selection" for r in cur.fetchall())


@pytest.mark.parametrize("key", ["year(ts)", "date_part('year', ts)", "date_trunc('quarter', ts)", "strftime(ts, '%Y-%m')",
                                 "CAST(ts AS DATE) = DATE '2020-06-01'", "extract(month FROM ts)"])  # fmt: skip
def test_day_level_functions_of_a_timestamp_keep_their_domain(visits, key):
    con = dpgate.connect(str(visits), analyst="alice")
    cur = con.cursor()
    cur.execute("EXPLAIN PRIVACY " + DP + f"{key} AS k, COUNT(*) FROM visits GROUP BY 1")
    assert not any(r[0] == "key selection" for r in cur.fetchall()), key


def test_date_differences_have_derived_bounds(visits):
    (truth,) = _truth(visits, "SELECT avg(discharge - visit_date) FROM visits")[0]
    con = dpgate.connect(str(visits), analyst="alice", test_seed=TEST_SEED)
    rows, cur = fetch(con, DP + "AVG(discharge - visit_date) AS stay, AVG(visit_date - DATE '2020-01-01') AS since, "
                      "AVG(date_diff('hour', TIMESTAMP '2020-01-01 00:00:00', ts)) AS hours FROM visits")  # fmt: skip
    lo, hi = cur.release.intervals[0]["stay"]
    assert lo <= truth <= hi
    cur.execute("EXPLAIN PRIVACY " + DP + "AVG(discharge - visit_date) FROM visits")
    clamp = [r[6] for r in cur.fetchall() if "centered sum" in r[0]][0]
    assert "[-1826, 1916]" in clamp  # discharge bounds minus visit bounds, in days


@pytest.mark.parametrize("agg", ["SUM(visit_date)", "AVG(ts)", "MEDIAN(visit_date)"])
def test_aggregating_dates_themselves_is_refused_with_a_hint(visits, agg):
    con = dpgate.connect(str(visits), analyst="alice")
    with pytest.raises(dpgate.Error) as e:
        fetch(con, DP + f"{agg} FROM visits")
    assert e.value.code == "DP212" and "difference" in e.value.hint


def test_synthetic_release_bins_dates_and_timestamps(visits):
    con = dpgate.connect(str(visits), analyst="alice", test_seed=TEST_SEED)
    cur = con.cursor()
    cur.execute("CREATE SYNTHETIC TABLE vsyn FROM visits USING privbayes WITH (epsilon = 1, bins = 16)")
    rows, cur = fetch(con, "SELECT min(visit_date), max(visit_date), min(ts), max(ts), any_value(typeof(visit_date)), "
                      "any_value(typeof(ts)), count(*) FROM vsyn")  # fmt: skip
    lo_d, hi_d, lo_t, hi_t, td, tt, n = rows[0]
    assert datetime.date(2020, 1, 1) <= lo_d <= hi_d <= datetime.date(2024, 12, 31)
    assert datetime.datetime(2020, 1, 1) <= lo_t <= hi_t <= datetime.datetime(2021, 12, 31, 23, 59, 59)
    assert (td, tt) == ("DATE", "TIMESTAMP") and n > 5000
    # The release's years follow the source's (5 years, roughly even) within a generous tolerance.
    years = dict(fetch(con, "SELECT year(visit_date) AS y, count(*) / sum(count(*)) OVER () FROM vsyn GROUP BY y")[0])
    assert set(years) <= {2020, 2021, 2022, 2023, 2024, None}  # NULL has a code: the column is nullable
    assert years.get(None, 0) < 0.05
    assert all(0.1 < share < 0.3 for y, share in years.items() if y is not None)
