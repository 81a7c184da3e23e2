"""Plans: sensitivities, ε shares, key domains, key selection thresholds — fixed before any row is read."""

from __future__ import annotations

import math
import re

import pytest

import dpgate
from dpgate import errors, noise
from dpgate.frontend.classify import classify
from dpgate.frontend.dialect import parse_one
from dpgate.queries.analysis import key_selection_threshold


@pytest.fixture
def plan(con):
    g = con.gateway

    def make(sql):
        cat = g.catalog()
        return g.plan(classify(parse_one(sql), cat), cat)

    return make


def test_equal_shares_sum_to_epsilon(plan):
    p = plan("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.7) COUNT(*), SUM(age), AVG(hours_per_week) FROM adult")
    assert [a.epsilon for a in p.aggs] == pytest.approx([0.7 / 3] * 3)
    assert sum(a.epsilon for a in p.aggs) == pytest.approx(0.7, abs=1e-15)
    avg = p.aggs[2]
    assert [c.label for c in avg.components] == ["centered sum", "count"]
    assert avg.components[0].epsilon == pytest.approx(0.7 / 6)


def test_sensitivities(plan):
    p = plan("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (max_rows_contributed = 3) sex, COUNT(*), COUNT(DISTINCT person_id), "
             "SUM(age), AVG(age) FROM adult GROUP BY sex")  # fmt: skip
    count, subjects, total, mean = p.aggs
    assert count.components[0].sensitivity == 3
    # max_groups (1) < min(max_rows, cells) -> groups are bounded and each subject counts once
    assert p.bound_groups and subjects.components[0].sensitivity == 1
    assert total.components[0].sensitivity == 3 * 90 and total.grid == 1.0 and total.integer
    mid = (17 + 90) // 2
    assert mean.components[0].sensitivity == 3 * max(90 - mid, mid - 17)
    assert mean.components[1].sensitivity == 3


def test_subject_count_sensitivity_without_group_bound(plan):
    p = plan("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (max_rows_contributed = 2, max_groups_contributed = 5) "
             "sex, COUNT(DISTINCT person_id) FROM adult GROUP BY sex")  # fmt: skip
    assert not p.bound_groups
    assert p.aggs[0].components[0].sensitivity == 2  # min(rows=2, groups=5, cells=2)


def test_real_valued_inputs_go_on_a_power_of_two_grid(make_db):
    db = make_db("CREATE TABLE t (uid INT, x DOUBLE); INSERT INTO t VALUES (1, 0.5)",
                 {"t": dict(unit="uid", bounds={"x": (-2.5, 7.25)})})  # fmt: skip
    with dpgate.connect(str(db), analyst="alice") as con:
        g = con.gateway
        cat = g.catalog()
        p = g.plan(classify(parse_one("SELECT SUM(x) FROM t"), cat), cat)
    agg = p.aggs[0]
    assert not agg.integer
    assert math.log2(agg.grid).is_integer() and agg.grid <= (7.25 + 2.5) / 2**32
    assert agg.lower <= -2.5 and agg.upper >= 7.25
    assert agg.components[0].sensitivity == max(abs(round(agg.lower / agg.grid)), abs(round(agg.upper / agg.grid)))


@pytest.mark.parametrize(
    "sql, sources, sizes",
    [
        ("SELECT education, COUNT(*) FROM adult GROUP BY education", ["declared"], [16]),
        ("SELECT workclass, COUNT(*) FROM adult GROUP BY 1", ["declared"], [9]),  # 8 + NULL
        ("SELECT age, COUNT(*) FROM adult GROUP BY age", ["integer bounds"], [74]),
        ("SELECT age // 10 AS d, COUNT(*) FROM adult GROUP BY d", ["image of age"], [9]),
        ("SELECT sex, race, COUNT(*) FROM adult GROUP BY ALL", ["declared", "declared"], [2, 5]),
        ("SELECT r.region, COUNT(*) FROM adult a JOIN country_regions r USING (native_country) GROUP BY r.region",
         ["public table country_regions"], [5]),
        ("SELECT r.region, COUNT(*) FROM adult a LEFT JOIN country_regions r USING (native_country) GROUP BY r.region",
         ["public table country_regions"], [6]),  # + NULL for people without a match
    ],
)
def test_key_domains(plan, sql, sources, sizes):
    p = plan(sql)
    assert [k.source for k in p.keys] == sources
    assert [len(k.domain) for k in p.keys] == sizes
    assert p.key_selection is None
    assert p.cells == math.prod(sizes)


def test_undeclared_key_useskey_selection_threshold(plan):
    p = plan("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.6, delta = 1e-6) capital_gain, COUNT(*) FROM adult GROUP BY capital_gain")
    assert p.keys[0].domain is None
    ks = p.key_selection
    assert ks.epsilon == pytest.approx(0.3) and ks.delta == 1e-6
    assert p.epsilon == 0.6 and p.delta == 1e-6
    assert p.aggs[0].epsilon == pytest.approx(0.3)


@pytest.mark.parametrize("epsilon, delta, groups", [(0.3, 1e-6, 1), (1.0, 1e-9, 3), (0.05, 1e-5, 10)])
def test_key_selection_threshold_is_the_smallest_safe_one(epsilon, delta, groups):
    ks = key_selection_threshold(epsilon, delta, groups)
    tail = lambda m: noise.discrete_laplace_tail(epsilon, groups, m)  # noqa: E731
    assert groups * tail(ks.threshold - 1) <= delta
    assert ks.threshold == 2 or groups * tail(ks.threshold - 2) > delta


def test_having_and_order_by_aggregates_are_paid_releases(plan):
    p = plan("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.9) education, AVG(age) FROM adult "
             "GROUP BY education HAVING COUNT(*) > 100 ORDER BY SUM(hours_per_week) DESC")  # fmt: skip
    assert [a.label for a in p.aggs] == ["AVG(age)", "COUNT(*)", "SUM(hours_per_week)"]
    assert sum(a.epsilon for a in p.aggs) == pytest.approx(0.9)


def test_same_aggregate_twice_is_one_release(plan):
    p = plan("SELECT COUNT(*) AS n, COUNT(*) * 2 AS twice FROM adult HAVING COUNT(*) > 0")
    assert len(p.aggs) == 1


def test_privacy_unit_option_must_match(plan):
    assert plan("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (privacy_unit_column = person_id) COUNT(*) FROM adult")
    with pytest.raises(errors.PolicyError):
        plan("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (privacy_unit_column = age) COUNT(*) FROM adult")


def test_derived_bounds_errors_name_the_fix(plan):
    with pytest.raises(errors.PolicyError) as info:
        plan("SELECT SUM(person_id) FROM adult")
    assert "LEAST(GREATEST" in info.value.hint
    p = plan("SELECT SUM(LEAST(GREATEST(person_id, 0), 10)) FROM adult")
    assert (p.aggs[0].lower, p.aggs[0].upper) == (0, 10)


def test_too_many_cells(plan):
    with pytest.raises(errors.UnsupportedQueryError) as info:
        plan("SELECT age, education_num, hours_per_week, native_country, COUNT(*) FROM adult GROUP BY ALL")
    assert info.value.code == "DP276"


def test_filter_clause_becomes_a_bounded_input(plan):
    p = plan("SELECT COUNT(*) FILTER (WHERE age > 60), SUM(age) FILTER (WHERE sex = 'Male') FROM adult")
    assert [a.kind for a in p.aggs] == ["count_values", "sum"]
    assert p.aggs[1].upper == 90


def test_plans_read_no_protected_rows(con):
    """Every statement the planner sends to DuckDB is a DESCRIBE (binding only), a zero-row read of a
    column (the collation probe of a lookup's key: ``LIMIT 0``) or reads public objects."""
    g = con.gateway
    real = g.facts._con
    seen = []

    class Spy:
        def execute(self, sql, *args):
            seen.append(sql)
            return real.execute(sql, *args)

    g.facts._con = Spy()
    try:
        cat = g.catalog()
        g.plan(classify(parse_one(
            "SELECT r.region, a.age // 10 AS d, COUNT(*), AVG(a.hours_per_week) FROM adult a "
            "JOIN country_regions r USING (native_country) GROUP BY ALL"), cat), cat)  # fmt: skip
    finally:
        g.facts._con = real
    assert seen
    for sql in seen:
        rest = re.sub(r'from main\."adult" limit 0\)', "", sql.lower())
        assert sql.startswith("DESCRIBE ") or "adult" not in rest, sql
