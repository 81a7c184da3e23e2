"""Only the charged subjects' rows reach the aggregation.

For every corpus DP statement over a table with subjects, the exact statistics computed on
the heavy world (a heavy subject over max_rows, off-roster units) with the charged relation
restricted to the roster units ``u % 3 = 0`` must equal those computed on a database where
only those subjects' rows exist: rows of uncharged subjects (and of units on no roster) never
reach the aggregation, neither as values nor as keys, nor by changing anyone's row sample.

Then the same with the charged relation the ledger really builds (a debit on a throwaway
copy) under each personalization rule — sampled subjects, the threshold, the minimum,
partitions and rounds (several partitions per subject) — and the neighbour check with that
relation: each partition's statistics move by at most the declared sensitivity.
"""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import numpy as np
import pytest

import dpgate

import harness

ACCEPTED = Path(__file__).resolve().parents[2] / "sql" / "queries" / "accepted"
SUBJECT_CLASSES = {"count", "top_k", "synthetic", "explain"}


def _expected_class(path: Path) -> str:
    return re.search(r"^-- expect: class=(\S+)", path.read_text(), re.M).group(1)


CORPUS = [p for p in sorted(ACCEPTED.glob("*.sql")) if _expected_class(p) in SUBJECT_CLASSES]


@pytest.fixture(scope="session")
def world(demo_template, tmp_path_factory) -> harness.DemoWorld:
    return harness.demo_world(demo_template, tmp_path_factory.mktemp("neighbour_world"))


@pytest.fixture(scope="module")
def gws(world):
    with harness.gateways(world.heavy, world.restricted) as (heavy, restricted):
        yield heavy, restricted


def _third(plan) -> str:
    return f"(SELECT unit, 0 AS part FROM {plan.table.roster_table_sql} WHERE unit % 3 = 0)"


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
def test_rows_of_uncharged_subjects_never_reach_the_aggregation(path, gws):
    heavy, restricted = gws
    sql = path.read_text()
    _, plan = harness.plan_statement(heavy, sql)
    charged_third = harness.statistics_of(heavy, sql, charged=_third(plan))
    only_third = harness.statistics_of(restricted, sql)
    found = harness.differences(charged_third, only_third)
    assert not found, "rows of uncharged subjects reached the aggregation:\n" + "\n".join(found)
    everyone = harness.statistics_of(heavy, sql)
    assert harness.differences(everyone, charged_third), "restricting the charged set changed nothing: vacuous"


# -- the charged relation the ledger builds --------------------------------------------------------
ADULT = ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1{opts}) education, COUNT(*) AS n, AVG(age) AS a, "
         "SUM(capital_gain) AS s, COUNT(DISTINCT person_id) AS p FROM adult WHERE hours_per_week > 20 "
         "GROUP BY education")  # fmt: skip
DEBITS = {
    "sample": ADULT.format(opts=""),
    "threshold": ADULT.format(opts=", personalization = 'threshold'"),
    "minimum": ADULT.format(opts=", personalization = 'minimum'"),
    "partition": ADULT.format(opts=", personalization = 'partition', partitions = 3, min_partition_size = 10"),
    "t_round": ADULT.format(opts=", personalization = 't_round', rounds = 2, min_partition_size = 10"),
    "key selection": "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-6, personalization = "
                     "'threshold') capital_gain, COUNT(*) FROM adult GROUP BY capital_gain",
    "top-k": "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) item, COUNT(*) AS n FROM baskets "
             "GROUP BY item ORDER BY n DESC LIMIT 5",
    "synthetic": "CREATE SYNTHETIC TABLE s FROM adult USING privbayes WITH (epsilon = 1, bins = 8, "
                 "columns = 'age, education, sex, income')",
}  # fmt: skip


_on_heavy: dict[str, tuple[harness.Exact, list[tuple], int]] = {}


def _debited_on_heavy(world, rule: str, tmp_path: Path):
    """``_debited`` on a throwaway copy of the heavy world, once per rule (two tests use it)."""
    if rule not in _on_heavy:
        _on_heavy[rule] = _debited(harness.copy_db(world.heavy, tmp_path / "heavy.duckdb"), DEBITS[rule])
    return _on_heavy[rule]


def _debited(path: Path, sql: str) -> tuple[harness.Exact, list[tuple], int]:
    """Debit on ``path`` (a throwaway copy), then the exact statistics over the real charged relation."""
    with dpgate.connect(str(path), analyst=harness.ANALYST, test_seed=harness.SEED) as con:
        gw = con.gateway
        _, plan = harness.plan_statement(gw, sql)
        debit = gw.ledger.reserve(gw._cost(plan, sql, True))
        try:
            if plan.charge.rule == "sample" and debit.temp:
                gw.ledger.thin_sample(debit, rng=np.random.default_rng(harness.SEED))
            n_parts = len(debit.subjects.parts) if debit.subjects is not None else 1
            mapping = sorted(gw._con.execute(f"SELECT unit, part FROM {debit.charged}").fetchall())
            stats = harness.exact_statistics(gw._con, plan, charged=debit.charged, n_parts=n_parts)
        finally:
            gw.ledger.discard(debit)
    return stats, mapping, n_parts


@pytest.mark.parametrize("rule", [r for r in DEBITS if r != "minimum"])  # minimum: everyone, one part
def test_the_ledgers_charged_relation_is_what_reaches_the_aggregation(rule, world, tmp_path):
    sql = DEBITS[rule]
    stats, mapping, n_parts = _debited_on_heavy(world, rule, tmp_path)
    units = sorted({u for u, _ in mapping})
    table = stats.plan.table
    if rule in ("sample", "threshold", "key selection"):  # partitions use everyone, each at their allowance
        assert 0 < len(units) < 32561, f"{rule}: {len(units)} subjects charged, expected a strict subset"
    if rule in ("partition", "t_round"):
        assert n_parts > 1, f"{rule} made one partition: the multi-partition path is not exercised"
    # A database holding only the charged subjects' rows, with the same (unit, part) relation.
    spaces = {"adult": [("adult", "person_id")], "baskets": [("baskets", "basket_id"), ("basket_flags", "basket_id")]}
    restricted = harness.copy_db(world.heavy, tmp_path / "only_charged.duckdb")
    sqls = ["CREATE TABLE harness_charged (unit BIGINT, part INTEGER)",
            "INSERT INTO harness_charged SELECT unnest($u), unnest($p)"]  # fmt: skip
    con = duckdb.connect(str(restricted))
    try:
        con.execute(sqls[0])
        con.execute(sqls[1], {"u": [u for u, _ in mapping], "p": [p for _, p in mapping]})
        for t, u in spaces[table.name if table.name in spaces else "baskets"]:
            con.execute(f"DELETE FROM {t} WHERE {u} NOT IN (SELECT unit FROM harness_charged)")
    finally:
        con.close()
    with harness.gateways(restricted) as (gw,):
        _, plan = harness.plan_statement(gw, sql)
        only = harness.exact_statistics(gw._con, plan, charged="(SELECT unit, part FROM main.harness_charged)",
                                        n_parts=n_parts)  # fmt: skip
    found = harness.differences(stats, only)
    assert not found, f"{rule}: rows outside the ledger's charged relation reached the aggregation:\n" + "\n".join(
        found
    )


@pytest.mark.parametrize("rule", ["threshold", "minimum", "partition", "t_round", "key selection"])
def test_neighbours_under_the_ledgers_charged_relation(rule, world, tmp_path):
    """Per partition, the statistics over the real charged relation move within the sensitivity."""
    sql = DEBITS[rule]
    before, map_d, parts_d = _debited_on_heavy(world, rule, tmp_path)
    after, map_n, parts_n = _debited(harness.copy_db(world.heavy_neighbour.path, tmp_path / "n.duckdb"), sql)
    assert (map_d, parts_d) == (map_n, parts_n), "the charged relation depends on the rows (it must not)"
    harness.assert_neighbours(before, after, context=f"{rule}: {world.heavy_neighbour.changed['adult']}")
    assert harness.compare(before, after, scale=0.0), "the heavy subject changed nothing: vacuous"
