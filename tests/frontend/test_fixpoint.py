"""What dpgate checks is what DuckDB runs [fixpoint].

DuckDB runs the SQL dpgate writes from the checked tree, and sqlglot writes some string arguments
back out unquoted: protected rows, budgets and dpgate's schema could be read, and the ledger
rewritten, through "public" statements such as
``SELECT ANONYMOUS_AGG_FUNC('(SELECT ... FROM adult) AS r, lower', 'x')``. ``parse_one`` now
parses the written SQL again until it writes itself, so the checks see the subquery (or refuse a
statement that does not settle, DP208).
"""

from __future__ import annotations

import pytest
from sqlglot.dialects.duckdb import DuckDB

from dpgate import errors
from dpgate.frontend.dialect import parse, parse_one, to_sql

ATTACKS = [
    "SELECT ANONYMOUS_AGG_FUNC('(SELECT list((person_id, age, sex, income) ORDER BY person_id)[1:3] FROM adult) "
    "AS rows_, lower', 'x')",
    "SELECT ANONYMOUS_AGG_FUNC('(SELECT list((person_id, epsilon) ORDER BY person_id)[1:3] FROM subject_budgets) "
    "AS b, lower', 'x')",
    "SELECT ANONYMOUS_AGG_FUNC('(SELECT count(*) FROM dpgate.analysts) AS n, lower', 'x')",
    "SELECT ANONYMOUS_AGG_FUNC('main.current_query_id')",
    "SELECT DATE_ADD(DATE '2020-01-01', 1, 'DAY AS d, (SELECT list(age ORDER BY person_id)[1:5] FROM adult) AS x --')",
    "SELECT OBJECT_INSERT({'a': 1}, 'b := 2) AS s, (SELECT list(age ORDER BY person_id)[1:5] FROM adult) AS x --', 3)",
    "SELECT COMBINED_AGG_FUNC('(SELECT max(age) FROM adult) AS m, lower', 'x')",
]


@pytest.mark.parametrize("sql", ATTACKS)
def test_sql_smuggled_in_a_string_argument_is_checked_and_refused(con, sql):
    before = con.budget()
    with pytest.raises(errors.Error) as info:
        con.cursor().execute(sql)
    assert info.value.code in ("DP208", "DP216", "DP220", "DP223"), info.value
    assert con.budget() == before


def test_a_smuggled_write_never_runs(con):
    cur = con.cursor()
    cur.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) COUNT(*) FROM adult")
    left = con.budget()
    with pytest.raises(errors.Error):
        con.cursor().execute("SELECT ANONYMOUS_AGG_FUNC('1 AS a; UPDATE dpgate.analysts SET epsilon_spent = 0; "
                             "SELECT lower', 'x')")  # fmt: skip
    assert con.budget() == left, "the ledger was not rewritten"


def test_ordinary_statements_settle_in_one_or_two_rounds(con):
    assert con.cursor().execute("SELECT DATE_ADD(DATE '2020-01-01', 1, 'DAY')").fetchall()[0][0].day == 2
    assert con.cursor().execute("SELECT CAST(DATE '2020-01-01' + INTERVAL 1 DAY AS DATE) AS d").fetchall()[0][0].day == 2
    tree = parse_one("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5) sex, COUNT(*) FROM adult GROUP BY sex")
    assert to_sql(parse(to_sql(tree))[0]) == to_sql(tree)


def test_no_function_smuggles_sql_past_the_checks(con):
    """Every function sqlglot's DuckDB parser knows, called with a string holding SQL over a protected
    table: either the statement is refused, or the string stayed a string (the protected table's
    row count never came back)."""
    marker = "(SELECT count(*) FROM adult) AS zz_smuggled, lower"
    ran, smuggled = 0, []
    for name in sorted(set(DuckDB.Parser.FUNCTIONS)):
        for k in (1, 2, 3):
            sql = f"SELECT {name}({', '.join([repr(marker)] * k)})"
            cur = con.cursor()
            try:
                rows = cur.execute(sql).fetchall()
            except errors.Error:
                continue
            ran += 1
            names = [d[0].lower() for d in cur.description or []]
            if "zz_smuggled" in names or any(v == 32561 for r in rows for v in r if isinstance(v, int)):
                smuggled.append(sql)
    assert ran > 100, "the sweep ran statements (not all refused for another reason)"
    assert smuggled == []


def test_a_public_statement_commits_nothing(con, monkeypatch):
    """Defence in depth: were a write to slip into a public statement, its transaction rolls back."""
    from dpgate import statements

    run = statements.public

    def slipped(gw, statement, params):
        result = run(gw, statement, params)
        gw.con.execute("CREATE TABLE slipped AS SELECT 1 AS x")
        return result

    monkeypatch.setattr(statements, "public", slipped)
    assert con.cursor().execute("SELECT count(*) FROM country_regions").fetchall() == [(41,)]
    monkeypatch.setattr(statements, "public", run)
    (n,) = con.gateway._con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'slipped'").fetchone()
    assert n == 0


@pytest.mark.parametrize("arg", ["a OR b", "a AND b", "NOT a", "a = b", "a IS DISTINCT FROM b", "x + y", "x * y - 1",
                                 "x BETWEEN 0 AND y", "CASE WHEN a THEN x END"])  # fmt: skip
def test_the_coalesce_rewrite_computes_what_was_written(arg):
    """COALESCE(a OR b, c) ran as CASE WHEN NOT a OR b IS NULL ..., which DuckDB
    reads as (NOT a) OR (b IS NULL): the answer to another predicate. Every combination of NULL,
    true and false (and of small numbers) gives the same value both ways."""
    import duckdb

    from dpgate.frontend.allowlist import rewrite_for_engine
    from dpgate.frontend.dialect import to_duckdb

    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT a, b, x, y FROM (VALUES (NULL), (true), (false)) va(a), "
                "(VALUES (NULL), (true), (false)) vb(b), (VALUES (NULL), (0), (2)) vx(x), (VALUES (NULL), (1), (3)) vy(y)")  # fmt: skip
    default = "NULL" if arg.startswith(("x", "CASE")) else "false"
    sql = f"SELECT COALESCE({arg}, {default}) FROM t ORDER BY ALL"
    rewritten = to_duckdb(rewrite_for_engine(parse_one(sql)))
    assert "COALESCE" not in rewritten.upper()
    assert con.execute(rewritten).fetchall() == con.execute(sql).fetchall(), rewritten
