"""Set-valued and sequence releases over Spark tables: the same records, the same release, the harness.

Spark reads each charged subject's bounded records (distinct items, at most ``max_rows`` by a keyed
hash) or sequences (its first l⊤ rows in position order); dpgate's process numbers them in their
units' order, as DuckDB's statement does, and runs the mechanism. So with nothing sampled and the
same seed, the released tables are DuckDB's row for row; the neighbour harness then checks on Spark
that one subject moves one record or one sequence.
"""

from __future__ import annotations

import harness
import pytest
from conftest import duckdb_and_spark, spark_neighbours

import dpgate

ITEMS = ["bread", "milk", "eggs", "tea", "jam", "rice"]
STATES = ["home", "work", "shop", "gym", "park"]
ROWS = """
CREATE TABLE baskets AS SELECT b AS basket, unnest(CASE b % 5 WHEN 0 THEN ['bread'] WHEN 1 THEN ['bread', 'milk']
    WHEN 2 THEN ['milk', 'eggs', 'tea'] WHEN 3 THEN ['rice', 'rice', 'soap'] ELSE ['jam', 'tea', 'bread', 'eggs'] END)
    AS item FROM range(1500) r(b);
CREATE TABLE trips AS SELECT i // 4 AS uid, CASE WHEN i % 9 = 0 THEN NULL ELSE (i * 7) % 4 END AS pos,
    ['home', 'work', 'shop', 'gym', 'park', 'moon'][(i * i + i // 4) % 6 + 1] AS state FROM range(4000) r(i)
"""
PROTECT = {
    "baskets": {"unit": "basket", "max_rows": 6, "epsilon": 1e6, "domains": {"item": ITEMS}},
    "trips": {"unit": "uid", "max_rows": 5, "epsilon": 1e6, "domains": {"state": STATES}},
}  # fmt: skip
ANALYSTS = {harness.ANALYST: {"epsilon": 1e6, "delta": 1.0, "epsilon_per_query": 100.0, "delta_per_query": 0.5}}
RELEASES = {
    "b_parts": ("CREATE SYNTHETIC TABLE b_parts FROM baskets USING diffpart WITH (epsilon = 2, item = 'item', "
                "method = 'partition', fanout = 3)", ("", "_itemsets", "_supports")),
    "b_pairs": ("CREATE SYNTHETIC TABLE b_pairs FROM baskets USING diffpart WITH (epsilon = 2, item = 'item', "
                "method = 'marginals')", ("", "_itemsets", "_supports")),
    "m": ("CREATE SYNTHETIC TABLE m FROM trips USING privtree_markov WITH (epsilon = 2, symbol = 'state', "
          "position = 'pos')", ("", "_model")),
}  # fmt: skip


@pytest.fixture(scope="module")
def world(spark, tmp_path_factory):
    return duckdb_and_spark(spark, tmp_path_factory.mktemp("rel") / "rel.duckdb", ROWS, PROTECT, analysts=ANALYSTS)


def _tables(path, spark, name: str) -> dict:
    sql, sides = RELEASES[name]
    with dpgate.connect(str(path), analyst=harness.ANALYST, test_seed=harness.SEED, spark=spark) as con:
        cur = con.cursor()
        cur.execute(sql)
        out = {"charged": (cur.release.epsilon, cur.release.subjects_charged)}
        for side in sides:
            cur.execute(f"SELECT * FROM {name}{side} ORDER BY ALL")
            out[side] = cur.fetchall()
    return out


@pytest.mark.parametrize("name", list(RELEASES))
def test_spark_release_equals_duckdb_without_sampling(world, spark, name):
    duck, on_spark = world
    a, b = _tables(duck, spark, name), _tables(on_spark, spark, name)
    assert len(a[""]) > 100
    assert a == b


def test_spark_records_equal_duckdb(world):
    """The exact inputs: every record (a subject's items) and every sequence, as multisets."""
    duck, on_spark = world
    with harness.gateways(duck, on_spark) as (gd, gs):
        for name in ("b_parts", "m"):
            sql = RELEASES[name][0].replace(f"TABLE {name} ", f"TABLE {name}_again ")  # the name is taken now
            a, b = harness.statistics_of(gd, sql), harness.statistics_of(gs, sql)
            assert a.values() == b.values() and a.hints["rows"] == b.hints["rows"] > 1000, name


@pytest.fixture(scope="module")
def neighbours(spark, tmp_path_factory):
    """Spark twins of D and of two neighbours: basket 7 and traveller 7 removed; a basket of every
    item with repeats (over max_rows) and a traveller with twelve rows added."""
    return [twin for _, twin in spark_neighbours(spark, tmp_path_factory, ROWS, {
        "base": "",
        "removed": "DELETE FROM baskets WHERE basket = 7; DELETE FROM trips WHERE uid = 7",
        "added": "INSERT INTO baskets SELECT 9999, unnest(['bread', 'milk', 'eggs', 'tea', 'jam', 'rice', 'rice', "
                 "'soap', 'milk']); INSERT INTO trips SELECT 9999, 12 - i, ['gym', 'park'][i % 2 + 1] FROM range(12) r(i)",
    }, PROTECT, analysts=ANALYSTS)]  # fmt: skip


def test_neighbour_harness_on_spark_releases(neighbours):
    base, *others = neighbours
    with harness.gateways(base, *others) as (gd, *gns):
        for name in ("b_pairs", "m"):
            sql = RELEASES[name][0]
            before = harness.statistics_of(gd, sql)
            for label, gn in zip(("removed", "added"), gns):
                harness.check_statement(gd, gn, sql, context=f"spark {name}, {label}", before=before)
