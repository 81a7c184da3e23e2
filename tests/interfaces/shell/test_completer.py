"""Completion as a pure function of the text before the cursor and a catalog snapshot."""

from __future__ import annotations

from prompt_toolkit.document import Document

from dpgate.interfaces.shell.completer import SQLCompleter, suggest

CATALOG = {
    "adult": ("protected", [("person_id", "INTEGER"), ("age", "INTEGER"), ("education", "VARCHAR")]),
    "country_regions": ("public", [("native_country", "VARCHAR"), ("region", "VARCHAR")]),
}
COMMANDS = [".help", ".tables", ".schema", ".budget", ".quit"]


def names(text):
    return [v for v, _ in suggest(text, CATALOG, COMMANDS)]


def test_tables_after_from_and_join():
    assert names("SELECT COUNT(*) FROM ") == ["adult", "country_regions", "dp_top_k_columns("]
    assert names("SELECT COUNT(*) FROM ad") == ["adult"]
    assert names("SELECT * FROM dp_") == ["dp_top_k_columns("]
    assert names("SELECT * FROM adult a JOIN co") == ["country_regions"]


def test_columns_of_the_tables_in_the_query():
    assert "age" in names("SELECT COUNT(*) FROM adult WHERE ag")
    # the SELECT list is completed from the FROM clause after the cursor
    assert [v for v, _ in suggest("SELECT ag", CATALOG, COMMANDS, "SELECT ag FROM adult")][:1] == ["age"]
    assert names("SELECT COUNT(*) FROM adult a WHERE a.") == ["person_id", "age", "education"]
    assert names("SELECT COUNT(*) FROM adult a JOIN country_regions r USING (native_country) GROUP BY r.re") == ["region"]


def test_dp_words_and_options():
    assert "WITH DIFFERENTIAL_PRIVACY OPTIONS (" in names("SELECT ")
    assert names("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (eps") == ["epsilon"]
    assert "intervals" in names("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, ")
    assert names("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = ") == []
    assert "EXPLAIN PRIVACY" in names("EXP")
    assert "SHOW BUDGET" in names("SHOW")
    assert names("SET dp_e") == ["dp_epsilon"]


def test_dot_commands():
    assert names(".b") == [".budget"]
    assert names(".schema ") == ["adult", "country_regions"]
    assert names(".schema co") == ["country_regions"]


def test_prompt_toolkit_wrapper_keeps_lower_case():
    completer = SQLCompleter(lambda: CATALOG, lambda: COMMANDS)
    doc = Document("select count(*) fro")
    got = [c.text for c in completer.get_completions(doc, None)]
    assert "from" in got
    doc = Document(".sc")
    assert [c.text for c in completer.get_completions(doc, None)] == [".schema"]
