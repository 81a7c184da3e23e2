"""MEDIAN / QUANTILE_CONT / PERCENTILE_CONT through SQL: utility on Adult, the rank note, refusals."""

from __future__ import annotations

import duckdb
import pytest

import dpgate
from conftest import TEST_SEED, fetch

DP = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) "


def test_medians_by_group_on_adult_are_within_their_rank_bound(demo_db):
    with duckdb.connect(str(demo_db), read_only=True) as raw:
        ages = {sex: sorted(a for (a,) in raw.execute("SELECT age FROM adult WHERE sex = ?", [sex]).fetchall())
                for sex in ("Female", "Male")}  # fmt: skip
    con = dpgate.connect(str(demo_db), analyst="demo", test_seed=TEST_SEED)
    rows, cur = fetch(con, DP + "sex, MEDIAN(age) AS m, QUANTILE_CONT(hours_per_week, 0.9) AS h9, "
                      "PERCENTILE_CONT(age, 0.25) AS q1 FROM adult GROUP BY sex")  # fmt: skip
    note = next(n for n in cur.messages if n.startswith("note: MEDIAN(age)"))
    t = int(note.split("within ")[1].split(" rows")[0].replace(",", ""))
    for sex, m, _, q1 in rows:
        x = ages[sex]
        for value, level in ((m, 0.5), (q1, 0.25)):
            below = sum(a < value for a in x)
            upto = sum(a <= value for a in x)
            rho = level * len(x)
            assert max(below - rho, rho - upto, 0) <= t, (sex, level, value)
    assert cur.release.intervals[0]["m"] == (None, None)  # no interval of values for a quantile


def test_several_quantiles_share_epsilon(demo_db):
    con = dpgate.connect(str(demo_db), analyst="demo")
    cur = con.cursor()
    cur.execute("EXPLAIN PRIVACY " + DP + "MEDIAN(age), QUANTILE_CONT(age, 0.9), COUNT(*) FROM adult")
    rows = [r for r in cur.fetchall() if r[1] == "exponential (quantile)" or "(quantile)" in r[0]]
    assert len(rows) == 2 and all(abs(r[2] - 1 / 3) < 1e-9 for r in rows)


@pytest.mark.parametrize(
    "sql, code",
    [
        ("QUANTILE_CONT(age, 1.5) FROM adult", "DP254"),
        ("QUANTILE_CONT(age, [0.1, 0.9]) FROM adult", "DP254"),
        ("MEDIAN(DISTINCT age) FROM adult", "DP252"),
        ("MEDIAN(fnlwgt_unbounded) FROM adult", "DP218"),
        ("PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY age) FROM adult", "DP252"),
    ],
)
def test_quantile_near_misses_are_refused(demo_db, sql, code):
    con = dpgate.connect(str(demo_db), analyst="demo")
    with pytest.raises(dpgate.Error) as e:
        fetch(con, DP + sql)
    assert e.value.code == code, e.value


def test_quantiles_refuse_partitioned_personalization(demo_db):
    con = dpgate.connect(str(demo_db), analyst="demo")
    with pytest.raises(dpgate.Error) as e:
        fetch(con, "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, personalization = 'partition') "
                   "MEDIAN(age) FROM adult")  # fmt: skip
    assert e.value.code == "DP274" and "threshold" in e.value.hint
