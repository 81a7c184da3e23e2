"""Functions an analyst may call by name: a reviewed positive list (``frontend.functions``).

Protected row counts could be read out of a free public statement through
``json_serialize_plan`` (SQL text planned against the live catalog), and whether a subject was over
its bound through ``current_query_id`` (the connection's statement counter). Both are refused now,
and so is any built-in a newer DuckDB adds until it is reviewed.
"""

from __future__ import annotations

import duckdb
import pytest

import dpgate
from dpgate import errors
from dpgate.frontend import classify, functions

ATTACKS = [
    "SELECT json_serialize_plan('SELECT count(*) FROM adult t JOIN range(45556) r ON t.person_id = r.range', "
    "optimize := true)",
    "SELECT json_serialize_plan(?, optimize := true)",
    "SELECT json_serialize_sql('SELECT * FROM adult')",
    "SELECT json_deserialize_sql(json_serialize_sql('SELECT 1'))",
    "SELECT current_query_id()",
    "SELECT txid_current(), current_transaction_id()",
    "SELECT current_connection_id()",
    "SELECT current_query()",
    "SELECT stats(region) FROM country_regions",
    "SELECT get_block_size('main')",
    "SELECT sleep_ms(1)",
    "SELECT region FROM country_regions WHERE current_query_id() > 0",
    "WITH c AS (SELECT current_query_id() AS q) SELECT q FROM c",
    # DuckDB 2.0: a table named in a string; an aggregate called by its name; states repeated by an argument
    "SELECT index_key({'table': 'adult'}, 'adult_idx', 1)",
    "SELECT finalize(to_aggregate_state({'count': 1, 'value': 42.0}, 'avg', ['DOUBLE']))",
    "SELECT to_aggregate_state(1, 'json_serialize_plan', ['VARCHAR'])",
    "SELECT combine_aggr(s, 1000000000000) FROM (SELECT NULL AS s)",
    # a VARIANT of any nesting (DuckDB's work on one recurses per level)
    "SELECT variant_bytes_to_variant(from_hex('00'))",
    "SELECT variant_group_array(region) FROM country_regions",
    # an aggregate named in a string runs as if it were called: its name is checked as a call's
    "SELECT list_aggregate([1], 'combine_aggr')",
    "SELECT list_aggr(['[1]'], 'json_group_structure')",
]


@pytest.mark.parametrize("sql", ATTACKS)
def test_introspection_and_sql_text_functions_are_refused_free(con, sql):
    before = con.budget()
    with pytest.raises(errors.NotSupportedError) as info:
        con.cursor().execute(sql, ["SELECT count(*) FROM adult"] if "?" in sql else None)
    assert info.value.code == "DP220"
    assert con.budget() == before


def test_the_counter_no_longer_shows_the_path_of_a_dp_query(con):
    """The counter read before and after a DP query would show its path; refused at the first read."""
    with pytest.raises(errors.NotSupportedError):
        con.cursor().execute("SELECT current_query_id()")
    cur = con.cursor()
    cur.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1) COUNT(*) FROM adult")
    assert cur.fetchall()
    with pytest.raises(errors.NotSupportedError):
        con.cursor().execute("SELECT current_query_id()")


def test_ordinary_functions_still_run(con):
    rows = con.cursor().execute(
        "SELECT upper(region), levenshtein(region, 'Asia'), list_sort([3, 1, 2]), count(*) "
        "FROM country_regions GROUP BY ALL ORDER BY 1 LIMIT 1"
    ).fetchall()
    assert rows == [("ASIA", 0, [1, 2, 3], 12)]


def test_an_unreviewed_builtin_is_refused(con, monkeypatch):
    monkeypatch.setattr(functions, "REVIEWED", functions.REVIEWED - {"damerau_levenshtein", "levenshtein"})
    with pytest.raises(errors.NotSupportedError) as info:
        con.cursor().execute("SELECT damerau_levenshtein('a', 'b')")
    assert info.value.code == "DP220" and "not reviewed" in info.value.message


def test_every_builtin_of_this_duckdb_is_reviewed():
    """Upgrading DuckDB makes this fail with the new functions' names: review each (does it read SQL
    text, the catalog, settings, files, counters of the engine's work?) and add it to REVIEWED or
    REFUSED."""
    rows = duckdb.connect().execute(
        "SELECT DISTINCT lower(function_name) FROM duckdb_functions() "
        "WHERE internal AND function_type IN ('scalar', 'aggregate', 'macro', 'window')"
    ).fetchall()  # fmt: skip  (window: DuckDB 2 lists rank(), lag(), ... as their own type)
    # DuckDB's internal spellings (__internal_*, __cast, __between) stay unlisted: refused as unreviewed.
    unreviewed = sorted(
        n for (n,) in rows
        if n.isidentifier() and not n.startswith("__") and not classify.is_forbidden_function(n)
        and n not in functions.REVIEWED and n not in functions.REFUSED
    )  # fmt: skip
    assert unreviewed == [], f"DuckDB {duckdb.__version__} has functions dpgate has not reviewed: {unreviewed}"
    assert not functions.REVIEWED & functions.REFUSED
    assert not {n for n in functions.REVIEWED if classify.is_forbidden_function(n)}


def test_every_table_function_but_the_generators_is_refused_free(con):
    """Table functions are accepted by a positive list (``classify.SAFE_TABLE_FUNCTIONS``): those a newer
    DuckDB adds -- 2.0's grammar extensions and external resources, which change the parser or act outside
    the database -- are refused before DuckDB sees the statement, without a review of each."""
    names = sorted({n for (n,) in duckdb.connect().execute(
        "SELECT DISTINCT lower(function_name) FROM duckdb_functions() WHERE function_type IN ('table', 'table_macro')"
    ).fetchall()} - classify.SAFE_TABLE_FUNCTIONS - {"repeat"})  # fmt: skip  (repeat('x') does not parse as a FROM item)
    before = con.budget()
    refused = {}
    for name in names:
        with pytest.raises(errors.Error) as info:
            con.cursor().execute(f"SELECT * FROM {name}('x')")
        refused[name] = info.value.code
    assert {n: c for n, c in refused.items() if c != "DP220"} == {}
    assert con.budget() == before


def test_the_release_is_unaffected(demo_db):
    """A synthetic release's own SQL is dpgate's, not the analyst's: it still runs."""
    with dpgate.connect(str(demo_db), analyst="demo") as c:
        cur = c.cursor()
        cur.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.2) sex, COUNT(*) AS n FROM adult GROUP BY sex")
        assert len(cur.fetchall()) == 2


def test_a_function_sqlglot_models_is_checked_under_its_duckdb_name(con, monkeypatch):
    """``editdist3`` parses as sqlglot's Levenshtein and runs DuckDB's ``levenshtein``."""
    assert con.cursor().execute("SELECT editdist3('ab', 'b')").fetchall() == [(1,)]
    monkeypatch.setattr(functions, "REVIEWED", functions.REVIEWED - {"levenshtein", "editdist3"})
    with pytest.raises(errors.NotSupportedError) as info:
        con.cursor().execute("SELECT editdist3('ab', 'b')")
    assert info.value.code == "DP220"
    assert con.cursor().execute("SELECT CAST(1 AS VARCHAR), coalesce(NULL, 2)").fetchall() == [("1", 2)]
