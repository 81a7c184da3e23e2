"""The fast paths chosen from cached table facts give exactly the statistics of the full pass.

``backends.duckdb.run`` skips the per-subject row count when no subject of the whole table exceeds
the bound, and the restriction to charged rows when every row's subject is charged
(``dpgate.catalog.unit_stats``). On the same salt, every component must equal the full path's,
for subjects within and over their bounds, NULL and off-roster units, WHERE, lookup joins,
group bounding and key selection; and a change to the table must be seen at once.
"""

from __future__ import annotations

import numpy as np
import pytest

import harness
from dpgate.catalog import unit_stats
from dpgate.backends import duckdb as exact_mod

DP = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1{opts}) "
SETUP = """
CREATE TABLE t AS SELECT i % 300 AS uid, ['a', 'b', 'c'][1 + i % 3] AS g, (i * 7) % 11 AS x, i % 5 AS store
FROM range(1200) r(i);
CREATE TABLE stores AS SELECT s AS store, ['n', 's'][1 + s % 2] AS region FROM range(5) r(s);
"""
STATEMENTS = [
    DP + "g, COUNT(*), SUM(x), AVG(x) FROM t GROUP BY g",
    DP + "COUNT(*), COUNT(DISTINCT uid) FROM t WHERE x > 3",
    DP + "s.region, COUNT(*) FROM t JOIN stores s USING (store) GROUP BY s.region",
    DP + "g, COUNT(DISTINCT uid) AS n FROM t GROUP BY g",
]


def _components(gw, sql, use_stats, salt=harness.SALT):
    _, plan = harness.plan_statement(gw, sql)
    ex = exact_mod.run(gw._con, plan, harness.roster_charged(plan), salt, use_stats=use_stats)
    return {k: [int(v) for v in arr.ravel()] for k, arr in ex.components.items()}, ex.keys, plan


@pytest.fixture
def world(make_db, tmp_path):
    def build(max_rows, extra_sql=None):
        path = make_db(SETUP, protect={"t": {"unit": "uid", "max_rows": max_rows, "max_groups": 2, "epsilon": 1e6,
                                             "domains": {"g": ["a", "b", "c"]}, "bounds": {"x": (0, 10)}}})  # fmt: skip
        harness.add_harness_analyst(path)
        harness.sample_per_query(path)  # compared paths share the per-query hash
        if extra_sql:
            harness.mutate(path, extra_sql)
        return path

    return build


@pytest.mark.parametrize("max_rows", [4, 3, 2])  # 4: nobody over the bound; 3, 2: everyone (4 rows each)
@pytest.mark.parametrize("extra", [None, "INSERT INTO t VALUES (NULL, 'a', 1, 1), (9999, 'b', 2, 2), (9999, 'a', 3, 3)"])
def test_fast_paths_equal_the_full_pass(world, max_rows, extra):
    path = world(max_rows, extra)
    unit_stats.clear()
    with harness.gateways(path) as (gw,):
        for sql in STATEMENTS:
            sql = sql.format(opts=", max_groups_contributed = 1" if "DISTINCT uid" in sql else "")
            fast, keys_f, _ = _components(gw, sql, True)
            full, keys_s, _ = _components(gw, sql, False)
            assert keys_f == keys_s and fast == full, sql


def test_the_paths_are_taken(world):
    path = world(4)
    unit_stats.clear()
    with harness.gateways(path) as (gw,):
        stats = unit_stats.current(gw._con, gw.catalog().protected("t"))
        assert (stats.most_rows, stats.null_unit_rows, stats.off_roster_units) == (4, 0, 0)


def test_a_change_to_the_table_is_seen_at_once(world):
    """Subject 7 gains 10 rows after the facts were cached: it must be sampled down to max_rows."""
    path = world(4)
    unit_stats.clear()
    sql = DP.format(opts="") + "COUNT(*) FROM t WHERE uid = 7"
    with harness.gateways(path) as (gw,):
        before, _, _ = _components(gw, sql, True)
    harness.mutate(path, "INSERT INTO t SELECT 7, 'a', 1, 1 FROM range(10)")
    with harness.gateways(path) as (gw,):
        after, _, _ = _components(gw, sql, True)
        stats = unit_stats.current(gw._con, gw.catalog().protected("t"))
    assert stats.most_rows == 14
    (label,) = [k for k in after]
    assert before[label] == [4] and after[label] == [4]  # cut to max_rows = 4, not 14


def test_a_new_off_roster_unit_turns_the_restriction_back_on(world):
    path = world(4)
    unit_stats.clear()
    sql = DP.format(opts="") + "COUNT(*) FROM t"
    with harness.gateways(path) as (gw,):
        base, _, _ = _components(gw, sql, True)
    harness.mutate(path, "INSERT INTO t VALUES (5555, 'a', 1, 1), (NULL, 'b', 1, 1)")
    with harness.gateways(path) as (gw,):
        after, _, _ = _components(gw, sql, True)
    assert after == base  # the rows of a unit not on the roster, and NULL units, are never counted
    assert np.all(np.asarray(list(base.values())[0]) == 1200)


def test_subjects_left_out_keep_the_restriction(world):
    """Half the roster charged (others exhausted): their rows never count, on either path."""
    path = world(4)
    unit_stats.clear()
    with harness.gateways(path) as (gw,):
        _, plan = harness.plan_statement(gw, DP.format(opts="") + "g, COUNT(*) FROM t GROUP BY g")
        half = f"(SELECT unit, 0 AS part FROM {plan.table.roster_table_sql} WHERE unit % 2 = 0)"
        fast = exact_mod.run(gw._con, plan, half, harness.SALT, use_stats=True)
        full = exact_mod.run(gw._con, plan, half, harness.SALT, use_stats=False)
    counts = {k: [int(v) for v in a.ravel()] for k, a in fast.components.items()}
    assert counts == {k: [int(v) for v in a.ravel()] for k, a in full.components.items()}
    assert sum(next(iter(counts.values()))) == 600  # 150 charged subjects of 4 rows


def test_a_uniform_debit_covers_the_roster_only_up_to_its_generation(world):
    """The roster grew after the generation the debit charged: the restriction must stay on."""
    path = world(4)
    unit_stats.clear()
    with harness.gateways(path) as (gw,):
        _, plan = harness.plan_statement(gw, DP.format(opts="") + "COUNT(*) FROM t")
        roster = plan.table.roster_table_sql
        (gen,) = gw._con.execute(f"SELECT max(added) FROM {roster}").fetchone()
        gw._con.execute(f"UPDATE {roster} SET added = {gen + 1} WHERE unit >= 150")  # added after generation gen
        older = f"(SELECT unit, 0 AS part FROM {roster} WHERE added <= {gen})"
        ex = exact_mod.run(gw._con, plan, older, harness.SALT, roster_generation=gen)
        full = exact_mod.run(gw._con, plan, older, harness.SALT, use_stats=False)
    assert [int(v) for v in next(iter(ex.components.values())).ravel()] == [600]
    assert {k: list(v.ravel()) for k, v in ex.components.items()} == {k: list(v.ravel()) for k, v in full.components.items()}


def test_a_lookup_that_gains_a_duplicate_after_planning_is_still_bounded(world):
    """The key was unique when planned; a duplicate added before the run doubles some rows, and the
    bound still holds (the fast path is not taken with joins)."""
    path = world(4)
    unit_stats.clear()
    with harness.gateways(path) as (gw,):
        _, plan = harness.plan_statement(gw, DP.format(opts="") + "COUNT(*) FROM t JOIN stores s USING (store)")
        gw._con.execute("INSERT INTO stores VALUES (1, 'dup')")
        ex = exact_mod.run(gw._con, plan, harness.roster_charged(plan), harness.SALT)
    (count,) = [int(v) for v in next(iter(ex.components.values())).ravel()]
    assert count <= 4 * 300


def test_a_table_with_a_generated_column_never_uses_facts(make_db, monkeypatch):
    """A generated column is computed at each read (random() is allowed): facts counted in one scan
    need not describe the units the aggregate computes, so such a table always takes the full pass."""
    path = make_db("CREATE TABLE t (uid INTEGER, x INTEGER, y DOUBLE GENERATED ALWAYS AS (random()) VIRTUAL); "
                   "INSERT INTO t (uid, x) SELECT i % 50, i % 7 FROM range(200) r(i)",
                   protect={"t": {"unit": "uid", "max_rows": 2, "epsilon": 1e6, "bounds": {"x": (0, 6)}}})  # fmt: skip
    harness.add_harness_analyst(path)

    def no_facts(*args, **kwargs):
        raise AssertionError("table facts used for a table with a generated column")

    monkeypatch.setattr(unit_stats, "current", no_facts)
    with harness.gateways(path) as (gw,):
        _, plan = harness.plan_statement(gw, DP.format(opts="") + "COUNT(*), SUM(x) FROM t")
        ex = exact_mod.run(gw._con, plan, harness.roster_charged(plan), harness.SALT)
    assert int(ex.components[(0, "count")][0][0]) == 100  # 50 subjects cut to max_rows = 2


def test_one_read_gives_the_definition_the_key_and_the_roster_additions(world):
    """``unit_stats.read`` replaces four statements with one: its parts must equal what they read."""
    from dpgate.catalog import sample_order

    path = world(4)
    with harness.gateways(path) as (gw,):
        table = gw.catalog().protected("t")
        roster = table.roster_table_sql
        (gen,) = gw._con.execute(f"SELECT max(added) FROM {roster}").fetchone()
        first = unit_stats.read(gw._con, table, generation=gen)
        assert first.definition == sample_order.definition(gw._con, "t") and "CREATE TABLE" in first.definition
        assert first.key == unit_stats.fingerprint(gw._con, table) and first.added_after == 0
        assert unit_stats.read(gw._con, table).added_after is None  # not asked
        gw._con.execute(f"UPDATE {roster} SET added = {gen + 1} WHERE unit < 7")
        assert unit_stats.read(gw._con, table, generation=gen).added_after == 7
        assert unit_stats.read(gw._con, table, generation=gen).key == first.key  # the same units
        gw._con.execute("UPDATE t SET uid = 5 WHERE uid = 6")
        moved = unit_stats.read(gw._con, table).key
        assert moved != first.key
        gw._con.execute("ALTER TABLE t ADD COLUMN z INTEGER")
        altered = unit_stats.read(gw._con, table)
        assert altered.key != moved and altered.definition != first.definition


def test_a_view_whose_units_change_at_each_read_is_bounded_in_the_aggregates_statement(make_db):
    """A protected view computes its units anew in every statement (random() is allowed in one): facts or
    a per-subject count read by one statement need not describe the rows the aggregate computes. The
    bound held on neither path before (subject 1 kept up to 115 rows with max_rows =
    100). Now the view's rows are bounded inside the aggregate's own statement, on both paths."""
    path = make_db("CREATE TABLE base AS SELECT i AS id FROM range(2, 202) r(i);"
                   "CREATE VIEW t AS SELECT CASE WHEN random() < 0.5 THEN 1 ELSE id END AS uid FROM base",
                   protect={"t": {"unit": "uid", "max_rows": 100, "epsilon": 1e6}})  # fmt: skip
    harness.add_harness_analyst(path)
    sql = DP.format(opts="") + "COUNT(*) FROM t WHERE uid = 1"
    counts = []
    with harness.gateways(path) as (gw,):
        assert not gw.catalog().protected("t").base_table
        for _ in range(20):
            for use_stats in (True, False):
                unit_stats.clear()
                comps, _, _ = _components(gw, sql, use_stats)
                counts.append(comps[(0, "count")][0])
    assert max(counts) <= 100  # every run: P(subject 1 has over 100 of 200 rows) is about 1/2 per read
    assert max(counts) == 100  # and the bound was reached (sampled down) in some run: P(never) < 2^-30
