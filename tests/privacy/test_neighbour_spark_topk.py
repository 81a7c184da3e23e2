"""Top-k over a Spark table: the same exact statistics and answers as DuckDB, and the neighbour harness.

As ``test_neighbour_spark.py`` does for counting: a DuckDB file and its Spark twin plan every
statement alike. Without sampling (no subject holds more than ``max_groups`` of the counted items or
keys) the statistics the selection, the counts and key selection perturb are equal on both engines,
so with the same test seed the answers are equal row for row (the noise is drawn in dpgate's
process). The neighbour harness then checks on Spark that D and D′ (one subject's rows removed, or a
new subject with extreme rows added) differ by at most the declared sensitivities.
"""

from __future__ import annotations

import harness
import pytest
from conftest import duckdb_and_spark, spark_neighbours

import dpgate

ROWS = """
CREATE TABLE t AS SELECT
  i // 3 AS pid,
  ['sales', 'ops', 'it', 'hr'][i % 4 + 1] AS dept,
  CASE WHEN i % 17 = 0 THEN NULL ELSE 'c' || (i * i % 7) END AS city,
  CASE WHEN i % 23 = 0 THEN NULL WHEN i % 29 = 0 THEN 'NaN'::DOUBLE ELSE (i * 37 % 1000) / 3.0 - 20 END AS income,
  CAST((i * 13) % 9 + 5 AS INTEGER) AS age,
  i % 5 = 0 AS flag,
  CAST((i % 11) AS DECIMAL(10, 2)) AS amount
FROM range(900) r(i)
"""
PROTECT = {
    "t": {
        "unit": "pid", "max_rows": 3, "epsilon": 1e6,
        "domains": {"dept": ["sales", "ops", "it"], "flag": [True, False]},
        "bounds": {"income": (0, 300), "age": (5, 13), "amount": (0, 10)},
    }
}  # fmt: skip
ANALYSTS = {harness.ANALYST: {"epsilon": 1e6, "delta": 1.0, "epsilon_per_query": 100.0, "delta_per_query": 0.5}}


def _q(options: str, rest: str) -> str:
    return f"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 2, {options}) {rest}"


#: Every method, with and without counts, over declared domains, integer bounds (age), NULL keys and
#: key selection (city), a WHERE, and the wide-table form. max_groups >= k: nothing is sampled.
STATEMENTS = [
    _q("topk_method = 'oneshot'", "dept, COUNT(*) AS n FROM t GROUP BY dept ORDER BY n DESC LIMIT 2"),
    _q("topk_method = 'em'", "dept, flag, COUNT(*) AS n FROM t GROUP BY dept, flag ORDER BY n DESC LIMIT 3"),
    _q("topk_method = 'laplace'", "age, COUNT(DISTINCT pid) AS n FROM t WHERE income > 50 GROUP BY age "
                                  "ORDER BY n DESC LIMIT 3"),
    _q("topk_method = 'tps_em', max_groups_contributed = 3", "dept, age, COUNT(*) AS n FROM t GROUP BY dept, age "
                                                             "ORDER BY n DESC LIMIT 3"),
    _q("topk_method = 'tps_pfm', max_groups_contributed = 3", "city, COUNT(*) AS n FROM t WHERE flag "
                                                              "GROUP BY city ORDER BY n DESC LIMIT 2"),
    _q("topk_method = 'laplace'", "* FROM dp_top_k_columns('t', k => 2, counts => true)"),
]
#: One subject keeps at most one of the counted items or keys: sampled by each engine's keyed hash.
SAMPLED = [
    _q("topk_method = 'oneshot', max_groups_contributed = 1", "dept, COUNT(*) AS n FROM t GROUP BY dept "
                                                              "ORDER BY n DESC LIMIT 3"),
    _q("topk_method = 'laplace', max_groups_contributed = 1", "city, COUNT(*) AS n FROM t GROUP BY city "
                                                              "ORDER BY n DESC LIMIT 2"),
]
#: Whole answers: counts shown and not, the wide-table form, the personalization rules besides the
#: default 'sample' (no key selection: its noise is drawn in the engine's row order, which differs).
ANSWERS = [
    STATEMENTS[1], STATEMENTS[3], STATEMENTS[5],
    *(_q(f"personalization = '{rule}', topk_method = 'tps_pfm'", "age, COUNT(*) AS n FROM t GROUP BY age "
                                                                 "ORDER BY n DESC LIMIT 2")
      for rule in ("threshold", "minimum")),
]
#: The neighbour harness: every statistic kind (frequencies, truncated frequencies and the truncation
#: quality, key selection's subject counts, the counts, sampled and not, the wide-table form).
HARNESS = [STATEMENTS[2], STATEMENTS[4], STATEMENTS[5], SAMPLED[0]]


@pytest.fixture(scope="module")
def world(spark, tmp_path_factory):
    return duckdb_and_spark(spark, tmp_path_factory.mktemp("topk") / "topk.duckdb", ROWS, PROTECT, analysts=ANALYSTS)


def test_spark_topk_statistics_equal_duckdb_without_sampling(world):
    duck, spark = world
    with harness.gateways(duck, spark) as (gd, gs):
        for sql in STATEMENTS:
            a, b = harness.statistics_of(gd, sql), harness.statistics_of(gs, sql)
            assert any(v for v in a.stats["frequency"].values.values()), sql  # not all zero
            assert a.values() == b.values(), sql
            assert a.hints["labels"] == b.hints["labels"], sql


def test_spark_topk_sampled_totals_equal_duckdb(world):
    """With max_groups = 1 each engine's hash picks the kept item; how many (subject, item) pairs are
    kept cannot differ."""
    duck, spark = world
    with harness.gateways(duck, spark) as (gd, gs):
        for sql in SAMPLED:
            a, b = harness.statistics_of(gd, sql), harness.statistics_of(gs, sql)
            name = "counts of the selected items" if "dept" in sql else "key selection subjects"
            assert sum(a.stats[name].values.values()) == sum(b.stats[name].values.values()) > 0, sql


def _answer(path, sql: str):
    with dpgate.connect(str(path), analyst=harness.ANALYST, test_seed=harness.SEED) as con:
        cur = con.cursor()
        cur.execute(sql)
        return cur.fetchall(), cur.release.epsilon, cur.release.subjects_charged


def test_spark_topk_answers_equal_duckdb(world):
    """The same seed, the same exact statistics: the same released rows, ε and charged subjects."""
    duck, spark = world
    for sql in ANSWERS:
        a, b = _answer(duck, sql), _answer(spark, sql)
        assert a[0], sql
        assert a == b, sql


@pytest.fixture(scope="module")
def neighbours(spark, tmp_path_factory):
    """Spark twins of D and of two neighbours: subject 7 removed, and a subject 9999 with eight
    rows over every department, a new city and NULLs added."""
    return [twin for _, twin in spark_neighbours(spark, tmp_path_factory, ROWS, {
        "base": "",
        "removed": "DELETE FROM t WHERE pid = 7",
        "added": "INSERT INTO t SELECT 9999, ['sales', 'ops', 'it', 'hr'][i % 4 + 1], "
                 "CASE WHEN i < 4 THEN 'c99' END, 1e9, 5 + i, i % 2 = 0, 10 FROM range(8) r(i)",
    }, PROTECT, analysts=ANALYSTS)]


def test_neighbour_harness_on_spark_topk(neighbours):
    base, *others = neighbours
    with harness.gateways(base, *others) as (gd, *gns):
        for sql in HARNESS:
            before = harness.statistics_of(gd, sql)
            for name, gn in zip(("removed", "added"), gns):
                harness.check_statement(gd, gn, sql, context=f"spark top-k, {name}: {sql}", before=before)


def test_neighbour_harness_on_spark_topk_can_fail(neighbours):
    """The harness sees the added subject on Spark: with every bound at 1% a statistic exceeds it."""
    base, _, added = neighbours
    with harness.gateways(base, added) as (gd, gn):
        sql = STATEMENTS[2]  # laplace: frequencies, truncated frequencies, the truncation quality
        assert harness.compare(harness.statistics_of(gd, sql), harness.statistics_of(gn, sql), scale=0.01)
