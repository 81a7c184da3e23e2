"""The codes of ``coding.encode_query`` written in Spark SQL, for a table whose rows live in Spark.

A tabular release over a Spark table reads the same codes as over DuckDB, computed where the rows
are: Spark codes the charged subjects' bounded rows and returns each distinct coded row with its
count (``SparkPlane.release_rows``), and the synthesizer reads those weighted rows. Each value gets
the code DuckDB's encoding gives it (``tests/privacy/test_spark_synthetic.py`` compares the two
engines value by value, edges, NULL, NaN and ±inf included):

- categorical: the 0-based position in the declared values, each value the one DuckDB reads
  from its text (``coding.values_list``'s TRY_CAST, computed by DuckDB here and written exactly:
  Spark's own cast reads '1.5' as the INTEGER 1 where DuckDB reads 2, '1e+16' as no BIGINT, and
  no 'infinity' DATE; one that does not convert matches nothing); a value outside them takes the
  NULL code, or no code;
- integer (and DATE as days since 1970-01-01; DuckDB's ±infinity, stored as ±2^31 - 1 days, is
  NULL as in DuckDB's ``date_diff``): clamped to the bounds, then one code per integer or
  ``((x - lower) * bins) div (upper - lower)`` in DECIMAL(38, 0), exact for every BIGINT;
- real (DOUBLE, FLOAT, DECIMAL): a DOUBLE estimate of the bin, corrected by one step against the
  bin edges written in the column's own type, so the code depends on exact comparisons only.

Spark's session runs with ANSI mode off, and none of these expressions can fail whatever a row
holds: a cast that does not convert is NULL, ``div`` never divides by zero (``upper > lower``),
``floor`` of ±inf saturates and is clamped by ``least`` / ``greatest``. Every expression is built
from the declarations (types, domains, bounds, bins): no analyst text reaches Spark here.
"""

from __future__ import annotations

import secrets

import numpy as np
from sqlglot import exp

from dpgate.backends.spark.literals import INFINITE_DAYS, spark_type, spark_values
from dpgate.backends.spark.plane import counted_rows
from dpgate.backends.spark.rows import cut_rows
from dpgate.queries.synthetic import coding
from dpgate.queries.synthetic.coding import ColumnCoding


def quoted(name: str) -> str:
    """A column name as a quoted Spark identifier."""
    return exp.to_identifier(name, quoted=True).sql("spark")


def _declared(values, sql_type: str) -> list[str]:
    """Declared values as Spark literals of the column's type: each the one DuckDB reads from its text
    (``coding.values_list``'s TRY_CAST), written exactly; one that does not convert is NULL."""
    return spark_values(coding.values_list(values, sql_type), None, sql_type)


def lookup_sql(values, sql_type: str) -> str:
    """The declared values as a relation ``(v, i)`` of the column's type, numbered from 0, to join a
    column with (``coding.domain_lookup`` on Spark); a value that does not convert joins nothing."""
    rows = ", ".join(f"({v}, {i})" for i, v in enumerate(_declared(values, sql_type)))
    return f"SELECT * FROM VALUES {rows} AS __d(v, i)"


def record_numbers(units) -> np.ndarray:
    """Each row's record number, 0.., records in their units' order (an Arrow column of units, as
    Spark returns a release's rows): DuckDB's ``dense_rank() OVER (ORDER BY unit) - 1``."""
    values = units.to_numpy(zero_copy_only=False)
    if not len(values):
        return np.zeros(0, dtype=np.int64)
    return np.asarray(np.unique(values, return_inverse=True)[1], dtype=np.int64).reshape(-1)


def _str(text: str) -> str:
    return exp.Literal.string(text).sql("spark")


def _typed(text: str, sql_type: str) -> str:
    if sql_type.upper().strip() == "VARCHAR":
        return _str(text)
    return f"CAST({_str(text)} AS {spark_type(sql_type)})"


def _array(texts: list[str], sql_type: str) -> str:
    return f"array({', '.join(_typed(t, sql_type) for t in texts)})"


def _domain(c: ColumnCoding) -> str:
    """The declared values of a categorical coding as a Spark array of the column's type: the values
    DuckDB's encoder compares with (``coding.values_list``), read by DuckDB and written exactly."""
    return f"array({', '.join(_declared(c.values, c.sql_type))})"


def _edges(c: ColumnCoding) -> str:
    return _array(coding.edge_texts(c), c.numeric_type)


def code_sql(i: int, c: ColumnCoding, x: str) -> tuple[list[tuple[str, str]], str]:
    """Coding ``i``'s code of the Spark column expression ``x``: the per-row expressions (SQL,
    alias) of an inner SELECT, and the outer expression over them that is the code (NULL: none)."""
    nc = str(c.null) if c.null_code else "NULL"
    if c.kind == "categorical":
        values = _domain(c)
        # array_position is 1-based and 0 when absent
        code = f"CASE WHEN {x} IS NULL THEN {nc} ELSE coalesce(nullif(array_position({values}, {x}), 0) - 1, {nc}) END"
        return [(f"CAST({code} AS INT)", f"__c{i}")], f"__c{i}"
    lay = c._layout
    top = lay.bins - 1
    if c.temporal == "date":
        days = f"CAST(datediff({x}, DATE '1970-01-01') AS BIGINT)"
        x = f"nullif(nullif({days}, {INFINITE_DAYS}), -{INFINITE_DAYS})"  # DuckDB's ±infinity: NULL
    if c.kind == "integer":
        lo_t, hi_t = _typed(str(lay.lo), c.numeric_type), _typed(str(lay.hi), c.numeric_type)
        offset = f"(CAST({x} AS DECIMAL(38, 0)) - CAST({lay.lo} AS DECIMAL(38, 0)))"
        span = f"CAST({lay.hi - lay.lo} AS DECIMAL(38, 0))"
        inside = offset if c.bins is None else f"(({offset} * {lay.bins}) div {span})"
        code = (
            f"CASE WHEN {x} IS NULL THEN {nc} WHEN {x} <= {lo_t} THEN 0 WHEN {x} >= {hi_t} THEN {top} "
            f"ELSE {inside} END"
        )
        return [(f"CAST({code} AS INT)", f"__c{i}")], f"__c{i}"
    xd = f"CAST({x} AS DOUBLE)"
    estimate = (
        f"CASE WHEN {x} IS NULL OR isnan({xd}) THEN NULL ELSE CAST(greatest(0, least({top}, "
        f"floor(({xd} - CAST({_str(repr(float(lay.estimate_lower)))} AS DOUBLE)) / "
        f"CAST({_str(repr(float(lay.estimate_width)))} AS DOUBLE)))) AS INT) END"
    )
    e, v, edges = f"__e{i}", f"__x{i}", _edges(c)
    code = (
        f"CASE WHEN {e} IS NULL THEN {nc} WHEN {e} > 0 AND {v} < element_at({edges}, {e} + 1) THEN {e} - 1 "
        f"WHEN {e} < {top} AND {v} >= element_at({edges}, {e} + 2) THEN {e} + 1 ELSE {e} END"
    )
    return [(x, v), (estimate, e)], f"CAST({code} AS INT)"


def spark_codes(codings: list[ColumnCoding], row: str = "__r") -> tuple[list[tuple[str, str]], list[str]]:
    """Every coding's inner expressions (over the columns of ``row``) and outer codes, in order."""
    inner: list[tuple[str, str]] = []
    outer: list[str] = []
    for i, c in enumerate(codings):
        ins, out = code_sql(i, c, f"{row}.{quoted(c.name)}")
        inner += ins
        outer.append(out)
    return inner, outer


def grouped_sql(codings: list[ColumnCoding], rows: str, guard: str | None = None) -> str:
    """Each distinct coded row of the relation ``rows`` (SQL, aliased ``__r`` inside) and its count
    (``__n``); rows with a column that has no code are left out. ``guard``: a condition over ``__r``
    that every inner expression is evaluated under (the charged rows only)."""
    inner, outer = spark_codes(codings)
    if guard is not None:
        inner = [(f"CASE WHEN {guard} THEN {sql} END", alias) for sql, alias in inner]
    ins = ", ".join(f"{sql} AS {alias}" for sql, alias in inner)
    codes = ", ".join(f"{sql} AS __c{i}" for i, sql in enumerate(outer))
    names = ", ".join(f"__c{i}" for i in range(len(outer)))
    kept = " AND ".join(f"__c{i} IS NOT NULL" for i in range(len(outer)))
    coded = f"SELECT {codes} FROM (SELECT {ins} FROM ({rows}) __r) __e"
    return f"SELECT {names}, count(*) AS __n FROM ({coded}) __k WHERE {kept} GROUP BY {names}"


def coded_rows_sql(plan, salt: int, source: str, units: str) -> str:
    """A tabular release's statement on Spark (``SparkPlane.release_rows``): the charged subjects'
    rows cut to ``plan.max_rows`` each (``cut_rows``: a keyed hash of each row) [bound], coded, each
    distinct coded row with its count; every expression evaluated on charged rows only."""
    rows = cut_rows(plan.table, source, units, "__seen", salt, max_rows=plan.max_rows)
    return grouped_sql(list(plan.codings), rows, guard="__r.__seen IS NOT NULL")


def quality(con, spark, df, table: str, codings: list[ColumnCoding]) -> dict:
    """The owner's quality report of a release whose source lives in Spark (``coding.quality``): the
    source's rows (the DataFrame ``df``, every row, as the DuckDB report reads them) coded in Spark.
    Reads the protected rows: for the data owner only."""
    view = f"__dpgate_quality_{secrets.token_hex(6)}"
    df.createOrReplaceTempView(view)
    try:
        real, counts = counted_rows(spark.sql(grouped_sql(codings, f"SELECT * FROM {view}")).toArrow(), len(codings))
    finally:
        spark.catalog.dropTempView(view)
    return coding.quality_of(con, real, counts, table, codings)


__all__ = ["code_sql", "coded_rows_sql", "grouped_sql", "lookup_sql", "quality", "quoted", "record_numbers",
           "spark_codes"]
