"""Set-valued, sequence and spatial releases over Spark tables: the same inputs and release, the harness.

Spark reads each charged subject's bounded records (distinct items, at most ``max_rows`` by a keyed
hash), sequences (its first l⊤ rows in position order) or points (NULL and NaN dropped, at most
``max_rows``); dpgate's process numbers them in their units' order, as DuckDB's statement does, and
runs the mechanism. So with nothing sampled and the
same seed, the released tables are DuckDB's row for row; the neighbour harness then checks on Spark
that one subject moves one record, one sequence, or at most ``max_rows`` points of each node count.
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
    ['home', 'work', 'shop', 'gym', 'park', 'moon'][(i * i + i // 4) % 6 + 1] AS state FROM range(4000) r(i);
CREATE TABLE places AS SELECT i // 2 AS pid,
    CASE WHEN i % 31 = 0 THEN NULL WHEN i % 37 = 0 THEN 'NaN'::DOUBLE ELSE (i * 7919 % 1000) / 10.0 END AS x,
    CAST((i * i) % 97 AS INTEGER) AS y, CAST(i % 250 AS DECIMAL(6, 2)) AS z, CAST(i AS DECIMAL(18, 2)) AS w
FROM range(6000) r(i)
"""
PROTECT = {
    "baskets": {"unit": "basket", "max_rows": 6, "epsilon": 1e6, "domains": {"item": ITEMS}},
    "trips": {"unit": "uid", "max_rows": 5, "epsilon": 1e6, "domains": {"state": STATES}},
    "places": {"unit": "pid", "max_rows": 2, "epsilon": 1e6, "experimental": True,
               "bounds": {"x": (0, 100), "y": (0, 96), "z": (0, 100), "w": (0, 6000)}},
}  # fmt: skip
ANALYSTS = {harness.ANALYST: {"epsilon": 1e6, "delta": 1.0, "epsilon_per_query": 100.0, "delta_per_query": 0.5}}
RELEASES = {
    "b_parts": ("CREATE SYNTHETIC TABLE b_parts FROM baskets USING diffpart WITH (epsilon = 2, item = 'item', "
                "method = 'partition', fanout = 3)", ("", "_itemsets", "_supports")),
    "b_pairs": ("CREATE SYNTHETIC TABLE b_pairs FROM baskets USING diffpart WITH (epsilon = 2, item = 'item', "
                "method = 'marginals')", ("", "_itemsets", "_supports")),
    "m": ("CREATE SYNTHETIC TABLE m FROM trips USING privtree_markov WITH (epsilon = 2, symbol = 'state', "
          "position = 'pos')", ("", "_model")),
    "p": ("CREATE SYNTHETIC TABLE p FROM places USING privtree WITH (epsilon = 2, columns = 'x, y, z')", ("",)),
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
        for name in ("b_parts", "m", "p"):
            sql = RELEASES[name][0].replace(f"TABLE {name} ", f"TABLE {name}_again ")  # the name is taken now
            a, b = harness.statistics_of(gd, sql), harness.statistics_of(gs, sql)
            assert a.values() == b.values() and a.hints["rows"] == b.hints["rows"] > 1000, name


@pytest.fixture(scope="module")
def neighbours(spark, tmp_path_factory):
    """Spark twins of D and of two neighbours: basket 7 and traveller 7 removed; a basket of every
    item with repeats (over max_rows) and a traveller with twelve rows added."""
    return [twin for _, twin in spark_neighbours(spark, tmp_path_factory, ROWS, {
        "base": "",
        "removed": "DELETE FROM baskets WHERE basket = 7; DELETE FROM trips WHERE uid = 7; DELETE FROM places WHERE pid = 7",
        "added": "INSERT INTO baskets SELECT 9999, unnest(['bread', 'milk', 'eggs', 'tea', 'jam', 'rice', 'rice', "
                 "'soap', 'milk']); INSERT INTO trips SELECT 9999, 12 - i, ['gym', 'park'][i % 2 + 1] FROM range(12) r(i); "
                 "INSERT INTO places SELECT 9999, 99.9 - i, 96, 100, 6000 FROM range(7) r(i)",
    }, PROTECT, analysts=ANALYSTS)]  # fmt: skip


def test_neighbour_harness_on_spark_releases(neighbours):
    base, *others = neighbours
    with harness.gateways(base, *others) as (gd, *gns):
        for name in ("b_pairs", "m", "p"):
            sql = RELEASES[name][0]
            before = harness.statistics_of(gd, sql)
            for label, gn in zip(("removed", "added"), gns):
                harness.check_statement(gd, gn, sql, context=f"spark {name}, {label}", before=before)


def test_what_spark_refuses_for_releases_is_free(world, spark):
    """Every vetted synthesizer runs on Spark; the experimental generalized sample does not (DP260),
    refused before the debit even where the owner allows experimental releases."""
    _, on_spark = world
    with dpgate.connect(str(on_spark), analyst=harness.ANALYST, spark=spark) as con:
        cur = con.cursor()
        budget = cur.execute("SHOW BUDGET").fetchall()
        with pytest.raises(dpgate.Error) as info:
            cur.execute("CREATE SYNTHETIC TABLE g FROM places USING supermodular WITH (columns = 'y')")
        assert info.value.code == "DP260" and "USING mst | privbayes" in info.value.hint
        # a DECIMAL of more than 15 digits becomes a different DOUBLE on each engine: refused, free
        with pytest.raises(dpgate.Error) as info:
            cur.execute("CREATE SYNTHETIC TABLE q FROM places USING privtree WITH (columns = 'x, w')")
        assert info.value.code == "DP261" and "DECIMAL(18,2)" in info.value.message
        assert cur.execute("SHOW BUDGET").fetchall() == budget
