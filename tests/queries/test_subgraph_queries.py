"""Subgraph counts through SQL: protected graphs, function forms, recognised shapes, errors.

The ladder's exact privacy and utility tests are in ``tests/mechanisms/test_ladder.py`` and
``tests/test_graphs.py``; here the gateway's part: which rows become which edges, what is
charged, which SQL is accepted.
"""

from __future__ import annotations

import math

import networkx as nx
import pytest

import dpgate
from dpgate import errors
from dpgate.catalog.owner import Owner
from dpgate.release import confidence_label

from conftest import TEST_SEED, fetch

KARATE = sorted((min(u, v), max(u, v)) for u, v in nx.karate_club_graph().edges())
TRUE = {"triangles": 45, "2-stars": 528, "3-stars": 1764, "4-cliques": 11, "2-triangles": 151}
ANALYST = {"alice": {"epsilon": 1e6, "delta": 1e-3, "epsilon_per_query": 1e5}}
BIG = "epsilon = 400"  # large enough that the ladder returns the exact count


def _values(edges) -> str:
    return ", ".join(f"({u}, {v})" for u, v in edges)


@pytest.fixture
def db(make_db):
    # The raw table adds a reversed duplicate, a repeated edge, a self-loop and an edge to a
    # node outside the universe: none of them changes the simple graph on 0..33.
    raw = KARATE + [(1, 0), (0, 1), (5, 5), (3, 99)]
    setup = (
        f"CREATE TABLE karate (src INTEGER, dst INTEGER, w DOUBLE); "
        f"INSERT INTO karate SELECT col0, col1, (col0 + col1) % 3 FROM (VALUES {_values(raw)});"
        "CREATE TABLE adult_like (pid INTEGER, x INTEGER); INSERT INTO adult_like VALUES (1, 2);"
        "CREATE TABLE names (name VARCHAR); INSERT INTO names SELECT 'n' || i FROM range(34) t(i);"
        "CREATE TABLE named AS SELECT 'n' || src AS a, 'n' || dst AS b FROM karate;"
    )
    path = make_db(setup, protect={"adult_like": {"unit": "pid"}}, analysts=ANALYST)
    with Owner(path) as owner:
        owner.protect_graph("karate", src="src", dst="dst", nodes=34, epsilon=1e6)
        owner.protect_graph("named", src="a", dst="b", nodes="names", epsilon=1e6)
    return path


@pytest.fixture
def alice(db):
    c = dpgate.connect(str(db), analyst="alice", test_seed=TEST_SEED)
    yield c
    c.close()


def q(opts: str, body: str) -> str:
    return f"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS ({opts}) {body}"


# -- answers -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "call, truth",
    [
        ("TRIANGLE_COUNT(src, dst)", TRUE["triangles"]),
        ("TRIANGLE_COUNT(dst, src)", TRUE["triangles"]),
        ("KSTAR_COUNT(src, dst, 2)", TRUE["2-stars"]),
        ("KSTAR_COUNT(src, dst, 3)", TRUE["3-stars"]),
        ("KCLIQUE_COUNT(src, dst, 4)", TRUE["4-cliques"]),
        ("KCLIQUE_COUNT(src, dst, 3)", TRUE["triangles"]),
        ("KTRIANGLE_COUNT(src, dst, 2)", TRUE["2-triangles"]),
    ],
)
def test_function_forms_count_the_simple_graph_on_the_universe(alice, call, truth):
    rows, cur = fetch(alice, q(BIG, f"{call} AS n FROM karate"))
    assert cur.release.query_class == "subgraph" and cur.release.mechanism == "ladder"
    assert rows == [(truth,)]
    lo, hi = cur.release.intervals[0]["n"]
    assert lo <= truth <= hi


def test_a_node_table_gives_the_universe(alice):
    rows, cur = fetch(alice, q(BIG, "TRIANGLE_COUNT(a, b) AS t, KSTAR_COUNT(a, b, 2) AS s FROM named"))
    assert rows == [(TRUE["triangles"], TRUE["2-stars"])]
    assert "34 nodes (public table names.name)" in cur.release.notes[0]


def test_where_selects_edges_and_arithmetic_is_post_processing(alice):
    g = nx.Graph([e for e in KARATE if (e[0] + e[1]) % 3 != 0])
    truth = sum(nx.triangles(g).values()) // 3
    rows, _ = fetch(alice, q(BIG, "TRIANGLE_COUNT(src, dst) * 2 + 1 AS t FROM karate WHERE w <> 0"))
    assert rows == [(2 * truth + 1,)]


def test_several_counts_split_epsilon(alice):
    rows, cur = fetch(alice, "EXPLAIN PRIVACY " + q("epsilon = 1", "TRIANGLE_COUNT(src, dst), KSTAR_COUNT(src, dst, 2) FROM karate"))
    by = {r[0]: r for r in rows}
    assert by["TRIANGLE_COUNT(src, dst)"][2] == 0.5 and by["KSTAR_COUNT(src, dst, 2)"][2] == 0.5
    assert by["TRIANGLE_COUNT(src, dst)"][4] == "GS 32" and by["KSTAR_COUNT(src, dst, 2)"][4] == "GS 64"
    assert by["edge budget"][2] == 1.0
    assert "simple undirected graph" in by["graph"][6]
    assert alice.budget()[0] == 1e6, "EXPLAIN is free"


def test_interval_coverage_at_epsilon_one(alice):
    """95% error bars (a DP width statistic at 10% of ε): misses are rare."""
    misses = 0
    for _ in range(60):
        _, cur = fetch(alice, q("epsilon = 1", "TRIANGLE_COUNT(src, dst) AS t FROM karate"))
        lo, hi = cur.release.intervals[0]["t"]
        misses += not lo <= TRUE["triangles"] <= hi
    # P(more than 9 misses in 60 at a 5% rate) < 0.01; the interval is conservative anyway.
    assert misses <= 9


@pytest.mark.parametrize("alpha", [1e-3, 1e-6, 1e-9])
def test_a_small_alpha_widens_the_error_bar_instead_of_failing(alice, alpha):
    """The calibration cells cover statistics further above the noisy one when alpha is small
    (they used to leave no miss probability for the count below alpha ≈ 0.005, and the statement
    failed with a bare ValueError after planning); the footer states the level in full."""
    body = "TRIANGLE_COUNT(src, dst) AS t, KTRIANGLE_COUNT(src, dst, 2) AS k FROM karate"
    _, wide = fetch(alice, q(f"epsilon = 1, alpha = {alpha}", body))
    _, usual = fetch(alice, q("epsilon = 1", body))
    for name in ("t", "k"):
        (lo, hi), (ulo, uhi) = wide.release.intervals[0][name], usual.release.intervals[0][name]
        assert hi - lo > uhi - ulo
    assert confidence_label(alpha) == {1e-3: "99.9%", 1e-6: "99.9999%", 1e-9: "99.9999999%"}[alpha]


def test_small_counts_never_read_zero_zero_and_say_the_noise_dominates(alice):
    """89 2-triangles among the edges with src < 20, at ε = 0.1: the noise is far larger than the
    count. The answer is clamped at zero with the interval taken around the clamped value, so
    it never collapses to 0 [0, 0], and the note says how to read it."""
    g = nx.Graph([e for e in KARATE if e[0] < 20])
    truth = sum(math.comb(len(set(g[u]) & set(g[v])), 2) for u, v in g.edges())
    hits = noted = 0
    for _ in range(30):
        rows, cur = fetch(alice, q("epsilon = 0.1", "KTRIANGLE_COUNT(src, dst, 2) AS t FROM karate WHERE src < 20"))
        (value,) = rows[0]
        lo, hi = cur.release.intervals[0]["t"]
        assert 0 <= lo <= value < hi and hi > 0
        hits += lo <= truth <= hi
        note = [n for n in cur.release.notes if "noise is larger than the count" in n]
        if lo == 0:
            assert note and f"somewhere between 0 and {hi:,}" in note[0] and note[0].startswith("KTRIANGLE_COUNT")
            noted += 1
    assert hits >= 26  # P(more than 4 misses in 30 at a 5% rate) < 0.02; the bar is conservative
    assert noted >= 20  # the error bar is ~100 times the count: it reaches zero nearly always


def test_explain_states_the_epsilon_split(alice):
    sql = q("epsilon = 1, interval_share = 0.2", "TRIANGLE_COUNT(src, dst) FROM karate")
    rows, _ = fetch(alice, "EXPLAIN PRIVACY " + sql)
    detail = {r[0]: r for r in rows}["TRIANGLE_COUNT(src, dst)"][6]
    assert "0.8 on the count" in detail and "0.2 on the error bar" in detail and "c_K" in detail
    _, cur = fetch(alice, q("epsilon = 1", "TRIANGLE_COUNT(src, dst) AS t FROM karate"))
    assert "noisy c_K = " in cur.release.columns["t"].description


def test_public_error_bar_spends_everything_on_the_count(alice):
    rows, _ = fetch(alice, "EXPLAIN PRIVACY " + q("epsilon = 1, interval_share = 0", "TRIANGLE_COUNT(src, dst) FROM karate"))
    assert "public quantities" in {r[0]: r for r in rows}["TRIANGLE_COUNT(src, dst)"][6]
    _, cur = fetch(alice, q("epsilon = 1, interval_share = 0", "TRIANGLE_COUNT(src, dst) AS t FROM karate"))
    assert "public error bar" in cur.release.columns["t"].description


# -- the smallest ε -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "call, truth",
    [("TRIANGLE_COUNT(src, dst)", TRUE["triangles"]), ("KSTAR_COUNT(src, dst, 3)", TRUE["3-stars"]),
     ("KTRIANGLE_COUNT(src, dst, 2)", TRUE["2-triangles"]), ("KCLIQUE_COUNT(src, dst, 4)", TRUE["4-cliques"])],
)  # fmt: skip
def test_every_count_at_the_minimum_epsilon_answers_with_bounded_work(alice, monkeypatch, call, truth):
    """At ε = 10^-6 (the least a statement may ask) the error bar's calibration, which runs
    after the debit and can no longer be interrupted, visits at most BAND_WORK (rung, window)
    pairs per probe (its work used to grow like 1/ε²: this statement never finished), and the
    answer comes back with an interval around the count."""
    from dpgate.mechanisms import ladder_bounds

    probes = []

    class Recorded(ladder_bounds._Band):
        def ok(self, m, beta):
            result = super().ok(m, beta)
            probes.append(self.visits[-1])
            return result

    monkeypatch.setattr(ladder_bounds, "_Band", Recorded)
    ladder_bounds._half_width.cache_clear()
    before = {r[0]: r[1] for r in fetch(alice, "SHOW BUDGET")[0]}
    rows, cur = fetch(alice, q("epsilon = 1e-6", f"{call} AS n FROM karate"))
    lo, hi = cur.release.intervals[0]["n"]
    assert lo <= truth <= hi and lo <= rows[0][0] <= hi
    assert probes and max(probes) <= ladder_bounds.BAND_WORK and len(probes) <= 4 * 80
    after = {r[0]: r[1] for r in fetch(alice, "SHOW BUDGET")[0]}
    assert before["karate: edge budget"] - after["karate: edge budget"] == pytest.approx(1e-6, rel=1e-4)


@pytest.mark.parametrize("share", ["0.00001", "0.9999999"])
def test_an_epsilon_split_below_what_the_samplers_run_at_is_refused_free(alice, share):
    """ε = 10^-6 split so that the error bar's statistic (or the count) gets less than the
    samplers' margin of 10^-10: they would refuse it after the debit, so it is refused before."""
    before = fetch(alice, "SHOW BUDGET")[0]
    sql = q(f"epsilon = 1e-6, interval_share = {share}", "TRIANGLE_COUNT(src, dst) AS t FROM karate")
    with pytest.raises(errors.ProgrammingError) as e:
        fetch(alice, sql)
    assert e.value.code == "DP264" and "interval_share = 0 (a public error bar) or between" in e.value.hint
    assert fetch(alice, "SHOW BUDGET")[0] == before
    low, high = (float(x) for x in e.value.hint.rsplit("between ", 1)[1].split(" and "))
    for accepted in ("0", f"{low:.6g}", f"{high:.6g}"):
        fetch(alice, q(f"epsilon = 1e-6, interval_share = {accepted}", "TRIANGLE_COUNT(src, dst) AS t FROM karate"))


def test_a_count_too_large_for_128_bit_answers_is_refused_free(make_db):
    """3-stars on 2,445 nodes reach 10^108 at k = 50 (and 10^539 at k = 500): the release failed
    after the debit when it was converted to DuckDB's 128-bit integers (DP231, or DP404 when its
    error bar overflowed a double). It is refused before, with the largest k that is served."""
    path = make_db(f"CREATE TABLE g (s INTEGER, d INTEGER); INSERT INTO g VALUES {_values(KARATE)};", analysts=ANALYST)
    with Owner(path) as owner:
        owner.protect_graph("g", src="s", dst="d", nodes=2445, epsilon=1e6)
    with dpgate.connect(str(path), analyst="alice", test_seed=TEST_SEED) as c:
        for k, epsilon in ((50, "1"), (500, "1e-6")):
            before = fetch(c, "SHOW BUDGET")[0]
            with pytest.raises(errors.UnsupportedQueryError) as e:
                fetch(c, q(f"epsilon = {epsilon}", f"KSTAR_COUNT(s, d, {k}) FROM g"))
            assert e.value.code == "DP265" and fetch(c, "SHOW BUDGET")[0] == before
            served = int(e.value.hint.split("k <= ")[1].split()[0])
            rows, cur = fetch(c, q(f"epsilon = {epsilon}", f"KSTAR_COUNT(s, d, {served}) AS n FROM g"))
            lo, hi = cur.release.intervals[0]["n"]
            assert 0 <= lo <= rows[0][0] <= hi < 2**127
            with pytest.raises(errors.UnsupportedQueryError):
                fetch(c, q(f"epsilon = {epsilon}", f"KSTAR_COUNT(s, d, {served + 1}) FROM g"))


def test_the_output_bound_holds_every_half_width_the_error_bar_takes():
    """The clip bound's closed form is above the error bar the mechanism computes, at every level."""
    from dpgate.mechanisms import graphs, ladder
    from dpgate.queries.subgraph import output_bound

    for n, query, k in ((34, "triangle", None), (2445, "kstar", 3), (300, "ktriangle", 2)):
        for epsilon in (1.0, 1e-3, 1e-6):
            bound = output_bound(query, k, n, epsilon, 0.1, 0.05)
            m, _, _ = ladder.calibrated_half_width(query, k, n, 0.9 * epsilon, 0, 0.1 * epsilon, 0.05)
            top = graphs.max_count(query, k, n)
            assert top + m <= bound and top + 2 * m <= 2 * bound < 2**127


# -- recognised shapes ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "body",
    [
        "COUNT(*) AS n FROM karate a JOIN karate b ON a.dst = b.src JOIN karate c ON c.src = a.src AND c.dst = b.dst",
        "COUNT(*) AS n FROM karate a, karate b, karate c WHERE a.dst = b.src AND b.dst = c.dst AND c.src = a.src",
        "COUNT(*) AS n FROM karate x JOIN karate y ON x.src = y.src JOIN karate z ON z.src = x.dst AND z.dst = y.dst",
    ],
)
def test_the_triangle_self_join_is_answered_by_the_ladder(alice, body):
    rows, cur = fetch(alice, q(BIG, body))
    assert cur.release.query_class == "subgraph"
    assert rows == [(TRUE["triangles"],)], "the simple graph's count, not the literal join on the raw rows"
    assert any("triangle self-join" in n for n in cur.release.notes)


@pytest.mark.parametrize("k, summand", [(2, "deg * (deg - 1) / 2"), (3, "deg*(deg-1)*(deg-2)/6"), (3, "(deg - 2) * deg * (deg - 1) // 6")])
def test_the_degree_sum_is_answered_as_a_k_star_count(alice, k, summand):
    sql = (
        "WITH d AS (SELECT x, COUNT(*) AS deg FROM (SELECT src AS x FROM karate UNION ALL SELECT dst FROM karate) "
        f"GROUP BY x) {q(BIG, f'SUM({summand}) AS s FROM d')}"
    )
    rows, cur = fetch(alice, sql)
    assert rows == [(TRUE[f"{k}-stars"],)]
    assert cur.release.mechanism == "ladder"


# -- refusals ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "sql, code",
    [
        (q("epsilon = 1", "COUNT(*) FROM karate"), "DP212"),
        (q("epsilon = 1", "src FROM karate"), "DP211"),
        (q("epsilon = 1", "src, TRIANGLE_COUNT(src, dst) FROM karate GROUP BY src"), "DP271"),
        (q("epsilon = 1", "TRIANGLE_COUNT(src, w) FROM karate"), "DP282"),
        (q("epsilon = 1", "KSTAR_COUNT(src, dst) FROM karate"), "DP282"),
        (q("epsilon = 1", "KSTAR_COUNT(src, dst, 1) FROM karate"), "DP282"),
        (q("epsilon = 1", "TRIANGLE_COUNT(x, pid) FROM adult_like"), "DP270"),
        ("SELECT TRIANGLE_COUNT(a, b) FROM names", "DP270"),
        (q("epsilon = 1", "COUNT(*) FROM karate a JOIN karate b ON a.dst = b.src JOIN karate c ON c.src = b.dst"), "DP271"),
        (q("epsilon = 1", "COUNT(*) FROM karate a JOIN karate b ON a.dst = b.src"), "DP215"),
        (q("epsilon = 1", "TRIANGLE_COUNT(src, dst) FROM karate k JOIN names n ON k.src = 1"), "DP251"),
        (q("epsilon = 1", "TRIANGLE_COUNT(src, dst) FROM karate WHERE src IN (SELECT 1)"), "DP252"),
        ("WITH d AS (SELECT x, COUNT(*) AS deg FROM (SELECT src AS x FROM karate UNION ALL SELECT dst FROM karate) "
         "GROUP BY x) SELECT SUM(deg * deg) FROM d", "DP271"),
        ("WITH e AS (SELECT * FROM karate) SELECT TRIANGLE_COUNT(src, dst) FROM e", "DP257"),
    ],
)
def test_refusals_are_specific_and_free(alice, sql, code):
    before = alice.budget()
    with pytest.raises(errors.Error) as e:
        fetch(alice, sql)
    assert e.value.code == code, e.value
    assert e.value.hint
    assert alice.budget() == before


def test_large_k_cliques_need_the_owners_permission(make_db):
    edges = [(i, (i * 7 + 3) % 300) for i in range(300)] + [(i, i + 1) for i in range(299)]
    setup = f"CREATE TABLE g (s INTEGER, d INTEGER); INSERT INTO g VALUES {_values(edges)};"
    path = make_db(setup, analysts=ANALYST)
    with Owner(path) as owner:
        owner.protect_graph("g", src="s", dst="d", nodes=300, epsilon=1e6)
    with dpgate.connect(str(path), analyst="alice", test_seed=TEST_SEED) as c:
        with pytest.raises(errors.PolicyError) as e:
            fetch(c, q("epsilon = 1", "KCLIQUE_COUNT(s, d, 4) FROM g"))
        assert e.value.code == "DP319" and c.budget()[0] == 1e6
        fetch(c, q("epsilon = 1", "KCLIQUE_COUNT(s, d, 3) FROM g"))  # triangles: always served
    with Owner(path) as owner:
        owner.protect_graph("g", src="s", dst="d", nodes=300, epsilon=1e6, allow_kclique=True)
    with dpgate.connect(str(path), analyst="alice", test_seed=TEST_SEED) as c:
        rows, _ = fetch(c, q(BIG, "KCLIQUE_COUNT(s, d, 4) FROM g"))
    assert rows == [(sum(1 for cl in nx.enumerate_all_cliques(nx.Graph([e for e in edges if e[0] != e[1]])) if len(cl) == 4),)]


# -- budget --------------------------------------------------------------------------------------
def test_every_query_charges_the_shared_edge_budget(make_db):
    path = make_db(f"CREATE TABLE g (s INTEGER, d INTEGER); INSERT INTO g VALUES {_values(KARATE)};", analysts=ANALYST)
    with Owner(path) as owner:
        owner.protect_graph("g", src="s", dst="d", nodes=34, epsilon=1.0)
    with dpgate.connect(str(path), analyst="alice", test_seed=TEST_SEED) as c:
        _, cur = fetch(c, q("epsilon = 0.6", "TRIANGLE_COUNT(s, d) FROM g"))
        assert cur.release.epsilon == 0.6
        rows, _ = fetch(c, "SHOW BUDGET")
        assert {r[0]: r for r in rows}["g: edge budget"][1] == pytest.approx(0.4)
        before = c.budget()
        with pytest.raises(errors.BudgetExceededError) as e:
            fetch(c, q("epsilon = 0.6", "TRIANGLE_COUNT(s, d) FROM g"))
        assert e.value.code == "DP403" and "edge budget" in e.value.message and "0.4" in e.value.hint
        assert c.budget() == before, "refused: nothing charged"
        fetch(c, q("epsilon = 0.4", "TRIANGLE_COUNT(s, d) FROM g"))


def test_show_tables_and_describe_mark_graphs(alice):
    rows, _ = fetch(alice, "SHOW TABLES")
    assert ("karate", "graph", None, None, None) in rows
    rows, _ = fetch(alice, "DESCRIBE karate")
    assert [(r[0], r[2]) for r in rows] == [("src", "edge source"), ("dst", "edge target"), ("w", "")]


# -- the owner's declaration ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs, code",
    [
        ({"src": "src", "dst": "nope", "nodes": 34}, "DP311"),
        ({"src": "src", "dst": "src", "nodes": 34}, "DP311"),
        ({"src": "src", "dst": "dst", "nodes": 1}, "DP318"),
        ({"src": "src", "dst": "dst", "nodes": "missing"}, "DP318"),
        ({"src": "src", "dst": "dst", "nodes": "adult_like"}, "DP318"),  # protected: not a public universe
        ({"src": "src", "dst": "dst", "nodes": "names"}, "DP318"),  # VARCHAR ids vs INTEGER endpoints
        ({"src": "src", "dst": "dst", "nodes": 34, "epsilon": -1.0}, "DP313"),
    ],
)
def test_protect_graph_refuses_bad_declarations(db, kwargs, code):
    with Owner(db) as owner, pytest.raises(errors.PolicyError) as e:
        owner.protect_graph("karate", **kwargs)
    assert e.value.code == code


def test_a_graph_is_not_silently_turned_into_a_table(db):
    with Owner(db) as owner:
        with pytest.raises(errors.PolicyError) as e:
            owner.protect("karate", unit="src")
        assert e.value.code == "DP314"
        with pytest.raises(errors.PolicyError) as e:
            owner.protect_graph("adult_like", src="pid", dst="x", nodes=10)
        assert e.value.code == "DP314"


def test_the_policy_file_declares_graphs(make_db, tmp_path):
    path = make_db(f"CREATE TABLE g (s INTEGER, d INTEGER); INSERT INTO g VALUES {_values(KARATE)};", analysts=ANALYST)
    policy = tmp_path / "p.toml"
    policy.write_text('[graphs.g]\nsrc = "s"\ndst = "d"\nnodes = 34\nepsilon = 3.0\n')
    with Owner(path) as owner:
        done = owner.apply_policy(policy)
        assert done == ["protected graph g (s - d)"]
        assert owner.catalog().tables["g"].graph == {"src": "s", "dst": "d", "allow_kclique": False, "nodes": 34}
    with dpgate.connect(str(path), analyst="alice") as c:
        rows, _ = fetch(c, "SHOW BUDGET")
    assert {r[0]: r for r in rows}["g: edge budget"][1] == 3.0
    assert math.isfinite(rows[0][1])


# -- what a graph's rows must not leak or multiply -----------------------------------------------
@pytest.mark.parametrize(
    "body",
    [
        # a subquery reading the graph row by row, hidden in the SELECT list under output aliases
        "TRIANGLE_COUNT(src, dst) AS src, 0 AS dst, EXISTS(SELECT 1 FROM karate WHERE src = 5 AND dst = 7) AS e FROM karate",
        "TRIANGLE_COUNT(src, dst) AS t, ARRAY(SELECT src FROM karate) AS rows FROM karate",
        "TRIANGLE_COUNT(src, dst) AS t FROM karate ORDER BY (SELECT max(src) FROM karate)",
        "TRIANGLE_COUNT(src, dst) AS src, src + 0 AS x FROM karate",
        "TRIANGLE_COUNT(src, dst) AS t, (SELECT count(*) FROM names) AS n FROM karate",
        "COUNT(*) FROM karate a JOIN karate b ON a.dst = b.src JOIN karate c ON c.src = a.src AND c.dst = b.dst "
        "WHERE EXISTS (SELECT 1 FROM karate WHERE src = 5)",
    ],
)
def test_no_row_of_a_graph_leaves_through_the_select_list(alice, body):
    """The SELECT list of a graph query becomes post-processing: it may hold only the counts."""
    before = alice.budget()
    with pytest.raises(errors.UnsupportedQueryError):
        fetch(alice, q("epsilon = 1", body))
    assert alice.budget() == before


def test_the_degree_sum_must_be_exactly_the_recognised_shape(alice):
    base = "WITH d AS (SELECT x, COUNT(*) AS deg FROM (SELECT src AS x FROM karate UNION ALL SELECT dst FROM karate{}) GROUP BY x{}) "
    tail = q("epsilon = 1", "SUM(deg * (deg - 1) / 2) FROM d")
    fetch(alice, base.format("", "") + tail)  # accepted
    for inner, group in ((" WHERE src < 3", ""), ("", " HAVING COUNT(*) > 2"), (" LIMIT 5", "")):
        with pytest.raises(errors.UnsupportedQueryError):
            fetch(alice, base.format(inner, group) + tail)


def test_large_cliques_are_refused_by_a_public_bound_on_n_and_k(alice):
    fetch(alice, q("epsilon = 1", "KCLIQUE_COUNT(src, dst, 5) FROM karate"))  # C(34, 5) = 278,256
    with pytest.raises(errors.PolicyError) as e:
        fetch(alice, q("epsilon = 1", "KCLIQUE_COUNT(src, dst, 6) FROM karate"))  # C(34, 6) = 1,344,904
    assert e.value.code == "DP319"


def test_a_node_table_of_another_numeric_type_is_refused(make_db):
    path = make_db("CREATE TABLE g (s HUGEINT, d HUGEINT); CREATE TABLE nodes (id DECIMAL(18, 3));", analysts=ANALYST)
    with Owner(path) as owner, pytest.raises(errors.PolicyError) as e:
        owner.protect_graph("g", src="s", dst="d", nodes="nodes")
    assert e.value.code == "DP318"


@pytest.mark.parametrize("edge, node", [("DOUBLE", "BIGINT"), ("FLOAT", "INTEGER"), ("BIGINT", "DOUBLE")])
def test_integer_ids_with_floating_point_endpoints_are_refused(make_db, edge, node):
    """Compared as doubles, the distinct BIGINT ids 2^60 + i all equal the DOUBLE endpoint 2^60: one edge
    row joined 30 node ids, and adding it moved TRIANGLE_COUNT from 0 to 30. An
    integer type with a floating-point one is refused at protect_graph, and at query time when an
    ALTER makes them so later (free); FLOAT with DOUBLE and integers of any widths stay accepted."""
    path = make_db(f"CREATE TABLE g (s {edge}, d {edge}); CREATE TABLE nodes (id {node});"
                   "INSERT INTO nodes SELECT i FROM range(10) r(i); INSERT INTO g VALUES (0, 1), (1, 2), (0, 2)",
                   analysts=ANALYST)  # fmt: skip
    with Owner(path) as owner, pytest.raises(errors.PolicyError) as e:
        owner.protect_graph("g", src="s", dst="d", nodes="nodes")
    assert e.value.code == "DP318" and "several node ids" in e.value.message


def test_a_node_type_changed_after_protect_graph_is_refused_at_query_time(make_db):
    path = make_db("CREATE TABLE g (s BIGINT, d BIGINT); CREATE TABLE nodes (id BIGINT);"
                   "INSERT INTO nodes SELECT i FROM range(10) r(i); INSERT INTO g VALUES (0, 1), (1, 2), (0, 2)",
                   analysts=ANALYST)  # fmt: skip
    with Owner(path) as owner:
        owner.protect_graph("g", src="s", dst="d", nodes="nodes")
        owner.protect_graph("g", src="s", dst="d", nodes="nodes")  # re-declaring is accepted
        owner.con.execute("ALTER TABLE g ALTER s TYPE DOUBLE")
    with dpgate.connect(str(path), analyst="alice") as c:
        before = c.budget()
        with pytest.raises(errors.PolicyError) as e:
            fetch(c, q("epsilon = 1", "TRIANGLE_COUNT(s, d) FROM g"))
        assert e.value.code == "DP318" and c.budget() == before


@pytest.mark.parametrize("edge, node", [("FLOAT", "DOUBLE"), ("INTEGER", "BIGINT"), ("UINTEGER", "BIGINT")])
def test_exact_comparisons_between_types_stay_accepted(make_db, edge, node):
    path = make_db(f"CREATE TABLE g (s {edge}, d {edge}); CREATE TABLE nodes (id {node});"
                   "INSERT INTO nodes SELECT i FROM range(10) r(i); INSERT INTO g VALUES (0, 1), (1, 2), (0, 2)",
                   analysts=ANALYST)  # fmt: skip
    with Owner(path) as owner:
        owner.protect_graph("g", src="s", dst="d", nodes="nodes", epsilon=1e6)
    with dpgate.connect(str(path), analyst="alice") as c:
        assert fetch(c, q(BIG, "TRIANGLE_COUNT(s, d) AS t FROM g"))[0] == [(1,)]


def test_an_endpoint_with_a_collation_is_refused(make_db):
    """With dst COLLATE NOCASE and node ids 'x' and 'X', the endpoint join matched both: each edge row became
    two edges. Refused at protect_graph, and for every statement when an ALTER adds
    the collation later (free)."""
    setup = ("CREATE TABLE e (src VARCHAR, dst VARCHAR{}); INSERT INTO e VALUES ('x', 'y'), ('y', 'z'), ('z', 'x');"
             "CREATE TABLE nodes (id VARCHAR); INSERT INTO nodes VALUES ('x'), ('X'), ('y'), ('Y'), ('z'), ('Z')")
    path = make_db(setup.format(" COLLATE NOCASE"), analysts=ANALYST)
    with Owner(path) as owner, pytest.raises(errors.PolicyError) as e:
        owner.protect_graph("e", src="src", dst="dst", nodes="nodes", epsilon=1e6)
    assert e.value.code == "DP329" and "endpoint column dst" in e.value.message
    path = make_db(setup.format(""), analysts=ANALYST)
    with Owner(path) as owner:
        owner.protect_graph("e", src="src", dst="dst", nodes="nodes", epsilon=1e6)
        assert fetch_one_triangle(path) == 1
        owner.con.execute("ALTER TABLE e ALTER dst SET DATA TYPE VARCHAR COLLATE NOCASE")
    with dpgate.connect(str(path), analyst="alice") as c:
        before = c.budget()
        with pytest.raises(errors.PolicyError) as e:
            fetch(c, q(BIG, "TRIANGLE_COUNT(src, dst) AS t FROM e"))
        assert e.value.code == "DP329" and c.budget() == before


def fetch_one_triangle(path) -> int:
    with dpgate.connect(str(path), analyst="alice") as c:
        return fetch(c, q(BIG, "TRIANGLE_COUNT(src, dst) AS t FROM e"))[0][0][0]
