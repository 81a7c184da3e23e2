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
    ("SELECT levenshtein(repeat('a', 100000), repeat('b', 100000))", "DP258"),  # 16 s, not interruptible
    ("SELECT levenshtein(string_agg(region, ''), 'a') FROM country_regions", "DP258"),
    ("SELECT repeat('a', 30000) GLOB '*a*a*a*b'", "DP258"),
    ("SELECT (SELECT string_agg(region, '') FROM country_regions) LIKE '%a_%a%b'", "DP258"),
    ("SELECT json_pretty(repeat('[', 3000) || repeat(']', 3000))", "DP258"),  # indentation: 36M characters
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
    "SELECT region LIKE '%a_%i%' FROM country_regions",
    "SELECT printf('%5d|%s', 3, region) FROM country_regions",
    "SELECT replace(region, 'a', 'bb') FROM country_regions",
    "SELECT array_to_string(list(region), ',') IS NULL FROM country_regions",
    "SELECT list_filter(range(10), x -> x % 2 = 0)",
    "SELECT * FROM generate_series(DATE '2020-01-01', DATE '2020-01-31', INTERVAL 1 DAY)",
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
