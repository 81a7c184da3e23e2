"""What the owner reads back: budgets, the ledger, the catalog, a release's quality.

The ``budgets``, ``ledger``, ``catalog`` and ``quality`` methods of ``dpgate.Owner``. Owner only:
the quality report reads raw rows, so no analyst interface offers it.
"""

from __future__ import annotations

from typing import Any

from dpgate import errors
from dpgate.catalog import hooks
from dpgate.catalog import releases as registry
from dpgate.catalog import tables as catalog
from dpgate.catalog.tables import quote_ident as quote


class Reports:
    """Part of ``Owner``: what the owner reads back (needs ``con``)."""

    # -- reading -------------------------------------------------------------------------
    def budgets(self) -> tuple[list[tuple], list[tuple]]:
        """The analysts' quotas and spending, and per protected table its subjects' remaining ε."""
        analysts = self.con.execute(
            f"SELECT name, epsilon_quota, epsilon_spent, epsilon_quota - epsilon_spent, delta_quota, delta_spent, "
            f"epsilon_per_query, delta_per_query FROM {catalog.SCHEMA}.analysts ORDER BY name"
        ).fetchall()
        tables = []
        for t in catalog.load(self.con).tables.values():
            left = "epsilon_budget - epsilon_spent"
            row = self.con.execute(
                f"SELECT count(*), min({left}), median({left}), max({left}), count(*) FILTER (WHERE {left} <= 0) "
                f"FROM {t.roster_sql}"
            ).fetchone()
            tables.append((t.name, t.kind, t.unit, *row))
        return analysts, tables

    def quality(self, release: str) -> dict:
        """Compare a release with its source table: average TVD of all 1-, 2- and 3-way marginals.

        Owner only: it reads the raw rows, so no analyst interface offers it. The columns are
        coded exactly as the release was (the codings are kept in its registry row).
        """
        rec = registry.active(self.con, release)
        if rec is None:
            raise errors.ProgrammingError(
                f"No release named {release!r}", code="DP225", hint="SHOW RELEASES lists the releases"
            )
        if rec.kind != "synthetic table" or "codings" not in rec.parameters:
            # DiffPart's and the Markov model's tables are synthetic too, but not coded column by column
            raise errors.NotSupportedError(
                f"No quality report for a {rec.kind} made with {rec.mechanism}", code="DP221",
                hint="quality compares the marginals of MST, PrivBayes and independent-column releases",
            )  # fmt: skip
        coder = hooks.release_coding()
        codings = [coder.coding_from_dict(d) for d in rec.parameters["codings"]]
        source = rec.sources[0]
        cols = ", ".join(quote(c.name) for c in codings)
        report = coder.quality(self.con, f"SELECT {cols} FROM main.{quote(source)}", rec.name, codings)
        return {"release": rec.name, "source": source, **report}

    def catalog(self) -> catalog.Catalog:
        return catalog.load(self.con)

    def ledger(self, analyst: str | None = None) -> list[tuple]:
        """The append-only ledger (owner only): every debit, newest last."""
        sql = (
            f"SELECT l.entry_id, l.logged_at, l.analyst, l.query_class, l.mechanism, l.table_name, l.epsilon, "
            f"l.delta, l.subjects_charged, l.subjects_excluded, l.private, r.entry_id IS NOT NULL AS released, "
            f"l.statement FROM {catalog.SCHEMA}.ledger l LEFT JOIN {catalog.SCHEMA}.releases r USING (entry_id)"
        )
        params: list[Any] = []
        if analyst is not None:
            sql += " WHERE l.analyst = ?"
            params.append(analyst)
        return self.con.execute(sql + " ORDER BY l.entry_id", params).fetchall()

