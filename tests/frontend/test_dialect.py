"""The dialect parses dpgate's clauses strictly and round-trips them (sqlglot's Validator style)."""

from __future__ import annotations

import pytest

from dpgate import errors
from dpgate.frontend import dialect
from dpgate.frontend.nodes import DPOptions, ExplainPrivacy, ShowBudget, dp_options


def validate_identity(sql: str, expected: str | None = None):
    node = dialect.parse_one(sql)
    assert dialect.to_sql(node) == (expected or sql)
    return node


def assert_rejects(sql: str, code: str):
    with pytest.raises(errors.ParseError) as info:
        dialect.parse_one(sql)
    assert info.value.code == code
    return info.value


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5) COUNT(*) FROM adult",
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5, delta = 1e-6) education, COUNT(*) AS n FROM adult GROUP BY education",
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = ?, intervals = TRUE) COUNT(*) FROM adult",
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (privacy_unit_column = person_id, personalization = 'threshold') COUNT(*) FROM adult",
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS () COUNT(*) FROM adult",
        "SHOW BUDGET",
        "EXPLAIN PRIVACY SELECT COUNT(*) FROM adult",
        "EXPLAIN PRIVACY SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) SUM(age) FROM adult",
        "SET dp_epsilon = 0.5",
        "SELECT 1",
    ],
)
def test_round_trip(sql):
    validate_identity(sql)


def test_options_are_parsed_into_nodes():
    node = validate_identity("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5, delta = 1e-6) COUNT(*) FROM t")
    opts = dp_options(node)
    assert isinstance(opts, DPOptions)
    assert [o.option_name for o in opts.expressions] == ["epsilon", "delta"]
    assert [o.expression.sql() for o in opts.expressions] == ["0.5", "1e-6"]


def test_bigquery_arrow_form_is_accepted():
    validate_identity(
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon => 0.5) COUNT(*) FROM t",
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5) COUNT(*) FROM t",
    )


def test_statement_nodes():
    assert isinstance(dialect.parse_one("show budget;"), ShowBudget)
    node = dialect.parse_one("EXPLAIN PRIVACY SELECT COUNT(*) FROM t")
    assert isinstance(node, ExplainPrivacy)


@pytest.mark.parametrize(
    "sql, where",
    [
        ("SELECT WITH foo COUNT(*) FROM t", "DIFFERENTIAL_PRIVACY"),
        ("SELECT WITH DIFFERENTIAL_PRIVACY COUNT(*) FROM t", "OPTIONS"),
        ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS epsilon = 1 COUNT(*) FROM t", "("),
        ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon 0.5) COUNT(*) FROM t", "="),
        ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5 COUNT(*) FROM t", ","),
        ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = ) COUNT(*) FROM t", "value"),
        ("EXPLAIN SELECT 1", "EXPLAIN PRIVACY"),
        ("EXPLAIN PRIVACY", "query"),
    ],
)
def test_strict_errors(sql, where):
    err = assert_rejects(sql, "DP201")
    assert where in str(err)
    assert err.details["line"] == 1 and err.details["col"] >= 1


def test_multiple_statements_refused():
    err = assert_rejects("SELECT 1; DROP TABLE adult", "DP203")
    assert "2 statements" in err.message


def test_empty_refused():
    assert_rejects("  ;  ", "DP202")


def test_tokenizer_errors_are_parse_errors():
    assert_rejects("SELECT 'unterminated", "DP201")


def test_explain_is_an_ordinary_word_elsewhere():
    node = dialect.parse_one("SELECT explain FROM t")
    assert node.expressions[0].name == "explain"


def test_plain_duckdb_sql_is_unchanged():
    sql = "SELECT a, COUNT(*) FROM t WHERE b BETWEEN 1 AND 2 GROUP BY a HAVING COUNT(*) > 3 ORDER BY 2 DESC LIMIT 5"
    assert dialect.to_duckdb(dialect.parse_one(sql)) == sql
