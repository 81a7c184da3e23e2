"""What the owner reads back: budgets, the ledger, the catalog, a release's quality.

The ``budgets``, ``ledger``, ``catalog`` and ``quality`` methods of ``dpgate.Owner``. Owner only:
the quality report reads raw rows, so no analyst interface offers it.
"""

from __future__ import annotations

from typing import Any

from dpgate import errors
from dpgate.catalog import hooks
from dpgate.catalog import releases as registry
from dpgate.catalog import shares as budget_shares
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
        analysts = [(*row, budget_shares.describe(self.con, row[0])) for row in analysts]
        tables = []
        for t in catalog.load(self.con).tables.values():
            left = "epsilon_budget - epsilon_spent"
            row = self.con.execute(
                f"SELECT count(*), min({left}), median({left}), max({left}), count(*) FILTER (WHERE {left} <= 0) "
                f"FROM {t.roster_sql}"
            ).fetchone()
            tables.append((t.name, t.kind, t.unit, *row))
        return analysts, tables

    def overcommitted(self) -> list[dict]:
        """The subject spaces whose budgets the analysts' quotas can use up.

        Subjects' budgets are shared by every analyst: what one analyst spends on a person, the
        others cannot. When the quotas together reach the median lifetime ε of a space's subjects,
        the analysts can exhaust most of them between them, and whoever asks last is refused
        (DP403) with quota to spare; an analyst whose own quota reaches it can do so alone. One
        dict per space: its ``tables``, ``subjects``, ``median_epsilon``, the ``quotas`` in all and
        the analysts who can do it ``alone``. Owner commands that change quotas or budgets print
        ``describe_overcommit`` of it as a note. Budget shares (``catalog.shares``) bound what each
        analyst can take; shares that add up to at most 1 leave every analyst theirs."""
        analysts = self.con.execute(
            f"SELECT name, epsilon_quota FROM {catalog.SCHEMA}.analysts WHERE epsilon_quota > 0 ORDER BY name"
        ).fetchall()
        if not analysts:
            return []
        shares = {name: budget_shares.share_of(self.con, name) for name, _ in analysts}
        if all(v is not None for v in shares.values()) and sum(shares.values()) <= 1:
            return []  # each analyst's share of every subject is theirs: nobody can use up another's
        tables = [t for t in catalog.load(self.con).tables.values() if t.kind != "graph"]
        out = []
        for roster in sorted({t.roster for t in tables}):
            first = next(t for t in tables if t.roster == roster)
            n, median = self.con.execute(f"SELECT count(*), median(epsilon_budget) FROM {first.roster_sql}").fetchone()
            if not n or median is None or float(median) <= 0:
                continue  # (a median of 0: most subjects have nothing left to use up)
            # what each analyst can take of a median subject: the quota, or less under a budget share
            reach = {name: float(q) if shares[name] is None else min(float(q), float(shares[name]) * float(median))
                     for name, q in analysts}  # fmt: skip
            total = sum(reach.values())
            if total < float(median) * (1 - 1e-9):
                continue
            out.append({
                "tables": sorted(t.name for t in tables if t.roster == roster), "subjects": int(n),
                "median_epsilon": float(median), "quotas": total,
                "alone": [name for name, r in reach.items() if r >= float(median) * (1 - 1e-9)],
            })  # fmt: skip
        return out

    def quality(self, release: str) -> dict:
        """Compare a release with its source table: average TVD of all 1-, 2- and 3-way marginals.
        For a generalized (supermodular) release: its information loss (``generalization_loss``).

        Owner only: it reads the raw rows, so no analyst interface offers it. The columns are
        coded exactly as the release was (the codings are kept in its registry row).
        """
        rec = registry.active(self.con, release)
        if rec is None:
            raise errors.ProgrammingError(
                f"No release named {release!r}", code="DP225", hint="SHOW RELEASES lists the releases"
            )
        if rec.mechanism == "supermodular":
            return {"release": rec.name, "source": rec.sources[0],
                    **generalization_loss(self.con, rec.name, rec.parameters["columns"])}  # fmt: skip
        if rec.kind != "synthetic table" or "codings" not in rec.parameters:
            # DiffPart's and the Markov model's tables are synthetic too, but not coded column by column
            raise errors.NotSupportedError(
                f"No quality report for a {rec.kind} made with {rec.mechanism}", code="DP221",
                hint="quality compares the marginals of MST, PrivBayes and independent-column releases, and gives a "
                "generalized (supermodular) release's information loss",
            )  # fmt: skip
        coder = hooks.release_coding()
        codings = [coder.coding_from_dict(d) for d in rec.parameters["codings"]]
        source = rec.sources[0]
        spark_source = self._spark_source(source)
        if spark_source is not None:  # the rows live in Spark (the DuckDB table is an empty stub): coded there
            sources = hooks.spark()
            df = sources.read_source(self.spark_session(), spark_source)
            report = coder.spark_quality(self.con, self.spark_session(), df, rec.name, codings)
            return {"release": rec.name, "source": source, **report}
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


def generalization_loss(con: Any, name: str, columns: list[str]) -> dict:
    """The information a generalized release gave up, read from its public tables (NAME and
    NAME_hierarchy), so any reader could compute it:

    - ``suppressed``: per column, the share of released rows whose value is the root ('*');
    - ``certainty_penalty``: per column and on average, the normalized certainty penalty (Xu et al.,
      KDD 2006): a value covering k of the column's n leaves costs (k − 1) / (n − 1), 0 for an exact
      value and 1 for '*', averaged over the released rows;
    - ``discernibility``: Σ |E|² / rows² over the classes E of identical released rows (Bayardo and
      Agrawal, ICDE 2005, normalized): 1 / rows when every row is distinct, 1 when all are alike.
    """
    table, tree = f"main.{quote(name)}", f"main.{quote(name + '_hierarchy')}"
    suppressed, penalty = {}, {}
    for c in columns:
        share, ncp = con.execute(
            f"SELECT avg(CAST(h.parent IS NULL AS DOUBLE)), avg((len(h.covers) - 1) / greatest(n.leaves - 1, 1)) "
            f"FROM {table} r JOIN {tree} h ON h.column_name = $c AND h.label IS NOT DISTINCT FROM r.{quote(c)}, "
            f"(SELECT len(covers) AS leaves FROM {tree} WHERE column_name = $c AND parent IS NULL) n",
            {"c": c},
        ).fetchone()  # fmt: skip
        suppressed[c], penalty[c] = float(share or 0.0), float(ncp or 0.0)
    cols = ", ".join(quote(c) for c in columns)
    (disc,) = con.execute(
        f"SELECT sum(k * k) / (sum(k) * sum(k)) FROM (SELECT count(*) AS k FROM {table} GROUP BY {cols})"
    ).fetchone()
    (rows,) = con.execute(f"SELECT count(*) FROM {table}").fetchone()
    return {
        "rows": int(rows), "suppressed": suppressed, "certainty_penalty": penalty,
        "mean_certainty_penalty": sum(penalty.values()) / len(penalty) if penalty else 0.0,
        "discernibility": float(disc or 0.0),
    }  # fmt: skip


def describe_loss(loss: dict) -> str:
    """One line for a release's notes."""
    stars = ", ".join(f"{c} {v:.0%}" for c, v in loss["suppressed"].items())
    return (f"information loss: certainty penalty {loss['mean_certainty_penalty']:.2f} (0: exact values, 1: all '*'); "
            f"'*' in {stars}; discernibility {loss['discernibility']:.3g} (Σ class² / rows², 1/rows at best)")  # fmt: skip


def describe_overcommit(spaces: list[dict]) -> str | None:
    """One line for an owner command's notes (None when nothing is overcommitted)."""
    if not spaces:
        return None
    parts = []
    for sp in spaces:
        alone = f"; {', '.join(sp['alone'])} alone" if sp["alone"] else ""
        parts.append(f"{' and '.join(sp['tables'])} (median ε {sp['median_epsilon']:g}{alone})")
    return (f"the analysts' quotas (ε {spaces[0]['quotas']:g} in all) can use up most subjects' lifetime budgets of "
            f"{', '.join(parts)}: whoever asks later is refused (DP403) with quota left; give the analysts shares "
            "of each subject's budget (dpgate analyst set DB NAME --share equal), lower the quotas or raise the "
            "subjects' budgets if that is not intended")  # fmt: skip
