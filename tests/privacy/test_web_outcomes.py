"""The web front door on neighbouring databases: what a page sees ends the same way on D and D′.

``dpgate web`` answers through the signed-in analyst's ``Gateway``, and adds what a browser
sees beside the rows: an HTTP status, a JSON error with its code, a streamed public result
within its caps. None of that may depend on one subject. D′ is D without the rows of subject
17 (ten rows, over ``max_rows``, x at its upper bound; 17 stays on the roster, a public fact);
for each
statement — answers of every shape, a WHERE naming the subject, refusals before and at the
debit — the outcome through the JSON API (status; the error's code, or the answer's columns,
row count, cost and population) must be the same on both, with the same test seed; and each
answer's exact statistics stay within their sensitivity (the harness).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import harness
from dpgate.catalog.owner import Owner

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "web"))  # the web tests' server in a thread
from webserver import PASSWORD, ThreadWeb  # noqa: E402

STATEMENTS = [
    "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) g, COUNT(*) AS n, AVG(x) AS m FROM t GROUP BY g",
    "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) COUNT(*) AS n FROM t WHERE uid <> 17 OR x > 8",
    "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) g, SUM(x) AS s FROM t GROUP BY g ORDER BY s DESC LIMIT 2",
    "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) g, COUNT(*) AS n FROM t GROUP BY g ORDER BY n DESC LIMIT 2",
    "EXPLAIN PRIVACY SELECT COUNT(*) FROM t WHERE uid = 17",
    "SELECT x FROM t WHERE uid = 17",  # raw rows: refused before anything is read
    "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1000) COUNT(*) FROM t",  # over the per-query cap
    "SELECT i FROM pub",  # a public statement over the result cap
]


def _worlds(make_db, tmp_path):
    setup = (
        "CREATE TABLE t (uid INTEGER, x DOUBLE, g VARCHAR);"
        "INSERT INTO t SELECT i // 2, (i % 5)::DOUBLE, ['a', 'b', 'c'][1 + i % 3] FROM range(600) r(i) WHERE i // 2 <> 17;"
        + "INSERT INTO t SELECT 17, 10.0, 'a' FROM range(10);"
        + "CREATE TABLE pub AS SELECT i FROM range(30) r(i);"
    )  # fmt: skip
    path = make_db(setup, protect={"t": {"unit": "uid", "max_rows": 2, "epsilon": 1e6, "bounds": {"x": (0, 10)},
                                         "domains": {"g": ["a", "b", "c"]}}})  # fmt: skip
    harness.add_harness_analyst(path)
    with Owner(path, create=False) as o:
        o.set_login(harness.ANALYST, password=PASSWORD)
    return path, harness.mutate(harness.copy_db(path, tmp_path / "neighbour.duckdb"), "DELETE FROM t WHERE uid = 17")


def _outcome(client, sql: str) -> tuple:
    status, body = client.query(sql)
    if status != 200:
        return status, body["code"]
    cost = body["cost"]
    return (status, tuple(body["columns"]), len(body["rows"]), None if cost is None else cost["epsilon"],
            None if body["population"] is None else body["population"]["subjects"])  # fmt: skip


@pytest.mark.parametrize("sql", STATEMENTS)
def test_the_web_outcome_is_the_same_on_neighbours(make_db, tmp_path, sql):
    outcomes, statistics = [], []
    for path in _worlds(make_db, tmp_path):
        server = ThreadWeb(path, test_seed=harness.SEED, max_result_rows=20)
        try:
            client = server.client()
            assert client.login(harness.ANALYST)[0] == 200
            outcomes.append(_outcome(client, sql))
        finally:
            server.stop()
        if outcomes[-1][0] == 200 and outcomes[-1][3] is not None and not sql.startswith("EXPLAIN"):
            with harness.gateways(path) as (gw,):
                statistics.append(harness.statistics_of(gw, sql))
    assert outcomes[0] == outcomes[1], f"{sql}: {outcomes[0]} on D, {outcomes[1]} on D′"
    if statistics:
        harness.assert_neighbours(*statistics, context=sql)
    if sql.endswith("FROM pub"):
        assert outcomes[0] == (413, "DP714")
    elif "LIMIT" not in sql and "EXPLAIN" not in sql:
        assert outcomes[0][0] in (200, 400, 403)
