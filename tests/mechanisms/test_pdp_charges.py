"""Charges equal what the mechanism uses: a property test over random rosters and every rule.

For every personalization rule, every roster of allowances (including the all-equal roster
below the requested ε, which 0.6.0 charged a but ran at ε) and every requested ε, the ε at
which each subject's data is used never exceeds what that subject is charged, and no charge
exceeds the subject's allowance.
"""

from __future__ import annotations

import math
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpgate import errors
from dpgate.mechanisms import pdp

ALLOWANCES = st.decimals(min_value=Decimal("0.01"), max_value=Decimal("3"), places=2)


@st.composite
def rosters(draw):
    values = draw(st.lists(ALLOWANCES, min_size=1, max_size=6, unique=True))
    counts = draw(st.lists(st.integers(1, 500), min_size=len(values), max_size=len(values)))
    return [pdp.Level(a, n) for a, n in sorted(zip(values, counts))]


def _check(plan: pdp.SubjectPlan) -> None:
    used = pdp.used_epsilon(plan)
    for lv in plan.levels:
        charge = plan.charges[lv.allowance]
        assert charge <= lv.allowance, (plan.rule, lv, charge)
        assert used[lv.allowance] <= float(charge) * (1 + 1e-12) + 1e-12, (plan.rule, lv, used[lv.allowance], charge)


@settings(max_examples=300, deadline=None)
@given(rosters(), st.sampled_from(pdp.RULES), ALLOWANCES)
def test_no_subject_is_used_beyond_its_charge(levels, rule, requested):
    levels = [pdp.Level(min(lv.allowance, requested), lv.count) for lv in levels]  # the ledger caps at ε
    merged: dict[Decimal, int] = {}
    for lv in levels:
        merged[lv.allowance] = merged.get(lv.allowance, 0) + lv.count
    levels = [pdp.Level(a, n) for a, n in sorted(merged.items())]
    try:
        plan = pdp.plan(rule, levels, requested, min_size=1)
    except errors.BudgetExceededError:
        assert rule == "threshold"  # nobody has the whole ε
        return
    _check(plan)


@pytest.mark.parametrize("rule", pdp.RULES)
def test_equal_allowances_below_epsilon_run_at_the_allowance(rule):
    """Equal allowances below ε: every subject has a = 0.3 left and the query asks ε = 1."""
    levels = [pdp.Level(Decimal("0.3"), 1000)]
    try:
        plan = pdp.plan(rule, levels, Decimal("1"), min_size=1)
    except errors.BudgetExceededError:
        assert rule == "threshold"
        return
    _check(plan)
    assert pdp.used_epsilon(plan)[Decimal("0.3")] == pytest.approx(0.3)
    if rule == "sample":
        assert plan.parts[0].epsilon == Decimal("0.3")  # the mechanism runs at 0.3 ...
        assert plan.sample_probability[Decimal("0.3")] == 1.0  # ... on everyone
        assert plan.uniform


def test_sample_rule_uses_a_subject_at_its_allowance():
    plan = pdp.plan("sample", [pdp.Level(Decimal("0.2"), 10), pdp.Level(Decimal("1"), 10)], Decimal("1"))
    used = pdp.used_epsilon(plan)
    assert used[Decimal("0.2")] == pytest.approx(0.2, rel=1e-9)
    assert used[Decimal("1")] == pytest.approx(1.0)
    assert not plan.uniform  # sampled subjects need the charged table (and its thinning)
    assert math.isclose(plan.sample_probability[Decimal("0.2")], math.expm1(0.2) / math.expm1(1.0), rel_tol=1e-12)
