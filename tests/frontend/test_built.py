"""A public statement's values are bounded before it runs (``dpgate.frontend.built``).

DuckDB's memory limit does not count the value one scalar call returns, and one call over a huge
value is not reached by an interrupt: these shapes held gigabytes or a core for seconds to minutes
on a free statement. Each is refused free; the same functions with small constants still run.
"""

from __future__ import annotations

import pytest
import sqlglot

from dpgate import errors
from dpgate.frontend import built

REFUSED = [
    ("SELECT len(range(600000000))", "DP255"),  # 21 GB past the memory limit
    ("SELECT lpad('a', 100000000)", "DP255"),
    ("SELECT repeat('ab', 500000000)", "DP255"),
    ("SELECT repeat(region, n) FROM (SELECT region, 3 AS n FROM country_regions)", "DP255"),
    ("SELECT list_resize([1], 300000000)", "DP255"),
    ("SELECT printf('%1000000000d', 1)", "DP255"),
    ("SELECT format('{:>300000000}', 1)", "DP255"),
    ("SELECT printf(region, 1) FROM country_regions", "DP255"),
    ("SELECT len(list_concat(range(300000000), [1]))", "DP255"),
    ("SELECT range(n) FROM (SELECT 5 AS n)", "DP255"),
    ("SELECT repeat(repeat('a', 1000), 1000)", "DP255"),
    ("SELECT replace(replace(repeat('a', 1000), 'a', repeat('a', 1000)), 'a', 'aaaa')", "DP255"),
    ("SELECT regexp_replace(repeat('a', 10000), '', repeat('b', 10000), 'g')", "DP255"),
    ("SELECT array_to_string(range(100000), repeat('x', 10000))", "DP255"),
    ("SELECT list_transform(range(1000), x -> range(1000))", "DP255"),
    ("SELECT list_reduce(range(64), (a, b) -> a || a)", "DP255"),  # doubles per step: 2^64
    ("SELECT repeat(region, 1000) FROM country_regions", "DP255"),
    ("WITH s AS (SELECT string_agg(region, ',') AS v FROM country_regions) SELECT repeat(v, 100) FROM s", "DP255"),
    ("SELECT list_transform(list(region), y -> repeat('a', 1000)) FROM country_regions", "DP255"),
    ("SELECT generate_series(DATE '2020-01-01', DATE '2020-12-31', INTERVAL 1 DAY)", "DP255"),
    ("SELECT levenshtein(repeat('a', 100000), repeat('b', 100000))", "DP255"),  # 16 s, not interruptible
    ("SELECT levenshtein(string_agg(region, ''), 'a') FROM country_regions", "DP258"),
    ("SELECT repeat('a', 30000) GLOB '*a*a*a*b'", "DP255"),
    ("SELECT (SELECT string_agg(region, '') FROM country_regions) LIKE '%a_%a%b'", "DP258"),
    # backtracking matchers: the work is the text's length to the power of the wildcard runs (210 s at 1,000)
    ("SELECT repeat('a', 1000) LIKE '_%a%a%a%b'", "DP258"),
    ("SELECT repeat('a', 4000) GLOB '*a*a*a*a*b'", "DP258"),
    ("SELECT like_escape(repeat('a', 1000), '%a%a%a%a%b', '\\')", "DP258"),
    ("SELECT region FROM country_regions WHERE region LIKE region || '_%a%b'", "DP258"),  # a computed pattern
    # values carried under another name: a VALUES row, an alias of the same SELECT, a comprehension
    ("SELECT repeat(s, 50) FROM (VALUES (repeat('x', 1000))) t(s)", "DP255"),
    ("SELECT 'x' AS s, repeat(s, 200) AS t, repeat(t, 200) AS u", "DP255"),
    ("SELECT [repeat(x::VARCHAR, 200) FOR x IN range(200)]", "DP255"),
    ("SELECT length(x) FROM " + "(SELECT x || x AS x FROM " * 12 + "(SELECT 'x' AS x)" + ")" * 12, "DP255"),
    ("WITH RECURSIVE r(n, s) AS (SELECT 0, 'x' UNION ALL SELECT n + 1, s || s FROM r WHERE n < 40) "
     "SELECT max(length(s)) FROM r", "DP255"),
    # widths and counts the model did not see
    ("SELECT printf('%*d', 1000000000, 1)", "DP255"),
    ("SELECT format('{:>{}}', 'a', 1000000000)", "DP255"),
    ("SELECT list_aggregate(range(2000), 'string_agg', repeat('x', 100))", "DP255"),
    ("SELECT list_select([repeat('x', 1000)], [1, 1, 1, 1, 1, 1, 1, 1, 1, 1])", "DP255"),
    ("SELECT array_to_string(max(region, 999), repeat('x', 200)) FROM country_regions", "DP255"),
    ("SELECT json_extract(repeat('[', 2000) || repeat(']', 2000), '$[*]')", "DP255"),
    ("SELECT json_extract(string_agg(region, ''), '$[*]') FROM country_regions", "DP258"),
    ("SELECT lpad('a', 1e400)", "DP255"),
    ("SELECT list_transform([1], a -> list_transform([1], b -> list_transform([1], c -> list_transform([1], "
     "d -> list_transform([1], e -> e)))))", "DP255"),
    # constants read exactly, as DuckDB computes them (in floats this difference is 0)
    ("SELECT len(range((9007199254740993 - 9007199254740992) * 100000000))", "DP255"),
    # an argument a format names many times; escapes that double per level; a format's specifiers
    ("SELECT len(format(" + repr("{0}" * 300) + ", repeat('x', 100)))", "DP255"),
    ("SELECT json_array(json_array(json_array(repeat('\"', 1000))))", "DP255"),
    ("SELECT strftime(DATE '2020-01-01', repeat('%c', 2000))", "DP255"),
    ("SELECT printf('%" + "9" * 400 + "d', 1)", "DP255"),
    # text carried in a type: an ENUM's labels
    ("SELECT enum_range(NULL::ENUM(" + ", ".join(repr(f"{i:04d}" + "x" * 96) for i in range(60)) + "))", "DP255"),
    # columns dpgate cannot place by name are as large as any projection of their source
    ("SELECT len(b) FROM (SELECT 1 AS a, repeat(b, 64) AS b FROM (SELECT 1 AS a, repeat('x', 1000) AS b) t(a)) s(a)",
     "DP255"),
    ("SELECT * REPLACE (repeat(x, 64) AS x) FROM (SELECT * REPLACE (repeat(x, 64) AS x) FROM (SELECT repeat('y', 100) AS x))",
     "DP255"),
    ("SELECT sum(len(equi_width_bins(0, 1000000 + i, 1000000, false))) FROM range(100) t(i)", "DP255"),
    # a star over a CTE joined with itself doubles per level: DuckDB's binder ran 43 s past an interrupt
    ("WITH c0 AS (SELECT 1 AS x), " + ", ".join(f"c{i} AS (SELECT * FROM c{i - 1} a, c{i - 1} b)" for i in range(1, 21))
     + " SELECT count(*) FROM c20", "DP255"),
    ("SELECT json_pretty(repeat('[', 3000) || repeat(']', 3000))", "DP255"),  # indentation: 36M characters
    ("SELECT json_pretty(repeat('[', 1500) || repeat(']', 1500))", "DP255"),  # within the bound, squared past it
    # a VARIANT nests as deep as its JSON text, and DuckDB's work on it recurses per level (100,000 levels: a crash)
    ("SELECT CAST(CAST(string_agg('[', '') || string_agg(']', '') AS JSON) AS VARIANT) = 1 FROM range(200000)", "DP258"),
    ("SELECT TRY_CAST('[[1]]'::JSON AS VARIANT)", "DP258"),
    ("SELECT [CAST(region AS STRUCT(a VARIANT))] FROM country_regions", "DP258"),
    ("SELECT json_pretty(string_agg('[', '')) FROM country_regions", "DP258"),
]

ACCEPTED = [
    "SELECT lpad(region, 10) FROM country_regions",
    "SELECT repeat('ab', 1000)",
    "SELECT len(range(4096))",
    "SELECT count(*) FROM range(100000000) t(i) WHERE i < 0",
    "SELECT count(*) FROM generate_series(1, 1000000)",
    "SELECT length(string_agg(region, ',')) FROM country_regions",
    "SELECT upper(string_agg(region, '')) IS NULL FROM country_regions",
    "WITH s AS (SELECT string_agg(region, ',') AS v FROM country_regions) SELECT length(v) FROM s",
    "SELECT list_transform(range(100), x -> x + 1)",
    "SELECT list_reduce(range(100), (a, b) -> a + b)",
    "SELECT list_reduce(['a', 'b'], (a, b) -> a || b)",
    "SELECT levenshtein(region, 'Asia') FROM country_regions",
    "SELECT region LIKE '%a_%' FROM country_regions",
    "SELECT printf('%5d|%s', 3, region) FROM country_regions",
    "SELECT replace(region, 'a', 'bb') FROM country_regions",
    "SELECT array_to_string(list(region), ',') IS NULL FROM country_regions",
    "SELECT list_filter(range(10), x -> x % 2 = 0)",
    "SELECT * FROM generate_series(DATE '2020-01-01', DATE '2020-01-31', INTERVAL 1 DAY)",
    "SELECT upper(region) AS region FROM country_regions",  # an alias of its own column: no growth per round
    "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 10) SELECT sum(n) FROM r",
    "SELECT s FROM (VALUES (repeat('x', 100))) t(s)",
    "SELECT region LIKE '%a%b%c' FROM country_regions",  # LIKE without '_' matches in linear time
    "SELECT [x * 2 FOR x IN range(100)]",
    "SELECT count(*) FROM country_regions WHERE " + " AND ".join(["region <> 'x'"] * 300),  # a boolean, not a sum
]


@pytest.mark.parametrize(("sql", "code"), REFUSED)
def test_a_value_past_the_bound_is_refused_free(con, sql, code):
    before = con.budget()
    with pytest.raises(errors.UnsupportedQueryError) as info:
        con.cursor().execute(sql)
    assert info.value.code == code, str(info.value)
    assert info.value.hint
    assert con.budget() == before


@pytest.mark.parametrize("sql", ACCEPTED)
def test_small_constants_and_stored_values_still_run(con, sql):
    assert con.cursor().execute(sql).fetchall() is not None


def test_parameters_are_sized_and_patterns_checked(con):
    before = con.budget()
    with pytest.raises(errors.UnsupportedQueryError) as info:
        con.cursor().execute("SELECT length(repeat(?, 8000))", ["x" * 100_000])
    assert info.value.code == "DP255"
    with pytest.raises(errors.UnsupportedQueryError) as info:
        con.cursor().execute("SELECT region FROM country_regions WHERE region LIKE ?", ["%a_%b%c"])
    assert info.value.code == "DP258"
    assert con.cursor().execute("SELECT count(*) FROM country_regions WHERE region LIKE ?", ["A%"]).fetchall()
    assert con.budget() == before


def test_parameters_of_every_type_are_sized(con):
    import numpy as np

    for value in (np.zeros(1_000_000), memoryview(b"x" * 10**6), [[0] * 10_000] * 10):
        with pytest.raises(errors.UnsupportedQueryError) as info:
            con.cursor().execute("SELECT len(repeat($1, 120))", [value])
        assert info.value.code == "DP255"


def test_statements_the_scopes_cannot_read_get_a_dpgate_error(con):
    for sql in ("SELECT x FROM (SELECT 1 x) a, (SELECT 2 y) a",  # sqlglot: 'Alias already used'
                "SELECT x FROM (" + " UNION ALL ".join(["SELECT 1 AS x"] * 1500) + ")"):  # fmt: skip
        try:
            con.cursor().execute(sql).fetchall()
        except errors.Error as e:
            assert e.code


def test_functions_that_recurse_per_nesting_level_are_refused(con):
    """json_structure of a 100,000-deep text overflowed the stack and killed the process."""
    with pytest.raises(errors.NotSupportedError) as info:
        con.cursor().execute("SELECT json_structure(repeat('[', 1000) || repeat(']', 1000))")
    assert info.value.code == "DP220"


def test_a_call_with_too_few_arguments_is_the_engine_s_error_not_a_traceback(con):
    with pytest.raises(errors.Error) as info:
        con.cursor().execute("SELECT json_pretty()")
    assert info.value.code


def test_the_checker_is_quick_on_long_and_nested_statements():
    """Lambdas nested 14 deep took the checker 218 s, a chain of 8,000 terms 25 s (pure Python, before
    any timeout runs): both are bounded by the statement's size now."""
    import time

    chain = "SELECT " + " + ".join(["1"] * 8000)
    nested = "SELECT " + "list_reduce([1], (a, b) -> " * 14 + "a" + ")" * 14
    conjuncts = "SELECT 1 WHERE " + " AND ".join(["true"] * 3000)  # 45 s in the function check before
    deep = "(SELECT 'a' AS z)"
    for _ in range(60):
        deep = f"(SELECT z || 'a' AS z FROM {deep})"
    wide = ("SELECT 1 IN (" + ", ".join(["x"] * 2000) + ") FROM (" + " UNION ALL ".join(["SELECT 1 AS x"] * 300)
            + ") u, " + deep + " d")  # fmt: skip
    for sql in (chain, nested, conjuncts, wide):
        tree = sqlglot.parse_one(sql, read="duckdb")
        start = time.perf_counter()
        try:
            built.check(tree)
        except errors.UnsupportedQueryError:
            pass
        assert time.perf_counter() - start < 10  # minutes before; well under a second now


def test_the_refusal_names_the_builder_not_the_statement():
    with pytest.raises(errors.UnsupportedQueryError) as info:
        built.check(sqlglot.parse_one("SELECT length(upper(lpad('a', 100000000))) AS x", read="duckdb"))
    assert str(info.value).startswith("LPAD(")


def test_the_bound_is_where_it_says():
    """Just under the bound runs; just over is refused: the limits are what the module states."""
    fits = f"SELECT repeat('a', {built.MAX_BUILT})"
    over = f"SELECT repeat('a', {built.MAX_BUILT + 1})"
    built.check(sqlglot.parse_one(fits, read="duckdb"))
    with pytest.raises(errors.UnsupportedQueryError):
        built.check(sqlglot.parse_one(over, read="duckdb"))
    built.check(sqlglot.parse_one(f"SELECT repeat(region, {built.MAX_FACTOR}) FROM t", read="duckdb"))
    with pytest.raises(errors.UnsupportedQueryError):
        built.check(sqlglot.parse_one(f"SELECT repeat(region, {built.MAX_FACTOR + 1}) FROM t", read="duckdb"))


@pytest.mark.parametrize(("sql", "ok"), [
    # DuckDB 2.0's invoke(): its lambda's parameters have the sizes of its arguments (nested, 4 x 4 x 300)
    ("SELECT invoke(lambda x: x || x, repeat('a', 1000))", True),
    ("SELECT invoke(lambda x: x || x || x || x, repeat('a', 2000))", False),
    ("SELECT invoke(lambda x: invoke(lambda y: y || y || y || y, x || x || x || x), repeat('a', 300))", False),
    # lttb's points are as large as the rows read: measured, not grown
    ("SELECT length(lttb(x, y, 1000)) FROM t", True),
    ("SELECT array_to_string(lttb(x, y, 1000), repeat('-', 1000)) FROM t", False),
    # sort keys are larger than their text: nested ones multiply (2.0's collate_<locale> and 1.x's icu_collate_<locale>)
    ("SELECT icu_collate_en(region), collate_en(region) FROM t", True),
    ("SELECT icu_collate_en(icu_collate_en(icu_collate_en(repeat('a', 10))))", False),
    ("SELECT collate_zh(repeat('a', 300))", False),
])  # fmt: skip
def test_functions_duckdb_2_added_are_sized(sql, ok):
    """The functions DuckDB 2.0 added that build or gather values (``frontend.functions``) are sized too; on
    1.x they are refused before this check as functions DuckDB does not have."""
    statement = sqlglot.parse_one(sql, read="duckdb")
    if ok:
        built.check(statement)
    else:
        with pytest.raises(errors.UnsupportedQueryError) as info:
            built.check(statement)
        assert info.value.code == "DP255"
