"""The harness itself: it fails when a declared sensitivity is wrong (tests that could fail).

A harness that never fails proves nothing. Here it is given plans whose declared
sensitivities are halved, statistics that move too far, key sets that change, ladders that
break the ladder property and charged sets that leak, and must report each of them.
"""

from __future__ import annotations

import pytest

import harness

HEAVY_SUM = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) SUM(x) AS s, COUNT(*) AS n, AVG(x) AS a FROM t"
#: Light rows (uid 0, 2..9: four rows at x = 1), and subject 1 with 6 rows at the upper bound 10.
SETUP = ("CREATE TABLE t AS SELECT i % 10 AS uid, 1 AS x FROM range(40) r(i) WHERE i % 10 <> 1; "
         "INSERT INTO t SELECT 1, 10 FROM range(6)")
SPEC = {"t": {"unit": "uid", "max_rows": 3, "bounds": {"x": (0, 10)}, "public_roster": True}}


@pytest.fixture
def heavy_pair(make_db):
    """D, and D′ without the heavy subject 1 (10 rows, max_rows = 3)."""
    d = make_db(SETUP, protect=SPEC, analysts={harness.ANALYST: {"epsilon": 100.0}})
    n = harness.mutate(harness.copy_db(d, d.with_name("without_1.duckdb")), "DELETE FROM t WHERE uid = 1")
    with harness.gateways(d, n) as (gd, gn):
        yield gd, gn


def test_the_declared_sensitivity_holds_and_is_tight(heavy_pair):
    d, n = heavy_pair
    before, after = harness.check_statement(d, n, HEAVY_SUM)
    s = before.stats["agg 0 SUM(x) [sum]"]
    # The heavy subject keeps max_rows = 3 of its rows, all at the bound x = 10.
    assert s.values[0] - after.stats["agg 0 SUM(x) [sum]"].values[0] == 30 == s.l1
    assert before.stats["agg 1 COUNT(*) [count]"].values[0] - after.stats["agg 1 COUNT(*) [count]"].values[0] == 3


def test_a_halved_declared_sensitivity_is_caught(heavy_pair):
    """The harness must raise when the plan declares half the true sensitivity of a heavy subject."""
    d, n = heavy_pair
    wrong_d = harness.halved(harness.plan_statement(d, HEAVY_SUM)[1])
    wrong_n = harness.halved(harness.plan_statement(n, HEAVY_SUM)[1])
    assert [c.sensitivity for a in wrong_d.aggs for c in a.components] == [15, 1, 7, 1]
    before = harness.exact_statistics(d._con, wrong_d)
    after = harness.exact_statistics(n._con, wrong_n)
    with pytest.raises(harness.NeighbourViolation) as info:
        harness.assert_neighbours(before, after)
    by_name = {v.statistic: v for v in info.value.violations}
    assert set(by_name) >= {"agg 0 SUM(x) [sum]", "agg 1 COUNT(*) [count]", "agg 2 AVG(x) [count]"}, by_name
    assert (by_name["agg 0 SUM(x) [sum]"].observed, by_name["agg 0 SUM(x) [sum]"].declared) == (30, 15)
    assert "L1 change 30 > declared 15" in str(info.value)


def test_scale_below_one_is_caught(heavy_pair):
    d, n = heavy_pair
    with pytest.raises(harness.NeighbourViolation):
        harness.check_statement(d, n, HEAVY_SUM, scale=0.5)


def test_uncharged_rows_would_be_caught(heavy_pair):
    """``differences`` sees the rows of subjects outside the charged set when they are counted."""
    d, _ = heavy_pair
    _, plan = harness.plan_statement(d, HEAVY_SUM)
    everyone = harness.exact_statistics(d._con, plan)
    charged = f"(SELECT unit, 0 AS part FROM {plan.table.roster_table_sql} WHERE unit <> 1)"
    without_1 = harness.exact_statistics(d._con, plan, charged=charged)
    assert harness.differences(everyone, without_1)
    assert not harness.differences(everyone, harness.exact_statistics(d._con, plan))


def _exact(**stats: harness.Statistic) -> harness.Exact:
    return harness.Exact("count", None, dict(stats))


def test_public_key_sets_must_not_change():
    a = _exact(s=harness.Statistic("s", {0: 5, 1: 3}, l1=10, fixed_keys=True))
    b = _exact(s=harness.Statistic("s", {0: 5, 1: 3, 2: 0}, l1=10, fixed_keys=True))
    assert [v.what.split(" (")[0] for v in harness.compare(a, b)] == ["public key set differs"]


def test_linf_and_top_k_bounds():
    a = _exact(f=harness.Statistic("f", {0: 5, 1: 3, 2: 9}, linf=1, fixed_keys=True),
               c=harness.Statistic("c", {0: 5, 1: 3, 2: 9}, l1=2, top=2, fixed_keys=True))  # fmt: skip
    b = _exact(f=harness.Statistic("f", {0: 4, 1: 1, 2: 8}, linf=1, fixed_keys=True),
               c=harness.Statistic("c", {0: 4, 1: 1, 2: 8}, l1=2, top=2, fixed_keys=True))  # fmt: skip
    found = {(v.statistic, v.what): (v.observed, v.declared) for v in harness.compare(a, b)}
    assert found == {("f", "L∞ change"): (2, 1), ("c", "L1 change"): (3, 2)}


def test_ladder_checks():
    """A count moving more than the smaller local sensitivity, and a ladder that is not one."""
    a = _exact(t=harness.Statistic("t", {(): 45}, l1=32, fixed_keys=True, ladder=((10, 11, 12), 32, 10)))
    b = _exact(t=harness.Statistic("t", {(): 57}, l1=32, fixed_keys=True, ladder=((12, 12, 13), 32, 10)))
    found = {(v.statistic, v.what.split(":")[0]) for v in harness.compare(a, b)}
    assert ("t", "L1 change") in found  # 12 > min(I_0) = 10
    assert ("t ladder D′ -> D", "I_0 > I_1 of the neighbour") in found  # I_0(g′) = 12 > I_1(g) = 11
    ok = _exact(t=harness.Statistic("t", {(): 55}, l1=32, fixed_keys=True, ladder=((10, 11, 12), 32, 10)))
    assert harness.compare(a, ok) == []


@pytest.mark.parametrize("subjects, eps, families", [(50, 2, ("upper", "leaves", "refined")),
                                                     (1000, 40, ("upper", "middle", "leaves", "refined"))])
def test_a_synopsis_family_moves_by_max_rows_and_a_halved_bound_is_caught(make_db, subjects, eps, families):
    """A PrivTree synopsis measures three or four families of disjoint boxes of its tree (the middle
    cut when n'·ε/(x·160) boxes are at least 16 times the upper cut's: 2,000 points kept, 2,000·40/320
    = 250 at ε = 40); removing a subject (40 rows, max_rows = 2: two points kept) moves each
    family's counts by exactly 2 in all."""
    d = make_db(f"CREATE TABLE pts AS SELECT i % {subjects} AS uid, (i * 37 % 100) * 1.0 AS x, "
                f"(i * 11 % 97) * 1.0 AS y FROM range({40 * subjects}) r(i)",
                protect={"pts": {"unit": "uid", "max_rows": 2, "bounds": {"x": (0, 100), "y": (0, 100)},
                                 "public_roster": True}},
                analysts={harness.ANALYST: {"epsilon": 1000.0}})  # fmt: skip
    n = harness.mutate(harness.copy_db(d, d.with_name("without_7.duckdb")), "DELETE FROM pts WHERE uid = 7")
    sql = f"CREATE SYNTHETIC TABLE s FROM pts USING privtree WITH (epsilon = {eps}, columns = 'x, y')"
    with harness.gateways(d, n) as (gd, gn):
        before, after = harness.check_statement(gd, gn, sql)
        assert {k for k in before.stats if k.endswith(" counts")} == {f"{f} counts" for f in families}
        for name in families:
            a, b = before.stats[f"{name} counts"], after.stats[f"{name} counts"]
            moved = sum(abs(a.values[k] - b.values[k]) for k in a.values)
            assert moved == 2 == a.l1 and len(a.values) > (1 if name == "upper" else 16), name
        with pytest.raises(harness.NeighbourViolation) as info:
            harness.check_statement(gd, gn, sql, scale=0.5)
        assert {f"{f} counts" for f in families} <= {v.statistic for v in info.value.violations}
