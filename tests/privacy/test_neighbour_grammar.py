"""Random accepted counting-class queries: the exact statistics respect the declared sensitivities.

A hypothesis grammar of the shapes the counting class accepts (docs/sql/reference.md):
WHERE conjunctions of comparisons / BETWEEN / IN / IS NULL over arithmetic, CASE, COALESCE,
LEAST, GREATEST and ABS of bounded columns; GROUP BY a declared domain, an integer column
with bounds, an expression with a public image, or (with δ) a key that needs DP key
selection; COUNT(*), COUNT(x), COUNT(DISTINCT uid), COUNT(DISTINCT x), SUM, AVG with an
optional FILTER; per-query max_rows_contributed 2–3 and max_groups_contributed 1–2.

The table ``t(uid, g, x, y)`` has heavy subjects (far more rows than max_rows), values
outside the declared bounds and domain, NULLs everywhere, rows with a NULL unit and rows
of units that are on no roster. D′ removes every row of one subject (heavy ones included).
Statements the gateway refuses are rejected; every accepted one must keep each component
within its declared sensitivity, keep its public key set, and end the same way (answer or
error code) through ``dpgate.connect`` on D and D′.

# FINDING (fixed in exact._agg_sql [null-input]): the sensitivity test fails today (AVG over NULL / filtered-out inputs, see
# test_neighbour_findings.py); it passes with that bug fixed (checked with a local patch of
# ``exact._agg_sql`` that sums only non-NULL inputs).
"""

from __future__ import annotations

import random

import duckdb
import pytest
from hypothesis import HealthCheck, Phase, given, reject, settings
from hypothesis import strategies as st

from dpgate.catalog.owner import Owner

import harness

#: Subjects that D′ removes: heavy ones (uid % 5 == 0: 9–14 rows), light ones, one with only
#: out-of-bounds / NULL values.
REMOVABLE = (0, 5, 10, 1, 7, 13, 22, 23)
N_SUBJECTS = 24


def _rows() -> list[tuple]:
    rnd = random.Random(7)
    out = []
    for uid in range(N_SUBJECTS):
        n = rnd.randint(9, 14) if uid % 5 == 0 else rnd.randint(1, 3)
        for _ in range(n):
            g = rnd.choice(["a", "b", "c", "c", None, "zz"])
            x = rnd.choice([None, -3, 0, 1, 2, 5, 7, 10, 10, 14, rnd.randint(0, 10)])
            y = rnd.choice([None, -8.5, -5.0, -1.25, 0.0, 0.5, 2.75, 5.0, 7.0, round(rnd.uniform(-5, 5), 3)])
            out.append((uid, g, x, y))
    # uid 23: only values outside the bounds / domain and NULLs
    out += [(23, "zz", 99, 1e9), (23, None, None, None), (23, "a", -50, -1e9)]
    return out


def _sql_values(rows) -> str:
    def lit(v):
        if v is None:
            return "NULL"
        if isinstance(v, str):
            return f"'{v}'"
        return repr(v)

    return ", ".join("(" + ", ".join(lit(v) for v in r) + ")" for r in rows)


@pytest.fixture(scope="module")
def grammar_dbs(tmp_path_factory):
    """D and one D′ per removable subject, with gateways opened once for the module."""
    work = tmp_path_factory.mktemp("grammar")
    base = work / "t.duckdb"
    con = duckdb.connect(str(base))
    con.execute("CREATE TABLE t (uid INTEGER, g VARCHAR, x INTEGER, y DOUBLE)")
    con.execute(f"INSERT INTO t VALUES {_sql_values(_rows())}")
    con.close()
    with Owner(base) as owner:
        # Per query: the neighbours share the per-query hash under one salt; a stored order would be
        # drawn afresh in each file (its coupled argument: test_sample_order.py).
        owner.protect("t", unit="uid", max_rows=3, max_groups=2, epsilon=1000.0, public_roster=True,
                      domains={"g": ["a", "b", "c"]}, bounds={"x": (0, 10), "y": (-5, 5)}, sample_order="per_query")  # fmt: skip
        owner.add_analyst(harness.ANALYST, epsilon=1e6, delta=1.0, epsilon_per_query=100.0, delta_per_query=0.5)
        owner.allow_test_seed(harness.ANALYST)
    # Rows after the roster was made: a NULL unit and units on no roster (never charged).
    harness.mutate(base, "INSERT INTO t VALUES (NULL, 'a', 5, 1.0), (NULL, 'b', 10, 5.0), (900, 'a', 10, 5.0), "
                         "(900, 'c', 10, 5.0), (901, NULL, 3, -5.0)")  # fmt: skip
    paths = {None: base}
    for uid in REMOVABLE:
        copy = harness.copy_db(base, work / f"without_{uid}.duckdb")
        paths[uid] = harness.mutate(copy, f"DELETE FROM t WHERE uid = {uid}")
    order = list(paths)
    with harness.gateways(*[paths[k] for k in order]) as gws:
        yield {"paths": paths, "gateways": dict(zip(order, gws))}


# -- the grammar --------------------------------------------------------------------------------
def _num(draw, depth: int) -> str:
    """A bounded numeric row expression over x and y."""
    leaves = ["x", "y", "x", "y", str(draw(st.integers(-4, 6))), str(draw(st.sampled_from([0.5, 1.5, -2.25]))),
              "(x + 20)", "(y - 12)", "(100 - x)"]  # inputs whose bounds are far from 0 on one side
    if depth <= 0:
        return draw(st.sampled_from(leaves))
    kind = draw(st.sampled_from(["leaf", "leaf", "add", "sub", "mul", "neg", "abs", "least", "greatest", "coalesce",
                                 "case", "round", "div"]))  # fmt: skip
    sub = lambda: _num(draw, depth - 1)  # noqa: E731
    if kind == "leaf":
        return draw(st.sampled_from(leaves))
    if kind == "add":
        return f"({sub()} + {sub()})"
    if kind == "sub":
        return f"({sub()} - {sub()})"
    if kind == "mul":
        return f"({sub()} * {draw(st.sampled_from(['2', '-3', '0.5', 'x', 'y']))})"
    if kind == "neg":
        return f"(-{sub()})"
    if kind == "abs":
        return f"ABS({sub()})"
    if kind == "least":
        return f"LEAST({sub()}, {sub()})"
    if kind == "greatest":
        return f"GREATEST({sub()}, {sub()})"
    if kind == "coalesce":
        return f"COALESCE({sub()}, {draw(st.integers(-3, 3))})"
    if kind == "round":
        return f"ROUND({sub()})"
    if kind == "div":
        return f"({sub()} / {draw(st.sampled_from(['2', '4', '-0.5']))})"
    return f"CASE WHEN {_cond(draw, 0)} THEN {sub()} ELSE {sub()} END"


def _cond(draw, depth: int) -> str:
    kind = draw(st.sampled_from(["cmp", "cmp", "between", "in_g", "in_x", "null", "not", "or"] if depth > 0
                                else ["cmp", "cmp", "between", "in_g", "in_x", "null"]))  # fmt: skip
    if kind == "cmp":
        op = draw(st.sampled_from(["<", "<=", ">", ">=", "=", "<>"]))
        return f"{_num(draw, 1)} {op} {draw(st.integers(-6, 12))}"
    if kind == "between":
        lo = draw(st.integers(-6, 8))
        return f"{_num(draw, 1)} BETWEEN {lo} AND {lo + draw(st.integers(0, 8))}"
    if kind == "in_g":
        vals = draw(st.lists(st.sampled_from(["a", "b", "c", "zz"]), min_size=1, max_size=3, unique=True))
        return f"g {draw(st.sampled_from(['IN', 'NOT IN']))} ({', '.join(repr(v) for v in vals)})"
    if kind == "in_x":
        vals = draw(st.lists(st.integers(-3, 14), min_size=1, max_size=4, unique=True))
        return f"x IN ({', '.join(map(str, vals))})"
    if kind == "null":
        return f"{draw(st.sampled_from(['g', 'x', 'y']))} IS {draw(st.sampled_from(['', 'NOT ']))}NULL"
    if kind == "not":
        return f"NOT ({_cond(draw, depth - 1)})"
    return f"({_cond(draw, depth - 1)} OR {_cond(draw, depth - 1)})"


GROUPS = [
    None,
    "g",
    "x",
    "x // 3",
    "x % 4",
    "CASE WHEN x > 5 THEN 1 ELSE 0 END",
    "g, x // 5",
    "LEAST(x, 3)",
    "y",  # no public domain: DP key selection (needs delta)
]


def _aggregate(draw) -> str:
    kind = draw(st.sampled_from(["COUNT(*)", "COUNT(x)", "COUNT(y)", "COUNT(DISTINCT uid)", "COUNT(DISTINCT x)",
                                 "SUM", "SUM", "AVG", "AVG"]))  # fmt: skip
    if kind in ("SUM", "AVG"):
        kind = f"{kind}({_num(draw, 2)})"
    if draw(st.booleans()):
        kind += f" FILTER (WHERE {_cond(draw, 1)})"
    return kind


@st.composite
def counting_queries(draw) -> str:
    group = draw(st.sampled_from(GROUPS))
    aggs = [_aggregate(draw) for _ in range(draw(st.integers(1, 3)))]
    where = [_cond(draw, 1) for _ in range(draw(st.integers(0, 3)))]
    options = [f"epsilon = {draw(st.sampled_from(['0.5', '1']))}"]
    if draw(st.booleans()):
        options.append(f"max_rows_contributed = {draw(st.sampled_from([2, 3]))}")
    if draw(st.booleans()):
        options.append(f"max_groups_contributed = {draw(st.sampled_from([1, 2]))}")
    if group == "y":
        # Key selection: at this table's size (24 subjects) only a large ε and δ keep the threshold
        # below the roster (a higher one is refused before the debit, DP214).
        options[0] = f"epsilon = {draw(st.sampled_from(['8', '16']))}"
        options.append("delta = 1e-2")
    select = ([group] if group else []) + [f"{a} AS a{i}" for i, a in enumerate(aggs)]
    sql = f"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS ({', '.join(options)}) {', '.join(select)} FROM t"
    if where:
        sql += " WHERE " + " AND ".join(where)
    if group:
        sql += f" GROUP BY {group}"
    return sql


# No shrinking: a failure is reported with the query that failed (its SQL and numbers are in the
# message), within the time budget; test_neighbour_findings.py holds minimal reproductions.
@settings(max_examples=60, deadline=None, derandomize=True, database=None, phases=[Phase.explicit, Phase.generate],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])  # fmt: skip
@given(sql=counting_queries(), removed=st.sampled_from(REMOVABLE))
def test_random_accepted_queries_respect_their_sensitivity(grammar_dbs, sql, removed):
    # FINDING: fails today on AVG over inputs that are NULL or excluded by a FILTER (their rows add
    # the lower clamp bound to AVG's centred sum, beyond its declared sensitivity); see
    # test_neighbour_findings.py. First failing example with this grammar (not shrunk):
    # AVG((((100 - x) - y) * 0.5)) FILTER (WHERE x IN (5, 8)) ... WHERE (x - (y - 12)) > 5, with
    # max_rows_contributed = 2, subject 22 removed: centred sum L1 change 2.28e10 > declared 5.37e9
    # grid units (shrunk by hand: AVG((x * -3)) FILTER (WHERE g IS NULL), subject 0: 75 > 45).
    d, n = grammar_dbs["gateways"][None], grammar_dbs["gateways"][removed]
    context = f"{sql} | subject {removed} removed"
    before, _ = harness.check_statement(d, n, sql, context=context)  # same planning outcome on D and D′
    if before is None:
        reject()  # refused by the gateway (the same way on D′): nothing to check
    assert before.kind == "count", context


@settings(max_examples=8, deadline=None, derandomize=True, database=None, phases=[Phase.explicit, Phase.generate],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])  # fmt: skip
@given(sql=counting_queries(), removed=st.sampled_from(REMOVABLE))
def test_random_queries_end_the_same_way_through_the_gateway(grammar_dbs, sql, removed):
    """The full pipeline (plan, bind, debit, exact pass, noise, post-processing) on D and D′."""
    out_d = harness.gateway_outcome(grammar_dbs["paths"][None], sql)
    if out_d[0] == "error" and out_d[1] != "DP404":
        reject()  # refused before the debit
    out_n = harness.gateway_outcome(grammar_dbs["paths"][removed], sql)
    assert out_d == out_n, f"outcome differs: D {out_d}, D′ {out_n} [{sql} | subject {removed} removed]"


def test_the_grammar_reaches_the_interesting_cases(grammar_dbs):
    """The table really has subjects over max_rows, and the grammar's shapes are accepted."""
    d = grammar_dbs["gateways"][None]
    heavy = d._con.execute("SELECT count(*) FROM (SELECT uid FROM t GROUP BY uid HAVING count(*) > 3)").fetchone()[0]
    assert heavy >= 5
    accepted = {
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 8, delta = 1e-2) y, COUNT(DISTINCT uid) FROM t GROUP BY y",
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) g, x // 5, SUM(CASE WHEN g IS NULL THEN ABS(y) ELSE "
        "LEAST(x, 3) END) FILTER (WHERE y BETWEEN -1 AND 4), AVG(COALESCE(x, 2) * y) FROM t WHERE x IN (1, 2, 14) "
        "OR NOT (g = 'a') GROUP BY g, x // 5",
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, max_groups_contributed = 1) x % 4, "
        "COUNT(DISTINCT uid), COUNT(DISTINCT x) FROM t GROUP BY x % 4",
    }
    for sql in accepted:
        for removed in (0, 10):
            before, after = harness.check_statement(d, grammar_dbs["gateways"][removed], sql, context=sql)
            assert before is not None
            assert harness.compare(before, after, scale=0.0), "removing a heavy subject changes nothing?"
