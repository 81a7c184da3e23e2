"""Personalized DP (seed 002): partitioning programs, the sample mechanism, charges and combination."""

from __future__ import annotations

import itertools
import math
from decimal import Decimal as D

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dpgate
from conftest import TEST_SEED
from dpgate import errors, noise
from dpgate.mechanisms import pdp
from dpgate.catalog.owner import Owner


def compositions(L: int, k: int):
    """All ways to cut L sorted levels into k non-empty contiguous segments (cut positions)."""
    for inner in itertools.combinations(range(1, L), k - 1):
        yield [*inner, L]


def brute(eps, counts, k, min_size, objective):
    best, arg = None, None
    for cuts in compositions(len(eps), k):
        start, ok = 0, True
        for end in cuts:
            ok &= sum(counts[start:end]) >= min_size
            start = end
        if not ok:
            continue
        value = objective(cuts)
        if best is None or value < best - 1e-12:
            best, arg = value, cuts
    return best, arg


def square_utility(eps, counts):
    def f(cuts):
        total, start = 0.0, 0
        for end in cuts:
            total += (sum(counts[start:end]) * eps[start]) ** 2
            start = end
        return -total

    return f


@pytest.mark.parametrize("seed", range(12))
def test_partitioning_programs_match_brute_force(seed):
    rng = np.random.default_rng(seed)
    L = int(rng.integers(2, 9))
    eps = sorted(rng.choice(np.arange(1, 100) / 100, size=L, replace=False).tolist())
    counts = rng.integers(1, 30, size=L).tolist()
    min_size = int(rng.integers(1, 20))
    for k in range(1, min(L, 4) + 1):
        w_dp, cuts_dp = pdp.privacy_aware(eps, counts, k, min_size)
        w_bf, _ = brute(eps, counts, k, min_size, lambda c: pdp.waste(eps, counts, c))
        if w_bf is None:
            assert cuts_dp == []
            continue
        assert w_dp == pytest.approx(w_bf) and pdp.waste(eps, counts, cuts_dp) == pytest.approx(w_bf)
        u_dp, ucuts = pdp.utility_based(eps, counts, k, min_size)
        u_bf, _ = brute(eps, counts, k, min_size, square_utility(eps, counts))
        assert -u_dp == pytest.approx(u_bf)


@pytest.mark.parametrize("seed", range(6))
def test_waste_is_monotone_in_k_and_zero_at_the_number_of_levels(seed):
    rng = np.random.default_rng(seed)
    L = 7
    eps = sorted(rng.choice(np.arange(1, 100) / 100, size=L, replace=False).tolist())
    counts = rng.integers(1, 30, size=L).tolist()
    wastes = [pdp.privacy_aware(eps, counts, k, 1)[0] for k in range(1, L + 1)]
    assert all(a >= b - 1e-12 for a, b in zip(wastes, wastes[1:]))
    assert wastes[-1] == pytest.approx(0.0)
    assert all(w > 0 for w in wastes[:-1])


@pytest.mark.parametrize("seed", range(6))
def test_linear_utility_equals_privacy_aware(seed):
    """U(n, ε) = n ε makes Σ U = Σ ε - waste: the same optimal partition (digest 5.6)."""
    rng = np.random.default_rng(seed)
    L = 8
    eps = sorted(rng.choice(np.arange(1, 100) / 100, size=L, replace=False).tolist())
    counts = rng.integers(1, 30, size=L).tolist()
    for k in range(1, 5):
        w, cuts_pa = pdp.privacy_aware(eps, counts, k, 1)
        u, cuts_lin = pdp.utility_based(eps, counts, k, 1, utility="linear")
        total = sum(e * c for e, c in zip(eps, counts))
        assert u == pytest.approx(total - w)
        assert pdp.waste(eps, counts, cuts_lin) == pytest.approx(w)


def test_uniform_budgets_split_evenly():
    """Digest 5.6: uniform allowances on a grid, k = 2 minima near 0.01 / 0.50."""
    levels = [pdp.Level(D(i) / 100, 100) for i in range(1, 101)]
    eps = [float(lv.allowance) for lv in levels]
    counts = [lv.count for lv in levels]
    _, cuts = pdp.privacy_aware(eps, counts, 2, 1)
    assert eps[cuts[0]] == pytest.approx(0.51, abs=0.011)
    _, cuts3 = pdp.privacy_aware(eps, counts, 3, 1)
    assert [eps[0], eps[cuts3[0]], eps[cuts3[1]]] == pytest.approx([0.01, 0.34, 0.67], abs=0.011)


def test_minimum_partition_size_is_enforced_inside():
    eps = [0.1, 0.2, 0.9]
    counts = [5, 5, 200]
    _, cuts = pdp.privacy_aware(eps, counts, 2, 50)
    assert cuts == [2, 3] or cuts == []
    _, cuts = pdp.privacy_aware(eps, counts, 2, 6)  # {0.1} alone is too small
    assert cuts == [2, 3]


def test_allowances_round_down():
    assert pdp.allowance(D("0.7349"), D("1")) == D("0.734")
    assert pdp.allowance(D("1.2"), D("1")) == D("1")
    assert pdp.allowance(D("0.0009"), D("1")) == D(0)
    assert pdp.allowance(D("0.3"), D("0.3")) == D("0.3")


@pytest.mark.parametrize("a, eps_t", [(0.1, 1.0), (0.5, 1.0), (0.05, 0.3), (1.0, 1.0)])
def test_sample_mechanism_privacy_exactly(a, eps_t):
    """One subject with allowance a below ε_T: the output distribution of a sampled count with and
    without the subject's row differs by at most e^a (add/remove neighbours)."""
    p = pdp.sample_probability(D(str(a)), D(str(eps_t)))
    z = np.arange(-3000, 3001)
    log_without = noise.discrete_laplace_logpmf(eps_t, 1, z)  # output = c + Z, noise at ε_T
    log_shifted = noise.discrete_laplace_logpmf(eps_t, 1, z - 1)
    # with the subject's row, sampled with probability p (log space: no underflow in the tails)
    log_with = np.logaddexp(math.log1p(-p) + log_without, math.log(p) + log_shifted) if p < 1 else log_shifted
    ratio = np.abs(log_with - log_without)
    assert ratio.max() <= a + 1e-9
    if a < eps_t:
        assert ratio.max() >= a - 1e-3  # and the bound is (nearly) attained: no budget is wasted


@pytest.mark.statistical
def test_sample_inclusion_frequencies():
    rng = np.random.default_rng(TEST_SEED)
    probs = np.array([pdp.sample_probability(D("0.2"), D("1"))] * 20000 + [1.0] * 100)
    kept = pdp.draw_sample(probs, rng=rng)
    p = probs[0]
    assert abs(kept[:20000].mean() - p) <= 5 * math.sqrt(p * (1 - p) / 20000)
    assert kept[20000:].all()


def test_combination_of_disjoint_partitions():
    """Disjoint partitions are summed (each is the exact total of its subjects plus noise), so the
    answer is about everyone it uses with no extrapolation; the threshold rule's answer is about
    the subjects with the whole ε (no scaling to those it leaves out)."""
    levels = [pdp.Level(D("0.1"), 100), pdp.Level(D("1"), 300)]
    plan = pdp.plan("partition", levels, D("1"), partitions=2, min_size=1)
    assert list(pdp.coefficients(plan, [200.0, 2.0], 0.25)) == [1.0, 1.0]
    assert pdp.extrapolation(plan, [1.0, 1.0], 1.0, 0.05) == (0.0, 0.0)
    assert pdp.answer_population(plan) == 400
    thr = pdp.plan("threshold", levels, D("1"))
    assert list(pdp.coefficients(thr, [2.0], 0.25)) == [1.0]
    assert pdp.answer_population(thr) == 300


def test_sample_strata_are_horvitz_thompson():
    levels = [pdp.Level(D("0.2"), 100), pdp.Level(D("0.5"), 50), pdp.Level(D("1"), 300)]
    plan = pdp.plan("sample", levels, D("1"), strata=True)
    assert len(plan.parts) == 3 and all(p.epsilon == D("1") for p in plan.parts)
    c = pdp.coefficients(plan, [2.0] * 3, 0.25)
    probs = sorted((pdp.sample_probability(lv.allowance, D("1")) for lv in levels), reverse=True)
    assert c == pytest.approx([1 / q for q in probs])
    sampling, bias = pdp.extrapolation(plan, c, 1.0, 0.05)
    assert bias == 0.0 and sampling > 0
    one = pdp.plan("sample", levels, D("1"))  # one part: a ratio estimate, whose bias is bounded
    assert len(one.parts) == 1 and pdp.extrapolation(one, pdp.coefficients(one, [2.0], 0.25), 1.0, 0.05)[1] > 0


@pytest.fixture
def budgets_db(make_db):
    return make_db(
        "CREATE TABLE t (uid INTEGER, x INTEGER); INSERT INTO t SELECT i, i % 2 FROM range(1, 401) r(i);"
        "CREATE TABLE b (uid INTEGER, epsilon DOUBLE); INSERT INTO b SELECT i, [0.05, 0.2, 0.5, 1.0, 3.0][1 + i % 5] FROM range(1, 401) r(i)",
        {"t": dict(unit="uid", budget_table="b", domains={"x": [0, 1]})},
        analysts={"alice": {"epsilon": 1000.0, "delta": 1e-3}},
    )


def roster(db):
    with Owner(db, create=False) as o:
        return {u: (b, s) for u, b, s in o.con.execute("SELECT unit, epsilon_budget, epsilon_spent FROM dpgate.subjects_t").fetchall()}


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(pdp.RULES), st.sampled_from([0.05, 0.1, 0.3, 0.7, 1.0])), min_size=1, max_size=8))
def test_ledger_follows_the_charge_table(budgets_db, queries):
    """Random sequences mixing all five rules: charges equal the plan's, nobody exceeds a budget."""
    db = budgets_db
    with dpgate.connect(str(db), analyst="alice") as con:
        for rule, eps in queries:
            before = roster(db)
            remaining = {}
            for u, (b, s) in before.items():
                remaining[b - s] = remaining.get(b - s, 0) + 1
            levels, excluded = pdp.allowance_levels(remaining, D(repr(eps)))
            try:
                expected = pdp.plan(rule, levels, D(repr(eps)), excluded=excluded, min_size=20)
            except errors.BudgetExceededError:
                expected = None
            sql = (f"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = {eps}, personalization = '{rule}', "
                   f"min_partition_size = 20) x, COUNT(*) FROM t GROUP BY x")  # fmt: skip
            try:
                con.cursor().execute(sql)
                assert expected is not None
            except errors.BudgetExceededError:
                assert expected is None
                assert roster(db) == before
                continue
            after = roster(db)
            for u, (b, s) in after.items():
                assert s <= b
                a = pdp.allowance(b - before[u][1], D(repr(eps)))
                assert s - before[u][1] == (expected.charges.get(a, D(0)) if a > 0 else 0)


def test_rules_end_to_end(budgets_db):
    with dpgate.connect(str(budgets_db), analyst="alice", test_seed=TEST_SEED) as con:
        for rule in pdp.RULES:
            cur = con.cursor().execute(
                f"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.3, personalization = '{rule}', min_partition_size = 20) "
                "x, COUNT(*) AS n, SUM(x) AS s FROM t GROUP BY x"
            )  # fmt: skip
            rows = cur.fetchall()
            assert [r[0] for r in rows] == [0, 1]
            for row, iv in zip(rows, cur.release.intervals):
                assert iv["n"][0] <= row[1] <= iv["n"][1] and iv["s"][0] <= row[2] <= iv["s"][1]
            assert cur.release.epsilon <= 0.3
            assert any(rule in n for n in cur.release.notes) or rule == "threshold"


def test_key_selection_is_refused_with_partitions(budgets_db):
    with dpgate.connect(str(budgets_db), analyst="alice") as con:
        with pytest.raises(errors.UnsupportedQueryError):
            con.cursor().execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.3, delta = 1e-6, "
                                 "personalization = 'partition') uid, COUNT(*) FROM t GROUP BY uid")  # fmt: skip


def test_explain_shows_partitions_charges_and_error(budgets_db):
    with dpgate.connect(str(budgets_db), analyst="alice") as con:
        rows = con.cursor().execute(
            "EXPLAIN PRIVACY SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, personalization = 'partition', "
            "min_partition_size = 20, partitions = 3) x, COUNT(*) FROM t GROUP BY x"
        ).fetchall()
        items = [r[0] for r in rows]
        assert items.count("partition") == 3
        assert items.count("charge") >= 3
        assert "expected error" in items
        assert con.budget()[0] == 1000.0
