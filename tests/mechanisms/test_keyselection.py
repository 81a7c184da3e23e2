"""DP key selection: exact δ accounting of the threshold, privacy on neighbours, utility."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dpgate
from conftest import TEST_SEED
from dpgate import noise
from dpgate.mechanisms import KeySelector
from dpgate.mechanisms.keyselection import threshold as key_selection_threshold


@pytest.mark.parametrize("epsilon, delta, groups", [(0.5, 1e-6, 1), (0.2, 1e-5, 4)])
def test_a_lone_subjects_key_appears_with_probability_at_most_delta_over_groups(epsilon, delta, groups):
    sel = key_selection_threshold(epsilon, delta, groups)
    p_release_single = noise.discrete_laplace_tail(epsilon, groups, sel.threshold - 1)
    assert groups * p_release_single <= delta
    # the exact probability from the pmf agrees with the tail formula
    z = np.arange(sel.threshold - 1, sel.threshold + 5000)
    assert np.exp(noise.discrete_laplace_logpmf(epsilon, groups, z)).sum() == pytest.approx(p_release_single, rel=1e-6)


@pytest.mark.statistical
def test_release_probability_sampled():
    """Keys with n subjects appear with probability P(n + Z >= τ), checked by sampling."""
    sel = key_selection_threshold(1.0, 1e-2, 1)
    rng = np.random.default_rng(TEST_SEED)
    n = np.repeat(np.array([1, sel.threshold - 1, sel.threshold, sel.threshold + 5]), 20_000)
    released = np.zeros(len(n), dtype=bool)
    released[KeySelector().select(n, sel, rng=rng)] = True
    for value in np.unique(n):
        got = released[n == value].mean()
        m = sel.threshold - value
        a = noise.discrete_laplace_alpha(1.0, 1)
        expect = a**m / (1 + a) if m >= 1 else 1 - a ** (1 - m) / (1 + a)
        assert abs(got - expect) <= 5 * math.sqrt(expect * (1 - expect) / 20_000) + 1e-4


def test_keys_with_many_subjects_are_released_and_rare_ones_are_not(make_db):
    db = make_db(
        "CREATE TABLE t (uid INT, city VARCHAR); "
        "INSERT INTO t SELECT i, CASE WHEN i <= 400 THEN 'big' WHEN i <= 700 THEN 'mid' ELSE 'lonely' || i END FROM range(1, 706) r(i)",
        {"t": dict(unit="uid", epsilon=100.0, subject_delta=1e-3)},
        analysts={"alice": {"epsilon": 1e4, "delta": 1e-2}},
    )
    with dpgate.connect(str(db), analyst="alice", test_seed=TEST_SEED) as con:
        cur = con.cursor()
        for _ in range(20):
            cur.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-6) city, COUNT(*) AS n FROM t GROUP BY city")
            keys = {r[0] for r in cur.fetchall()}
            assert {"big", "mid"} <= keys
            assert not any(k.startswith("lonely") for k in keys)
            assert cur.release.delta == 1e-6


def test_key_selection_charges_delta(make_db):
    db = make_db(
        "CREATE TABLE t (uid INT, city VARCHAR); INSERT INTO t SELECT i, 'c' || (i % 3) FROM range(1, 301) r(i)",
        {"t": dict(unit="uid", epsilon=10.0, subject_delta=2e-6)},
        analysts={"alice": {"epsilon": 100, "delta": 1e-2}},
    )
    with dpgate.connect(str(db), analyst="alice") as con:
        q = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-6) city, COUNT(*) FROM t GROUP BY city"
        con.cursor().execute(q)
        assert con.budget()[1] == pytest.approx(1e-2 - 1e-6)
        con.cursor().execute(q)
        # each subject's δ budget (2e-6) is now spent: the next query finds nobody to use
        with pytest.raises(dpgate.BudgetExceededError) as info:
            con.cursor().execute(q)
        assert info.value.code == "DP403"
