"""The work bound of row expressions (``dpgate.frontend.cost``): what it refuses, what it keeps.

A row expression whose work one chosen row can make large turns a statement's time into a readout
of that row; each refusal here is free (DP258 / DP255 / DP259, before the debit).
"""

from __future__ import annotations

import pytest

from dpgate import errors
from dpgate.frontend import allowlist, cost
from dpgate.frontend.dialect import MAX_STATEMENT_BYTES, MAX_TOKENS, parse_one

DP = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) COUNT(*) FROM t WHERE "


def _code(where: str) -> str | None:
    try:
        allowlist.check(parse_one(DP + where))
    except errors.Error as e:
        return e.code
    return None


@pytest.mark.parametrize(
    ("pattern", "low", "high"),
    [
        ("a", 1, 3),
        ("(x|y){1,1000}z", 4000, 6000),  # RE2 copies the group 1,000 times
        ("(x|y){1,30}z", 100, 200),
        ("((x|y){8}){8}", 200, 300),  # nested counts multiply
        ("[[:alpha:]]+", 16, 20),  # a class is ranges of UTF-8 sequences
        ("\\p{L}+", 96, 100),  # a Unicode class: hundreds of ranges
        ("(?i)abc", 8, 12),  # case folding doubles
        ("(?s).*a.{250}c", 4000, 4100),
        ("a{2,}", 3, 6),
        ("\\Qaaaa\\E", 4, 6),
        ("x{", 2, 4),  # a literal brace
    ],
)
def test_regex_program_estimate(pattern, low, high):
    assert low <= cost.regex_program(pattern) <= high


@pytest.mark.parametrize(
    ("where", "code"),
    [
        ("regexp_matches(s, '(x|y){1,1000}z')", "DP258"),  # 80 ms a row on 4 KB in 0.18.0
        ("regexp_matches(s, '(x|y){1,40}z')", "DP258"),  # 200 instructions at RE2's worst case per character
        ("regexp_matches(s, '^[0-9]{4}-[0-9]{2}$')", None),
        ("regexp_matches(CAST(age AS VARCHAR) || '" + "ab" * 500 + "', '(?s).*a.{250}c')", "DP258"),  # varied built text
        ("regexp_matches(s, '\\p{L}{200}')", "DP258"),  # 0.6 s to compile
        ("regexp_extract(s, '((a|b){20}){20}') = ''", "DP258"),
        ("regexp_matches(s, 'a.*b.*c')", None),
        ("s LIKE '%_%z'", "DP258"),  # backtracks: 23 ms a row on 4 KB
        ("s LIKE '%a%b%c%'", None),  # no '_': DuckDB's linear matcher
        ("s LIKE '%a_b%'", None),  # '%' only at the ends
        ("s ILIKE '%x%z'", "DP258"),  # ILIKE always backtracks: 16 ms a row on 4 KB
        ("s ILIKE '%x%'", None),
        ("s LIKE 'a!%b%c%d' ESCAPE '!'", "DP258"),  # an ESCAPE takes the backtracking matcher too
        ("s LIKE 'a!%b%c' ESCAPE '!'", None),  # one '%' with text after it: linear in the text times the pattern
        ("s ILIKE 'x%y%'", None),
        ("s LIKE '%a!%b%' ESCAPE '!'", None),
        ("length(lpad(s, 4096, 'x')) > 1", None),
        ("length(lpad(s, 4097, 'x')) > 1", "DP255"),
        ("length(s || s || s || s || s || s || s || s || s) > 1", "DP255"),  # 9x its input
        (" AND ".join(f"regexp_matches(lpad(s, 4096, '{c}'), '(x|y){{1,50}}z')" for c in "xyz"),
         "DP258"),  # three of the largest patterns over the largest built text: over a row's work
        ("contains(lpad(s, 4096, 'x'), '" + "x" * 999 + "')", None),
    ],
)
def test_row_work_bound(where, code):
    assert _code(where) == code


def test_refusals_say_the_bound():
    with pytest.raises(errors.UnsupportedQueryError) as e:
        allowlist.check(parse_one(DP + "regexp_matches(s, '(x|y){1,1000}z')"))
    assert "instructions" in e.value.message and f"at most {cost.MAX_REGEX_PROGRAM}" in e.value.message
    with pytest.raises(errors.UnsupportedQueryError) as e:
        allowlist.check(parse_one(DP + "s ILIKE '%a%b%'"))
    assert "backtrack" in e.value.message and "at most one '%'" in e.value.hint


def test_statement_work_over_the_public_row_bound():
    statement = parse_one(DP + "regexp_matches(lpad(s, 4096, 'x'), '(x|y){1,50}z')")
    _, per_row = cost.row_work(statement)
    assert per_row > 100_000
    cost.check_statement(per_row, rows=1000)
    with pytest.raises(errors.UnsupportedQueryError) as e:
        cost.check_statement(per_row, rows=10**8)
    assert e.value.code == "DP258" and "rows" in e.value.message


def test_statement_work_bound_scales_with_spark_cores_up_to_a_cap():
    """A statement that reads only Spark tables may do a minute of work per core Spark gives
    dpgate's session, up to MAX_SPARK_CORES; the cores are asked only past one core's bound."""
    per_row = 2**19
    rows = 3 * cost.MAX_STATEMENT_WORK // per_row  # three cores' worth
    with pytest.raises(errors.UnsupportedQueryError):
        cost.check_statement(per_row, rows, cores=2)
    cost.check_statement(per_row, rows, cores=3)
    with pytest.raises(errors.UnsupportedQueryError) as e:
        cost.check_statement(per_row, cost.MAX_SPARK_CORES * rows, cores=10**6)
    assert f"{cost.MAX_SPARK_CORES} Spark cores" in e.value.message

    class Roster:
        def __init__(self, n):
            self.n = n

        def execute(self, sql):
            return self

        def fetchone(self):
            return (self.n,)

    asked = []
    table = type("T", (), {"roster_sql": "r"})()
    statement = parse_one(DP + "regexp_matches(lpad(s, 4096, 'x'), '(x|y){1,50}z')")
    _, b = cost.row_work(statement)
    within = int(cost.MAX_STATEMENT_WORK // b)
    cost.check_rows(Roster(within), statement, (table,), lambda t: 1, lambda: asked.append(1) or 1)
    assert asked == []
    cost.check_rows(Roster(3 * within), statement, (table,), lambda t: 1, lambda: asked.append(1) or 4)
    assert asked == [1]
    # a light statement skips the count only while roster x rows per subject could not pass the bound
    light = parse_one(DP + "s = 'x'")
    with pytest.raises(errors.UnsupportedQueryError):
        cost.check_rows(Roster(1000), light, (table,), lambda t: 10**9)
    # ... and as the product of rows per subject when tables are joined: three tables of 2 rows each
    # are 8 joined rows per subject (the largest table's 2 would skip the count)
    with pytest.raises(errors.UnsupportedQueryError):
        cost.check_rows(Roster(30_000_000), light, (table, table, table), lambda t: 2)
    # two tables joined on the unit: a subject's joined rows are the product of its rows in each
    assert 1000 <= within < 1100  # 1,044 rows of this statement's work fit the bound
    cost.check_rows(Roster(10), statement, (table, table), lambda t: 10)  # 10 subjects x 10 x 10 rows
    with pytest.raises(errors.UnsupportedQueryError):
        cost.check_rows(Roster(11), statement, (table, table), lambda t: 10)  # 1,100 (the sum: 220)
    with pytest.raises(errors.UnsupportedQueryError):
        cost.check_rows(Roster(3 * within), statement, (table,), lambda t: 1)


def test_dp_options_are_no_work_per_row():
    """OPTIONS (...) is read once, at planning: a top-k over 100M rows was refused (DP258) for the
    per-row cost of its topk_method option's text."""
    plain = "SELECT dept, COUNT(*) AS n FROM t GROUP BY dept ORDER BY n DESC LIMIT 3"
    with_options = plain.replace("SELECT", "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, topk_method = "
                                 "'tps_pfm', max_groups_contributed = 3)")  # fmt: skip
    assert cost.row_work(parse_one(with_options)) == cost.row_work(parse_one(plain))


def test_statement_size_and_tokens_are_bounded_before_parsing():
    with pytest.raises(errors.ParseError) as e:
        parse_one("SELECT 1 WHERE " + " OR ".join(["a = 1"] * (MAX_TOKENS // 2)))
    assert e.value.code == "DP259" and "tokens" in e.value.message
    with pytest.raises(errors.ParseError) as e:
        parse_one("SELECT '" + "x" * MAX_STATEMENT_BYTES + "'")
    assert e.value.code == "DP259" and "bytes" in e.value.message
    parse_one("SELECT 1 WHERE " + " OR ".join(["a = 1"] * 1000))  # a long but ordinary statement


@pytest.mark.parametrize(
    ("where", "refused"),
    [("s LIKE '%e%e%e%e%z'", True),  # Spark's LIKE is a backtracking Java regex: 10.7-12 s vs 0.8 s in 0.18.0
     ("s LIKE '%a%b'", True), ("s LIKE 'a%b'", False), ("s LIKE '%abc%'", False), ("s LIKE 'a_c%'", False),
     ("s LIKE 'c%x'", False)],
)
def test_spark_like_has_at_most_one_percent_before_its_end(where, refused):
    from dpgate.backends.spark import translate as spark

    node = parse_one(DP + where).args["where"].this
    if refused:
        with pytest.raises(errors.UnsupportedQueryError) as e:
            spark.to_spark(node)
        assert e.value.code == "DP258"
    else:
        spark.to_spark(node)


def test_the_row_bound_is_not_the_analysts_to_lower(tmp_path):
    """The WHERE runs on a subject's rows before the sample, so max_rows_contributed = 1 does not lower
    the public bound below the table's max_rows; a graph's WHERE runs on every edge row, bounded by
    its C(n, 2) potential edges (not by its roster's one row)."""
    import duckdb

    import dpgate
    from dpgate.catalog.owner import Owner

    path = tmp_path / "w.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE t AS SELECT i // 4 AS pid, 'x' AS s FROM range(12000) r(i)")
    con.execute("CREATE TABLE e AS SELECT i AS a, i + 1 AS b, 'x' AS s FROM range(100) r(i)")
    con.close()
    with Owner(path) as owner:
        owner.protect("t", unit="pid", max_rows=1000, public_roster=True)
        owner.protect_graph("e", src="a", dst="b", nodes=3000, epsilon=1e6)
        owner.add_analyst("alice", epsilon=10.0, delta=1e-3)
    heavy = f"contains(lpad(s, 4096, 'x'), '{'ab' * 50}')"  # about 69,000 steps a row
    with dpgate.connect(str(path), analyst="alice") as c:
        for sql in (f"SELECT COUNT(*) FROM t WHERE {heavy}",  # 3,000 subjects x 1,000 rows
                    f"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (max_rows_contributed = 1) COUNT(*) FROM t WHERE {heavy}",
                    f"SELECT TRIANGLE_COUNT(a, b) FROM e WHERE {heavy}"):  # C(3000, 2) = 4.5M potential edges
            with pytest.raises(errors.UnsupportedQueryError) as e:
                c.gateway.cost(sql)
            assert e.value.code == "DP258", sql
        assert c.gateway.cost("SELECT TRIANGLE_COUNT(a, b) FROM e WHERE s = 'x'") is not None


def test_a_like_spark_runs_as_a_regular_expression_is_charged_as_backtracking():
    """Spark turns abc, abc%, %abc, %abc% and abc%def into comparisons and searches; any other LIKE
    runs as a Java regular expression that backtracks over '%' (x%aaa...b%: text length times pattern
    length per row), so it is charged so on either engine."""
    needle = "a" * 40 + "b"
    cheap = parse_one(DP + f"lpad(s, 4000, 'x') LIKE '%{needle}%'")
    allowlist.check(cheap)
    for shape in (f"x%{needle}%", f"%{needle}%x", f"x%{needle}%y"):
        with pytest.raises(errors.UnsupportedQueryError) as e:
            allowlist.check(parse_one(DP + f"lpad(s, 4000, 'x') LIKE '{shape}'"))
        assert e.value.code == "DP258", shape
    assert cost.spark_linear("abc%def") and cost.spark_linear("%%abc%%") and not cost.spark_linear("a_c")
    assert not cost.spark_linear("a%%b%c")

