"""The gateway releases an answer only if its mechanisms ran at exactly the ε (and δ) it debited.

Each query class's answer reports what its mechanisms were given where they draw noise (or what
their release objects say they spent); ``release.check_consumed`` compares it, per part of the
personalization plan, with the debit. These tests run real statements in process and look at
what the check saw, then break the report (a mechanism run at another ε, no report at all) and
see the answer withheld with DP501 while the debit stands.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

import dpgate
from dpgate import errors, gateway, release
from dpgate.catalog.owner import Owner
from dpgate.catalog.tables import SCHEMA
from dpgate.mechanisms import keyselection, laplace
from dpgate.queries import counting

from conftest import TEST_SEED

ADULT = Path(__file__).resolve().parents[1] / "examples" / "data" / "adult.parquet"


@pytest.fixture
def checked(monkeypatch):
    """Every (answer, plan, debit) the gateway's check saw, after it passed."""
    seen = []

    def spy(answer, plan, debit):
        release.check_consumed(answer, plan, debit)
        seen.append((answer, plan, debit))

    monkeypatch.setattr(gateway, "check_consumed", spy)
    return seen


def _per_part(answer) -> dict[int, tuple[float, float]]:
    parts: dict[int, list] = {}
    for s in answer.consumed:
        parts.setdefault(s.part, []).append(s)
    return {p: (math.fsum(s.epsilon for s in v), math.fsum(s.delta for s in v)) for p, v in parts.items()}


def _assert_balanced(seen, n_parts: int | None = None) -> None:
    (answer, plan, debit) = seen[-1]
    assert answer.consumed, "the answer reports the runs of its mechanisms"
    ran = _per_part(answer)
    debited = {p.index: float(p.epsilon) for p in debit.subjects.parts}
    assert set(ran) == set(debited)
    for part, (eps, delta) in ran.items():
        assert math.isclose(eps, debited[part], rel_tol=1e-9), (part, answer.consumed)
        assert math.isclose(delta, plan.delta, rel_tol=1e-9), (part, answer.consumed)
    if n_parts is not None:
        assert len(debited) == n_parts


@pytest.fixture
def budgets_db(make_db):
    """Subjects with five different lifetime budgets: the personalization rules make several parts."""
    return make_db(
        "CREATE TABLE t (uid INTEGER, x INTEGER, v INTEGER, k VARCHAR, w VARCHAR); "
        "INSERT INTO t SELECT i, i % 2, i % 50, 'k' || (i % 3), 'w' || (i % 4) FROM range(1, 801) r(i);"
        "CREATE TABLE b (uid INTEGER, epsilon DOUBLE); "
        "INSERT INTO b SELECT i, [0.05, 0.2, 0.5, 1.0, 3.0][1 + i % 5] FROM range(1, 801) r(i)",
        {"t": {"unit": "uid", "budget_table": "b", "domains": {"x": [0, 1], "k": ["k0", "k1", "k2"]},
               "bounds": {"v": (0, 49)}}},
        analysts={"alice": {"epsilon": 1000.0, "delta": 1e-3}},
    )  # fmt: skip


# -- (a) every class reports what was debited ------------------------------------------------------
@pytest.mark.parametrize("rule, parts", [("threshold", 1), ("minimum", 1), ("sample", None), ("partition", None),
                                         ("t_round", None)])  # fmt: skip
def test_counting_under_each_personalization_rule(budgets_db, checked, rule, parts):
    with dpgate.connect(str(budgets_db), analyst="alice", test_seed=TEST_SEED) as con:
        con.execute(f"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.3, personalization = '{rule}', "
                    "min_partition_size = 20) x, COUNT(*) AS n, SUM(v) AS s, AVG(v) AS a FROM t GROUP BY x").fetchall()  # fmt: skip
    _assert_balanced(checked, parts)
    if rule in ("partition", "t_round"):
        assert len(checked[-1][2].subjects.parts) > 1  # the per-part check is exercised


def test_counting_with_key_selection_and_a_quantile(budgets_db, checked):
    with dpgate.connect(str(budgets_db), analyst="alice", test_seed=TEST_SEED) as con:
        con.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.4, delta = 1e-6) "
                    "w, COUNT(*) AS n FROM t GROUP BY w").fetchall()  # fmt: skip
        answer, plan, _ = checked[-1]
        assert plan.delta > 0 and any(s.what == "key selection" for s in answer.consumed)
        _assert_balanced(checked, 1)
        con.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.4) x, MEDIAN(v) AS m, "
                    "VARIANCE(v) AS var FROM t GROUP BY x").fetchall()  # fmt: skip
        assert any(s.what.startswith("quantile") for s in checked[-1][0].consumed)
        _assert_balanced(checked, 1)


@pytest.mark.parametrize("query", [
    "k, COUNT(*) AS n FROM t GROUP BY k ORDER BY n DESC LIMIT 2",
    "k, x, COUNT(*) AS n FROM t GROUP BY k, x ORDER BY n DESC LIMIT 3",
])  # fmt: skip
def test_top_k(budgets_db, checked, query):
    with dpgate.connect(str(budgets_db), analyst="alice", test_seed=TEST_SEED) as con:
        con.execute(f"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5, personalization = 'minimum') {query}")
    assert checked[-1][1].query_class == "top_k"
    assert any(s.what.startswith("top-k") for s in checked[-1][0].consumed)
    _assert_balanced(checked, 1)


def test_subgraph_counts(make_db, checked):
    edges = ", ".join(f"({i}, {j})" for i in range(12) for j in range(i + 1, 12) if (i * j) % 3 != 1)
    path = make_db(f"CREATE TABLE g (src INTEGER, dst INTEGER); INSERT INTO g VALUES {edges};")
    with Owner(path) as owner:
        owner.protect_graph("g", src="src", dst="dst", nodes=12, epsilon=100.0)
    with dpgate.connect(str(path), analyst="alice", test_seed=TEST_SEED) as con:
        con.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) "
                    "TRIANGLE_COUNT(src, dst) AS t, KSTAR_COUNT(src, dst, 2) AS s FROM g").fetchall()  # fmt: skip
    answer = checked[-1][0]
    assert checked[-1][1].query_class == "subgraph" and len(answer.consumed) == 4  # count and error bar, twice
    _assert_balanced(checked, 1)


@pytest.mark.parametrize("using, opts", [
    ("privbayes", "columns = 'sex, income, race'"),
    ("mst", "columns = 'sex, income, race'"),
    ("independent", "columns = 'sex, income'"),
])  # fmt: skip
def test_tabular_synthetic_releases(demo_db, checked, using, opts):
    with dpgate.connect(str(demo_db), analyst="demo", test_seed=TEST_SEED) as con:
        con.execute(f"CREATE SYNTHETIC TABLE syn FROM adult USING {using} WITH (epsilon = 0.5, {opts}, rows = 50)")
    answer, plan, _ = checked[-1]
    assert plan.query_class == "synthetic" and answer.consumed
    _assert_balanced(checked, 1)


@pytest.mark.parametrize("statement", [
    "CREATE SYNTHETIC TABLE tree FROM cities USING privtree WITH (epsilon = 0.5, columns = 'lon, lat')",
    "CREATE SYNTHETIC TABLE seqs FROM careers USING privtree_markov WITH (epsilon = 0.5)",
    "CREATE SYNTHETIC TABLE sets FROM baskets USING diffpart WITH (epsilon = 0.5, item = 'item', fanout = 6)",
])  # fmt: skip
def test_other_synthesizers(demo_db, checked, statement):
    with dpgate.connect(str(demo_db), analyst="demo", test_seed=TEST_SEED) as con:
        con.execute(statement)
    _assert_balanced(checked, 1)


def test_supermodular_with_its_noisy_row_count_and_delta(make_db, checked):
    path = make_db(
        f"CREATE TABLE adult AS SELECT * FROM read_parquet('{ADULT}')",
        protect={"adult": {
            "unit": "person_id", "epsilon": 10.0, "subject_delta": 0.5, "experimental": True,
            "domains": {"sex": ["Female", "Male"], "income": ["<=50K", ">50K"]}, "bounds": {"age": (17, 90)},
            "hierarchies": {"age": {"widths": [5, 10, 20]}, "sex": ["Female", "Male"]},
        }},
        analysts={"alice": {"epsilon": 100.0, "delta": 1.0, "delta_per_query": 0.5}},
    )  # fmt: skip
    with dpgate.connect(str(path), analyst="alice", test_seed=TEST_SEED) as con:
        con.execute("CREATE SYNTHETIC TABLE gen FROM adult USING supermodular WITH (epsilon = 1, delta = 0.05, "
                    "columns = 'age, sex, income')")  # fmt: skip
    answer, plan, _ = checked[-1]
    assert plan.delta == 0.05 and any(s.what == "noisy row count" for s in answer.consumed)
    _assert_balanced(checked, 1)


# -- (b) a mechanism run at another ε is withheld; (c) so is a missing report ----------------------
def _withheld(db, analyst: str, sql: str) -> None:
    with dpgate.connect(str(db), analyst=analyst) as con:
        before = con.budget()[0]
        entries = con.gateway.con.execute(f"SELECT count(*) FROM {SCHEMA}.ledger").fetchone()[0]
        released = con.gateway.con.execute(f"SELECT count(*) FROM {SCHEMA}.releases").fetchone()[0]
        with pytest.raises(errors.InternalError) as e:
            con.execute(sql)
        assert e.value.code == "DP501" and "withheld" in e.value.message and "debit stands" in e.value.hint
        assert con.budget()[0] == pytest.approx(before - 0.3)  # the debit stands
        assert con.gateway.con.execute(f"SELECT count(*) FROM {SCHEMA}.ledger").fetchone()[0] == entries + 1
        assert con.gateway.con.execute(f"SELECT count(*) FROM {SCHEMA}.releases").fetchone()[0] == released


COUNT = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.3{opts}) x, COUNT(*) AS n, SUM(v) AS s FROM t GROUP BY x"


@pytest.mark.parametrize("opts", ["", ", personalization = 'partition', min_partition_size = 20"])
def test_a_noise_draw_at_another_epsilon_is_withheld(budgets_db, monkeypatch, opts):
    real = laplace._parts

    def wrong_first_part(plan, subjects):  # the first part's noise drawn at 1.5 times its ε
        parts = real(plan, subjects)
        parts.epsilons[0] *= 1.5
        return parts

    monkeypatch.setattr(laplace, "_parts", wrong_first_part)
    _withheld(budgets_db, "alice", COUNT.format(opts=opts))


def test_a_share_counted_twice_is_withheld(budgets_db, monkeypatch):
    real = keyselection.spend
    monkeypatch.setattr(keyselection, "spend", lambda *a, **k: (real(*a, **k), real(*a, **k)))
    _withheld(budgets_db, "alice", "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.3, delta = 1e-6) "
                                   "w, COUNT(*) AS n FROM t GROUP BY w")  # fmt: skip


def test_a_missing_report_is_withheld(budgets_db, monkeypatch):
    real = counting.CountingQuery.answer

    def forgetful(self, run):
        out = real(self, run)
        out.consumed = None  # a class that does not say what it ran at
        return out

    monkeypatch.setattr(counting.CountingQuery, "answer", forgetful)
    _withheld(budgets_db, "alice", COUNT.format(opts=""))


def test_the_check_itself():
    """Sums per part, relative tolerance 1e-9: rounding of shares passes, a part short or extra does not."""
    from dataclasses import dataclass
    from decimal import Decimal

    from dpgate.mechanisms.base import Spent
    from dpgate.mechanisms.pdp import Part

    @dataclass
    class _Debit:
        subjects: object
        epsilon: float = 0.0

    @dataclass
    class _Subjects:
        parts: tuple

    class _Plan:
        query_class, delta = "count", 0.0

    def answer(*spent):
        return release.Answer([], [], [], [], consumed=tuple(spent))

    parts = (Part(0, 0, Decimal("0.1"), Decimal("0.1"), 5, Decimal("0.1")),
             Part(1, 0, Decimal("0.3"), Decimal("0.3"), 5, Decimal("0.3")))  # fmt: skip
    debit = _Debit(_Subjects(parts))
    third = 0.1 / 3
    release.check_consumed(answer(Spent(0, third), Spent(0, third), Spent(0, 0.1 - 2 * third), Spent(1, 0.3)),
                           _Plan(), debit)  # fmt: skip
    bad = [
        answer(Spent(0, 0.1)),  # part 1 never ran
        answer(Spent(0, 0.1), Spent(1, 0.3), Spent(2, 0.1)),  # a part nobody was charged for
        answer(Spent(0, 0.1 * (1 + 1e-8)), Spent(1, 0.3)),  # beyond the tolerance
        answer(Spent(0, 0.1, 1e-9), Spent(1, 0.3)),  # δ nobody paid
        release.Answer([], [], [], []),  # no report
    ]
    for a in bad:
        with pytest.raises(errors.InternalError) as e:
            release.check_consumed(a, _Plan(), debit)
        assert e.value.code == "DP501"
    release.check_consumed(answer(Spent(0, 1.0)), _Plan(), _Debit(None, 1.0))  # no personalization plan: one part
