"""The catalog one analyst's session sees, and the pin that holds a charged statement to it.

A session re-reads the catalog when the owner changed it (a cheap fingerprint each statement).
A DP statement is planned against one catalog and answered after its debit; between the two the
owner may change a table or view. The answer then runs only if, where the statement looks, the
catalog is still the planned one: otherwise it fails closed (the debit stands), because a plan made
for one schema can read other rows under another.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import duckdb
from sqlglot import exp

from dpgate import database, errors
from dpgate.catalog import tables as catalog_mod
from dpgate.catalog.tables import Catalog, ProtectedTable


class Moved(Exception):
    """The catalog changed after the statement was classified, before any debit: start over."""


@dataclasses.dataclass(frozen=True)
class Pin:
    """Where a statement looks (``names``) in the catalog it was planned against (``fingerprint``)."""

    fingerprint: frozenset
    names: frozenset[str]
    views: dict[str, str]

    def moved(self, con: duckdb.DuckDBPyConnection) -> bool:
        """The catalog as ``con`` sees it now differs from the planned one where the statement looks."""
        now = catalog_mod.fingerprint(con)
        return now != self.fingerprint and (
            catalog_mod.relevant(now, self.names, self.views)
            != catalog_mod.relevant(self.fingerprint, self.names, self.views)
        )

    @contextmanager
    def held(self, con: duckdb.DuckDBPyConnection) -> Iterator[None]:
        """After the debit: the block (the answer) runs in one transaction whose catalog is, where the
        statement looks, the one it was planned against; a difference fails closed rather than run a
        plan made for another schema."""
        with database.transaction(con):
            if self.moved(con):
                raise errors.OperationalError(
                    "The data owner changed tables or views after this query was planned and charged; "
                    "nothing was computed", code="DP404",
                    hint="the debit stands (fail closed); run the query again",
                )  # fmt: skip
            yield


class Snapshot:
    """The catalog of one session's connection, re-read when its fingerprint changes."""

    def __init__(self, con: duckdb.DuckDBPyConnection, instance: Any, facts: Any):
        self._con = con
        self._instance = instance
        self._facts = facts
        self._catalog: Catalog | None = None
        self.fingerprint: frozenset | None = None
        self.views: dict[str, str] = {}

    def current(self) -> Catalog:
        """The catalog now (cheap check each statement; read again when the owner changed it)."""
        # First, before any SQL of dpgate's own that a macro named like a built-in would hijack.
        now = time.monotonic()
        seen = self._instance.shadowing
        if seen is None or now - seen[0] > catalog_mod.SHADOW_RECHECK:
            seen = self._instance.shadowing = (now, catalog_mod.shadowing_functions(self._con))
        if seen[1]:
            names = ", ".join(sorted(seen[1]))
            raise errors.PolicyError(
                f"The database defines a macro that hides DuckDB's built-in function of the same name: {names}",
                code="DP307",
                hint="the data owner must drop or rename it (DROP MACRO ...); until then no statement runs",
            )  # fmt: skip
        fp = catalog_mod.fingerprint(self._con)
        if self._catalog is None or fp != self.fingerprint:
            for _ in range(10):
                catalog = catalog_mod.load(self._con)
                views = catalog_mod.view_sql(self._con, fp)
                if views is not None:
                    break
                fp = catalog_mod.fingerprint(self._con)  # a view changed in between: read again
            else:
                raise errors.OperationalError(
                    "The database's views kept changing while dpgate read them", code="DP405",
                    hint="nothing was charged; try again when the data owner has finished changing views",
                )  # fmt: skip
            self._catalog, self.fingerprint, self.views = catalog, fp, views
        self._facts.schema_key = (self._instance.path, self._instance.serial, fp)
        return dataclasses.replace(self._catalog, views=catalog_mod.Views(sql=dict(self.views)))

    def pin(self, statement: exp.Expr, cat: Catalog) -> Pin:
        """The pin of a statement classified under the current catalog."""
        return Pin(self.fingerprint, frozenset(_names(statement, cat)), self.views)


def require_queryable(tables: tuple[ProtectedTable, ...]) -> None:
    """Refuse (free) a protected table whose declaration no longer fits its data's schema."""
    for table in tables:
        if table.unit_collation is not None:
            raise errors.PolicyError(
                f"Protected table {table.name} cannot be queried: {table.unit_collation}", code="DP329",
                hint="subjects must compare as bytes; the data owner removes the collation from the unit column "
                "(or protects a view that selects it with COLLATE \"binary\"); nothing was charged",
            )  # fmt: skip
        bad = next((c for c in table.columns.values() if c.domain_problem), None)
        if bad is not None:  # declared before protect checked it, or the column's type changed since
            raise errors.PolicyError(
                f"Protected table {table.name} cannot be queried: the declared domain of {table.name}.{bad.name} "
                f"does not fit its type {bad.type}: {bad.domain_problem}", code="DP316",
                hint=f"the data owner declares the domain of {bad.name} again (Owner.declare(table, column, domain=...) "
                "or dpgate policy apply); nothing was charged",
            )  # fmt: skip


def _names(statement: exp.Expr, cat: Catalog) -> set[str]:
    """The relations a statement may depend on, for ``catalog.tables.relevant``: those it names, every
    protected table and roster (a table function names its table in a string), and the string
    constants it holds."""
    names = {t.name.lower() for t in statement.find_all(exp.Table)}
    names |= {lit.this.lower() for lit in statement.find_all(exp.Literal) if lit.is_string}
    for t in cat.tables.values():
        names |= {t.name.lower(), t.roster.lower()}
    return names
