"""Per-subject aggregation first: FROM (SELECT unit, aggregates FROM t GROUP BY unit), then a DP aggregate."""

from __future__ import annotations

import duckdb
import pytest

import dpgate
from conftest import TEST_SEED, fetch

DP = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) "
# 600 people with 1..6 purchases each (person i has 1 + i % 6), amounts 0..99.
SETUP = """
CREATE TABLE purchases AS SELECT i AS cid, (i * 31 + j * 17) % 100 AS amount, ['food', 'books'][1 + j % 2] AS category
FROM range(600) r(i), range(6) s(j) WHERE j <= i % 6;
CREATE TABLE people AS SELECT i AS cid FROM range(600) r(i);
"""


@pytest.fixture
def shop(make_db):
    return make_db(SETUP, protect={"purchases": {"unit": "cid", "max_rows": 4, "epsilon": 1e6,
                                                 "bounds": {"amount": (0, 100)},
                                                 "domains": {"category": ["food", "books"]}}})  # fmt: skip


def _truth(path, sql):
    with duckdb.connect(str(path), read_only=True) as raw:
        return raw.execute(sql).fetchall()


def test_a_histogram_of_per_subject_counts_has_a_public_domain(shop):
    con = dpgate.connect(str(shop), analyst="alice", test_seed=TEST_SEED)
    rows, cur = fetch(con, DP + "n, COUNT(*) AS people FROM (SELECT cid, COUNT(*) AS n FROM purchases GROUP BY cid) "
                      "GROUP BY n")  # fmt: skip
    # Rows are cut to max_rows = 4 per person first: n lies in 0..4, every cell released.
    assert [r[0] for r in rows] == [0, 1, 2, 3, 4]
    truth = {1: 100, 2: 100, 3: 100, 4: 300}  # people with 4, 5 or 6 purchases keep 4
    misses = sum(not iv["people"][0] <= truth.get(n, 0) <= iv["people"][1] for (n, _), iv in zip(rows, cur.release.intervals))
    assert misses <= 2  # 95% intervals on 5 cells: P(3 or more misses) < 0.002


def test_averages_of_per_subject_values_cover_the_bounded_truth(shop):
    food = _truth(shop, "SELECT AVG(n) FROM (SELECT cid, COUNT(*) AS n FROM purchases WHERE category = 'food' GROUP BY cid)")[0][0]
    con = dpgate.connect(str(shop), analyst="alice", test_seed=TEST_SEED)
    rows, cur = fetch(con, DP + "AVG(n) AS n, AVG(hi) AS hi, AVG(mean) AS mean FROM (SELECT cid, COUNT(*) AS n, "
                      "MAX(amount) AS hi, AVG(amount) AS mean FROM purchases WHERE category = 'food' GROUP BY cid)")  # fmt: skip
    iv = cur.release.intervals[0]
    # n: everyone has at least one food purchase (j = 0), and at most 3 (j = 0, 2, 4): the cut to 4 keeps all
    # of some people's food rows and fewer of others', so the truth lies between these two averages.
    assert 1.0 <= rows[0][0] <= 3.0
    assert iv["n"][0] <= food and iv["n"][1] >= 1.0
    assert 0 <= iv["hi"][0] <= rows[0][1] <= iv["hi"][1] <= 100


def test_explain_states_the_per_subject_bounds(shop):
    con = dpgate.connect(str(shop), analyst="alice")
    cur = con.cursor()
    cur.execute("EXPLAIN PRIVACY " + DP + "SUM(s) FROM (SELECT cid, SUM(amount) AS s FROM purchases GROUP BY cid)")
    rows = cur.fetchall()
    notes = [r[6] for r in rows if r[0] == "note"]
    assert any("cut to 4 per subject" in n and "s in [0, 400]" in n for n in notes)
    assert any("at most 1 row(s) per subject" in str(r[6]) for r in rows)
    (sens,) = [r[4] for r in rows if r[0].startswith("SUM(s)")]
    assert sens == "400"  # one row per subject, clamped to [0, 400]


@pytest.mark.parametrize(
    "sql, code",
    [
        ("AVG(n) FROM (SELECT category, COUNT(*) AS n FROM purchases GROUP BY category)", "DP216"),
        ("AVG(n) FROM (SELECT cid, COUNT(*) AS n FROM purchases GROUP BY cid, category)", "DP216"),
        ("AVG(n) FROM (SELECT cid, COUNT(*) AS n FROM purchases GROUP BY cid HAVING COUNT(*) > 1)", "DP250"),
        ("AVG(n) FROM (SELECT cid, COUNT(*) AS n FROM purchases GROUP BY cid ORDER BY n LIMIT 5)", "DP250"),
        ("MAX(n) FROM (SELECT cid, COUNT(*) AS n FROM purchases GROUP BY cid)", "DP253"),
        ("AVG(n) FROM (SELECT cid, amount AS n FROM purchases)", "DP216"),
        ("AVG(n) FROM (SELECT cid, COUNT(*) FROM purchases GROUP BY cid)", "DP218"),
        ("AVG(n) FROM (SELECT COUNT(*) AS n FROM purchases GROUP BY cid)", "DP216"),
        ("AVG(n) FROM (SELECT cid, MEDIAN(amount) AS n FROM purchases GROUP BY cid)", "DP212"),
        ("AVG(n) FROM (SELECT p.cid, COUNT(*) AS n FROM purchases p JOIN people q USING (cid) GROUP BY p.cid)", "DP216"),
        ("AVG(n) FROM (SELECT cid, COUNT(*) AS n FROM purchases GROUP BY cid) a JOIN people USING (cid)", "DP216"),
    ],
)
def test_near_misses_are_refused_and_charge_nothing(shop, sql, code):
    con = dpgate.connect(str(shop), analyst="alice")
    left = con.cursor().execute("SHOW BUDGET").fetchall()
    with pytest.raises(dpgate.Error) as e:
        fetch(con, DP + sql)
    assert e.value.code == code, e.value
    assert con.cursor().execute("SHOW BUDGET").fetchall() == left
