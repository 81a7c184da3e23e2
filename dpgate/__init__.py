"""dpgate: a differential-privacy gateway for SQL over DuckDB.

Analysts connect with :func:`connect` and ask ordinary SQL; answers over protected tables
are differentially private and paid for from budgets kept in the database file. Data
owners declare what is protected with :class:`Owner`.
"""

from __future__ import annotations

from dpgate.interfaces.dbapi import Connection, Cursor, connect
from dpgate.errors import (
    BudgetExceededError,
    DatabaseError,
    DataError,
    Error,
    IntegrityError,
    InterfaceError,
    InternalError,
    NotSupportedError,
    OperationalError,
    ParseError,
    PolicyError,
    PopulationWarning,
    ProgrammingError,
    UnsupportedQueryError,
    RosterWarning,
    Warning,
)
from dpgate.catalog import hooks as _owner_hooks
from dpgate.catalog.owner import Owner
from dpgate.release import ReleaseInfo, Result

__version__ = "0.31.0"

apilevel = "2.0"
threadsafety = 1
paramstyle = "qmark"

STRING = "STRING"
NUMBER = "NUMBER"

__all__ = [
    "BudgetExceededError",
    "Connection",
    "Cursor",
    "DataError",
    "DatabaseError",
    "Error",
    "IntegrityError",
    "InterfaceError",
    "InternalError",
    "NotSupportedError",
    "OperationalError",
    "Owner",
    "ParseError",
    "PolicyError",
    "PopulationWarning",
    "ProgrammingError",
    "ReleaseInfo",
    "Result",
    "UnsupportedQueryError",
    "RosterWarning",
    "Warning",
    "apilevel",
    "connect",
    "paramstyle",
    "threadsafety",
]


def _spark_sources():
    from dpgate.backends import spark

    return spark


def _release_coding():
    from types import SimpleNamespace

    from dpgate.queries.synthetic import coding, coding_from_dict, coding_spark

    return SimpleNamespace(coding_from_dict=coding_from_dict, quality=coding.quality,
                           spark_quality=coding_spark.quality)


# The owner's API lives in the catalog, below the stages these come from (dpgate.catalog.hooks).
_owner_hooks.install(spark=_spark_sources, release_coding=_release_coding)


def load_ipython_extension(ipython) -> None:
    """``%load_ext dpgate``: the ``%dpsql`` / ``%%dpsql`` magics (``dpgate.interfaces.notebook``)."""
    from dpgate.interfaces.notebook import load_ipython_extension as load

    load(ipython)
