"""Only charged subjects' rows meet the analyst's expressions.

The exact pass restricts the protected table to the charged units *below* the analyst's
WHERE, keys and aggregate inputs. The probe is an expression DuckDB cannot evaluate on the
rows of uncharged subjects (odd ids) without raising, and that TRY() does not catch: with the
restriction the exact pass succeeds; without it (0.6.0) it raised.
"""

from __future__ import annotations

import duckdb
import pytest

import dpgate
from dpgate.frontend.classify import classify
from dpgate.frontend.dialect import parse_one
from dpgate import queries
from dpgate.queries import topk
from dpgate.queries.base import Context
from dpgate.backends import duckdb as exact

PROBE = "date_trunc(CASE WHEN uid % 2 = 1 THEN 'timezone' ELSE 'day' END, TIMESTAMP '2000-01-01') IS NOT NULL"
EVEN = "(SELECT uid AS unit, 0 AS part FROM range(0, 400, 2) r(uid))"
ALL = "(SELECT uid AS unit, 0 AS part FROM range(0, 400) r(uid))"


@pytest.fixture
def gw(make_db):
    db = make_db(
        "CREATE TABLE t AS SELECT i AS uid, i % 3 AS g FROM range(400) r(i)",
        protect={"t": {"unit": "uid", "domains": {"g": [0, 1, 2]}}},
    )
    with dpgate.connect(str(db), analyst="alice") as con:
        yield con.gateway


def _plan(g, sql):
    """Plan without the allowlist (which refuses the probe: it is not total)."""
    cat = g.catalog()
    classified = classify(parse_one(sql), cat)
    ctx = Context(cat, g.session, g.facts)
    return queries.for_statement(classified, ctx).plan(classified, ctx)


def test_the_probe_raises_when_uncharged_rows_are_read(gw):
    """The probe really is an error TRY() does not catch (else this file tests nothing)."""
    with pytest.raises(duckdb.Error):
        gw._con.execute(f"SELECT count(*) FROM t WHERE TRY({PROBE})").fetchall()


def test_counting_reads_only_charged_rows(gw):
    plan = _plan(gw, f"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) g, COUNT(*) FROM t WHERE {PROBE} GROUP BY g")
    got = exact.run(gw._con, plan, EVEN, salt=5)
    assert int(sum(got.components[(0, "count")].sum(axis=0))) == 200
    with pytest.raises(duckdb.Error):
        exact.run(gw._con, plan, ALL, salt=5)


def test_top_k_reads_only_charged_rows(gw):
    plan = _plan(gw, f"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) g, COUNT(*) AS n FROM t WHERE {PROBE} "
                     "GROUP BY g ORDER BY n DESC LIMIT 1")  # fmt: skip
    params: dict = {}
    sql = topk._pairs_from_domains(plan, EVEN, params)
    assert len(gw._con.execute(sql, params).fetchall()) == 200
    with pytest.raises(duckdb.Error):
        gw._con.execute(topk._pairs_from_domains(plan, ALL, {}), params).fetchall()


def test_offset_zero_is_an_optimisation_fence_on_this_engine():
    """DuckDB may push filters into subqueries and materialised CTEs (1.4 did for this subquery;
    1.5 happens not to), but not through OFFSET: the fenced filter runs only on the rows the
    subquery returns, whereas a filter next to the semi-join runs on every row."""
    c = duckdb.connect()
    c.execute("CREATE TABLE t AS SELECT i AS uid FROM range(1000) r(i); CREATE TABLE ch AS SELECT i AS unit FROM range(0, 1000, 2) r(i)")
    cond = "CASE WHEN uid % 2 = 1 THEN CAST(CAST(uid AS VARCHAR) || 'a' AS INTEGER) > 0 ELSE true END"
    fenced = f"SELECT count(*) FROM (SELECT * FROM t WHERE uid IN (SELECT unit FROM ch) OFFSET 0) s WHERE {cond}"
    assert c.execute(fenced).fetchone()[0] == 500
    with pytest.raises(duckdb.Error):  # what a pushed-down filter amounts to: it runs on every row
        c.execute(f"SELECT count(*) FROM t WHERE uid IN (SELECT unit FROM ch) AND {cond}").fetchall()


def test_the_gateway_refuses_the_probe_before_the_debit(gw):
    """At the front door the probe is refused outright: date_trunc's part must be a constant."""
    from dpgate import errors

    with pytest.raises(errors.UnsupportedQueryError) as info:
        gw.run(f"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) COUNT(*) FROM t WHERE {PROBE}")
    assert info.value.code.startswith("DP25")
    assert gw.ledger.remaining("alice")[0] == 100.0
