"""Refusals that depend only on public facts happen before the debit, at the ε the statement runs at.

A personalization rule can run a statement at far less than the ε asked (``minimum``: the smallest
allowance; ``sample``: the largest allowance when nobody has the ε asked). The planner checked a
mechanism's limits at the ε asked, so a top-k or a synthetic release
that cannot run at the rule's ε was charged and then failed. The check now also runs inside the debit's
transaction, against the personalization plan, before anything is written: a refusal there is free.
Likewise a DiffPart release whose first step's ε is below the noise sampler's floor (refused at
planning), and a release whose name another statement is making (two analysts were both charged).
"""

from __future__ import annotations

import pytest

import dpgate
from dpgate import database, errors
from dpgate.catalog.owner import Owner
from dpgate.queries import synthetic

ANALYST = {"alice": {"epsilon": 100.0, "delta": 1e-3, "epsilon_per_query": 100.0}}


def _spent(path) -> tuple:
    with Owner(path, read_only=True) as owner:  # shares the opening of a connection the test holds
        con = owner.con
        analyst = con.execute("SELECT epsilon_spent FROM dpgate.analysts WHERE name = 'alice'").fetchone()[0]
        rows = [r for t in con.execute("SELECT table_name FROM duckdb_tables() WHERE schema_name = 'dpgate' AND "
                                       "table_name LIKE 'roster%'").fetchall()  # fmt: skip
                for r in con.execute(f'SELECT * FROM dpgate."{t[0]}" ORDER BY ALL').fetchall()]
        ledger = con.execute("SELECT count(*) FROM dpgate.ledger").fetchone()[0]
    return analyst, rows, ledger


def _refused_free(path, sql: str, code: str) -> errors.Error:
    before = _spent(path)
    with dpgate.connect(str(path), analyst="alice") as con, pytest.raises(errors.Error) as info:
        con.cursor().execute(sql)
    assert info.value.code == code, info.value
    assert _spent(path) == before  # neither the analyst, nor any subject, nor the ledger moved
    return info.value


def test_a_top_k_the_minimum_rule_cannot_run_is_refused_before_the_debit(make_db):
    path = make_db(
        "CREATE TABLE t AS SELECT i AS uid, i % 1025 AS a, (i * 7) % 25 AS b, "
        "CASE WHEN i = 0 THEN 0.001 ELSE 10 END AS budget FROM range(200) r(i)",
        protect={"t": {"unit": "uid", "max_rows": 1, "budget_column": "budget", "bounds": {"a": (0, 1024), "b": (0, 24)}}},
        analysts=ANALYST,
    )  # fmt: skip
    options = "epsilon = 1, personalization = '{}', topk_method = 'tps_pfm'"
    body = "a, b FROM t GROUP BY a, b ORDER BY COUNT(*) DESC LIMIT 20000"
    e = _refused_free(path, f"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS ({options.format('minimum')}) {body}", "DP275")
    assert "personalization rule leaves" in e.message and "nothing was charged" in e.hint
    with dpgate.connect(str(path), analyst="alice") as con:  # at the full ε (threshold) it runs
        rows = con.cursor().execute(f"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS ({options.format('threshold')}) {body}")
        assert len(rows.fetchall()) == 20000


@pytest.mark.parametrize("rule, budget", [("minimum", "CASE WHEN i // 10 = 0 THEN 0.0015 ELSE 10 END"),
                                          ("sample", "0.0015")])  # fmt: skip
def test_a_release_its_rule_cannot_run_is_refused_before_the_debit(make_db, rule, budget):
    """Every subject (sample) or one (minimum) has 0.0015 left: the release runs at ε = 0.001, its
    model at 0.001 / 200 rows = 5e-6, which MST cannot split over 6 columns."""
    path = make_db(
        f"CREATE TABLE t AS SELECT i // 10 AS pid, i % 5 AS a, i % 4 AS b, i % 3 AS c, i % 2 AS d, i % 6 AS e, "
        f"i % 7 AS f, {budget} AS budget FROM range(3000) r(i)",
        protect={"t": {"unit": "pid", "max_rows": 200, "budget_column": "budget",
                       "bounds": {c: (0, 10) for c in "abcdef"}}},
        analysts=ANALYST,
    )  # fmt: skip
    sql = f"CREATE SYNTHETIC TABLE r FROM t WITH (epsilon = 1, personalization = '{rule}', columns = 'a,b,c,d,e,f')"
    e = _refused_free(path, sql, "DP275")
    assert "at ε=0.001" in e.message and "too small" in e.message


def test_diffpart_below_the_noise_floor_is_refused_at_planning(make_db):
    """6,000 items, fan-out 2, ε = 1e-6: the root operation's ε (ε/2 over 6,002 internal nodes, 8.3e-11)
    is below the sampler's floor; it failed after the debit."""
    items = [f"i{k}" for k in range(6000)]
    path = make_db("CREATE TABLE t AS SELECT i % 50 AS uid, 'i' || (i % 6000) AS item FROM range(500) r(i)",
                   analysts=ANALYST)  # fmt: skip
    with Owner(path) as owner:
        owner.protect("t", unit="uid", max_rows=2, domains={"item": items}, public_roster=True)
    sql = "CREATE SYNTHETIC TABLE d FROM t USING diffpart WITH (epsilon = 0.000001, fanout = 2, method = 'partition')"
    e = _refused_free(path, sql, "DP275")
    assert "1e-10" in e.message
    _refused_free(path, "EXPLAIN PRIVACY " + sql, "DP275")
    # the route chooses from public facts among the paths that can run: the marginals path here
    with dpgate.connect(str(path), analyst="alice") as con:
        rows = con.execute("EXPLAIN PRIVACY " + sql.replace(", method = 'partition'", "")).fetchall()
    assert [r[1] for r in rows if r[0] == "path"] == ["marginals"]


def test_a_name_another_statement_is_making_is_refused_before_the_debit(make_db):
    """Two analysts creating one name at once both passed the name check and were both charged; the
    second then failed at its write. A name in the making is refused, free."""
    path = make_db("CREATE TABLE t AS SELECT i AS pid, i % 5 AS a FROM range(300) r(i)",
                   protect={"t": {"unit": "pid", "bounds": {"a": (0, 4)}}}, analysts=ANALYST)  # fmt: skip
    sql = "CREATE SYNTHETIC TABLE same FROM t WITH (epsilon = 1)"
    with dpgate.connect(str(path), analyst="alice") as con:
        inst = database.acquire(path)  # the opening the connection uses
        try:

            class Making:
                name, mechanism = "same", "mst"

            with synthetic.making(Making(), (inst.path, inst.serial)):
                before = _spent(path)
                with pytest.raises(errors.ProgrammingError) as info:
                    con.cursor().execute(sql)
                assert info.value.code == "DP226" and "being written by another" in info.value.message
                assert _spent(path) == before
            con.cursor().execute(sql)  # the name is free again
        finally:
            database.release(inst)


@pytest.mark.parametrize("side", ["r_itemsets", "r_supports"])
def test_a_release_side_table_in_the_making_is_refused_before_the_debit(make_db, side):
    """A set-valued release writes NAME, NAME_itemsets and NAME_supports: another statement's release named
    r_itemsets made a DiffPart release r fail after its debit. All three names are reserved."""
    path = make_db("CREATE TABLE t AS SELECT i % 100 AS uid, ['a', 'b', 'c'][1 + i % 3] AS item FROM range(300) r(i)",
                   analysts=ANALYST)  # fmt: skip
    with Owner(path) as owner:
        owner.protect("t", unit="uid", max_rows=3, domains={"item": ["a", "b", "c"]}, public_roster=True)
    with dpgate.connect(str(path), analyst="alice") as con:
        inst = database.acquire(path)
        try:

            class Making:  # another statement's MST release named after a side table
                name, mechanism = side, "mst"

            with synthetic.making(Making(), (inst.path, inst.serial)):
                before = _spent(path)
                with pytest.raises(errors.ProgrammingError) as info:
                    con.cursor().execute("CREATE SYNTHETIC TABLE r FROM t USING diffpart WITH (epsilon = 1)")
                assert info.value.code == "DP226" and side in info.value.message
                assert _spent(path) == before
        finally:
            database.release(inst)
