"""What the owner's API needs from stages above the catalog, handed down from above.

The catalog imports downward only: never ``dpgate.backends``, ``dpgate.queries``, the server or the
interfaces. Two owner operations need code from those stages: a table whose rows live in Spark (its
columns for the empty stub, its units for the roster, a session from the policy: the Spark backend)
and a synthetic release's quality report (the source coded as the release coded it: the synthetic
query class). Each is declared here as a protocol; the package installs the real ones when it is
imported (``dpgate/__init__``), so an ``Owner`` has them whichever path it was imported by.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import duckdb

from dpgate import errors


class SparkSources(Protocol):
    """The Spark backend's owner side: declarations, sessions, schemas and units of a source."""

    def parse_source(self, source: Any) -> tuple[str, str]:
        """``('table', name)`` or ``('parquet', path)``; refuses (DP340) what is not a source."""

    def session_from_settings(self, settings: dict[str, str]) -> Any:
        """A Spark session from the policy's ``[backends.spark]`` settings."""

    def session_for(self, spark: Any) -> Any:
        """dpgate's own session on the caller's Spark (same catalog, dpgate's settings)."""

    def read_source(self, spark: Any, source: str) -> Any:
        """The source's DataFrame (reads no row)."""

    def reads_every_column_safely(self, spark: Any, source: str) -> bool:
        """Whether no value of the source can fail to be read (what a kept sample key needs)."""

    def stub_columns(self, df: Any, source: str) -> list[tuple[str, str]]:
        """(column, DuckDB type) of the source, or a refusal naming what cannot be served."""

    def unit_rows(self, spark: Any, source: str, unit: str, budget_column: str | None) -> Any:
        """The source's units (and smallest budget-column value) as an Arrow table."""


class ReleaseCoding(Protocol):
    """How a synthetic release coded its columns, and the quality report that re-codes its source."""

    def coding_from_dict(self, d: dict[str, Any]) -> Any:
        """A column coding from the form kept in the release's registry row."""

    def quality(self, con: duckdb.DuckDBPyConnection, source_sql: str, table: str, codings: list[Any]) -> dict:
        """Average TVD of the 1-, 2- and 3-way marginals of the source and the release."""

    def spark_quality(self, con: duckdb.DuckDBPyConnection, spark: Any, df: Any, table: str,
                      codings: list[Any]) -> dict:  # fmt: skip
        """``quality`` of a release whose source is the Spark DataFrame ``df`` (coded in Spark)."""


#: name -> provider; a provider is called when the hook is first needed, so it may import lazily
_providers: dict[str, Callable[[], Any]] = {}


def install(*, spark: Callable[[], SparkSources] | None = None,
            release_coding: Callable[[], ReleaseCoding] | None = None) -> None:  # fmt: skip
    """Install the providers of the hooks (a later install replaces an earlier one)."""
    for name, provider in (("spark", spark), ("release_coding", release_coding)):
        if provider is not None:
            _providers[name] = provider


def spark() -> SparkSources:
    return _get("spark")


def release_coding() -> ReleaseCoding:
    return _get("release_coding")


def _get(name: str) -> Any:
    provider = _providers.get(name)
    if provider is None:
        raise errors.InternalError(f"The owner's {name} hook is not installed (dpgate/__init__ installs it)")
    return provider()
