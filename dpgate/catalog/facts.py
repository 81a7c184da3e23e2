"""Public facts the planner may look up in DuckDB: query binding, public tables, the roster.

Nothing here reads a protected table's rows. ``describe`` binds a query (``DESCRIBE``
plans it without executing it), so a query that DuckDB would refuse — unknown function,
type mismatch, volatile function inside TRY — is refused before anything is charged,
and its error cannot depend on the data.
"""

from __future__ import annotations

from typing import Any

import duckdb

from dpgate import database, errors
from dpgate.catalog.tables import builtin_functions, column_collation, table_columns
from dpgate.memo import Memo


#: Output columns of statements that bound, by (schema key, SQL): see ``DuckDBFacts.schema_key``.
_DESCRIBED = Memo(4096)
#: Whether a column compares with a collation, by (schema key, table, column, type).
_COLLATED = Memo(4096)


class DuckDBFacts:
    def __init__(self, con: duckdb.DuckDBPyConnection):
        self._con = con
        #: The schema the connection's transaction sees, as the gateway read it in that transaction:
        #: (file, database instance, catalog fingerprint). A statement's output columns are a function
        #: of its SQL and the schema (every table's CREATE statement, every view, the owner's catalog
        #: version), so a DESCRIBE that succeeded under a key answers again under it (about 1 ms a
        #: statement); failures are never kept. None: no cache (the owner's side).
        self.schema_key: tuple | None = None
        #: Reads of rows (of public tables, or of expressions over the domains: ``random()`` may be in
        #: one): a plan made with none is a function of the statement, the schema and the settings.
        self.data_reads = 0

    def describe(self, sql: str) -> list[tuple[str, str]]:
        key = (self.schema_key, sql) if self.schema_key is not None else None
        if key is not None:
            hit = _DESCRIBED.get(key)
            if hit is not None:
                return list(hit)
        try:
            rows = self._con.execute(f"DESCRIBE {sql}").fetchall()
        except duckdb.Error as e:
            raise errors.ProgrammingError(
                f"DuckDB cannot bind this query: {_first_line(e)}",
                code="DP230",
                hint="fix the SQL; nothing was charged",
            ) from e
        out = [(r[0], r[1]) for r in rows]
        if key is not None:
            _DESCRIBED.put(key, tuple(out))
        return out

    def columns(self, table: str) -> list[tuple[str, str]]:
        return table_columns(self._con, table)

    def distinct_values(self, table: str, column: str) -> list[Any]:
        from dpgate.catalog.owner import quote

        self.data_reads += 1
        return [
            r[0]
            for r in self._con.execute(
                f"SELECT DISTINCT {quote(column)} FROM {quote(table)} ORDER BY 1 NULLS LAST"
            ).fetchall()
        ]

    def unique(self, table: str, columns: list[str], null_safe: bool = False) -> bool:
        """Whether no two rows of public ``table`` agree on ``columns`` (NULLs never match unless null-safe)."""
        self.data_reads += 1
        from dpgate.catalog.owner import quote

        cols = ", ".join(quote(c) for c in columns)
        where = "" if null_safe else " WHERE " + " AND ".join(f"{quote(c)} IS NOT NULL" for c in columns)
        dup = self._con.execute(
            f"SELECT count(*) FROM (SELECT 1 FROM {quote(table)}{where} GROUP BY {cols} HAVING count(*) > 1 LIMIT 1)"
        ).fetchone()[0]
        return dup == 0

    def collated(self, table: str, column: str, sql_type: str) -> bool:
        """Whether a text column of ``table`` compares with a collation (a zero-row probe: no row is read);
        a fact of the schema, kept under ``schema_key`` like ``describe``'s answers (planning asks it for
        every lookup's key, every statement)."""
        key = (self.schema_key, table, column, sql_type) if self.schema_key is not None else None
        hit = _COLLATED.get(key) if key is not None else None
        if hit is not None:
            return hit
        collated = column_collation(self._con, table, column, sql_type) is not None
        if key is not None:
            _COLLATED.put(key, collated)
        return collated

    def count_where(self, condition: str, domains: list[tuple[list[Any], str]]) -> int:
        """How many points of the product of domains satisfy ``condition`` (over ``__c0, ...``)."""
        self.data_reads += 1
        rel, params = _product(domains)
        try:
            return int(self._con.execute(f"SELECT count(*) FROM {rel} WHERE {condition}", params).fetchone()[0])
        except duckdb.Error as e:
            raise errors.ProgrammingError(
                f"DuckDB cannot evaluate this GROUP BY expression on its domain: {_first_line(e)}",
                code="DP230",
            ) from e

    def image(self, sql: str, domains: list[tuple[list[Any], str]]) -> list[Any]:
        """Distinct values of ``sql`` (over columns ``__c0, __c1, ...``) on the product of domains."""
        self.data_reads += 1
        rel, params = _product(domains)
        try:
            rows = self._con.execute(f"SELECT DISTINCT {sql} FROM {rel} ORDER BY 1 NULLS LAST", params).fetchall()
        except duckdb.Error as e:
            raise errors.ProgrammingError(
                f"DuckDB cannot evaluate this GROUP BY expression on its domain: {_first_line(e)}",
                code="DP230",
            ) from e
        return [r[0] for r in rows]

    def aggregate_functions(self) -> frozenset[str]:
        return builtin_functions(self._con)[1]


def _product(domains: list[tuple[list[Any], str]]) -> tuple[str, dict[str, Any]]:
    parts = []
    params = {}
    for i, (values, typ) in enumerate(domains):
        domain_sql, params[f"d{i}"] = database.typed_list(f"d{i}", list(values), typ)
        parts.append(f"(SELECT unnest({domain_sql}) AS __c{i})")
    return " CROSS JOIN ".join(parts), params


def _first_line(e: Exception) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__
