"""The statements a counting query sends to DuckDB do not depend on one person's values.

How long a statement takes is an outcome an analyst sees without noise. The exact pass chooses
between computations of the same statistics (skip the sampling when nobody needs it, a one-pass
filter over a stored order when every best-ranked row passes); if that choice were made from the
rows the analyst's WHERE selects, a WHERE naming one person ("uid <> 17 OR x > 8") would turn that
person's value into a whole extra pass. Here two databases differ in one person's value only, and
the exact pass must send the same statements, in the same order, on both: only the table facts
and the plan may choose the path.
"""

from __future__ import annotations

import re

import pytest

from dpgate.backends import duckdb as exact_mod

import harness


class Recording:
    """A DuckDB connection that records the text of every statement sent through it."""

    def __init__(self, con):
        self._con = con
        self.sent: list[str] = []

    def execute(self, sql, *args, **kwargs):
        self.sent.append(re.sub(r"__dp_special_\d+", "__dp_special_N", sql))
        return self._con.execute(sql, *args, **kwargs)

    def cursor(self):
        return self._con.cursor()

    def __getattr__(self, name):
        return getattr(self._con, name)


# Subject 17 has 10 rows, everyone else `others` rows; max_rows = 2. World 1 changes 17's x only.
QUERIES = [
    "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) COUNT(*) FROM t WHERE NOT (uid = 17 AND x > 8)",
    "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) COUNT(*) FROM t WHERE uid <> 17 OR x > 8",
    "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) g, COUNT(*), SUM(x) FROM t WHERE uid <> 17 OR x > 8 GROUP BY g",
    "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) g, COUNT(*), SUM(x) FROM t GROUP BY g",
]


def _world(make_db, order: str, others: int, world: int):
    setup = (
        "CREATE TABLE t (uid INTEGER, x DOUBLE, g VARCHAR);"
        f"INSERT INTO t SELECT i // {others}, (i % 5)::DOUBLE, ['a', 'b', 'c'][1 + i % 3] FROM range(300 * {others}) r(i);"
        "INSERT INTO t SELECT 17, (i % 5)::DOUBLE, 'a' FROM range(10 - " + str(others) + ") r(i);"
    )  # fmt: skip
    if world == 1:
        setup += "UPDATE t SET x = 9 WHERE uid = 17;"
    path = make_db(setup, protect={"t": {"unit": "uid", "max_rows": 2, "epsilon": 1e6, "sample_order": order,
                                         "bounds": {"x": (0, 10)}, "domains": {"g": ["a", "b", "c"]}}})  # fmt: skip
    harness.add_harness_analyst(path)
    return path


def _sent(path, sql: str) -> list[str]:
    with harness.gateways(path) as (gw,):
        _, plan = harness.plan_statement(gw, sql)
        charged = harness.roster_charged(plan)
        exact_mod.run(gw._con, plan, charged, salt=5)  # the table facts and the order are read once
        rec = Recording(gw._con)
        exact_mod.run(rec, plan, charged, salt=5)
        return rec.sent


@pytest.mark.parametrize("order", ["stored", "per_query"])
@pytest.mark.parametrize("others", [10, 2], ids=["everyone-over", "one-over"])
def test_one_persons_value_does_not_choose_the_statements(make_db, order, others):
    worlds = [_world(make_db, order, others, w) for w in (0, 1)]
    for sql in QUERIES:
        sent = [_sent(p, sql) for p in worlds]
        assert sent[0] == sent[1], f"{sql}: the statements differ between the two worlds"
        assert sent[0], "nothing was recorded: vacuous"


@pytest.mark.parametrize("order", ["stored", "per_query"])
def test_the_analysts_bound_does_not_measure_the_heaviest_subject(make_db, order):
    """A query's own bound (``max_rows_contributed``) is the analyst's to choose: were the path chosen
    by comparing it with the table's facts, trying bounds would find the heaviest subject's row count.
    Here subject 17 has 6 rows or 2 (everyone else 2), under a declared bound of 10."""
    worlds = []
    for rows in (6, 2):
        setup = (
            "CREATE TABLE t (uid INTEGER, x DOUBLE, g VARCHAR);"
            "INSERT INTO t SELECT i // 2, (i % 5)::DOUBLE, ['a', 'b', 'c'][1 + i % 3] FROM range(600) r(i) WHERE i // 2 <> 17;"
            f"INSERT INTO t SELECT 17, (i % 5)::DOUBLE, 'a' FROM range({rows}) r(i);"
        )  # fmt: skip
        path = make_db(setup, protect={"t": {"unit": "uid", "max_rows": 10, "epsilon": 1e6, "sample_order": order,
                                             "bounds": {"x": (0, 10)}, "domains": {"g": ["a", "b", "c"]}}})  # fmt: skip
        harness.add_harness_analyst(path)
        worlds.append(path)
    for bound in (2, 5, 10):
        sql = f"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, max_rows_contributed = {bound}) g, COUNT(*) FROM t GROUP BY g"
        sent = [_sent(p, sql) for p in worlds]
        assert sent[0] == sent[1], f"max_rows_contributed = {bound}: the statements differ between the two worlds"
