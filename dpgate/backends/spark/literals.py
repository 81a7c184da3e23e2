"""Declared values (a key's domain, a release's categories, items or symbols) written for Spark as
exactly the values DuckDB reads them as.

DuckDB and Spark read the same text as different values of a type: DuckDB reads '1.5' as the
INTEGER 2 where Spark's cast gives 1, '1e1' and '0x10' as 10 and 16 where Spark gives NULL, '1e+16'
as a BIGINT, 'infinity' as a DATE. A domain written with Spark's own casts then matched other rows
on Spark than on DuckDB. So DuckDB evaluates the very expression its own statement compares with
(``duckdb_sql``: the list the DuckDB plan builds from the declaration), and each resulting value
is written for Spark exactly: integers and decimals as their digits, DOUBLEs by ``repr`` (which
reads back as the same double), FLOATs as that double narrowed (exact), dates as day numbers
(DuckDB's ±infinity as ±(2^31 - 1) days, the way it stores them in Parquet too), text as a string
literal. A value DuckDB reads as NULL is NULL on Spark, and matches nothing on either.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import duckdb
from sqlglot import exp

#: The days DuckDB stores its DATE 'infinity' and '-infinity' as (Parquet's INT32 days too).
INFINITE_DAYS = 2**31 - 1


def spark_type(sql_type: str) -> str:
    """A DuckDB type name as Spark writes it (VARCHAR is STRING, INTEGER is INT)."""
    return exp.DataType.build(sql_type, dialect="duckdb").sql("spark")


def _str(text: str) -> str:
    return exp.Literal.string(text).sql("spark")


def spark_values(duckdb_sql: str, params: Any, sql_type: str) -> list[str]:
    """Spark literals of the values of the DuckDB list expression ``duckdb_sql`` (with ``params``),
    of type ``sql_type``. Raises DuckDB's error when DuckDB cannot read them (its own plan would fail
    the same way)."""
    t = sql_type.upper().strip()
    expr = duckdb_sql
    if t == "DATE":  # as days, ±infinity included (Spark reads neither DuckDB's text nor its BC dates)
        expr = (f"list_transform({expr}, lambda d: CASE WHEN NOT isinf(d) THEN date_diff('day', DATE '1970-01-01', d) "
                f"WHEN d > DATE '1970-01-01' THEN {INFINITE_DAYS} ELSE -{INFINITE_DAYS} END)")  # fmt: skip
    con = duckdb.connect()
    try:
        values = con.execute(f"SELECT {expr}", params if params is not None else []).fetchone()[0]
    finally:
        con.close()
    st = spark_type(sql_type)
    out = []
    for v in values:
        if v is None:
            out.append(f"CAST(NULL AS {st})")
        elif t == "DATE":
            out.append(f"date_from_unix_date({int(v)})")
        elif t == "BOOLEAN":
            out.append("true" if v else "false")
        elif t == "VARCHAR":
            out.append(_str(str(v)))
        elif t in ("FLOAT", "REAL", "FLOAT4"):  # the FLOAT's exact value as a DOUBLE, narrowed exactly
            out.append(f"CAST(CAST({_str(repr(float(v)))} AS DOUBLE) AS FLOAT)")
        elif isinstance(v, Decimal):
            out.append(f"CAST({_str(format(v, 'f'))} AS {st})")
        elif isinstance(v, float):
            out.append(f"CAST({_str(repr(v))} AS {st})")
        else:
            out.append(f"CAST({_str(str(int(v)))} AS {st})")
    return out


__all__ = ["INFINITE_DAYS", "spark_type", "spark_values"]
