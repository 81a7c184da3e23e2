"""Column coding for synthetic releases: code spaces from declarations, encoding in DuckDB,
decoding back to typed values, the release table and the owner's quality report.

The reference for every code is ``synthesis.code_of`` (Python, from the same bin edges); the
tests check that DuckDB's encoder agrees with it on every edge and its neighbours, that decoded
values encode back to their code, and a few codes worked out by hand.
"""

from __future__ import annotations

import doctest
import importlib.util
import math
import time
from decimal import Decimal
from pathlib import Path

import duckdb
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpgate import errors, resources
from dpgate.catalog import tables as catalog
from dpgate.queries.synthetic import coding as synthesis
from dpgate.catalog.tables import Column
from dpgate.mechanisms import privbayes
from dpgate.queries.synthetic.coding import ColumnCoding, code_of, coding_for, decode, encode_query, fetch_codes

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "privbayes_adult.py"


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------
def codes_in_duckdb(coding: ColumnCoding, values: list, *, con=None) -> list[int | None]:
    """Encode ``values`` (one per row, in a column of ``coding.sql_type``) and return the codes,
    None where the encoder gives SQL NULL."""
    con = con or duckdb.connect()
    col = synthesis._q(coding.name)
    con.execute(f"CREATE OR REPLACE TABLE src (__i INTEGER, {col} {coding.sql_type})")
    texts = [None if v is None else synthesis._text(v) if not isinstance(v, float) else repr(v) for v in values]
    con.execute(
        f"INSERT INTO src SELECT i, CAST(v AS {coding.sql_type}) FROM (SELECT unnest(range(len($1)::BIGINT)) AS i, "
        f"unnest(CAST($1 AS VARCHAR[])) AS v)",
        [texts],
    )
    sql = encode_query("SELECT * FROM src ORDER BY __i", [coding])
    return [r[0] for r in con.execute(sql).fetchall()]


def neighbours(coding: ColumnCoding, x) -> list:
    """``x`` and the values of the column's type just below and above it."""
    lay = coding._layout
    if coding.kind == "integer":
        return [x - 1, x, x + 1]
    if lay.decimal_scale is not None:
        step = Decimal(1).scaleb(-lay.decimal_scale)
        return [x - step, x, x + step]
    if lay.float32:
        f = np.float32(x)
        return [float(np.nextafter(f, np.float32(-np.inf))), float(f), float(np.nextafter(f, np.float32(np.inf)))]
    return [math.nextafter(x, -math.inf), x, math.nextafter(x, math.inf)]


def fits(coding: ColumnCoding, v) -> bool:
    """``v`` is a value of the column's type (neighbours of extreme edges may not be)."""
    t = coding.sql_type.upper()
    if coding.kind == "integer":
        lo, hi = synthesis._INTEGER_RANGE[t]
        return lo <= v <= hi
    if coding._layout.decimal_scale is not None:
        p = int(t.split("(")[1].split(",")[0])
        return abs(v) < Decimal(10) ** (p - coding._layout.decimal_scale)
    return math.isfinite(v)


def assert_edges_agree(coding: ColumnCoding) -> None:
    """DuckDB's code equals the Python reference on every edge and its two neighbours."""
    values = [v for e in coding.bin_edges for v in neighbours(coding, e) if fits(coding, v)]
    got = codes_in_duckdb(coding, values)
    want = [code_of(coding, v) for v in values]
    assert got == want, [(v, g, w) for v, g, w in zip(values, got, want) if g != w]


def roundtrip(codings: list[ColumnCoding], codes: np.ndarray, seed: int = 0) -> np.ndarray:
    """decode → write_table → encode_query over the release: the codes read back."""
    con = duckdb.connect()
    n = synthesis.write_table(con, "syn", codings, codes, rng=np.random.default_rng(seed))
    assert n == codes.shape[0]
    return fetch_codes(con, encode_query('SELECT * FROM main."syn"', codings))


def every_code(codings: list[ColumnCoding], repeat: int = 50) -> np.ndarray:
    """Each column runs through all its codes ``repeat`` times (columns cycle independently)."""
    n = max(c.size for c in codings) * repeat
    return np.stack([np.arange(n) % c.size for c in codings], axis=1).astype(np.int64)


AGE = Column("age", "INTEGER", 17, 90)


# ---------------------------------------------------------------------------------------------
# coding rules: public facts only
# ---------------------------------------------------------------------------------------------
def test_declared_domain_is_categorical_in_declared_order():
    c = coding_for(Column("race", "VARCHAR", domain=("White", "Black", "Other"), not_null=False), bins=16)
    assert (c.kind, c.values, c.null_code, c.size) == ("categorical", ("White", "Black", "Other"), False, 3)
    assert c.describe() == "3 declared values"


def test_none_in_the_domain_gives_the_last_code_to_null():
    c = coding_for(Column("workclass", "VARCHAR", domain=("Private", None, "State-gov")), bins=16)
    assert c.values == ("Private", "State-gov") and c.null_code and c.size == 3 and c.null == 2
    assert c.describe() == "2 declared values + NULL"


def test_not_null_does_not_matter_for_a_declared_domain():
    # the domain decides: no None declared, no NULL code, even on a nullable column
    assert not coding_for(Column("s", "VARCHAR", domain=("a",), not_null=False), bins=4).null_code


def test_a_domain_wins_over_bounds():
    c = coding_for(Column("grade", "INTEGER", 1, 100, domain=(1, 2, 3)), bins=16)
    assert c.kind == "categorical" and c.values == (1, 2, 3)


@pytest.mark.parametrize(("not_null", "size", "text"), [(False, 3, "false, true + NULL"), (True, 2, "false, true")])
def test_boolean_without_a_domain(not_null, size, text):
    c = coding_for(Column("flag", "BOOLEAN", not_null=not_null), bins=16)
    assert (c.kind, c.values, c.size, c.describe()) == ("categorical", (False, True), size, text)


def test_integer_spanning_at_most_bins_gets_one_code_per_integer():
    c = coding_for(Column("education_num", "INTEGER", 1, 16, not_null=True), bins=16)
    assert (c.kind, c.bins, c.lower, c.upper, c.size) == ("integer", None, 1, 16, 16)
    assert c.describe() == "16 integers 1..16"
    assert coding_for(Column("n", "INTEGER", 1, 17), bins=16).bins == 16  # 17 integers: binned


def test_integer_bounds_are_rounded_inward_and_cut_to_the_type():
    c = coding_for(Column("x", "INTEGER", 0.5, 10.5), bins=16)
    assert (c.lower, c.upper, c.size) == (1, 10, 11)
    t = coding_for(Column("t", "TINYINT", -1000, 1000, not_null=True), bins=8)
    assert (t.lower, t.upper) == (-128, 127)
    u = coding_for(Column("u", "UTINYINT", -5, 3, not_null=True), bins=8)
    assert (u.lower, u.upper, u.size) == (0, 3, 4)


def test_wide_integer_bins_by_hand():
    c = coding_for(AGE, bins=16)
    assert (c.kind, c.bins, c.size, c.null_code) == ("integer", 16, 17, True)
    assert c.describe() == "16 equi-width bins on [17, 90] + NULL"
    # bin k starts at 17 + ceil(73 k / 16): 17, 22, 27, 31, ...
    assert c.bin_edges[:4] == (17, 22, 27, 31) and c.bin_edges[-2:] == (86, 90)


@given(lo=st.integers(-(10**6), 10**6), span=st.integers(2, 5000), bins=st.integers(2, 1024))
def test_integer_bins_cover_every_integer_and_none_is_empty(lo, span, bins):
    c = coding_for(Column("x", "BIGINT", lo, lo + span, not_null=True), bins=bins)
    if span + 1 <= bins:
        assert c.bins is None and c.size == span + 1
        return
    e = c.bin_edges
    assert c.size == bins and len(e) == bins + 1 and e[0] == lo and e[-1] == lo + span
    counts = [e[k + 1] - e[k] for k in range(bins)]
    counts[-1] += 1  # the last bin holds its upper edge
    assert min(counts) >= 1 and sum(counts) == span + 1
    assert max(counts) - min(counts) <= 2  # equi-width up to rounding to integers
    # bin k is floor((x - lo) * bins / span): the same bins as equi-width on [lo, hi]
    for x in (lo, lo + span // 3, lo + span - 1, lo + span):
        assert code_of(c, x) == min((x - lo) * bins // span, bins - 1)


def test_double_bins():
    c = coding_for(Column("w", "DOUBLE", 0, 1), bins=16)
    assert (c.kind, c.size, c.null_code) == ("real", 17, True)
    assert c.bin_edges == tuple(k / 16 for k in range(17))
    assert c.describe() == "16 equi-width bins on [0, 1] + NULL"


def test_float_edges_are_float32_values():
    c = coding_for(Column("f", "FLOAT", 0.1, 0.7, not_null=True), bins=7)
    assert all(float(np.float32(e)) == e for e in c.bin_edges)
    assert c.bin_edges[0] >= 0.1 and c.bin_edges[-1] <= 0.7 and c.size == 7


def test_decimal_edges_are_values_of_the_type():
    c = coding_for(Column("salary", "DECIMAL(10,2)", 0, 100, not_null=True), bins=16)
    assert c.kind == "real" and c.size == 16
    assert c.bin_edges[:3] == (Decimal("0.00"), Decimal("6.25"), Decimal("12.50"))
    d = coding_for(Column("d", "DECIMAL(9,2)", 0, 1, not_null=True), bins=3)
    assert d.bin_edges == (Decimal("0.00"), Decimal("0.34"), Decimal("0.67"), Decimal("1.00"))


def test_decimal_with_fewer_values_than_bins_gets_one_code_per_value():
    c = coding_for(Column("r", "DECIMAL(3,1)", 0, 1, not_null=True), bins=16)
    assert (c.bins, c.size, c.describe()) == (11, 11, "11 values 0.0..1.0 in steps of 0.1")


@pytest.mark.parametrize(
    "column",
    [
        Column("name", "VARCHAR"),
        Column("age", "INTEGER"),
        Column("w", "DOUBLE", lower=0.0),
        Column("born", "TIME", 0, 10),  # bounds on a TIME: not a DATE / TIMESTAMP the coding bins
        Column("x", "INTEGER", 0.2, 0.8),
        Column("f", "FLOAT", 1e7, 1e7 + 1),  # 16 bins finer than FLOAT's spacing (1.0) there
        Column("d", "DECIMAL(4,2)", 0.001, 0.009),  # no DECIMAL(4,2) value in between
    ],
)
def test_columns_without_a_public_code_space_are_refused(column):
    with pytest.raises(errors.PolicyError) as info:
        coding_for(column, bins=16)
    assert info.value.code == "DP213"
    assert repr(column.name) in str(info.value)
    assert "columns" in info.value.hint


def test_refusals_say_what_would_be_accepted():
    with pytest.raises(errors.PolicyError) as info:
        coding_for(Column("age", "INTEGER"), bins=16)
    assert "bounds" in info.value.hint and "domain" in info.value.hint


@pytest.mark.parametrize("bins", [1, 0, -3, 1025, 2.5, True, "16", None])
def test_bins_must_be_an_integer_from_2_to_1024(bins):
    with pytest.raises(errors.ProgrammingError) as info:
        coding_for(AGE, bins=bins)
    assert info.value.code == "DP205" and not isinstance(info.value, errors.PolicyError)


@pytest.mark.parametrize("bins", [2, 1024])
def test_bins_limits_are_accepted(bins):
    assert coding_for(Column("w", "DOUBLE", 0, 1, not_null=True), bins=bins).size == bins


# ---------------------------------------------------------------------------------------------
# encoding in DuckDB
# ---------------------------------------------------------------------------------------------
def test_integer_codes_by_hand_with_clamping_and_null():
    c = coding_for(AGE, bins=16)
    values = [None, -(2**31), 0, 16, 17, 21, 22, 89, 90, 91, 2**31 - 1]
    assert codes_in_duckdb(c, values) == [16, 0, 0, 0, 0, 0, 1, 15, 15, 15, 15]


def test_small_span_integer_codes():
    c = coding_for(Column("e", "SMALLINT", 1, 16, not_null=True), bins=16)
    assert codes_in_duckdb(c, [1, 2, 16, 0, 17, None]) == [0, 1, 15, 0, 15, None]


def test_double_codes_by_hand():
    c = coding_for(Column("w", "DOUBLE", 0, 1), bins=16)
    below = math.nextafter(0.0625, 0)
    values = [0.0, below, 0.0625, 0.5, 1.0, 1.5, -1.0, math.inf, -math.inf, math.nan, None, 1e308, -1e308]
    assert codes_in_duckdb(c, values) == [0, 0, 1, 8, 15, 15, 0, 15, 0, 16, 16, 15, 0]


def test_nan_without_a_null_code_drops_the_row():
    c = coding_for(Column("w", "DOUBLE", 0, 1, not_null=True), bins=4)
    assert codes_in_duckdb(c, [math.nan, 0.3]) == [None, 1]


@pytest.mark.parametrize(
    "column",
    [
        Column("age", "INTEGER", 17, 90),
        Column("n", "BIGINT", -(2**63), 2**63 - 1, not_null=True),
        Column("u", "UBIGINT", 0, 2**64, not_null=True),
        Column("h", "HUGEINT", -(10**30), 10**30),
        Column("w", "DOUBLE", 0.1, 0.7),
        Column("w", "DOUBLE", -3.3, 1e6),
        Column("f", "FLOAT", 0.1, 0.7),
        Column("f", "FLOAT", -1e30, 3e38),
        Column("m", "DECIMAL(10,2)", -0.05, 99.99),
        Column("m", "DECIMAL(38,4)", -1e30, 1e30),
        Column("m", "DECIMAL(4,3)", 0, 1),
        Column("m", "DECIMAL(18,3)", 0.1, 0.7),
    ],
    ids=lambda c: f"{c.type}[{c.lower:g},{c.upper:g}]",
)
@pytest.mark.parametrize("bins", [3, 16, 1024])
def test_every_edge_and_its_neighbours_land_where_decode_assumes(column, bins):
    assert_edges_agree(coding_for(column, bins=bins))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kind=st.sampled_from(["DOUBLE", "FLOAT", "DECIMAL(12,3)", "INTEGER"]),
    lower=st.floats(-1e6, 1e6, allow_nan=False),
    width=st.floats(1e-2, 1e6, allow_nan=False),
    bins=st.integers(2, 64),
)
def test_edges_agree_for_random_bounds(kind, lower, width, bins):
    try:
        c = coding_for(Column("x", kind, lower, lower + width), bins=bins)
    except errors.PolicyError:
        return  # e.g. no integer within narrow bounds
    assert_edges_agree(c)


def test_categorical_codes_out_of_domain_and_null():
    c = coding_for(Column("city", "VARCHAR", domain=("Paris", "O'Brien {v}", None)), bins=4)
    values = ["Paris", "O'Brien {v}", "paris", "", None, "Lyon"]
    assert codes_in_duckdb(c, values) == [0, 1, 2, 2, 2, 2]


def test_out_of_domain_without_a_null_code_is_dropped():
    c = coding_for(Column("sex", "VARCHAR", domain=("F", "M")), bins=4)
    assert codes_in_duckdb(c, ["M", "X", None, "F"]) == [1, None, None, 0]


def test_typed_domains_compare_as_the_column_type():
    d = coding_for(Column("day", "DATE", domain=("2024-01-01", "2024-02-29")), bins=4)
    assert codes_in_duckdb(d, ["2024-02-29", "2024-01-01", "2024-03-01"]) == [1, 0, None]
    i = coding_for(Column("g", "INTEGER", domain=(3, 1, 2)), bins=4)
    assert codes_in_duckdb(i, [1, 2, 3, 4]) == [1, 2, 0, None]
    b = coding_for(Column("flag", "BOOLEAN"), bins=4)
    assert codes_in_duckdb(b, [True, False, None]) == [1, 0, 2]


def test_names_with_spaces_and_quotes():
    c = coding_for(Column('my "odd" col', "INTEGER", 0, 9, not_null=True), bins=16)
    assert codes_in_duckdb(c, [3, 12]) == [3, 9]
    back = roundtrip([c], every_code([c]))
    assert (back == every_code([c])).all()


def test_encoding_never_raises_on_extreme_values():
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE t AS SELECT * FROM (VALUES ('-170141183460469231731687303715884105728'::HUGEINT, "
        "'-inf'::DOUBLE, 99999999999999999999.9999::DECIMAL(24,4), 'zzz'), "
        "('170141183460469231731687303715884105727'::HUGEINT, 'nan'::DOUBLE, "
        "-99999999999999999999.9999::DECIMAL(24,4), "
        "NULL)) v(h, d, m, s)"
    )
    codings = [
        coding_for(Column("h", "HUGEINT", 0, 10**6), bins=16),
        coding_for(Column("d", "DOUBLE", -1, 1), bins=16),
        coding_for(Column("m", "DECIMAL(24,4)", -1, 1), bins=16),
        coding_for(Column("s", "VARCHAR", domain=("a", None)), bins=16),
    ]
    codes = fetch_codes(con, encode_query("SELECT * FROM t", codings))
    assert codes.tolist() == [[0, 0, 15, 1], [15, 16, 0, 1]]


def test_encode_query_is_one_select_with_integer_columns():
    codings = [coding_for(AGE, bins=16), coding_for(Column("w", "DOUBLE", 0, 1), bins=4)]
    sql = encode_query("SELECT 30 AS age, 0.3::DOUBLE AS w", codings)
    rel = duckdb.sql(sql)
    assert rel.columns == ["__c0", "__c1"] and [str(t) for t in rel.types] == ["INTEGER", "INTEGER"]
    assert rel.fetchall() == [(2, 1)]


def test_fetch_codes_drops_rows_with_a_null_code_and_passes_parameters():
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT * FROM (VALUES ('F', 20), ('X', 30), ('M', NULL), ('M', 95)) v(sex, age)")
    codings = [
        coding_for(Column("sex", "VARCHAR", domain=("F", "M")), bins=16),
        coding_for(Column("age", "INTEGER", 17, 90, not_null=True), bins=16),
    ]
    codes = fetch_codes(con, encode_query("SELECT * FROM t WHERE age IS NULL OR age > ?", codings), [10])
    assert codes.dtype == np.int64 and codes.tolist() == [[0, 0], [1, 15]]
    assert fetch_codes(con, encode_query("SELECT * FROM t WHERE false", codings)).shape == (0, 2)


def test_fetch_codes_refuses_a_query_that_does_not_bind():
    c = coding_for(AGE, bins=16)
    with pytest.raises(errors.ProgrammingError) as info:
        fetch_codes(duckdb.connect(), encode_query("SELECT 1 AS not_age", [c]))
    assert info.value.code == "DP230"


# ---------------------------------------------------------------------------------------------
# decoding: every code comes back
# ---------------------------------------------------------------------------------------------
MIXED = [
    coding_for(AGE, bins=16),
    coding_for(Column("education_num", "INTEGER", 1, 16, not_null=True), bins=16),
    coding_for(Column("fnlwgt", "BIGINT", 0, 1_500_000), bins=16),
    coding_for(Column("w", "DOUBLE", -0.3, 0.7), bins=16),
    coding_for(Column("f", "FLOAT", 0.1, 0.7, not_null=True), bins=16),
    coding_for(Column("salary", "DECIMAL(10,2)", 0, 100), bins=16),
    coding_for(Column("r", "DECIMAL(3,1)", 0, 1, not_null=True), bins=16),
    coding_for(Column("workclass", "VARCHAR", domain=("Private", "Never-worked", None)), bins=16),
    coding_for(Column("flag", "BOOLEAN"), bins=16),
    coding_for(Column("day", "DATE", domain=("2024-01-01", "2024-02-29")), bins=16),
    coding_for(Column("h", "HUGEINT", -(10**30), 10**30, not_null=True), bins=16),
]


def test_decode_by_kind():
    rng = np.random.default_rng(0)
    wc = MIXED[7]
    assert decode(wc, np.array([0, 1, 2]), rng=rng) == ["Private", "Never-worked", None]
    edu = MIXED[1]
    assert decode(edu, np.arange(16), rng=rng) == list(range(1, 17))
    age = decode(MIXED[0], np.full(2000, 1), rng=rng)
    assert set(age) == {22, 23, 24, 25, 26}  # bin 1 holds 22..26, each drawn
    w = decode(MIXED[3], np.full(2000, 0), rng=rng)
    assert all(-0.3 <= v < -0.3 + 1 / 16 for v in w) and len(set(w)) > 1900
    s = decode(MIXED[5], np.array([15, 16]), rng=rng)
    assert isinstance(s[0], Decimal) and Decimal("93.75") <= s[0] <= Decimal("100.00") and s[1] is None


def test_decode_refuses_codes_outside_the_domain():
    with pytest.raises(errors.InternalError):
        decode(MIXED[1], np.array([16]), rng=np.random.default_rng(0))


def test_every_code_round_trips_through_the_release_table():
    codes = every_code(MIXED, repeat=40)
    assert (roundtrip(MIXED, codes) == codes).all()


@settings(max_examples=300, deadline=None)
@given(
    kind=st.sampled_from(["DOUBLE", "FLOAT", "DECIMAL(12,3)", "DECIMAL(5,0)", "INTEGER", "UTINYINT"]),
    lower=st.floats(-1e5, 1e5, allow_nan=False),
    width=st.floats(1e-3, 1e6, allow_nan=False),
    bins=st.integers(2, 1024),
    seed=st.integers(0, 2**32 - 1),
)
def test_decoded_values_code_back_to_their_code(kind, lower, width, bins, seed):
    try:
        c = coding_for(Column("x", kind, lower, lower + width), bins=bins)
    except errors.PolicyError:
        return
    codes = np.arange(c.size).repeat(3)
    values = decode(c, codes, rng=np.random.default_rng(seed))
    assert [code_of(c, v) for v in values] == codes.tolist()


@settings(max_examples=25, deadline=None)
@given(
    kind=st.sampled_from(["DOUBLE", "FLOAT", "DECIMAL(12,3)", "BIGINT"]),
    lower=st.floats(-1e5, 1e5, allow_nan=False),
    width=st.floats(1e-1, 1e6, allow_nan=False),
    bins=st.integers(2, 200),
    seed=st.integers(0, 2**32 - 1),
)
def test_decoded_values_code_back_in_duckdb(kind, lower, width, bins, seed):
    try:
        c = coding_for(Column("x", kind, lower, lower + width), bins=bins)
    except errors.PolicyError:
        return
    codes = every_code([c], repeat=5)
    assert (roundtrip([c], codes, seed) == codes).all()


# ---------------------------------------------------------------------------------------------
# the release table
# ---------------------------------------------------------------------------------------------
def test_write_table_keeps_names_and_source_types():
    con = duckdb.connect()
    codes = every_code(MIXED, repeat=3)
    n = synthesis.write_table(con, "Adult Syn", MIXED, codes, rng=np.random.default_rng(1))
    assert n == codes.shape[0] == con.execute('SELECT count(*) FROM main."Adult Syn"').fetchone()[0]
    described = con.execute('DESCRIBE main."Adult Syn"').fetchall()
    assert [(r[0], r[1]) for r in described] == [(c.name, c.sql_type) for c in MIXED]
    nulls = con.execute('SELECT count(*) FILTER (WHERE workclass IS NULL) FROM main."Adult Syn"').fetchone()[0]
    assert nulls == int((codes[:, 7] == MIXED[7].null).sum())


def test_write_table_with_zero_rows_creates_the_empty_table():
    con = duckdb.connect()
    none = np.zeros((0, len(MIXED)), np.int64)
    assert synthesis.write_table(con, "empty", MIXED, none, rng=np.random.default_rng(0)) == 0
    assert con.execute("SELECT count(*) FROM empty").fetchone()[0] == 0
    assert [r[1] for r in con.execute("DESCRIBE empty").fetchall()] == [c.sql_type for c in MIXED]


@pytest.mark.parametrize("existing", ["CREATE TABLE adult_syn (x INTEGER)", "CREATE VIEW ADULT_SYN AS SELECT 1 AS x"])
def test_write_table_refuses_an_existing_name(existing):
    con = duckdb.connect()
    con.execute(existing)
    c = MIXED[:1]
    with pytest.raises(errors.ProgrammingError) as info:
        synthesis.write_table(con, "adult_syn", c, np.zeros((3, 1), np.int64), rng=np.random.default_rng(0))
    assert info.value.code == "DP226" and "adult_syn" in str(info.value)


def test_a_table_in_another_schema_does_not_collide():
    con = duckdb.connect()
    con.execute("CREATE SCHEMA other; CREATE TABLE other.adult_syn (x INTEGER)")
    codes = np.zeros((2, 1), np.int64)
    assert synthesis.write_table(con, "adult_syn", MIXED[:1], codes, rng=np.random.default_rng(0)) == 2


def test_write_table_refuses_codes_of_the_wrong_shape_or_range():
    con = duckdb.connect()
    with pytest.raises(errors.InternalError):
        synthesis.write_table(con, "t", MIXED[:2], np.zeros((3, 1), np.int64), rng=np.random.default_rng(0))
    with pytest.raises(errors.InternalError):
        synthesis.write_table(con, "t", MIXED[1:2], np.full((3, 1), 16), rng=np.random.default_rng(0))
    assert not synthesis.relation_exists(con, "t")


# ---------------------------------------------------------------------------------------------
# quality (owner only)
# ---------------------------------------------------------------------------------------------
SMALL = [
    coding_for(Column("a", "VARCHAR", domain=("x", "y", None)), bins=4),
    coding_for(Column("b", "INTEGER", 0, 9, not_null=True), bins=4),
    coding_for(Column("c", "DOUBLE", 0, 1, not_null=True), bins=4),
]


def _small_source(con, rng, n=500) -> str:
    a = rng.choice(["x", "y", None], n).tolist()
    b = rng.integers(0, 10, n).tolist()
    c = rng.random(n).tolist()
    con.execute("CREATE TABLE src AS SELECT unnest($1) AS a, unnest($2) AS b, unnest($3) AS c", [a, b, c])
    return "SELECT * FROM src"


def test_quality_of_an_identical_table_is_zero():
    con = duckdb.connect()
    src = _small_source(con, np.random.default_rng(3))
    con.execute("CREATE TABLE copy AS SELECT * FROM src")
    q = synthesis.quality(con, src, "copy", SMALL)
    assert q == {"columns": 3, "rows_source": 500, "rows_release": 500, "tvd_1way": 0.0, "tvd_2way": 0.0,
                 "tvd_3way": 0.0}  # fmt: skip


def test_quality_matches_marginal_tvd_on_the_codes():
    con = duckdb.connect()
    rng = np.random.default_rng(4)
    src = _small_source(con, rng)
    synth = np.stack([rng.integers(0, c.size, 300) for c in SMALL], axis=1)
    synthesis.write_table(con, "syn", SMALL, synth, rng=rng)
    q = synthesis.quality(con, src + " WHERE b >= ?", "syn", SMALL, params=[2])
    real = fetch_codes(con, encode_query("SELECT * FROM src WHERE b >= 2", SMALL))
    sizes = [c.size for c in SMALL]
    assert q["rows_source"] == len(real) and q["rows_release"] == 300
    for way in (1, 2, 3):
        assert q[f"tvd_{way}way"] == pytest.approx(privbayes.marginal_tvd(real, synth, sizes, way), abs=1e-12)
    assert 0 < q["tvd_2way"] < 1


def test_quality_with_few_columns_or_no_rows():
    con = duckdb.connect()
    _small_source(con, np.random.default_rng(5))
    synthesis.write_table(con, "syn", SMALL[:2], np.zeros((0, 2), np.int64), rng=np.random.default_rng(0))
    q = synthesis.quality(con, "SELECT * FROM src", "syn", SMALL[:2])
    assert (q["columns"], q["rows_release"], q["tvd_2way"], q["tvd_3way"]) == (2, 0, None, None)


# ---------------------------------------------------------------------------------------------
# Adult end to end, against examples/privbayes_adult.py
# ---------------------------------------------------------------------------------------------
def _example():
    spec = importlib.util.spec_from_file_location("privbayes_adult", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_adult_codes_equal_the_example_discretisation():
    """Every column agrees: on Adult's bounds the exact integer bins are the example's
    floating-point equi-width bins, and education_num (16 integers, 16 bins) is one code per
    integer in both. Numeric columns are declared NOT NULL so that the sizes agree too."""
    ex = _example()
    columns = []
    for name in ex.COLUMNS:
        if name in ex.NUMERIC:
            columns.append(Column(name, "INTEGER", *ex.NUMERIC[name], not_null=True))
        else:
            values, nullable = ex.CATEGORICAL[name]
            columns.append(Column(name, "VARCHAR", domain=tuple(values) + ((None,) if nullable else ())))
    codings = [coding_for(c, bins=ex.BINS) for c in columns]
    path = resources.data_dir() / "adult.parquet"
    con = duckdb.connect()
    t0 = time.perf_counter()
    codes = fetch_codes(con, encode_query(f"SELECT * FROM read_parquet('{path}')", codings))
    seconds = time.perf_counter() - t0
    want, sizes, names = ex.load_adult(path)
    assert names == [c.name for c in codings] and sizes == [c.size for c in codings]
    assert codes.shape == want.shape == (32561, 15)
    assert [n for j, n in enumerate(names) if not (codes[:, j] == want[:, j]).all()] == []
    assert seconds < 2.0  # about 0.05 s; generous for slow CI machines

    rng = np.random.default_rng(7)
    model = privbayes.fit(codes, sizes, 1.0, rng=rng)
    synth = privbayes.sample(model, model.noisy_rows, rng=rng)
    n = synthesis.write_table(con, "adult_syn", codings, synth, rng=rng)
    q = synthesis.quality(con, f"SELECT * FROM read_parquet('{path}')", "adult_syn", codings)
    assert (q["columns"], q["rows_source"], q["rows_release"]) == (15, 32561, n)
    assert 0 < q["tvd_2way"] < 0.2 and 0 < q["tvd_3way"] < 0.3


def test_docstring_examples():
    assert doctest.testmod(synthesis).failed == 0


def test_catalog_column_fields_used_here_exist():
    # coding_for reads these public facts and nothing else
    assert {"name", "type", "lower", "upper", "domain", "not_null"} <= set(catalog.Column.__dataclass_fields__)
