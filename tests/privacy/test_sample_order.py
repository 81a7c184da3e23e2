"""A stored sample order (``sample_order = "stored"``, ``dpgate.catalog.sample_order``).

What the argument in that module's docstring rests on, checked:
- the kept rows are each subject's passing rows with the ``max_rows`` smallest stored ranks, on
  both computations (the one-pass filter and the window), equal to a reference computed here;
- a subject keeps at most ``max_rows`` rows even when the order is stale (rows inserted, deleted);
- the kept rows are a uniform sample of the passing rows (inclusion frequencies over fresh draws);
- neighbouring databases whose orders are coupled (the subject's order rows removed or added with
  its rows) give exact statistics within the declared sensitivities (the neighbour harness);
- a stale order is never used, and the next query's planning rebuilds it.
"""

from __future__ import annotations

import collections

import duckdb
import pytest

import harness
from dpgate import errors
from dpgate.catalog import sample_order, unit_stats
from dpgate.catalog.owner import Owner
from dpgate.backends import duckdb as exact_mod

DP = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1{opts}) "
SETUP = """
CREATE TABLE t AS SELECT i % 60 AS uid, ['a', 'b', 'c'][1 + (i * 7) % 3] AS g, (i * 13) % 11 AS x FROM range(600) r(i);
INSERT INTO t SELECT 1000 + i, 'a', 1 FROM range(5) r(i);
INSERT INTO t VALUES (7, 'a', 3), (7, 'a', 3), (7, 'a', 3);
"""
STATEMENTS = [
    DP + "g, COUNT(*), SUM(x), AVG(x) FROM t GROUP BY g",
    DP + "COUNT(*), SUM(x) FROM t WHERE x > 3",
    DP + "g, COUNT(*) FROM t GROUP BY g",
    DP + "COUNT(DISTINCT uid) FROM t",
    DP + "g, MEDIAN(x) FROM t GROUP BY g",
]
GROUP_BOUND = ", max_groups_contributed = 1"


def _protect(make_db, max_rows=4):
    path = make_db(SETUP, protect={"t": {"unit": "uid", "max_rows": max_rows, "max_groups": 2, "epsilon": 1e6,
                                         "domains": {"g": ["a", "b", "c"]}, "bounds": {"x": (0, 10)},
                                         "sample_order": "stored"}})  # fmt: skip
    harness.add_harness_analyst(path)
    with duckdb.connect(str(path)) as con:  # a fixed draw (tests use fixed seeds)
        sample_order.build(con, "t", "uid", seed=20261126)
    return path


@pytest.fixture
def count_blind(monkeypatch):
    """A change the row count does not show (an update of units keeps it): before its debit a
    statement then sees no sign of staleness; only its own check in its snapshot finds it."""
    monkeypatch.setattr(sample_order, "_count_moved", lambda *counts: False)


def _exact(gw, sql, **kw):
    _, plan = harness.plan_statement(gw, sql)
    ex = exact_mod.run(gw._con, plan, harness.roster_charged(plan), harness.SALT, **kw)
    return {k: [v.tolist() if hasattr(v, "tolist") else v for v in arr.ravel()] for k, arr in ex.components.items()}, plan


def _sqls():
    for sql in STATEMENTS:
        yield sql.format(opts="")
    yield STATEMENTS[2].format(opts=GROUP_BOUND)


def test_both_computations_keep_the_best_ranked_passing_rows(make_db, monkeypatch):
    path = _protect(make_db)
    taken = []
    original = exact_mod._ordered_filter
    monkeypatch.setattr(exact_mod, "_ordered_filter", lambda *a: taken.append(original(*a)) or taken[-1])
    with harness.gateways(path) as (gw,):
        for sql in _sqls():
            unit_stats.clear()
            one_pass, _ = _exact(gw, sql)
            window, _ = _exact(gw, sql, use_stats=False)  # no table facts: the window over the passing rows
            assert one_pass == window, sql
        # the filter answered the statements without WHERE; under WHERE x > 3 it is never tried (whether
        # its count matched would say whether one chosen person's best-ranked row passed the WHERE)
        assert len(taken) == sum("WHERE" not in sql for sql in _sqls())
        assert [t is None for t in taken] == ["MEDIAN" in sql for sql in _sqls() if "WHERE" not in sql]
        # reference: per subject, the passing rows by stored rank, the first max_rows of them
        rows = gw._con.execute(
            f"SELECT t.uid, t.g, t.x, o.{sample_order.RANK} FROM t POSITIONAL JOIN {sample_order.table_sql('t')} o"
        ).fetchall()
        for where, sql in ((lambda r: True, STATEMENTS[2]), (lambda r: r[2] > 3, STATEMENTS[1])):
            per = collections.defaultdict(list)
            for r in rows:
                if where(r):
                    per[r[0]].append(r)
            kept = [r for rs in per.values() for r in sorted(rs, key=lambda r: r[3])[:4]]
            got, plan = _exact(gw, sql.format(opts=""))
            if plan.keys:
                want = [sum(1 for r in kept if r[1] == g) for g in "abc"]
                assert got[(0, "count")] == want
            else:
                assert got[(0, "count")] == [len(kept)]
                assert got[(1, "sum")] == [sum(plan.aggs[1].grid_int(r[2]) for r in kept)]


def test_a_stale_order_still_bounds_every_subject(make_db, count_blind):
    path = _protect(make_db, max_rows=3)
    # positions shift (a delete near the end), units change (an update), rows without an order row (inserts)
    harness.mutate(path, ["DELETE FROM t WHERE uid = 1001", "UPDATE t SET uid = 5 WHERE uid = 6",
                          "INSERT INTO t SELECT 5, 'b', i FROM range(9) r(i)"])  # fmt: skip
    with harness.gateways(path) as (gw,):
        _, plan = harness.plan_statement(gw, STATEMENTS[2].format(opts=""))
        q = exact_mod._build(plan, harness.roster_charged(plan), ordered=True)
        con = gw._con
        assert sample_order.current(con, plan.table) is None  # never used for a query
        filtered, units = con.execute(
            f"SELECT max(n), count(*) FROM (SELECT __unit, count(*) AS n FROM ({q.src}) WHERE __rank <= 3 GROUP BY __unit)"
        ).fetchone()
        sampled = q.sampled(f"SELECT {q.sample_cols} FROM ({q.src})")
        windowed = con.execute(f"SELECT max(n) FROM (SELECT __unit, count(*) AS n FROM ({sampled}) GROUP BY __unit)",
                               exact_mod._params(sampled, dict(q.params, salt=1))).fetchone()[0]  # fmt: skip
        assert filtered <= 3 and windowed <= 3
        assert units >= 55  # (defence in depth: current() refuses such an order; were it used, rows still line up)


def test_a_stale_order_is_rebuilt_before_the_next_debit(make_db, count_blind):
    path = _protect(make_db)
    def read():
        with duckdb.connect(str(path), read_only=True) as c:
            return c.execute(f"SELECT build_id FROM {sample_order.REGISTRY}").fetchone()[0]

    first = read()
    harness.mutate(path, "UPDATE t SET x = 0 WHERE uid = 4")  # other columns: the order still lines up
    with harness.gateways(path) as (gw,):
        _, plan = harness.plan_statement(gw, STATEMENTS[0].format(opts=""))
        assert sample_order.current(gw._con, plan.table) == first
    harness.mutate(path, "INSERT INTO t VALUES (4, 'a', 1)")
    with harness.gateways(path) as (gw,):
        _, plan = harness.plan_statement(gw, STATEMENTS[0].format(opts=""))  # planning: registered, not yet seen stale
        assert sample_order.current(gw._con, plan.table) is None  # the query's own check: stale, hash sampling
        stale = exact_mod.run(gw._con, plan, harness.roster_charged(plan), harness.SALT)
        harness.plan_statement(gw, STATEMENTS[0].format(opts=""))  # the next planning rebuilds it
        rebuilt = sample_order.current(gw._con, plan.table)
    assert rebuilt is not None and rebuilt != first and read() == rebuilt
    assert stale.components[(0, "count")].sum() == 60 * 4 + 5  # every subject bounded, the new row's too


def test_the_sample_is_uniform_over_the_passing_rows(make_db):
    """40 subjects with rows x = 0..9, max_rows 5, 60 fresh draws: each row is kept with probability
    5/10 (no WHERE) or 5/6 (WHERE x < 6); counts per x against Binomial(2400, p) at 4.5 sigma."""
    path = make_db("CREATE TABLE t AS SELECT i // 10 AS uid, i % 10 AS x FROM range(400) r(i)",
                   protect={"t": {"unit": "uid", "max_rows": 5, "epsilon": 1e6, "bounds": {"x": (0, 9)},
                                  "sample_order": "stored"}})  # fmt: skip
    harness.add_harness_analyst(path)
    draws = 60
    totals = {"all": collections.Counter(), "x < 6": collections.Counter()}
    with harness.gateways(path) as (gw,):
        plans = {name: harness.plan_statement(gw, DP.format(opts="") + f"x, COUNT(*) FROM t {w} GROUP BY x")[1]
                 for name, w in (("all", ""), ("x < 6", "WHERE x < 6"))}  # fmt: skip
        for draw in range(draws):
            sample_order.build(gw._con, "t", "uid", seed=draw)
            for name, plan in plans.items():
                ex = exact_mod.run(gw._con, plan, harness.roster_charged(plan), harness.SALT)
                for key, n in zip(ex.keys, ex.components[(0, "count")][0]):
                    totals[name][key[0]] += int(n)
    for name, p, xs in (("all", 0.5, range(10)), ("x < 6", 5 / 6, range(6))):
        n = draws * 40
        for x in xs:
            assert abs(totals[name][x] - n * p) <= 4.5 * (n * p * (1 - p)) ** 0.5, (name, x, totals[name][x])


@pytest.mark.parametrize("change", ["removed", "added"])
def test_neighbours_with_coupled_orders(make_db, tmp_path, change):
    path = _protect(make_db)
    order = sample_order.table_sql("t")
    other = harness.copy_db(path, tmp_path / "neighbour.duckdb")
    if change == "removed":  # the heaviest subject (13 rows, duplicates) leaves with its order rows
        harness.mutate(other, ["DELETE FROM t WHERE uid = 7", f"DELETE FROM {order} WHERE unit = 7",
                               f"UPDATE {sample_order.REGISTRY} SET row_count = (SELECT count(*) FROM t)"])  # fmt: skip
    else:  # a new subject with extreme values, appended with ranks of its own
        harness.mutate(other, ["INSERT INTO t SELECT 5000, 'c', 10 FROM range(12)",
                               f"INSERT INTO {order} SELECT 5000, 12 - i FROM range(12) r(i)"])  # fmt: skip
        with Owner(other, create=False) as owner:
            owner.refresh_roster("t")  # which rebuilds the order: couple it again by hand
        harness.mutate(other, [f"CREATE OR REPLACE TABLE {order} AS SELECT * FROM {order} WHERE false"])
        with duckdb.connect(str(path), read_only=True) as c:
            base = c.execute(f"SELECT unit, {sample_order.RANK} FROM {order}").fetchall()
        con = duckdb.connect(str(other))
        con.executemany(f"INSERT INTO {order} VALUES (?, ?)", base + [(5000, 12 - i) for i in range(12)])
        con.close()
    with harness.gateways(path, other) as (gw_d, gw_n):
        for sql in _sqls():
            _, plan = harness.plan_statement(gw_n, sql)
            assert sample_order.current(gw_n._con, plan.table) is not None, "the neighbour's order must be in use"
            harness.check_statement(gw_d, gw_n, sql, context=f"{change}: {sql}")


def test_owner_declarations(make_db, tmp_path):
    path = _protect(make_db)
    con = lambda: duckdb.connect(str(path), read_only=True)  # noqa: E731
    with Owner(path, create=False) as owner:
        with pytest.raises(errors.PolicyError) as e:
            owner.protect("t", unit="uid", sample_order="sometimes")
        assert e.value.code == "DP312"
        with pytest.raises(errors.PolicyError) as e:
            owner.protect("t", unit="uid", options={"sample_order": "stored"})
        assert e.value.code == "DP312"
        before = sample_order.registered(owner.con, "t")
        owner.refresh_roster("t")
        assert sample_order.registered(owner.con, "t") not in (None, before)  # a fresh draw
        owner.protect("t", unit="uid", max_rows=4, epsilon=1e6, public_roster=True)  # not repeated: kept
        assert sample_order.registered(owner.con, "t") is not None
        owner.protect("t", unit="uid", max_rows=4, epsilon=1e6, public_roster=True, sample_order="per_query")
        assert sample_order.registered(owner.con, "t") is None
        owner.protect("t", unit="uid", max_rows=4, epsilon=1e6, public_roster=True, sample_order="stored")
        owner.unprotect("t")
    c = con()
    assert c.execute(f"SELECT count(*) FROM {sample_order.REGISTRY}").fetchone()[0] == 0
    assert not c.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'sample_order_t'").fetchone()[0]
    c.close()
    policy = tmp_path / "policy.toml"
    policy.write_text('[tables.t]\nunit = "uid"\nmax_rows = 4\nsample_order = "stored"\npublic_roster = true\n'
                      '[analysts.bob]\nepsilon = 1.0\n')  # fmt: skip
    with Owner(path, create=False) as owner:
        owner.apply_policy(str(policy))
        assert sample_order.registered(owner.con, "t") is not None


def test_the_harness_sees_an_uncoupled_order(make_db, tmp_path):
    """The check above can fail: a neighbour whose order is drawn afresh keeps other rows."""
    path = _protect(make_db)
    other = harness.copy_db(path, tmp_path / "neighbour.duckdb")
    harness.mutate(other, "DELETE FROM t WHERE uid = 7")
    with duckdb.connect(str(other)) as con:
        sample_order.build(con, "t", "uid", seed=7)  # a fresh draw for every subject
    with harness.gateways(path, other) as (gw_d, gw_n):
        with pytest.raises(harness.NeighbourViolation):
            harness.check_statement(gw_d, gw_n, STATEMENTS[0].format(opts=""))


# -- a stored order against later columns, copies and failed rebuilds ------------------------------
def _count_and_sum(gw, sql="SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) COUNT(*), SUM(x) FROM t"):
    got, _ = _exact(gw, sql)
    return got[(0, "count")][0], got[(1, "sum")][0]


def test_a_table_column_named_like_the_rank_is_never_the_rank(make_db):
    """A column __dp_rank added after protect() was read as the rank, and the one-pass filter's
    global count let a subject keep 3 rows with max_rows 2. Now such a table samples per query,
    and the order's rank comes first in dpgate's subquery whatever the table gains later."""
    path = make_db("CREATE TABLE t(uid INTEGER, x INTEGER); "
                   "INSERT INTO t VALUES (1,10),(1,20),(1,30),(2,1),(2,2),(2,3),(3,5)",
                   protect={"t": {"unit": "uid", "max_rows": 2, "epsilon": 1e6, "bounds": {"x": (0, 100)},
                                  "sample_order": "stored"}})  # fmt: skip
    harness.add_harness_analyst(path)
    harness.mutate(path, ["ALTER TABLE t ADD COLUMN __dp_rank INTEGER",
                          "UPDATE t SET __dp_rank = CASE WHEN uid = 2 AND x > 1 THEN 5 ELSE 1 END"])  # fmt: skip
    with harness.gateways(path) as (gw,):
        unit_stats.clear()
        _, plan = harness.plan_statement(gw, DP.format(opts="") + "COUNT(*) FROM t")
        assert not exact_mod.orderable(plan)
        assert _count_and_sum(gw)[0] == 5  # 2 + 2 + 1
        q = exact_mod._build(plan, harness.roster_charged(plan), ordered=True)  # were it used anyway
        ranks = gw._con.execute(f"SELECT __unit, __rank FROM ({q.src}) ORDER BY 1, 2").fetchall()
        assert sorted(r for u, r in ranks if u == 1) == [1, 2, 3]  # the order's ranks, not the column's


def test_a_missing_order_table_is_rebuilt(make_db):
    """An order table dropped by hand made every query a DP230 refusal until the owner acted."""
    path = _protect(make_db)
    harness.mutate(path, f"DROP TABLE {sample_order.table_sql('t')}")
    with harness.gateways(path) as (gw,):
        _, plan = harness.plan_statement(gw, STATEMENTS[0].format(opts=""))
        assert sample_order.current(gw._con, plan.table) is not None


def test_a_copied_file_does_not_share_the_facts(make_db, tmp_path):
    """The facts cached under an order's build id were reused for a copy of the file whose order
    had gained rows: a subject kept 12 rows with max_rows 2. The database's path is in the key."""
    path = make_db("CREATE TABLE t AS SELECT i % 5 AS uid, i AS x FROM range(10) r(i)",
                   protect={"t": {"unit": "uid", "max_rows": 2, "epsilon": 1e6, "bounds": {"x": (0, 100)},
                                  "sample_order": "stored"}})  # fmt: skip
    harness.add_harness_analyst(path)
    other = harness.copy_db(path, tmp_path / "copy.duckdb")
    order = sample_order.table_sql("t")
    harness.mutate(other, ["INSERT INTO t SELECT 1, 100 FROM range(10)",
                           f"INSERT INTO {order} SELECT 1, 3 + i FROM range(10) r(i)"])  # fmt: skip
    with harness.gateways(path, other) as (gw_d, gw_n):
        assert _count_and_sum(gw_d)[0] == 10
        assert _count_and_sum(gw_n)[0] == 10  # subject 1 still keeps 2 rows


def test_a_failed_rebuild_leaves_the_connection_usable(make_db, monkeypatch, count_blind):
    """An exception other than DuckDB's inside the rebuild left the analyst's connection in an
    open transaction. The rebuild now runs on a cursor of its own and rolls back on anything."""
    import dpgate
    from dpgate.catalog import sample_order as so

    path = _protect(make_db)
    harness.mutate(path, "INSERT INTO t VALUES (1, 'a', 1)")  # the order is now stale
    real = so.build
    monkeypatch.setattr(so, "RETRY_AFTER", 0.0)  # no back-off between the attempts here

    def boom(*a, **k):
        raise MemoryError("simulated")

    sql = DP.format(opts="") + "COUNT(*) FROM t"
    with dpgate.connect(str(path), analyst=harness.ANALYST, test_seed=harness.SEED) as con:
        con.cursor().execute(sql).fetchall()  # finds the order stale: samples by hash
        monkeypatch.setattr(so, "build", boom)
        with pytest.raises(MemoryError):
            con.cursor().execute(sql)  # the next planning tries to rebuild
        monkeypatch.setattr(so, "build", real)
        assert con.cursor().execute(sql).fetchall()  # the connection works, and rebuilds
        assert so.current(con.gateway._con, con.gateway.catalog().tables["t"]) is not None


def test_a_failing_rebuild_is_not_retried_by_every_query(make_db, monkeypatch):
    """A rebuild that keeps failing was retried, at full price, by every query."""
    from dpgate.catalog import sample_order as so

    path = _protect(make_db)
    harness.mutate(path, "INSERT INTO t VALUES (1, 'a', 1)")
    calls = []

    def failing(*a, **k):
        calls.append(1)
        raise errors.PolicyError("simulated", code="DP312")

    monkeypatch.setattr(so, "build", failing)
    with harness.gateways(path) as (gw,):
        for _ in range(4):
            _, plan = harness.plan_statement(gw, STATEMENTS[0].format(opts=""))
            exact_mod.run(gw._con, plan, harness.roster_charged(plan), harness.SALT)  # marks it stale
    assert len(calls) == 1


@pytest.mark.parametrize("order", ["stored", "per_query"])
def test_a_collation_put_on_the_unit_is_seen(make_db, order):
    """ALTER ... COLLATE NOCASE on the unit merged 'A' and 'a' without changing the
    unit fingerprint, the line-up check or the catalog: cached facts let the merged unit keep 4 rows
    (max_rows 2), and with a stored order its duplicate ranks fooled the filter's global count.
    Since COUNT(DISTINCT) and unique indexes ignore a collation, a collated unit is now
    refused outright, before any debit."""
    path = make_db("CREATE TABLE t(uid VARCHAR, x INTEGER); "
                   "INSERT INTO t VALUES ('A', 10), ('A', 20), ('a', 30), ('a', 40), ('b', 5), ('b', 6); "
                   "INSERT INTO t SELECT 'u' || i, 1 FROM range(20) r(i)",
                   protect={"t": {"unit": "uid", "max_rows": 2, "epsilon": 1e6, "bounds": {"x": (0, 100)},
                                  "sample_order": order}})  # fmt: skip
    harness.add_harness_analyst(path)
    sql = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) COUNT(*), SUM(x) FROM t WHERE x <> 5 AND x <> 6"
    unit_stats.clear()
    with harness.gateways(path) as (gw,):
        assert _count_and_sum(gw, sql)[0] == 24  # before: 'A' and 'a' are two subjects of 2 rows
        gw._con.execute("ALTER TABLE t ALTER uid TYPE VARCHAR COLLATE NOCASE")  # in the same process
        with pytest.raises(errors.PolicyError) as e:
            _count_and_sum(gw, sql)
        assert e.value.code == "DP329"


def test_explain_says_which_sample_is_used(make_db):
    import dpgate

    path = _protect(make_db)
    with dpgate.connect(str(path), analyst=harness.ANALYST) as con:
        rows = con.cursor().execute("EXPLAIN PRIVACY " + STATEMENTS[0].format(opts="")).fetchall()
    text = " ".join(str(c) for r in rows for c in r)
    assert "stored sample order" in text and "the same rows for every query" in text


def test_a_row_with_a_null_unit_past_the_order_is_a_mismatch(make_db):
    """The counts and the positional comparison are one statement: a positional join pads the shorter
    side with NULLs, so a row whose unit is NULL appended after the order's last row compares equal
    to the padding. The differing counts must still condemn the order."""
    path = _protect(make_db)
    harness.mutate(path, "INSERT INTO t VALUES (NULL, 'a', 1)")
    with harness.gateways(path) as (gw,):
        table = gw.catalog().protected("t")
        assert sample_order.mismatches(gw._con, "t", "uid") >= 1
        assert sample_order.current(gw._con, table) is None
