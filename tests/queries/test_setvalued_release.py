"""CREATE SYNTHETIC TABLE ... USING diffpart through SQL: release, tables, registry, EXPLAIN, refusals."""

from __future__ import annotations

import numpy as np
import pytest

import dpgate
from dpgate.catalog.owner import Owner

ITEMS = ["bread", "milk", "eggs", "tea", "jam", "rice"]
# 3,000 baskets with a few frequent itemsets, and one basket of every item
SETUP = """
CREATE TABLE baskets (basket INTEGER, item VARCHAR, note VARCHAR);
INSERT INTO baskets SELECT b, unnest(CASE b % 4 WHEN 0 THEN ['bread'] WHEN 1 THEN ['bread', 'milk']
    WHEN 2 THEN ['milk', 'eggs', 'tea'] ELSE ['rice'] END), 'x' FROM range(3000) r(b);
INSERT INTO baskets SELECT 5000, unnest(['bread', 'milk', 'eggs', 'tea', 'jam', 'rice']), 'x';
"""
TRUE = {("bread",): 750, ("bread", "milk"): 750, ("eggs", "milk", "tea"): 750, ("rice",): 750}


@pytest.fixture
def db(make_db):
    return make_db(SETUP, protect={"baskets": {"unit": "basket", "max_rows": 6, "epsilon": 10.0,
                                              "domains": {"item": ITEMS}}})  # fmt: skip


def test_a_release_writes_both_tables_and_its_lineage(db):
    with dpgate.connect(str(db), analyst="alice", test_seed=1) as con:
        cur = con.execute("CREATE SYNTHETIC TABLE b_dp FROM baskets USING diffpart WITH (epsilon = 1, item = 'item', fanout = 3)")
        assert cur.release.epsilon == 1.0 and "itemsets" in cur.message
        rows = con.execute("SELECT items, size, count FROM b_dp_itemsets ORDER BY count DESC").fetchall()
        got = {tuple(sorted(i)): n for i, _, n in rows}
        for itemset, n in TRUE.items():  # frequent itemsets come back within the leaf noise
            assert abs(got.get(itemset, 0) - n) < 60
        long = con.execute("SELECT basket, list_sort(list(item)) FROM b_dp GROUP BY basket").fetchall()
        assert len(long) == sum(n for *_, n in rows)
        assert con.execute("SELECT count(*) FROM b_dp WHERE item = 'bread'").fetchone()[0] > 1300  # free query
        (rel,) = [r for r in con.execute("SHOW RELEASES").fetchall() if r[0] == "b_dp"]
        assert rel[3] == "diffpart" and rel[4] == 1.0
        with Owner(db, create=False) as o, pytest.raises(dpgate.errors.NotSupportedError) as e:
            o.quality("b_dp")  # raised a bare KeyError: 'codings'
        assert e.value.code == "DP221" and "diffpart" in e.value.message
        # the partition path's supports: sums over the released itemsets, without noise columns
        supports = {tuple(i): n for i, n in con.execute("SELECT list_sort(items), support FROM b_dp_supports").fetchall()}
        assert supports[("bread",)] == sum(n for i, n in got.items() if "bread" in i) > 1300
        assert supports[("eggs", "tea")] == sum(n for i, n in got.items() if {"eggs", "tea"} <= set(i)) > 600
        assert con.execute("SELECT count(*) FROM b_dp_supports WHERE measured IS NOT NULL").fetchone() == (0,)
        con.execute("DROP SYNTHETIC TABLE b_dp")
        names = {r[0] for r in con.execute("SHOW TABLES").fetchall()}
        assert not names & {"b_dp", "b_dp_itemsets", "b_dp_supports"}
    with Owner(db, create=False) as o:
        (entry,) = [r for r in o.ledger() if r[4] == "diffpart"]
        assert float(entry[6]) == 1.0


def test_explain_shows_taxonomy_thresholds_and_split(db):
    with dpgate.connect(str(db), analyst="alice") as con:
        rows = con.execute("EXPLAIN PRIVACY CREATE SYNTHETIC TABLE b FROM baskets USING diffpart WITH (item = 'item')").fetchall()
    text = "\n".join(str(r) for r in rows)
    assert "6 items, fan-out 10: height 1, 1 internal node(s)" in text
    assert "every chain spends exactly ε" in text and "C2 = 6.75" in text
    assert con.closed


@pytest.mark.parametrize("options, code, words", [
    ("", "DP286", "several columns"),  # item and note: which holds the items?
    ("item = 'note'", "DP312", "no declared domain"),
    ("item = 'basket'", "DP218", "not an item column"),
    ("item = 'item', fanout = 10, c2 = 4", "DP287", "multiply"),
    ("item = 'item', c1 = 9", "DP287", "must not exceed"),
    ("item = 'item', fanout = 13", "DP205", ""),
    ("item = 'item', degree = 2", "DP204", "not an option"),
    ("item = 'item', method = 'both'", "DP205", "one of 'auto', 'partition', 'marginals'"),
    ("item = 'item', pair_items = 1", "DP205", ""),
    ("item = 'item', personalization = 'partition'", "DP274", "several"),
])  # fmt: skip
def test_refusals_charge_nothing(db, options, code, words):
    with dpgate.connect(str(db), analyst="alice") as con:
        before = con.budget()
        with pytest.raises(dpgate.Error) as e:
            con.execute(f"CREATE SYNTHETIC TABLE b FROM baskets USING diffpart WITH ({options or 'epsilon = 1'})")
        assert e.value.code == code and words in str(e.value)
        assert con.budget() == before


def test_an_empty_release_says_why_and_the_route_avoids_it(make_db):
    # 200 baskets, most a different combination of 12 items: no partition reaches the root's threshold
    items = [f"i{k:02d}" for k in range(12)]
    rng = np.random.default_rng(3)
    values = ", ".join(f"({b}, 'i{k:02d}')" for b in range(200) for k in range(12) if rng.random() < 0.5)
    db = make_db(f"CREATE TABLE t (b INTEGER, item VARCHAR); INSERT INTO t VALUES {values};",
                 protect={"t": {"unit": "b", "max_rows": 12, "epsilon": 10.0, "domains": {"item": items}}})  # fmt: skip
    with dpgate.connect(str(db), analyst="alice", test_seed=2) as con:
        cur = con.execute("CREATE SYNTHETIC TABLE t_dp FROM t USING diffpart WITH (epsilon = 0.5, method = 'partition')")
        assert any("no itemset reached its threshold" in m for m in cur.messages), cur.messages
        assert con.execute("SELECT count(*) FROM t_dp").fetchone() == (0,)
        # without method, the public facts (200 records, 2 groups of items, ε) choose the marginals path
        cur = con.execute("CREATE SYNTHETIC TABLE t_m FROM t USING diffpart WITH (epsilon = 0.5)")
        assert "item and 66 pair supports" in cur.message
        assert con.execute("SELECT count(DISTINCT b) > 150, count(*) > 800 FROM t_m").fetchone() == (True, True)
        (mech,) = [r[3] for r in con.execute("SHOW RELEASES").fetchall() if r[0] == "t_m"]
        assert mech == "set_marginals"


def test_repeated_rows_of_one_item_take_one_place_in_a_record(make_db):
    """Every basket holds bread three times and milk once, max_rows = 2: its record is {bread, milk}. The
    rows were ranked before DISTINCT, so bread's copies took both places in about half the baskets."""
    db = make_db("CREATE TABLE t AS SELECT b, unnest(['bread', 'bread', 'bread', 'milk']) AS item FROM range(2000) r(b)",
                 protect={"t": {"unit": "b", "max_rows": 2, "epsilon": 1e4, "domains": {"item": ITEMS}}},
                 analysts={"alice": {"epsilon": 1e4, "epsilon_per_query": 1e4}})  # fmt: skip
    with dpgate.connect(str(db), analyst="alice", test_seed=4) as con:
        con.execute("CREATE SYNTHETIC TABLE t_dp FROM t USING diffpart WITH (epsilon = 1000)")
        got = {tuple(sorted(i)): n for i, n in con.execute("SELECT items, count FROM t_dp_itemsets").fetchall()}
    # ε = 1,000: the counts' noise is a few units; before, ~1,000 records were {bread} alone
    assert abs(got.get(("bread", "milk"), 0) - 2000) < 20 and got.get(("bread",), 0) < 20


def test_drop_names_releases_of_schema_main_only(db):
    with dpgate.connect(str(db), analyst="alice") as con:
        with pytest.raises(dpgate.errors.ProgrammingError) as e:
            con.execute("DROP SYNTHETIC TABLE other.b_dp")  # acted on main.b_dp
        assert e.value.code == "DP225"


def test_a_record_matrix_beyond_its_cap_is_refused_before_the_debit(db, monkeypatch):
    """The release holds one byte per subject and declared item (3,001 subjects × 6 items here);
    beyond MAX_RECORD_CELLS it is refused inside the debit's transaction, free, with the sizes
    that would do (6,000 items over a million subjects would need 6 GB after the debit)."""
    from dpgate.mechanisms import diffpart

    monkeypatch.setattr(diffpart, "MAX_RECORD_CELLS", 6 * 3000)
    with dpgate.connect(str(db), analyst="alice", test_seed=1) as con:
        before = con.budget()
        with pytest.raises(dpgate.errors.UnsupportedQueryError) as e:
            con.execute("CREATE SYNTHETIC TABLE b_dp FROM baskets USING diffpart WITH (epsilon = 1, item = 'item')")
        assert e.value.code == "DP266" and "3,001 subjects" in e.value.message and "3,000 subjects" in e.value.hint
        assert con.budget() == before
        assert "b_dp" not in {r[0] for r in con.execute("SHOW TABLES").fetchall()}
        monkeypatch.setattr(diffpart, "MAX_RECORD_CELLS", 6 * 3001)
        con.execute("CREATE SYNTHETIC TABLE b_dp FROM baskets USING diffpart WITH (epsilon = 1, item = 'item')")


def test_a_release_public_facts_say_is_empty_is_refused_free(db):
    """At ε = 0.02 the first split needs parts of ~5,000 records and there are 3,001: a forced partition
    path is refused before the debit, and EXPLAIN says so first; without method the marginals path serves."""
    sql = ("CREATE SYNTHETIC TABLE b FROM baskets USING diffpart WITH (epsilon = 0.02, item = 'item', fanout = 2, "
           "method = 'partition')")
    with dpgate.connect(str(db), analyst="alice") as con:
        rows = con.execute("EXPLAIN PRIVACY " + sql).fetchall()
        (size,) = [r[-1] for r in rows if r[0] == "expected size"]
        assert size.startswith("3,001 records") and "refused, free" in size
        before = con.budget()
        with pytest.raises(dpgate.errors.ProgrammingError) as e:
            con.execute(sql)
        assert e.value.code == "DP287" and "would be empty" in str(e.value) and "nothing was charged" in e.value.hint
        assert con.budget() == before
        ok = con.execute("EXPLAIN PRIVACY " + sql.replace("0.02", "1")).fetchall()
        (size,) = [r[-1] for r in ok if r[0] == "expected size"]
        assert "refused" not in size
        auto = con.execute("EXPLAIN PRIVACY " + sql.replace(", method = 'partition'", "")).fetchall()
        (path,) = [r for r in auto if r[0] == "path"]
        assert path[1] == "marginals" and "and 3,001 pay" in path[-1]
        assert not [r for r in auto if r[0] == "expected size"]


def test_the_expected_parts_kept_bound_the_first_split():
    """``passing_at_root`` bounds the mean number of the first operation's candidates that pass: measured
    over runs of the mechanism on records that all fall in one part (the worst case for the bound)."""
    from dpgate.mechanisms import diffpart

    tax = diffpart.Taxonomy.build(8, 2)  # 7 internal nodes: the root's α is ε/14
    eps, records = 1.0, 370  # the root needs ~401: 31 short
    bound = diffpart.passing_at_root(records, tax, eps, diffpart.DEFAULT_C1, diffpart.DEFAULT_C2)
    assert 0.05 < bound < 3  # a case where passing is neither certain nor negligible
    data = np.ones((records, 8), dtype=bool)
    rng = np.random.default_rng(11)
    runs, passed = 400, []
    for _ in range(runs):
        trace = diffpart.Trace()
        diffpart.release(data, tax, eps, rng=rng, trace=trace)
        passed.append(trace.operations[0][4])
    mean, sd = float(np.mean(passed)), float(np.std(passed)) + 1e-9
    assert mean <= bound + 4 * sd / runs**0.5, (mean, bound)


SPARSE = ("CREATE TABLE visits AS SELECT b AS uid, 'i' || lpad(CAST((b * 7 + k * k) % 30 AS VARCHAR), 2, '0') AS item "
          "FROM range(1500) r(b), range(8) s(k) WHERE k <= b % 8")  # 1 to 8 distinct items of 30 per subject
SPARSE_ITEMS = [f"i{k:02d}" for k in range(30)]


@pytest.fixture
def sparse(make_db):
    return make_db(SPARSE, protect={"visits": {"unit": "uid", "max_rows": 8, "epsilon": 10.0,
                                                "domains": {"item": SPARSE_ITEMS}}})  # fmt: skip


def test_the_marginals_path_writes_three_tables_that_agree(sparse):
    """1,500 subjects of 1–8 of 30 items: too few for DiffPart's partitions (3 groups of items), so the
    route takes the marginals path; its records, itemsets and supports agree with each other."""
    sql = "CREATE SYNTHETIC TABLE v FROM visits USING diffpart WITH (epsilon = 1, pair_items = 10)"
    with dpgate.connect(str(sparse), analyst="alice", test_seed=3) as con:
        explain = {r[0]: r for r in con.execute("EXPLAIN PRIVACY " + sql).fetchall()}
        assert explain["path"][1] == "marginals" and "and 1,500 pay" in explain["path"][-1]
        assert explain["model"][1] == "set_marginals" and "45 pairs of the 10" in explain["model"][-1]
        assert "item supports 0.45" in explain["shares"][-1] and "at most 8" in explain["expected quality"][-1]
        before = con.budget()
        cur = con.execute(sql)
        assert cur.release.epsilon == 1.0 and "30 item and 45 pair supports" in cur.message
        assert con.budget()[0] == pytest.approx(before[0] - 1.0)
        supports = con.execute("SELECT size, count(*), min(support), min(noise_sd) FROM v_supports GROUP BY size "
                               "ORDER BY size").fetchall()  # fmt: skip
        assert [(s, n) for s, n, *_ in supports] == [(1, 30), (2, 45)] and all(lo >= 0 and sd > 0 for *_, lo, sd in supports)
        subjects, rows = con.execute("SELECT count(DISTINCT uid), count(*) FROM v").fetchone()
        assert abs(subjects - 1500) < 200 and rows > 3000  # the noisy size distribution, ~4.5 items each
        assert con.execute("SELECT sum(count), sum(count * size) FROM v_itemsets").fetchone() == (subjects, rows)
        # the records' item counts follow the supports (a fit, within the noise)
        off = con.execute("SELECT median(abs(n - support) / noise_sd) FROM (SELECT item, count(*) AS n FROM v GROUP BY "
                          "item) JOIN v_supports ON items = [item]").fetchone()[0]  # fmt: skip
        assert off < 0.25
        (rel,) = [r for r in con.execute("SHOW RELEASES").fetchall() if r[0] == "v"]
        assert rel[3] == "set_marginals" and rel[4] == 1.0
        con.execute("DROP SYNTHETIC TABLE v")
        assert not {r[0] for r in con.execute("SHOW TABLES").fetchall()} & {"v", "v_itemsets", "v_supports"}


def test_a_forced_path_is_what_explain_and_the_release_say(sparse):
    with dpgate.connect(str(sparse), analyst="alice", test_seed=3) as con:
        rows = con.execute("EXPLAIN PRIVACY CREATE SYNTHETIC TABLE p FROM visits USING diffpart WITH (epsilon = 1, "
                           "method = 'partition')").fetchall()  # fmt: skip
        (path,) = [r for r in rows if r[0] == "path"]
        assert path[1] == "partition" and path[-1] == "method = 'partition'"
        assert {r[0] for r in rows} >= {"taxonomy", "thresholds", "expected size"} and "shares" not in {r[0] for r in rows}
        cur = con.execute("CREATE SYNTHETIC TABLE p FROM visits USING diffpart WITH (epsilon = 1, method = 'partition')")
        assert "(DiffPart)" in cur.message
        (rel,) = [r for r in con.execute("SHOW RELEASES").fetchall() if r[0] == "p"]
        assert rel[3] == "diffpart"


def test_a_size_model_beyond_its_cap_is_refused_before_the_debit(sparse, monkeypatch):
    """The marginals path's size model takes 60 passes over items × (max_rows + 1) cells (30 × 9 here):
    beyond MODEL_CELLS it is refused at planning, free (EXPLAIN too), with the max_rows that would do."""
    from dpgate.mechanisms import setmarginals

    monkeypatch.setattr(setmarginals, "MODEL_CELLS", 30 * 9 - 1)
    with dpgate.connect(str(sparse), analyst="alice", test_seed=1) as con:
        before = con.budget()
        for prefix in ("EXPLAIN PRIVACY ", ""):
            with pytest.raises(dpgate.errors.UnsupportedQueryError) as e:
                con.execute(prefix + "CREATE SYNTHETIC TABLE v FROM visits USING diffpart WITH (epsilon = 1)")
            assert e.value.code == "DP266" and "270 cells" in e.value.message and "max_rows_contributed = 7" in e.value.hint
        assert con.budget() == before
        con.execute("CREATE SYNTHETIC TABLE v FROM visits USING diffpart WITH (epsilon = 1, max_rows_contributed = 7)")


def test_the_size_model_is_bounded_by_the_declared_items_and_fitted_after_the_debit(sparse, monkeypatch):
    """A record is a set of declared items, so it holds at most 30 here whatever max_rows_contributed
    says: the size bins, the truncations and the size model range over 1..30. With the analyst's
    max_rows_contributed = 1,000,000 they ranged over a million sizes, the truncation's choice in
    time quadratic in them (an hour), in the free dry run at planning — EXPLAIN included — and again
    in the debit's transaction, under the ledger's lock, before the release caps refuse it. The dry
    runs now check the noise scales alone: the size model (``_solve``) is fitted once per release,
    after the debit, over at most 31 sizes."""
    from dpgate.mechanisms import setmarginals

    fitted, chosen = [], []
    solve, truncation = setmarginals._solve, setmarginals.truncation
    monkeypatch.setattr(setmarginals, "_solve", lambda t, h, w: fitted.append(len(h)) or solve(t, h, w))
    monkeypatch.setattr(setmarginals, "truncation", lambda h, *a: chosen.append(len(h)) or truncation(h, *a))
    sql = "CREATE SYNTHETIC TABLE v FROM visits USING diffpart WITH (epsilon = 1, max_rows_contributed = {})"
    with dpgate.connect(str(sparse), analyst="alice", test_seed=1) as con:
        before = con.budget()
        # 10^5: a million would exceed the statement work bound first (1,500 subjects x 10^6 rows x its steps)
        explain = {r[0]: r for r in con.execute("EXPLAIN PRIVACY " + sql.format(10**5)).fetchall()}
        assert explain["path"][1] == "marginals" and "at most 30)" in explain["expected quality"][-1]
        with pytest.raises(dpgate.errors.PolicyError) as e:  # 1,500 subjects × 10^5 rows: past the release cap
            con.execute(sql.format(10**5))
        assert e.value.code == "DP343" and con.budget() == before
        assert fitted == chosen == []  # planning, EXPLAIN, the debit's checks: no model work
        con.execute(sql.format(600))
    assert max(fitted) <= 31 and max(chosen) <= 31 and len(fitted) == 2  # items, then pairs: the release alone


def test_a_one_item_domain_is_released_on_the_marginals_path(make_db):
    """One declared item has no pairs: no selected items, and the records' fit indexed an empty pair
    matrix — every such release on the marginals path (forced, or ``auto`` where DiffPart's leaf count
    needs more records than pay) failed after its debit (DP404)."""
    db = make_db("CREATE TABLE t AS SELECT r AS b, 'a' AS item FROM range(50) x(r)",
                 protect={"t": {"unit": "b", "max_rows": 4, "epsilon": 10.0, "domains": {"item": ["a"]}}})  # fmt: skip
    with dpgate.connect(str(db), analyst="alice", test_seed=5) as con:
        for name, options in (("m", "method = 'marginals'"), ("a", "epsilon = 0.01")):
            cur = con.execute(f"CREATE SYNTHETIC TABLE {name} FROM t USING diffpart WITH (epsilon = 1, {options})"
                              .replace("epsilon = 1, epsilon", "epsilon"))  # fmt: skip
            assert "1 item and 0 pair supports" in cur.message, cur.message
            assert con.execute(f"SELECT count(*) FROM {name}_supports").fetchone() == (1,)
            assert con.execute(f"SELECT count(*) = count(DISTINCT b), count(*) FILTER (item <> 'a') FROM {name}"
                               ).fetchone() == (True, 0)  # fmt: skip
