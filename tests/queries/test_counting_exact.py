"""Contribution bounding and the exact bounded statistics (DESIGN.md 1.7).

The privacy of every counting mechanism rests on one claim checked here: on neighbouring
databases (all rows of one subject added or removed), the exact bounded statistics differ
by at most the sensitivity the plan declares, for every salt of the row sampling.
"""

from __future__ import annotations

import math

import duckdb
import numpy as np
import pytest

import dpgate
from dpgate import errors
from dpgate.backends import duckdb as execute
from dpgate.frontend.classify import classify
from dpgate.frontend.dialect import parse_one

ROWS_SQL = """
CREATE TABLE visits (uid INTEGER, kind VARCHAR, amount DOUBLE, code VARCHAR);
INSERT INTO visits
SELECT u, ['a', 'b', 'c', 'd'][1 + ((u * 7 + r) % 4)], ((u * 13 + r * 5) % 150) - 20, CAST(r AS VARCHAR)
FROM range(1, 41) s(u), range(0, 12) t(r)
WHERE r < 1 + (u % 9);
"""


def protect(**kw):
    # The per-query sample: these tests vary its salt (the stored order's tests: test_sample_order.py).
    spec = dict(unit="uid", max_rows=3, max_groups=2, epsilon=1000.0, domains={"kind": ["a", "b", "c", "d"]},
                bounds={"amount": (0, 100)}, sample_order="per_query")  # fmt: skip
    spec.update(kw)
    return {"visits": spec}


def exact_many(db, sql, salts):
    """Plan once, then compute the exact bounded answer (no noise) for each salt."""
    with dpgate.connect(str(db), analyst="alice") as con:
        g = con.gateway
        cat = g.catalog()
        plan = g.plan(classify(parse_one(sql), cat), cat)
        debit = g.ledger.reserve(g._cost(plan, sql, True))
        try:
            return plan, [execute.run(g._con, plan, debit.charged, s) for s in salts], debit
        finally:
            g.ledger.discard(debit)


def exact(db, sql, salt):
    plan, answers, _ = exact_many(db, sql, [salt])
    return plan, answers[0]


def first(answer, key):
    """A component's cells (partition 0: these queries run without personalization partitions)."""
    return answer.components[key][0]


def per_subject_rows(db):
    con = duckdb.connect(str(db), read_only=True)
    try:
        return dict(con.execute("SELECT uid, count(*) FROM visits GROUP BY uid").fetchall())
    finally:
        con.close()


def test_rows_are_bounded_per_subject(make_db):
    db = make_db(ROWS_SQL, protect())
    n = per_subject_rows(db)
    for ans in exact_many(db, "SELECT COUNT(*) FROM visits", (1, 2, 3))[1]:
        assert first(ans, (0, "count"))[0] == sum(min(v, 3) for v in n.values())
        assert ans.heavy_subjects == sum(v > 3 for v in n.values())


def test_no_bounding_work_when_no_subject_exceeds(make_db):
    db = make_db(ROWS_SQL, protect(max_rows=50))
    _, ans = exact(db, "SELECT COUNT(*) FROM visits", 5)
    assert ans.heavy_subjects == 0 and ans.unused_units == 0
    assert first(ans, (0, "count"))[0] == sum(per_subject_rows(db).values())


def test_values_are_clamped(make_db):
    db = make_db("CREATE TABLE t (uid INT, x DOUBLE); INSERT INTO t VALUES (1, -50), (2, 500), (3, 7.25), (4, NULL)",
                 {"t": dict(unit="uid", epsilon=10.0, bounds={"x": (0, 10)})})  # fmt: skip
    plan, ans = exact(db, "SELECT SUM(x), AVG(x), COUNT(x) FROM t", 1)
    s = plan.aggs[0]
    assert float(first(ans, (0, "sum"))[0]) * s.grid == pytest.approx(0 + 10 + 7.25)
    assert first(ans, (2, "count"))[0] == 3


def test_integer_sums_are_exact(make_db):
    db = make_db("CREATE TABLE t (uid INT, x BIGINT); INSERT INTO t SELECT i, i * 1000 FROM range(1, 101) r(i)",
                 {"t": dict(unit="uid", epsilon=10.0, bounds={"x": (0, 1_000_000)})})  # fmt: skip
    plan, ans = exact(db, "SELECT SUM(x) FROM t", 1)
    assert plan.aggs[0].grid == 1.0 and plan.aggs[0].integer
    assert first(ans, (0, "sum"))[0] == sum(i * 1000 for i in range(1, 101))


@pytest.mark.statistical
@pytest.mark.parametrize("salt_base", [0, 2**61])
def test_row_sampling_is_uniform(make_db, salt_base):
    """Ten distinct rows of each of three subjects, keep three: each row kept with probability 0.3."""
    db = make_db(
        "CREATE TABLE t (uid INT, k INT); INSERT INTO t SELECT u, i FROM range(3) s(u), range(10) r(i)",
        {"t": dict(unit="uid", max_rows=3, epsilon=1e6, bounds={"k": (0, 9)}, sample_order="per_query")},
        analysts={"alice": {"epsilon": 1e9, "delta": 1e-3}},
    )
    counts = np.zeros(10)
    trials = 300
    for ans in exact_many(db, "SELECT k, COUNT(*) FROM t GROUP BY k", range(salt_base, salt_base + trials))[1]:
        counts += np.array(list(first(ans, (0, "count"))), dtype=float)
    n, p = 3 * trials, 0.3
    sd = math.sqrt(n * p * (1 - p))
    assert counts.sum() == 9 * trials
    assert np.all(np.abs(counts - n * p) <= 5 * sd), counts / n


@pytest.mark.statistical
def test_identical_rows_are_sampled_as_rows(make_db):
    """Four identical rows in group a, one in b, keep two: b is kept with probability 1 - C(4,2)/C(5,2) = 0.4."""
    db = make_db(
        "CREATE TABLE t (uid INT, k VARCHAR); INSERT INTO t VALUES (1,'a'),(1,'a'),(1,'a'),(1,'a'),(1,'b')",
        {"t": dict(unit="uid", max_rows=2, epsilon=1e6, domains={"k": ["a", "b"]}, sample_order="per_query")},
        analysts={"alice": {"epsilon": 1e9, "delta": 1e-3}},
    )
    trials = 300
    answers = exact_many(db, "SELECT k, COUNT(*) FROM t GROUP BY k", range(trials))[1]
    kept_b = sum(first(ans, (0, "count"))[1] for ans in answers)
    assert abs(kept_b - 0.4 * trials) <= 5 * math.sqrt(trials * 0.4 * 0.6)


def test_groups_are_bounded_for_subject_counts(make_db):
    db = make_db(ROWS_SQL, protect(max_rows=8, max_groups=2))
    plan, answers, _ = exact_many(db, "SELECT kind, COUNT(DISTINCT uid) FROM visits GROUP BY kind", range(5))
    for ans in answers:
        assert plan.bound_groups
        assert plan.aggs[0].components[0].sensitivity == 2
        total = sum(first(ans, (0, "subjects")))
        assert total <= 2 * 40


def test_excluded_subjects_are_not_read(make_db):
    db = make_db(
        "CREATE TABLE t (uid INT, x INT); INSERT INTO t SELECT i, 1 FROM range(1, 11) r(i);"
        "CREATE TABLE b (uid INT, epsilon DOUBLE); INSERT INTO b SELECT i, CASE WHEN i <= 4 THEN 0.1 ELSE 5 END FROM range(1, 9) r(i)",
        {"t": dict(unit="uid", budget_table="b")},
    )
    _, answers, debit = exact_many(db, "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5, personalization = 'threshold') COUNT(*) FROM t", [1])
    # subjects 1..4 have too little budget, 9 and 10 are not on the roster: 4 rows remain
    assert first(answers[0], (0, "count"))[0] == 4
    assert answers[0].unused_units == 0  # the rows of uncharged subjects are never read at all
    assert debit.subjects_charged == 4 and debit.subjects_excluded == 4


def test_row_level_errors_become_nulls(make_db):
    """A CAST that fails on one row must not raise: whether it fails depends on the data."""
    db = make_db("CREATE TABLE t (uid INT, code VARCHAR); INSERT INTO t VALUES (1, '3'), (2, 'x'), (3, '5')",
                 {"t": dict(unit="uid", epsilon=10.0)})  # fmt: skip
    _, ans = exact(db, "SELECT SUM(LEAST(GREATEST(CAST(code AS INTEGER), 0), 10)) FROM t WHERE CAST(code AS INT) >= 0", 1)
    assert first(ans, (0, "sum"))[0] == 8


def test_bind_errors_are_refused_before_charging(make_db):
    db = make_db("CREATE TABLE t (uid INT, x DOUBLE); INSERT INTO t VALUES (1, 0.5)", {"t": dict(unit="uid", epsilon=10.0)})
    with dpgate.connect(str(db), analyst="alice") as con:
        with pytest.raises(errors.ProgrammingError) as info:
            con.cursor().execute("SELECT SUM(LEAST(GREATEST(x + random(), 0), 1)) FROM t")
        assert info.value.code == "DP253"  # random() is not on the allowlist (not a function of the row)
        assert con.budget() == (100.0, 1e-3)


NEIGHBOUR_QUERIES = [
    "SELECT COUNT(*) FROM visits",
    "SELECT kind, COUNT(*) FROM visits GROUP BY kind",
    "SELECT kind, SUM(amount) FROM visits GROUP BY kind",
    "SELECT kind, AVG(amount) FROM visits GROUP BY kind",
    "SELECT kind, COUNT(DISTINCT uid) FROM visits GROUP BY kind",
    "SELECT COUNT(DISTINCT code) FROM visits WHERE amount > 10",
    "SELECT kind, COUNT(amount) FILTER (WHERE amount > 50) FROM visits GROUP BY kind",
]


@pytest.mark.parametrize("sql", NEIGHBOUR_QUERIES)
@pytest.mark.parametrize("removed", [8, 9, 17])
def test_sensitivity_holds_on_neighbours(make_db, sql, removed):
    """Remove every row of one subject: each component's L1 change is at most its sensitivity."""
    d = make_db(ROWS_SQL, protect())
    d_minus = make_db(ROWS_SQL + f"DELETE FROM visits WHERE uid = {removed};", protect())
    plan, answers_d, _ = exact_many(d, sql, range(12))
    _, answers_minus, _ = exact_many(d_minus, sql, range(12))
    for a, b in zip(answers_d, answers_minus):
        for agg in plan.aggs:
            for comp in agg.components:
                x = np.array(list(first(a, (agg.index, comp.label))), dtype=object)
                y = np.array(list(first(b, (agg.index, comp.label))), dtype=object)
                if agg.kind == "avg" and comp.label == "centered sum":
                    mid = (round(agg.lower / agg.grid) + round(agg.upper / agg.grid)) // 2
                    x = x - first(a, (agg.index, "count")) * mid
                    y = y - first(b, (agg.index, "count")) * mid
                l1 = sum(abs(int(u) - int(v)) for u, v in zip(x, y))
                assert l1 <= comp.sensitivity, (sql, comp.label, l1, comp.sensitivity)


def test_cells_are_aligned_with_their_domain_values(make_db):
    """Domains with NULL anywhere, NaN keys and integers beyond 2^53 land in their own cells."""
    db = make_db(
        "CREATE TABLE t (uid INT, g VARCHAR, big BIGINT); INSERT INTO t VALUES "
        "(1, 'b', 9007199254740993), (2, NULL, 9007199254740993), (3, 'a', 9007199254740992), (4, 'b', 9007199254740992), (5, 'b', 1)",
        {"t": dict(unit="uid", max_rows=1, epsilon=10.0, domains={"g": [None, "a", "b", "c"],
                                                                  "big": [9007199254740992, 9007199254740993, 1]})},  # fmt: skip
    )
    _, ans = exact(db, "SELECT g, COUNT(*) FROM t GROUP BY g", 1)
    assert list(first(ans, (0, "count"))) == [1, 1, 3, 0]
    _, ans = exact(db, "SELECT big, COUNT(*) FROM t GROUP BY big", 1)
    assert list(first(ans, (0, "count"))) == [2, 2, 1]
    _, ans = exact(db, "SELECT CASE WHEN uid > 2 THEN 'nan'::DOUBLE ELSE 1.0 END AS k, COUNT(*) FROM t GROUP BY k", 1)
    assert sorted(first(ans, (0, "count"))) == [2, 3]


def test_null_is_a_group_for_the_group_bound(make_db):
    """A subject in groups {NULL, 'a'} with max_groups = 1 must be sampled down to one group."""
    db = make_db(
        "CREATE TABLE t (uid INT, g VARCHAR); INSERT INTO t VALUES (1, NULL), (1, 'a'), (2, 'b'), (3, 'b')",
        {"t": dict(unit="uid", max_rows=5, max_groups=1, epsilon=10.0, domains={"g": ["a", "b", None]})},
    )
    plan, answers, _ = exact_many(db, "SELECT g, COUNT(DISTINCT uid) FROM t GROUP BY g", range(10))
    assert plan.bound_groups
    for ans in answers:
        counts = list(first(ans, (0, "subjects")))
        assert counts[1] == 2 and counts[0] + counts[2] == 1


def test_mixed_group_by_returns_the_public_keys_values(make_db):
    """A public-domain key next to a key-selection key comes back as its value, not its position."""
    db = make_db(
        "CREATE TABLE t AS SELECT i AS uid, CASE WHEN i % 2 = 0 THEN 'even' ELSE 'odd' END AS g, i % 3 AS k "
        "FROM range(3000) r(i)",
        {"t": dict(unit="uid", domains={"g": ["even", "odd"]}, epsilon=100.0)},
    )
    with dpgate.connect(str(db), analyst="alice", test_seed=1) as con:
        cur = con.cursor()
        cur.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 5, delta = 1e-6) g, k, COUNT(*) FROM t "
                    "GROUP BY g, k ORDER BY g, k")  # fmt: skip
        rows = cur.fetchall()
    assert [(g, k) for g, k, _ in rows] == [(g, k) for g in ("even", "odd") for k in range(3)]
