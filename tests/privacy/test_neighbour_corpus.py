"""Every accepted DP statement of the corpus, on the demo database and its neighbours.

For each file of ``sql/queries/accepted/`` that is a DP statement over a protected table
(EXPLAIN PRIVACY: its inner statement; SHOW and public statements are not collected), the
harness computes the exact statistics the mechanism perturbs on D and on each neighbour D′
that changes the statement's table, and checks them against the plan (``harness``):

- five one-subject neighbours of the demo: per person of ``adult`` (the largest capital
  gain, an age-90 person, one with NULL workclass and occupation, a woman matching the
  WHERE of ``where_and_sum``, a young person matching no WHERE) and per basket (the largest,
  a one-item basket, a median one with bread, the largest without, the second largest),
  removed from every table of its subject space; for the graphs, the edge of largest support
  removed, the absent edge with the most common neighbours added, and two ordinary edits;
- the heavy world: the demo plus a person with five rows (max_rows = 1: extreme,
  out-of-bounds and out-of-domain values, NULLs) and a basket holding every item plus an
  unknown one (over max_rows = 48) with two flag rows, plus off-roster units; D′ removes
  the heavy subjects.

The outcome (answered, or the error code) is also compared through ``dpgate.connect`` with
a fixed test seed, on fresh copies of D and D′.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

import harness

ACCEPTED = Path(__file__).resolve().parents[2] / "sql" / "queries" / "accepted"
NOT_DP = {"public", "show_budget", "show_releases"}


def _expected_class(path: Path) -> str:
    m = re.search(r"^-- expect: class=(\S+)", path.read_text(), re.M)
    assert m, f"{path.name} has no expect header"
    return m.group(1)


CORPUS = [p for p in sorted(ACCEPTED.glob("*.sql")) if _expected_class(p) not in NOT_DP]

#: Shapes the corpus does not hold, on the same neighbours: top-k with DP key selection, top-k
#: counts with fewer groups per subject than k (the sampled ``noisy_counts`` path) under TPS,
#: distinct counts over the heavy basket, and the other subgraph counts.
EXTRA = {
    "topk_key_selection": "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-6) capital_gain, "
    "COUNT(*) AS n FROM adult GROUP BY capital_gain ORDER BY n DESC LIMIT 3",
    "topk_tps_em_sampled_counts": "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, topk_method = 'tps_em', "
    "max_groups_contributed = 2) item, COUNT(DISTINCT basket_id) AS n FROM baskets GROUP BY item ORDER BY n DESC LIMIT 4",
    "baskets_distinct_counts": "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) COUNT(*) AS n, "
    "COUNT(DISTINCT item) AS items, COUNT(DISTINCT basket_id) AS b FROM baskets WHERE item <> 'fruit'",
    "subject_join": "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) COUNT(*) AS n, "
    "COUNT(DISTINCT b.basket_id) AS baskets, SUM(f.baby_needs) AS baby FROM baskets b JOIN basket_flags f "
    "USING (basket_id) WHERE b.item <> 'fruit'",
    "variance": "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) sex, VAR_POP(age) AS v, "
    "STDDEV_SAMP(capital_gain) AS sd FROM adult GROUP BY sex",
    "quantiles": "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) sex, MEDIAN(age) AS m, "
    "QUANTILE_CONT(capital_gain, 0.9) AS q9 FROM adult GROUP BY sex",
    "per_subject_histogram": "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) n, COUNT(*) AS baskets "
    "FROM (SELECT basket_id, COUNT(*) AS n FROM baskets WHERE item <> 'fruit' GROUP BY basket_id) b GROUP BY n",
    "per_subject_average": "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) AVG(n) AS items, "
    "SUM(d) AS distinct_items FROM (SELECT basket_id, COUNT(*) AS n, COUNT(DISTINCT item) AS d FROM baskets "
    "GROUP BY basket_id)",
    "graph_other_counts": "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) KTRIANGLE_COUNT(src, dst, 2) AS kt, "
    "KCLIQUE_COUNT(src, dst, 4) AS k4, KSTAR_COUNT(src, dst, 3) AS s3 FROM karate WHERE src < 20",
    # the shift statistics of k-stars and k-triangles (the error bars' width statistic) on a dense graph:
    # the heaviest edge removed and the top-degree node's best absent pair added move them by at most 1
    "graph_shift_statistics": "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) KSTAR_COUNT(src, dst, 2) AS s2, "
    "KTRIANGLE_COUNT(src, dst, 1) AS t1, KTRIANGLE_COUNT(src, dst, 2) AS t2 FROM wormnet",
}
STATEMENTS = [pytest.param(p.read_text(), id=p.stem) for p in CORPUS] + [
    pytest.param(sql, id=name) for name, sql in EXTRA.items()
]


@pytest.fixture(scope="session")
def world(demo_template, tmp_path_factory) -> harness.DemoWorld:
    return harness.demo_world(demo_template, tmp_path_factory.mktemp("neighbour_world"))


@pytest.fixture(scope="module")
def gws(world):
    paths = [world.base, *(n.path for n in world.neighbours), world.heavy, world.heavy_neighbour.path]
    with harness.gateways(*paths) as gateways:
        yield {str(p): g for p, g in zip(paths, gateways)}


def _pairs(world: harness.DemoWorld, table: str) -> list[tuple[Path, harness.Neighbour]]:
    pairs = [(world.base, n) for n in world.neighbours if table in n.changed]
    if table in world.heavy_neighbour.changed:
        pairs.append((world.heavy, world.heavy_neighbour))
    return pairs


def test_the_corpus_has_every_query_class():
    assert {_expected_class(p) for p in CORPUS} >= {"count", "top_k", "subgraph", "synthetic", "explain"}


@pytest.mark.parametrize("sql", STATEMENTS)
def test_corpus_statement_moves_within_its_sensitivity(sql, world, gws):
    _, plan = harness.plan_statement(gws[str(world.base)], sql)
    table = plan.table.name
    pairs = _pairs(world, table)
    if plan.query_class == "synthetic":  # the slowest class: three neighbours (NULLs, extremes, heavy)
        pairs = [pairs[0], pairs[2], pairs[-1]]
    assert len(pairs) >= 2, f"no neighbours for {table}"
    failures, moved = [], 0
    computed: dict[Path, harness.Exact] = {}
    for d, n in pairs:
        if d not in computed:
            computed[d] = harness.statistics_of(gws[str(d)], sql)
        try:
            before, after = harness.check_statement(gws[str(d)], gws[str(n.path)], sql, context=n.changed[table],
                                                    before=computed[d])  # fmt: skip
        except AssertionError as e:
            failures.append(str(e))
            continue
        assert before is not None, "an accepted corpus statement was refused"
        moved += bool(harness.compare(before, after, scale=0.0))
    assert not failures, "\n".join(failures)
    assert moved, "no neighbour changed any statistic: the check would be vacuous"


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
def test_corpus_statement_ends_the_same_way_on_neighbours(path, world, gws, tmp_path):
    sql = path.read_text()
    _, plan = harness.plan_statement(gws[str(world.base)], sql)
    table = plan.table.name
    # One neighbour per statement keeps the run short: the heavy subject where there is one,
    # else the edge of largest support.
    if table in world.heavy_neighbour.changed:
        pairs = [(world.heavy, world.heavy_neighbour)]
    else:
        pairs = [(world.base, world.neighbours[0])]
    expected = _expected_class(path)
    for i, (d, n) in enumerate(pairs):
        d_copy = harness.copy_db(d, tmp_path / f"d{i}.duckdb")
        n_copy = harness.copy_db(n.path, tmp_path / f"n{i}.duckdb")
        try:
            out_d = harness.gateway_outcome(d_copy, sql)
            out_n = harness.gateway_outcome(n_copy, sql)
        finally:
            for p in (d_copy, n_copy):
                for f in (p, Path(str(p) + ".wal")):
                    if f.exists():
                        os.remove(f)
        assert out_d == out_n, f"outcome differs on D and D′ ({n.changed[table]}): {out_d} vs {out_n}"
        if expected != "explain":
            assert out_d == ("ok", expected), out_d
