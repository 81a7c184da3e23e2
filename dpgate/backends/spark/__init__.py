"""Apache Spark as the data plane of a protected table (counting, top-k, tabular synthetic releases).

``source``: the owner's side (reading and parsing a declared source, its stub's columns, its units
for the roster, dpgate's own Spark session); ``translate``: the analyst's row-level expressions
written for Spark, refused where the engines would differ; ``plane``: the statement and
``SparkPlane``, which runs it after the debit (its module docstring states the privacy argument);
``topk``: the top-k class's statements (pairs, frequencies, key selection's per-key counts); ``rows``:
the charged rows of joins and per-subject subqueries, and of a release's coded rows (whose coding
SQL the synthetic class writes: ``dpgate.queries.synthetic.coding_spark``).
The names below are what the owner's side (``dpgate.catalog.owner``) and the gateway use.
"""

from dpgate.backends.spark.plane import SparkPlane
from dpgate.backends.spark.source import (
    parse_source,
    read_source,
    reads_every_column_safely,
    session_for,
    session_from_settings,
    stub_columns,
    unit_rows,
)

__all__ = ["SparkPlane", "parse_source", "read_source", "reads_every_column_safely", "session_for",
           "session_from_settings", "stub_columns", "unit_rows"]
