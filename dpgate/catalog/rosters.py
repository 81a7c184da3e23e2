"""Rosters (who the subjects are, and their budgets) and tables whose rows live in Spark.

The ``refresh_roster``, ``spark_session`` and ``set_spark`` methods of ``dpgate.Owner``. A Spark
source is read through the Spark hook (``dpgate.catalog.hooks``), never by importing the backend.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from dpgate import database, errors
from dpgate.catalog import hooks, remembered
from dpgate.catalog import sample_order as sample_order_mod
from dpgate.catalog import tables as catalog
from dpgate.catalog.checks import main_table_exists
from dpgate.catalog.tables import quote_ident as quote


class Rosters:
    """Part of ``Owner``: rosters and Spark sources (needs ``con``, ``_transaction`` and ``_spark``)."""

    def refresh_roster(self, table: str) -> int:
        """Add new subjects and re-read budgets from their source; spent budget is kept.

        Returns the number of subjects on the roster. Rows whose unit is not on the roster
        are never used by any query (they could not be charged).
        """
        table = table.lower()
        self._require_protected(table)
        with self._transaction() as con:
            n = self._refresh_roster(con, table)
            remembered.new_generation(con)  # the owner changed data: remembered answers are drawn afresh
            unit, options = con.execute(
                f"SELECT unit_column, options FROM {catalog.SCHEMA}.protected_tables WHERE table_name = ?", [table]
            ).fetchone()
            options = json.loads(options or "{}")
            if options.get("sample_order") == sample_order_mod.STORED:  # a fresh draw for the rows as they are now
                sample_order_mod.keep(con, table, unit, options.get("spark"))
            return n

    def _refresh_roster(self, con, table: str) -> int:
        (roster, source, bcol, btab, btab_unit, btab_col, default_eps) = con.execute(
            f"SELECT roster_table, budget_source, budget_column, budget_table, budget_table_unit, "
            f"budget_table_column, default_epsilon FROM {catalog.SCHEMA}.protected_tables WHERE table_name = ?",
            [table],
        ).fetchone()
        members = con.execute(
            f"SELECT table_name, unit_column, kind FROM {catalog.SCHEMA}.protected_tables WHERE roster_table = ?",
            [roster],
        ).fetchall()
        # Every subject of every table in the subject space (the roster is theirs together). A
        # graph's roster is one row: the budget every potential edge shares (edge-level DP).
        rows_of = {t: quote(t) for t, _, _ in members}
        for t, u, kind in members:  # rows in Spark: their units (and budget column) copied here first
            src = self._spark_source(t, con) if kind != "graph" else None  # a graph's roster is one row
            if src is not None:
                arrow = hooks.spark().unit_rows(self.spark_session(), src, u, bcol if source == "column" else None)
                rows_of[t] = quote(f"__dp_spark_units_{t}")
                database.register(con, "__dp_spark_arrow", arrow)
                try:
                    con.execute(f"CREATE OR REPLACE TEMP TABLE {rows_of[t]} AS SELECT * FROM __dp_spark_arrow")
                finally:
                    con.unregister("__dp_spark_arrow")
        units = " UNION ".join(
            "SELECT CAST(0 AS BIGINT) AS unit" if kind == "graph"
            else f"SELECT {quote(u)} AS unit FROM {rows_of[t]} WHERE {quote(u)} IS NOT NULL"
            for t, u, kind in members
        )  # fmt: skip
        r = f"{catalog.SCHEMA}.{quote(roster)}"
        params: list[Any] = []
        if source == "default":
            src = f"SELECT unit, CAST(? AS DOUBLE) AS eps FROM ({units})"
            params = [default_eps]
        elif source == "column":
            t, u, _ = members[0]
            src = (
                f"SELECT {quote(u)} AS unit, greatest(coalesce(min(CAST({quote(bcol)} AS DOUBLE)), 0), 0) AS eps "
                f"FROM {rows_of[t]} WHERE {quote(u)} IS NOT NULL GROUP BY {quote(u)}"
            )
        else:
            bu = quote(btab_unit)
            src = (
                # a unit listed twice gets its smaller budget, as a budget column's smallest value
                f"SELECT {bu} AS unit, greatest(coalesce(min(CAST({quote(btab_col)} AS DOUBLE)), 0), 0) AS eps "
                f"FROM {quote(btab)} WHERE {bu} IS NOT NULL GROUP BY {bu}"
            )
            if default_eps is not None:
                src += (
                    f" UNION ALL SELECT unit, CAST(? AS DOUBLE) FROM ({units}) "
                    f"WHERE unit NOT IN (SELECT {bu} FROM {quote(btab)} WHERE {bu} IS NOT NULL)"
                )
                params = [default_eps]
        # New subjects start at minus the space's common offset (their total spending is zero)
        # and carry a new generation (see roster.sql).
        con.execute(
            f"UPDATE {catalog.SCHEMA}.roster_offsets SET generation = generation + 1 WHERE roster = ?", [roster]
        )
        con.execute(
            f"INSERT INTO {r} (unit, epsilon_budget, epsilon_spent, delta_spent, added) "
            f"SELECT s.unit, s.eps, -o.epsilon_spent, -o.delta_spent, o.generation FROM ({src}) s, "
            f"(SELECT epsilon_spent, delta_spent, generation FROM {catalog.SCHEMA}.roster_offsets WHERE roster = ?) o "
            "ON CONFLICT (unit) DO UPDATE SET epsilon_budget = excluded.epsilon_budget",
            [*params, roster],
        )
        return con.execute(f"SELECT count(*) FROM {r}").fetchone()[0]

    # -- tables whose rows live in Spark ---------------------------------------------------
    def spark_session(self) -> Any:
        """The Spark session for Spark sources: the one given to ``Owner``, else the policy's master."""
        if self._spark is None:
            self._spark = hooks.spark().session_from_settings(catalog.load(self.con).settings)
        if self._spark_own is None:  # dpgate's settings (partition columns as strings), the caller's catalog
            self._spark_own = hooks.spark().session_for(self._spark)
        return self._spark_own

    def set_spark(self, master: str | None, conf: Mapping[str, Any] | None = None) -> None:
        """Record the Spark master URL (and session settings) analysts' sessions connect with.

        ``master`` is any Spark master URL: ``"local[4]"``, ``"spark://host:7077"``,
        ``"yarn"``, ``"k8s://https://host:443"``. Connections that pass their own
        ``SparkSession`` use that one instead.
        """
        if not isinstance(master, str) or not master:
            raise errors.PolicyError("[backends.spark] needs master = \"<Spark master URL>\"", code="DP330")
        conf = dict(conf or {})
        if not all(isinstance(k, str) and isinstance(v, (str, int, float, bool)) for k, v in conf.items()):
            raise errors.PolicyError("[backends.spark] conf maps setting names to values", code="DP330")
        with self._transaction() as con:
            for key, value in (("spark_master", master), ("spark_conf", json.dumps(conf))):
                con.execute(f"INSERT OR REPLACE INTO {catalog.SCHEMA}.settings (key, value) VALUES (?, ?)", [key, value])

    def _spark_source(self, table: str, con=None) -> str | None:
        row = (con or self.con).execute(
            f"SELECT options FROM {catalog.SCHEMA}.protected_tables WHERE table_name = ?", [table]
        ).fetchone()
        return json.loads(row[0]).get("spark") if row and row[0] else None

    @contextmanager
    def _spark_stub_declared(self, table: str, source: str | None) -> Iterator[None]:
        """Write ``table``'s stub for the Spark ``source`` (when given), and put the DuckDB table back as it
        was when the declaration that follows is refused. The declaration's checks read the stub's
        columns, so the stub comes first; a refused re-declaration (a bad node count, another source's
        columns, a name protected otherwise) had left the stub of a source nothing declared, and the
        table as declared was refused at every query until the owner declared it again."""
        if source is None:
            yield
            return
        before = self.con.execute(
            "SELECT sql FROM duckdb_tables() WHERE database_name = current_database() AND schema_name = 'main' "
            "AND table_name = ?", [table]
        ).fetchone()
        self._spark_stub(table, source)  # raises before it writes anything, or writes the new stub
        try:
            yield
        except errors.RosterWarning:  # a warnings filter "error": raised once the declaration is committed
            raise
        except BaseException:
            with self._transaction() as con:
                con.execute(f"DROP TABLE IF EXISTS main.{quote(table)}")
                if before is not None and before[0]:
                    con.execute(before[0])  # empty: _spark_stub replaces only an empty table or a stub
            raise

    def _spark_stub(self, table: str, source: str) -> None:
        """Create (or re-create) the empty DuckDB table with the Spark source's columns."""
        sources = hooks.spark()
        sources.parse_source(source)
        columns = sources.stub_columns(sources.read_source(self.spark_session(), source), source)
        if main_table_exists(self.con, table) and self._spark_source(table) is None:
            (n,) = self.con.execute(f"SELECT count(*) FROM (SELECT 1 FROM main.{quote(table)} LIMIT 1)").fetchone()
            if n:
                raise errors.PolicyError(
                    f"{table} is a DuckDB table with rows; a Spark table needs the name for its empty stub",
                    code="DP340", hint="protect the Spark source under another name, or drop the DuckDB table",
                )  # fmt: skip
        cols = ", ".join(f"{quote(n)} {t}" for n, t in columns)
        with self._transaction() as con:
            con.execute(f"CREATE OR REPLACE TABLE main.{quote(table)} ({cols})")

