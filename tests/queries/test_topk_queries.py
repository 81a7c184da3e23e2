"""Top-k queries through SQL: routing, near misses, errors, universes, personalization, EXPLAIN.

The mechanisms' exact privacy tests are in ``tests/mechanisms/test_topk.py``; here the
gateway's part: which SQL goes to top-k, what it charges, which subjects it reads.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import dpgate
from dpgate import errors, noise
from dpgate.mechanisms import topk
from dpgate.frontend.settings import DEFAULTS, TOPK_METHODS

from conftest import TEST_SEED, fetch

# Item j is held by 10 * (12 - j) subjects: frequencies 120, 110, ..., 10, well separated.
SETUP = """
CREATE TABLE b AS
SELECT u AS uid, 'item' || lpad(CAST(j AS VARCHAR), 2, '0') AS item
FROM range(120) t(u), range(12) s(j) WHERE u < 10 * (12 - j);
CREATE TABLE w AS
SELECT u AS uid, (u % 2 = 0) AS a, (u % 3 = 0) AS b, CAST(u % 5 = 0 AS INTEGER) AS c, u % 7 = 0 AS d, 'x' AS label
FROM range(420) t(u);
"""
ITEMS = [f"item{j:02d}" for j in range(12)]
ANALYST = {"alice": {"epsilon": 1e6, "delta": 1e-3, "epsilon_per_query": 1e5}}


@pytest.fixture
def db(make_db):
    return make_db(
        SETUP,
        protect={
            "b": {"unit": "uid", "max_rows": 12, "max_groups": 12, "epsilon": 1e6, "domains": {"item": ITEMS}},
            "w": {"unit": "uid", "max_rows": 1, "max_groups": 4, "epsilon": 1e6},
        },
        analysts=ANALYST,
    )


@pytest.fixture
def alice(db):
    c = dpgate.connect(str(db), analyst="alice", test_seed=TEST_SEED)
    yield c
    c.close()


def q(opts: str, body: str) -> str:
    return f"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS ({opts}) {body}"


def test_settings_list_the_mechanisms_methods():
    assert set(TOPK_METHODS) == {*topk.METHODS, topk.AUTO}
    assert DEFAULTS["topk_method"] == topk.DEFAULT_METHOD == topk.AUTO


# -- routing -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "body",
    [
        "item, COUNT(*) AS n FROM b GROUP BY item ORDER BY n DESC LIMIT 3",
        "item, COUNT(*) AS n FROM b GROUP BY item ORDER BY COUNT(*) DESC LIMIT 3",
        "item, COUNT(*) AS n FROM b GROUP BY item ORDER BY 2 DESC LIMIT 3",
        "item, COUNT(DISTINCT uid) AS n FROM b GROUP BY item ORDER BY n DESC LIMIT 3",
        "item, COUNT(*) AS n FROM b WHERE item <> 'item05' GROUP BY item ORDER BY n DESC, item LIMIT 3",
    ],
)
def test_top_k_shapes_go_to_the_top_k_class(alice, body):
    rows, cur = fetch(alice, q("epsilon = 1", body))
    assert cur.release.query_class == "top_k"
    # the default from public facts: k = 3, selection ε = 1/2, 12 items, max_rows 12 <= 4 k
    assert cur.release.mechanism == f"top_k/{topk.default_method(3, 0.5, 12, 12)}" == "top_k/laplace"
    assert [d[0] for d in cur.description] == ["item", "n"]
    assert len(rows) == 3
    counts = [r[1] for r in rows]
    assert counts == sorted(counts, reverse=True), "ORDER BY n DESC is applied to the released counts"
    assert "n" in cur.release.columns and len(cur.release.intervals) == 3


def test_items_only_when_the_count_is_not_shown(alice):
    rows, cur = fetch(alice, q("epsilon = 50", "item FROM b GROUP BY item ORDER BY COUNT(*) DESC LIMIT 4"))
    assert cur.release.query_class == "top_k"
    assert [r[0] for r in rows] == ITEMS[:4], "in the selection's order"
    assert cur.release.columns == {} and cur.release.intervals == [{}] * 4
    assert any("only which items win" in n for n in cur.release.notes)


@pytest.mark.parametrize(
    "body, rows",
    [
        ("item, COUNT(*) AS n FROM b GROUP BY item ORDER BY item LIMIT 3", 3),  # another ORDER BY
        ("item, COUNT(*) AS n FROM b GROUP BY item ORDER BY n DESC", 12),  # no LIMIT
        ("item, COUNT(*) AS n FROM b GROUP BY item ORDER BY n ASC LIMIT 3", 3),  # bottom-k
        ("item, COUNT(*) AS n FROM b GROUP BY item HAVING COUNT(*) > 0 ORDER BY n DESC LIMIT 3", 3),
        ("item, COUNT(*) AS n, COUNT(DISTINCT uid) AS s FROM b GROUP BY item ORDER BY n DESC LIMIT 3", 3),
        ("item, COUNT(*) FILTER (WHERE uid > 3) AS n FROM b GROUP BY item ORDER BY n DESC LIMIT 3", 3),
    ],
)
def test_near_misses_are_counting_queries(alice, body, rows):
    """Every cell gets a noisy count; ORDER BY / LIMIT / HAVING are post-processing."""
    got, cur = fetch(alice, q("epsilon = 1", body))
    assert cur.release.query_class == "count"
    assert len(got) <= rows


def test_offset_selects_the_top_limit_plus_offset_and_drops_the_first(alice):
    rows, cur = fetch(alice, q("epsilon = 200", "item, COUNT(*) AS n FROM b GROUP BY item ORDER BY n DESC LIMIT 3 OFFSET 2"))
    assert cur.release.query_class == "top_k"
    assert [r[0] for r in rows] == ITEMS[2:5]
    (plan_rows, _) = fetch(alice, "EXPLAIN PRIVACY " + q("epsilon = 1", "item, COUNT(*) AS n FROM b GROUP BY item ORDER BY n DESC LIMIT 3 OFFSET 2"))
    assert any(r[0] == "top 5" for r in plan_rows)


@pytest.mark.parametrize("method", TOPK_METHODS)
def test_every_method_finds_the_true_top_k_at_large_epsilon(alice, method):
    rows, cur = fetch(alice, q(f"epsilon = 1000, topk_method = '{method}'",
                               "item, COUNT(*) AS n FROM b GROUP BY item ORDER BY n DESC LIMIT 5"))  # fmt: skip
    assert cur.release.mechanism == f"top_k/{method if method != topk.AUTO else topk.default_method(5, 500, 12, 12)}"
    assert [r[0] for r in rows] == ITEMS[:5]
    truth = [10 * (12 - j) for j in range(5)]
    comp = 1000 / 2
    w = noise.discrete_laplace_half_width(comp, 5, 0.05)
    for (_, n), t in zip(rows, truth):
        assert abs(n - t) <= 3 * max(w, 1)


def test_counts_are_noisy_subject_counts_with_their_interval(alice):
    """At ε = 1 the counts' noise has the scale EXPLAIN announces; intervals cover ~95% of the time."""
    hits = total = 0
    for _ in range(20):
        rows, cur = fetch(alice, q("epsilon = 1, intervals = true", "item, COUNT(*) AS n FROM b GROUP BY item ORDER BY n DESC LIMIT 3"))
        for item, n, lo, hi in rows:
            true = 10 * (12 - ITEMS.index(item))
            total += 1
            hits += lo <= true <= hi
            assert hi - lo == 2 * noise.discrete_laplace_half_width(0.5, 3, 0.05)
    # 60 intervals at 95%: fewer than 50 covering has probability < 1e-3.
    assert hits >= 50, (hits, total)


def test_k_larger_than_the_universe_is_refused_and_charges_nothing(alice):
    before = alice.budget()
    with pytest.raises(errors.UnsupportedQueryError) as e:
        fetch(alice, q("epsilon = 1", "item, COUNT(*) AS n FROM b GROUP BY item ORDER BY n DESC LIMIT 10 OFFSET 3"))
    assert e.value.code == "DP277" and "13" in e.value.message and "12" in e.value.message
    with pytest.raises(errors.UnsupportedQueryError):
        fetch(alice, q("epsilon = 1", "* FROM dp_top_k_columns('w', k => 5)"))
    assert alice.budget() == before


@pytest.mark.parametrize(
    "opts, body, code",
    [
        ("epsilon = 1, topk_method = 'tps_pfm'", "COUNT(*) FROM b", "DP272"),
        ("epsilon = 1, topk_method = 'gumbel'", "item, COUNT(*) AS n FROM b GROUP BY item ORDER BY n DESC LIMIT 3", "DP205"),
        ("epsilon = 1, personalization = 'partition'", "item, COUNT(*) AS n FROM b GROUP BY item ORDER BY n DESC LIMIT 3", "DP274"),
        ("epsilon = 1", "item, COUNT(*) AS n FROM b GROUP BY item ORDER BY n DESC LIMIT 0", "DP277"),
        ("epsilon = 1", "item, COUNT(*) AS n FROM b GROUP BY item ORDER BY n DESC LIMIT 1 + 2", "DP252"),
        ("epsilon = 1", "* FROM dp_top_k_columns('w')", "DP285"),
        ("epsilon = 1", "* FROM dp_top_k_columns('w', k => 2, colour => true)", "DP285"),
        ("epsilon = 1", "* FROM dp_top_k_columns('nope', k => 2)", "DP225"),
        ("epsilon = 1", "* FROM dp_top_k_columns(w, k => 2)", "DP285"),
        ("epsilon = 1", "column_name, count FROM dp_top_k_columns('w', k => 2)", "DP230"),
    ],
)
def test_refusals_are_specific_and_free(alice, opts, body, code):
    before = alice.budget()
    with pytest.raises(errors.Error) as e:
        fetch(alice, q(opts, body))
    assert e.value.code == code, e.value
    assert e.value.hint
    assert alice.budget() == before


def test_the_ledger_records_the_top_k_class(alice, db):
    fetch(alice, q("epsilon = 0.5, topk_method = 'tps_pfm'", "item, COUNT(*) AS n FROM b GROUP BY item ORDER BY n DESC LIMIT 2"))
    alice.close()
    import duckdb

    with duckdb.connect(str(db)) as raw:
        row = raw.execute("SELECT query_class, mechanism, epsilon FROM dpgate.ledger ORDER BY entry_id DESC LIMIT 1").fetchone()
    assert row[0] == "top_k" and row[1] == "top_k/tps_pfm" and float(row[2]) == 0.5


def test_explain_shows_the_selection_and_the_counts_separately(alice):
    rows, _ = fetch(alice, "EXPLAIN PRIVACY " + q("epsilon = 0.9, topk_method = 'tps_pfm'",
                                                   "item, COUNT(*) AS n FROM b GROUP BY item ORDER BY n DESC LIMIT 4"))  # fmt: skip
    by = {r[0]: r for r in rows}
    assert by["query"][1] == "top_k/tps_pfm" and by["query"][2] == 0.9
    assert by["top 4"][1] == "tps_pfm" and math.isclose(by["top 4"][2], 0.45)
    assert "truncation" in by["top 4"][6] and "phase2" in by["top 4"][6]
    assert by["counts"][4] == "4" and math.isclose(by["counts"][2], 0.45)
    assert "12 item(s)" in by["universe"][6]
    assert alice.budget()[0] == 1e6, "EXPLAIN is free"
    rows, _ = fetch(alice, "EXPLAIN PRIVACY " + q("epsilon = 0.9", "item FROM b GROUP BY item ORDER BY COUNT(*) DESC LIMIT 4"))
    assert "counts" not in {r[0] for r in rows}
    assert {r[0]: r for r in rows}["top 4"][2] == 0.9, "no count shown: the whole ε goes to the selection"


# -- the default method ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "opts, limit, expected",
    [
        ("epsilon = 0.9", 3, "laplace"),  # max_rows 12 <= 4 k
        ("epsilon = 4", 3, "laplace"),
        ("epsilon = 0.9", 2, "oneshot"),  # max_rows 12 > 4 k
        ("epsilon = 0.9, topk_method = 'tps_pfm'", 3, "tps_pfm"),  # named: kept
    ],
)
def test_the_default_method_comes_from_public_facts_only(make_db, opts, limit, expected):
    """The same statement on two databases that differ in one subject (who holds every item)
    gets the same method: the rule reads k, ε, the universe and max_rows, never the rows."""
    body = f"item, COUNT(*) AS n FROM b GROUP BY item ORDER BY n DESC LIMIT {limit}"
    protect = {"b": {"unit": "uid", "max_rows": 12, "max_groups": 12, "epsilon": 1e6, "domains": {"item": ITEMS}}}
    neighbour = SETUP + "INSERT INTO b SELECT 999, 'item' || lpad(CAST(j AS VARCHAR), 2, '0') FROM range(12) s(j);"
    methods = []
    for setup in (SETUP, neighbour):
        with dpgate.connect(str(make_db(setup, protect=protect, analysts=ANALYST)), analyst="alice",
                            test_seed=TEST_SEED) as c:  # fmt: skip
            plan, _ = fetch(c, "EXPLAIN PRIVACY " + q(opts, body))
            _, cur = fetch(c, q(opts, body))
            methods += [{r[0]: r for r in plan}[f"top {limit}"][1], cur.release.mechanism.removeprefix("top_k/")]
    assert methods == [expected] * 4


def test_set_dp_topk_method_auto_restores_the_default(alice):
    body = "item, COUNT(*) AS n FROM b GROUP BY item ORDER BY n DESC LIMIT 3"
    cur = alice.cursor()
    cur.execute("SET dp_topk_method = 'oneshot'")
    assert fetch(alice, q("epsilon = 0.9", body))[1].release.mechanism == "top_k/oneshot"
    cur.execute("SET dp_topk_method = 'auto'")
    assert fetch(alice, q("epsilon = 0.9", body))[1].release.mechanism == "top_k/laplace"


# -- universes -----------------------------------------------------------------------------------
def test_an_undeclared_domain_is_discovered_by_paid_key_selection(make_db):
    db = make_db(SETUP, protect={"b": {"unit": "uid", "max_rows": 12, "max_groups": 12, "epsilon": 1e6}}, analysts=ANALYST)
    with dpgate.connect(str(db), analyst="alice", test_seed=TEST_SEED) as c:
        with pytest.raises(errors.PolicyError) as e:
            fetch(c, q("epsilon = 1, delta = 0", "item, COUNT(*) AS n FROM b GROUP BY item ORDER BY n DESC LIMIT 3"))
        assert e.value.code == "DP214"
        rows, cur = fetch(c, q("epsilon = 300, delta = 1e-6", "item, COUNT(*) AS n FROM b GROUP BY item ORDER BY n DESC LIMIT 3"))
        assert cur.release.query_class == "top_k" and cur.release.delta == 1e-6
        assert [r[0] for r in rows] == ITEMS[:3]
        assert any("key selection released" in n for n in cur.release.notes)


@pytest.mark.parametrize("method, limit", [("oneshot", 10), ("em", 10), ("tps_pfm", 3), ("laplace", 3)])
def test_a_selection_past_its_work_cap_is_refused_before_the_debit(alice, monkeypatch, method, limit):
    """The selection runs after the debit: oneshot and em pass over the universe once per draw,
    the length methods noise every item (10^7 items took 50 s and 7.7 GB). Past the caps (here
    shrunk to the 12 items) the query is refused free; within them it is answered."""
    monkeypatch.setattr(topk, "SELECTION_WORK", 12 * (limit - 1))
    monkeypatch.setattr(topk, "NOISED_ITEMS", 11)
    before = alice.budget()
    sql = q(f"epsilon = 10, topk_method = '{method}'", f"item, COUNT(*) AS n FROM b GROUP BY item ORDER BY n DESC LIMIT {limit}")
    with pytest.raises(errors.UnsupportedQueryError) as e:
        fetch(alice, sql)
    assert e.value.code == "DP266" and "12 items" in e.value.message and alice.budget() == before
    monkeypatch.setattr(topk, "SELECTION_WORK", 12 * limit)
    monkeypatch.setattr(topk, "NOISED_ITEMS", 12)
    rows, _ = fetch(alice, sql)
    assert len(rows) == limit


def test_keys_from_key_selection_are_capped_at_what_a_selection_takes(make_db, monkeypatch):
    """Key selection releases a data-dependent number of keys: beyond the selection's cap a random
    subset of them is ranked (post-processing of the released keys), with a note, never a failure
    after the debit."""
    db = make_db(SETUP, protect={"b": {"unit": "uid", "max_rows": 12, "max_groups": 12, "epsilon": 1e6}}, analysts=ANALYST)
    monkeypatch.setattr(topk, "SELECTION_WORK", 3 * 5)
    with dpgate.connect(str(db), analyst="alice", test_seed=TEST_SEED) as c:
        rows, cur = fetch(c, q("epsilon = 300, delta = 1e-6, topk_method = 'oneshot'",
                               "item, COUNT(*) AS n FROM b GROUP BY item ORDER BY n DESC LIMIT 3"))  # fmt: skip
    assert len(rows) == 3 and set(r[0] for r in rows) <= set(ITEMS)
    assert any("5 of them, drawn at random, were ranked" in n for n in cur.release.notes)


def test_keys_outside_the_declared_domain_are_never_items(make_db):
    db = make_db(
        SETUP + "INSERT INTO b SELECT u, 'secret' FROM range(120) t(u);",
        protect={"b": {"unit": "uid", "max_rows": 13, "max_groups": 13, "epsilon": 1e6, "domains": {"item": ITEMS}}},
        analysts=ANALYST,
    )
    with dpgate.connect(str(db), analyst="alice", test_seed=TEST_SEED) as c:
        rows, _ = fetch(c, q("epsilon = 1000", "item, COUNT(*) AS n FROM b GROUP BY item ORDER BY n DESC LIMIT 12"))
    assert sorted(r[0] for r in rows) == ITEMS


def test_a_public_lookup_table_gives_the_universe(make_db):
    db = make_db(
        SETUP + "CREATE TABLE catalogue AS SELECT 'item' || lpad(CAST(j AS VARCHAR), 2, '0') AS item, j % 3 AS aisle FROM range(12) t(j);",
        protect={"b": {"unit": "uid", "max_rows": 12, "max_groups": 12, "epsilon": 1e6}},
        analysts=ANALYST,
    )
    with dpgate.connect(str(db), analyst="alice", test_seed=TEST_SEED) as c:
        rows, cur = fetch(c, q("epsilon = 1000", "c.aisle, COUNT(*) AS n FROM b JOIN catalogue c ON b.item = c.item "
                                                  "GROUP BY c.aisle ORDER BY n DESC LIMIT 1"))  # fmt: skip
    # Aisle 0 holds items 0, 3, 6, 9: every subject holding item 0 (120) holds one of them.
    assert cur.release.query_class == "top_k" and rows[0][0] == 0


# -- who is read ---------------------------------------------------------------------------------
def test_subjects_without_budget_are_not_read(make_db):
    """Subjects the ledger did not charge (no budget left) never count towards any item."""
    db = make_db(
        SETUP
        + "INSERT INTO b SELECT 1000 + u, 'item11' FROM range(500) t(u);"
        + "CREATE TABLE budgets AS SELECT DISTINCT uid, CASE WHEN uid >= 1000 THEN 0.0 ELSE 1e6 END AS epsilon FROM b;",
        protect={
            "b": {"unit": "uid", "max_rows": 12, "max_groups": 12, "domains": {"item": ITEMS},
                  "budget_table": "budgets", "budget_table_unit": "uid"},
        },  # fmt: skip
        analysts=ANALYST,
    )
    with dpgate.connect(str(db), analyst="alice", test_seed=TEST_SEED) as c:
        rows, cur = fetch(c, q("epsilon = 1000", "item, COUNT(*) AS n FROM b GROUP BY item ORDER BY n DESC LIMIT 1"))
    assert rows[0][0] == "item00", "the 500 exhausted subjects holding item11 were left out"
    assert cur.release.subjects_excluded == 500


def test_minimum_rule_runs_at_the_smallest_allowance(make_db):
    db = make_db(
        SETUP + "CREATE TABLE budgets AS SELECT DISTINCT uid, CASE WHEN uid % 2 = 0 THEN 0.5 ELSE 1e6 END AS epsilon FROM b;",
        protect={
            "b": {"unit": "uid", "max_rows": 12, "max_groups": 12, "domains": {"item": ITEMS},
                  "budget_table": "budgets", "budget_table_unit": "uid"},
        },  # fmt: skip
        analysts=ANALYST,
    )
    with dpgate.connect(str(db), analyst="alice", test_seed=TEST_SEED) as c:
        rows, cur = fetch(c, q("epsilon = 4, personalization = 'minimum'", "item, COUNT(*) AS n FROM b GROUP BY item ORDER BY n DESC LIMIT 2"))
        assert cur.release.epsilon == 0.5
        assert any("run at ε=0.5" in n for n in cur.release.notes)
        # The counts' noise is that of ε = 0.25 (half of 0.5): the interval says so.
        lo, hi = cur.release.intervals[0]["n"]
        assert hi - lo == 2 * noise.discrete_laplace_half_width(0.25, 2, 0.05)


def test_sample_rule_scales_the_counts_to_everyone_with_budget(make_db, tmp_path):
    """Half of item00's 120 holders can afford ε = 0.1 of the 1 asked: they are sampled with
    p = (e^0.1 - 1)/(e - 1) and the count is scaled by population / expected sample. A sampled
    subject spends its whole budget, so each run uses a fresh copy of the database."""
    import shutil

    template = make_db(
        SETUP + "CREATE TABLE budgets AS SELECT DISTINCT uid, CASE WHEN uid % 2 = 0 THEN 0.1 ELSE 1e6 END AS epsilon FROM b;",
        protect={
            "b": {"unit": "uid", "max_rows": 12, "max_groups": 12, "domains": {"item": ITEMS},
                  "budget_table": "budgets", "budget_table_unit": "uid"},
        },  # fmt: skip
        analysts=ANALYST,
    )
    estimates = []
    for i in range(20):
        db = tmp_path / f"copy{i}.duckdb"
        shutil.copy(template, db)
        with dpgate.connect(str(db), analyst="alice", test_seed=TEST_SEED + i) as c:
            rows, cur = fetch(c, q("epsilon = 1, personalization = 'sample'",
                                   "item, COUNT(*) AS n FROM b GROUP BY item ORDER BY n DESC LIMIT 12"))  # fmt: skip
        estimates.append(dict(rows)["item00"])
        assert any("scaled to all subjects" in n for n in cur.release.notes)
    p = math.expm1(0.1) / math.expm1(1.0)
    scale = 120 / (60 + 60 * p)
    sd = scale * math.sqrt(60 * p * (1 - p) + noise.discrete_laplace_std(0.5, 12) ** 2)
    assert abs(np.mean(estimates) - 120) <= 4 * sd / math.sqrt(len(estimates)) + 1


# -- the wide-table form -------------------------------------------------------------------------
def test_dp_top_k_columns_ranks_the_0_1_columns(alice):
    rows, cur = fetch(alice, q("epsilon = 1000", "* FROM dp_top_k_columns('w', k => 3)"))
    assert cur.release.query_class == "top_k"
    assert [d[0] for d in cur.description] == ["rank", "column_name"]
    assert rows == [(1, "a"), (2, "b"), (3, "c")], "label (VARCHAR) is not a 0/1 column"
    rows, cur = fetch(alice, q("epsilon = 1000, intervals = true", "column_name, count, count_ci_low, count_ci_high "
                                                                    "FROM dp_top_k_columns('w', k => 2, counts => true) ORDER BY count"))  # fmt: skip
    assert [r[0] for r in rows] == ["b", "a"]
    assert abs(rows[0][1] - 140) <= 3 and abs(rows[1][1] - 210) <= 3
    assert cur.release.intervals[0]["count"] == (rows[0][2], rows[0][3])
    rows, _ = fetch(alice, q("epsilon = 1000", "upper(column_name) AS c FROM dp_top_k_columns('w', 4) WHERE rank > 2"))
    assert rows == [("C",), ("D",)]


def test_explain_of_dp_top_k_columns(alice):
    rows, _ = fetch(alice, "EXPLAIN PRIVACY " + q("epsilon = 1", "* FROM dp_top_k_columns('w', k => 2, counts => true)"))
    by = {r[0]: r for r in rows}
    assert "4 0/1 column(s) of w" in by["universe"][6]
    assert by["counts"][4] == "2" and by["top 2"][2] == 0.5


def test_distinct_is_skipped_only_for_a_null_safe_unique_key(make_db):
    """UNIQUE (uid, item) lets (u, NULL) repeat: counting those rows would give one subject
    weight 2 on the NULL item, so only a PRIMARY KEY (or NOT NULL columns) skips DISTINCT."""
    from dpgate.frontend.classify import classify
    from dpgate.frontend.dialect import parse_one

    setup = (
        "CREATE TABLE nk (uid INTEGER, item VARCHAR, UNIQUE (uid, item));"
        "INSERT INTO nk SELECT u, NULL FROM range(50) t(u); INSERT INTO nk SELECT u, NULL FROM range(50) t(u);"
        "INSERT INTO nk SELECT u, 'x' FROM range(80) t(u);"
        "CREATE TABLE pk (uid INTEGER, item VARCHAR, PRIMARY KEY (uid, item)); INSERT INTO pk SELECT * FROM nk WHERE item IS NOT NULL;"
    )
    spec = {"unit": "uid", "max_rows": 3, "max_groups": 3, "epsilon": 1e6, "domains": {"item": ["x", "y", None]}}
    db = make_db(setup, protect={"nk": spec, "pk": {**spec, "subjects": "people"}}, analysts=ANALYST)
    with dpgate.connect(str(db), analyst="alice", test_seed=TEST_SEED) as c:
        g = c.gateway
        for table, skip in (("nk", False), ("pk", True)):
            sql = q("epsilon = 1", f"item, COUNT(*) AS n FROM {table} GROUP BY item ORDER BY n DESC LIMIT 1")
            cat = g.catalog()
            assert g.plan(classify(parse_one(sql), cat), cat).distinct_by_schema is skip
        rows, _ = fetch(c, q("epsilon = 2000", "item, COUNT(*) AS n FROM nk GROUP BY item ORDER BY n DESC LIMIT 2"))
    assert rows[0][0] == "x" and abs(rows[0][1] - 80) <= 2
    assert rows[1][0] is None and abs(rows[1][1] - 50) <= 2, "each subject counts once for NULL"


# -- key selection, huge keys, casting joins, count caps -----------------------------------------
def test_key_selection_keeps_max_groups_distinct_keys_per_subject(make_db):
    """DISTINCT before the per-subject cut: repeated rows of one key never crowd out the others."""
    from dpgate.frontend.classify import classify
    from dpgate.frontend.dialect import parse_one
    from dpgate.queries.topk import _key_subjects_sql

    db = make_db(
        "CREATE TABLE b (uid INTEGER, item VARCHAR); INSERT INTO b VALUES (1, 'a'), (1, 'a'), (1, 'a'), (1, 'b'), (1, 'c');",
        protect={"b": {"unit": "uid", "max_rows": 5, "max_groups": 2, "epsilon": 1e6}},
        analysts=ANALYST,
    )
    with dpgate.connect(str(db), analyst="alice") as c:
        g = c.gateway
        cat = g.catalog()
        sql = q("epsilon = 1, delta = 1e-6", "item, COUNT(*) AS n FROM b GROUP BY item ORDER BY n DESC LIMIT 1")
        plan = g.plan(classify(parse_one(sql), cat), cat)
        charged = f"(SELECT unit, 0 AS part FROM {plan.table.roster_table_sql})"
        for salt in range(20):
            rows = g._con.execute(_key_subjects_sql(plan, charged, salt)).fetchall()
            assert len(rows) == 2 and all(n == 1 for _, n in rows), (salt, rows)


def test_huge_integer_keys_never_fail_after_the_debit(make_db):
    big = 2**63
    db = make_db(
        f"CREATE TABLE t (pid INTEGER, item UBIGINT); INSERT INTO t VALUES (1, {big + 5}), (2, {big + 6}), (3, {big + 1});",
        protect={"t": {"unit": "pid", "epsilon": 1e6, "bounds": {"item": (float(big), float(big + 4096))}}},
        analysts=ANALYST,
    )
    with dpgate.connect(str(db), analyst="alice", test_seed=TEST_SEED) as c:
        rows, _ = fetch(c, q("epsilon = 1000", "item, COUNT(*) AS n FROM t GROUP BY item ORDER BY n DESC LIMIT 3"))
    assert sorted(r[0] for r in rows) == [big + 1, big + 5, big + 6]


def test_joins_that_would_cast_row_by_row_are_refused(make_db):
    db = make_db(
        "CREATE TABLE t (pid INTEGER, code HUGEINT); CREATE TABLE l (code DECIMAL(18, 3), name VARCHAR);",
        protect={"t": {"unit": "pid", "epsilon": 1e6}},
        analysts=ANALYST,
    )
    with dpgate.connect(str(db), analyst="alice") as c, pytest.raises(errors.UnsupportedQueryError) as e:
        fetch(c, q("epsilon = 1", "l.name, COUNT(*) FROM t JOIN l ON t.code = l.code GROUP BY l.name"))
    assert e.value.code == "DP215"


def test_top_k_counts_are_not_capped_below_k_unless_the_owner_says_so(make_db):
    """Undeclared max_groups: the counts' cap is min(k, max_rows), so they are unbiased; a
    declared cap below k is kept and the answer says the counts can be low."""
    setup = ("CREATE TABLE b AS SELECT i // 4 AS uid, 'item' || (i % 4) AS item FROM range(4000) r(i); "
             "CREATE TABLE c AS SELECT * FROM b")  # fmt: skip
    db = make_db(setup, protect={"b": {"unit": "uid", "max_rows": 4, "epsilon": 100.0},
                                 "c": {"unit": "uid", "max_rows": 4, "max_groups": 1, "epsilon": 100.0}})  # fmt: skip
    sql = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 4) item, COUNT(*) AS n FROM {t} GROUP BY item ORDER BY n DESC LIMIT 3"
    with dpgate.connect(str(db), analyst="alice", test_seed=3) as con:
        rows, cur = fetch(con, sql.format(t="b"))
        assert all(abs(n - 1000) < 60 for _, n in rows), rows  # every subject holds every item: 1000 each
        assert not any("can be low" in n for n in cur.release.notes)
        rows, cur = fetch(con, sql.format(t="c"))
        assert all(n < 600 for _, n in rows), rows  # one item per subject: the counts are low ...
        assert any("can be low" in n for n in cur.release.notes)  # ... and the answer says so
