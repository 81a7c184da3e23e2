"""VAR_POP / VAR_SAMP / STDDEV_*: noisy centred sums, sums of squares and counts, with intervals."""

from __future__ import annotations


import duckdb
import numpy as np
import pytest

import dpgate
from conftest import TEST_SEED, fetch

DP = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = {eps}) "


@pytest.fixture
def people(make_db):
    # 3,000 people, one row each, x in [0, 100]: a known variance per group.
    return make_db(
        "CREATE TABLE t AS SELECT i AS pid, ['a', 'b'][1 + i % 2] AS g, (i * 37) % 101 AS x, "
        "((i * 53) % 1000) / 10.0 AS y FROM range(3000) r(i)",
        protect={"t": {"unit": "pid", "epsilon": 1e6, "domains": {"g": ["a", "b"]},
                       "bounds": {"x": (0, 100), "y": (0, 100)}}},
    )  # fmt: skip


def _truth(path, sql):
    with duckdb.connect(str(path), read_only=True) as raw:
        return raw.execute(sql).fetchall()


def test_variance_estimates_are_close_and_intervals_cover(people):
    truth = _truth(people, "SELECT g, VAR_POP(x), VAR_SAMP(y), STDDEV_POP(x), STDDEV_SAMP(y) FROM t GROUP BY g ORDER BY g")
    con = dpgate.connect(str(people), analyst="alice", test_seed=TEST_SEED)
    rows, cur = fetch(con, DP.format(eps=1) + "g, VAR_POP(x) AS a, VARIANCE(y) AS b, STDDEV_POP(x) AS c, STDDEV(y) AS d "
                      "FROM t GROUP BY g")  # fmt: skip
    for row, t, iv in zip(rows, truth, cur.release.intervals):
        assert row[0] == t[0]
        for name, est, true in zip("abcd", row[1:], t[1:]):
            lo, hi = iv[name]
            assert lo <= est <= hi
            assert lo <= true <= hi, (name, lo, true, hi)
            assert abs(est - true) <= hi - lo  # the estimate is inside its own interval's width of the truth


@pytest.mark.statistical
def test_variance_intervals_cover_at_their_level(people):
    """At ε = 0.05 the noise dominates; 200 runs, 95% intervals: misses ~ Binomial(200, ≤0.05).

    With the Bonferroni box the true coverage is at least 95%; fail when more than 20 of 200
    miss (P(Binomial(200, 0.05) > 20) < 0.001).
    """
    (true,) = _truth(people, "SELECT VAR_POP(x) FROM t")[0]
    con = dpgate.connect(str(people), analyst="alice", test_seed=TEST_SEED)
    misses = 0
    widths = []
    for _ in range(200):
        rows, cur = fetch(con, DP.format(eps=0.05) + "VAR_POP(x) AS v FROM t")
        lo, hi = cur.release.intervals[0]["v"]
        misses += not (lo <= true <= hi)
        widths.append(hi - lo)
    assert misses <= 20
    assert np.median(widths) < 2500  # not the trivial [0, 2500] interval


def test_variance_needs_bounds_and_one_argument(make_db):
    path = make_db("CREATE TABLE t AS SELECT i AS pid, i * 1.5 AS z FROM range(10) r(i)", protect={"t": {"unit": "pid"}})
    con = dpgate.connect(str(path), analyst="alice")
    with pytest.raises(dpgate.Error) as e:
        fetch(con, DP.format(eps=1) + "VAR_POP(z) FROM t")
    assert e.value.code == "DP213"
    with pytest.raises(dpgate.Error) as e:
        fetch(con, DP.format(eps=1) + "VAR_POP(DISTINCT z) FROM t")
    assert e.value.code in ("DP212", "DP251", "DP252", "DP253")


def test_explain_shows_three_components(people):
    con = dpgate.connect(str(people), analyst="alice")
    cur = con.cursor()
    cur.execute("EXPLAIN PRIVACY " + DP.format(eps=0.9) + "STDDEV_SAMP(y) FROM t")
    labels = [r[0] for r in cur.fetchall()]
    assert {"STDDEV_SAMP(y) (centered sum)", "STDDEV_SAMP(y) (centered squares)", "STDDEV_SAMP(y) (count)"} <= set(labels)
