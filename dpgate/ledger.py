"""The persistent privacy ledger: analyst quotas and per-subject budgets, debited before release.

``reserve`` runs one DuckDB transaction that

1. checks the analyst's per-query caps and remaining quota,
2. selects the subjects the personalization rule uses (today: the threshold rule of seed
   002 — every subject of the table with at least the query's ε and δ left; with a budget
   share, left *for this analyst*: ``catalog.shares``) into a temporary table for the
   execution stage,
3. charges each of them, charges the analyst, and appends one ledger row,

and commits before any noisy value is computed. A crash after the commit loses the
answer, never the debit; a refusal changes nothing. A per-file lock (``database.Instance``)
serialises reservations in this process, so concurrent queries cannot overspend.

Charges depend only on public facts — budgets, the query, the plan — never on the rows:
every subject the rule uses is charged, whether or not a row of theirs matched WHERE.
All quantities are exact decimals (``DECIMAL(38, 18)``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import ROUND_CEILING, Context, Decimal
from typing import Any

import duckdb
import numpy as np

from dpgate import database, errors
from dpgate.catalog import caps, shares
from dpgate.catalog.tables import SCHEMA, ProtectedTable
from dpgate.mechanisms import pdp

_temp_ids = itertools.count(1)

#: Buckets of remaining ε shown by SHOW BUDGET (never an individual's budget).
BUCKETS = (0.0, 0.1, 0.5, 1.0, 2.0, 5.0)


#: The ledger's resolution: quantities are stored as DECIMAL(38, 18).
QUANTUM = Decimal(1).scaleb(-18)
#: Enough digits to round any float to 18 decimals (the default context's 28 failed above ε = 1e10).
_EXACT = Context(prec=400)


def charge(x: float | int | Decimal) -> Decimal:
    """A charge as the ledger stores it: ``dec(x)`` rounded *up* to the ledger's 18 decimals, so
    no charge is stored below what the mechanism spends (a δ of 4e-19 is charged 1e-18, not 0)."""
    d = dec(x)
    if not d.is_finite():
        raise errors.ProgrammingError(f"A charge of {x!r} is not a finite number", code="DP205",
                                      hint="epsilon and delta take finite numbers")  # fmt: skip
    return d.quantize(QUANTUM, rounding=ROUND_CEILING, context=_EXACT)


def dec(x: float | int | Decimal) -> Decimal:
    """An exact decimal for a privacy quantity (the shortest repr of a float)."""
    if isinstance(x, Decimal):
        return x
    return Decimal(repr(float(x)))


@dataclass(frozen=True)
class Cost:
    """What one statement spends: the analyst's ε and δ, and what each used subject pays."""

    analyst: str
    epsilon: float
    delta: float
    query_class: str
    mechanism: str
    statement: str
    query_hash: str
    table: ProtectedTable | None = None
    rule: str = "threshold"
    private: bool = True
    options: dict = field(default_factory=dict)  # personalization options (partitioning, partitions, ...)
    #: Run inside the debit's transaction with the personalization plan, before anything is written: a
    #: refusal of what the plan's ε cannot run (or of a name taken meanwhile) rolls the debit back, free.
    check: Callable[[pdp.SubjectPlan], None] | None = None
    #: The table a release may write (``caps.release_size`` of its plan): checked against the analyst's
    #: release caps inside the debit's transaction, so a release past a cap is refused free.
    release: caps.ReleaseSize | None = None


@dataclass(frozen=True)
class Debit:
    entry_id: int
    charged: str | None  # a relation of the units used, with columns unit, part (and round, charge)
    temp: str | None  # the temp table behind it, if one was made
    subjects_charged: int
    subjects_excluded: int  # nothing left, or left out by the rule
    epsilon_remaining: float
    delta_remaining: float
    epsilon: float = 0.0  # what the analyst was charged (the largest subject charge)
    subjects: pdp.SubjectPlan | None = None
    generation: int | None = None  # uniform charge: ``charged`` is the roster up to this generation
    #: A release's rows as reserved against the analyst's caps: it writes no more than this.
    release_rows: int | None = None


class Ledger:
    def __init__(self, instance: database.Instance, con: duckdb.DuckDBPyConnection):
        self._instance = instance
        self._con = con

    # -- reading -------------------------------------------------------------------------
    def quota(self, analyst: str, *, shares_too: bool = False) -> tuple:
        """(ε quota, δ quota, ε per query, δ per query, ε spent, δ spent); ``shares_too``: then the
        analyst's own budget share and the database's (``catalog.shares``), read in the same statement."""
        extra = (f", (SELECT value FROM {SCHEMA}.settings WHERE key = ?), "
                 f"(SELECT value FROM {SCHEMA}.settings WHERE key = ?)") if shares_too else ""  # fmt: skip
        row = self._con.execute(
            f"SELECT epsilon_quota, delta_quota, epsilon_per_query, delta_per_query, epsilon_spent, "
            f"delta_spent{extra} FROM {SCHEMA}.analysts WHERE name = ?",
            ([f"{shares.SETTING}:{analyst}", shares.SETTING] if shares_too else []) + [analyst],
        ).fetchone()
        if row is None:
            raise errors.PolicyError(
                f"Unknown analyst {analyst!r}", code="DP302",
                hint="the data owner adds analysts with Owner.add_analyst() or a policy file",
            )  # fmt: skip
        return row

    def may_seed(self, analyst: str) -> bool:
        row = self._con.execute(f"SELECT allow_test_seed FROM {SCHEMA}.analysts WHERE name = ?", [analyst]).fetchone()
        return bool(row and row[0])

    def remaining(self, analyst: str) -> tuple[float, float]:
        eq, dq, _, _, es, ds = self.quota(analyst)
        return float(max(eq - es, Decimal(0))), float(max(dq - ds, Decimal(0)))

    def subject_counts(self, table: ProtectedTable, epsilon: float, delta: float) -> tuple[int, int]:
        """How many subjects have at least (ε, δ) left / not (public: roster budgets)."""
        row = self._con.execute(
            f"SELECT count(*) FILTER (WHERE {_eligible_sql()}), count(*) FROM {table.roster_sql}",
            [dec(epsilon), dec(table.subject_delta), dec(delta)],
        ).fetchone()
        return int(row[0]), int(row[1] - row[0])

    def subject_distribution(self, table: ProtectedTable) -> list[tuple[str, int]]:
        """Counts of subjects per bucket of remaining ε (never an individual's value)."""
        edges = list(BUCKETS)
        cases = []
        labels = []
        for lo, hi in zip(edges, edges[1:] + [None]):
            if lo == 0.0:
                labels.append("0 (exhausted)")
                cases.append("remaining <= 0")
                labels.append(f"(0, {hi:g})")
                cases.append(f"remaining > 0 AND remaining < {hi}")
                continue
            if hi is None:
                labels.append(f">= {lo:g}")
                cases.append(f"remaining >= {lo}")
            else:
                labels.append(f"[{lo:g}, {hi:g})")
                cases.append(f"remaining >= {lo} AND remaining < {hi}")
        select = ", ".join(f"count(*) FILTER (WHERE {c})" for c in cases)
        row = self._con.execute(
            f"SELECT {select} FROM (SELECT epsilon_budget - epsilon_spent AS remaining FROM {table.roster_sql})"
        ).fetchone()
        return list(zip(labels, (int(v) for v in row)))

    # -- checking and reserving ----------------------------------------------------------
    def check(self, cost: Cost, row: tuple | None = None) -> tuple[Decimal, Decimal]:
        """Raise if the analyst cannot pay the cost (caps, quota); return what they have left.
        ``row``: the analyst's ``quota`` as the caller read it.

        Changes nothing. Whether any subject can pay is decided by ``reserve``, inside its
        transaction.
        """
        eq, dq, ecap, dcap, es, ds = (row or self.quota(cost.analyst))[:6]
        eps, delta = charge(cost.epsilon), charge(cost.delta)
        if eps > ecap:
            raise errors.PolicyError(
                f"ε = {cost.epsilon:g} is above your per-query cap", code="DP303",
                hint=f"Requested: ε={cost.epsilon:g} / Cap per query: ε={float(ecap):g}; lower epsilon",
                requested=cost.epsilon, cap=float(ecap),
            )  # fmt: skip
        if delta > dcap:
            raise errors.PolicyError(
                f"δ = {cost.delta:g} is above your per-query cap", code="DP304",
                hint=f"Requested: δ={cost.delta:g} / Cap per query: δ={float(dcap):g}; lower delta",
                requested=cost.delta, cap=float(dcap),
            )  # fmt: skip
        if eps > eq - es:
            raise errors.BudgetExceededError(
                f"Answering would exceed your analyst ε quota: ε={cost.epsilon:g} asked, "
                f"{float(max(eq - es, 0)):g} of your {float(eq):g} left", code="DP401",
                hint=f"Requested: ε={cost.epsilon:g} / Remaining: ε={float(max(eq - es, 0)):g}; "
                "ask for a smaller epsilon, or ask the owner for more quota (SHOW BUDGET shows your quota)",
                requested=cost.epsilon, remaining=float(max(eq - es, 0)),
            )  # fmt: skip
        if delta > dq - ds:
            raise errors.BudgetExceededError(
                f"Answering would exceed your analyst δ quota: δ={cost.delta:g} asked"
                f"{' (for DP key selection)' if cost.mechanism != 'supermodular' else ''}, "
                f"{float(max(dq - ds, 0)):g} of your {float(dq):g} left", code="DP402",
                hint=f"Requested: δ={cost.delta:g} / Remaining: δ={float(max(dq - ds, 0)):g}; "
                + ("use declared domains (no δ) or a smaller delta" if cost.mechanism != "supermodular"
                   else "ask the owner for more δ quota") + " (SHOW BUDGET shows your quota)",
                requested=cost.delta, remaining=float(max(dq - ds, 0)),
            )  # fmt: skip
        return eq - es, dq - ds

    def graph_remaining(self, table: ProtectedTable) -> float:
        """What every potential edge of a protected graph has left (its one shared budget)."""
        row = self._con.execute(
            f"SELECT max(epsilon_budget - epsilon_spent) FROM {table.roster_sql}"
        ).fetchone()
        return max(0.0, float(row[0] or 0))

    def subject_plan(self, cost: Cost, limit: Any = False) -> pdp.SubjectPlan:
        """The personalization plan for ``cost`` from the roster as it is now (public facts only);
        ``limit``: the analyst's budget share as ``shares.limit`` read it (False: read it now)."""
        table = cost.table
        limit = shares.limit(self._con, cost.analyst, table) if limit is False else limit
        rows = self._con.execute(
            f"SELECT {_allowance_sql(limit)} AS a, count(*) FROM {table.roster_sql} GROUP BY a", _allowance_params(cost)
        ).fetchall()
        levels = [pdp.Level(Decimal(a), int(n)) for a, n in rows if a > 0]
        excluded = sum(int(n) for a, n in rows if a <= 0)
        if table.kind == "graph" and not any(lv.allowance == charge(cost.epsilon) for lv in levels):
            left = self.graph_remaining(table)
            raise errors.BudgetExceededError(
                f"The edge budget of graph {table.name} has ε={left:g} left; the query asks ε={cost.epsilon:g}",
                code="DP403",
                hint=f"ask with epsilon <= {left:g}, or ask the owner for a larger edge budget",
                requested=cost.epsilon, remaining=left,
            )  # fmt: skip
        if not levels:
            raise self._share_used(cost, limit) or self._nobody_left(cost)
        try:
            return pdp.plan(cost.rule, sorted(levels, key=lambda lv: lv.allowance), charge(cost.epsilon),
                            excluded=excluded, **cost.options)  # fmt: skip
        except errors.BudgetExceededError as e:  # the rule uses nobody: because of the share?
            raise self._share_used(cost, limit) or e from None

    def _share_used(self, cost: Cost, limit: tuple[Decimal, Decimal] | None) -> errors.BudgetExceededError | None:
        """The refusal when the analyst's budget share, not the subjects' budgets, leaves nobody for the
        query (subjects could take part without the share); None otherwise."""
        if limit is None or not self._takers_without_share(cost):
            return None
        share, used = limit
        return errors.BudgetExceededError(
            f"You have used your share of the subjects' budgets on {cost.table.name}: at most {share.normalize():f} of "
            f"each subject's lifetime ε, and you have charged ε={float(used):g} on its subjects", code="DP403",
            hint="the subjects still have ε for other analysts; the data owner sets shares "
            "(dpgate analyst set NAME --share S, or --share none)",
            budget="share of subject epsilon", requested=cost.epsilon,
        )  # fmt: skip

    def _takers_without_share(self, cost: Cost) -> int:
        """How many subjects could take part in ``cost`` with no budget share (a refusal's wording)."""
        (n,) = self._con.execute(
            f"SELECT count(*) FROM {cost.table.roster_sql} WHERE {_allowance_sql()} > 0", _allowance_params(cost)
        ).fetchone()
        return int(n)

    def _nobody_left(self, cost: Cost) -> errors.BudgetExceededError:
        """The refusal when no subject can take part: it names the subjects' budget that ran out (ε or δ)."""
        table = cost.table
        no_delta, no_eps, total = self._con.execute(
            f"SELECT count(*) FILTER (WHERE ? - delta_spent < ?), "
            f"count(*) FILTER (WHERE CAST(epsilon_budget AS DECIMAL(38, 18)) - epsilon_spent < ?), count(*) "
            f"FROM {table.roster_sql}",
            [dec(table.subject_delta), charge(cost.delta), pdp.GRID],
        ).fetchone()  # fmt: skip
        lifetime = f"{float(table.subject_delta):g}"
        if total and no_delta == total:
            return errors.BudgetExceededError(
                f"No subject of {table.name} has δ left for key selection: every subject's lifetime δ ({lifetime}) "
                f"is spent (each has less than the δ={cost.delta:g} this query needs)",
                code="DP403",
                hint="SHOW BUDGET shows δ; GROUP BY a declared domain (no key selection) spends no δ; the data "
                "owner sets subjects' lifetime δ (subject_delta)",
                budget="subject delta", requested=cost.delta, lifetime=float(table.subject_delta),
            )  # fmt: skip
        if total and no_eps == total:
            return errors.BudgetExceededError(
                f"No subject of {table.name} has ε left: every subject's lifetime ε is spent",
                code="DP403",
                hint="SHOW BUDGET shows how much subjects have left; the data owner sets their lifetime ε",
                budget="subject epsilon", requested=cost.epsilon,
            )  # fmt: skip
        return errors.BudgetExceededError(
            f"No subject of {table.name} has budget left for this query: {no_eps:,} have spent their ε and "
            f"{no_delta:,} have less than the δ={cost.delta:g} this query needs of their lifetime δ ({lifetime})",
            code="DP403",
            hint="SHOW BUDGET shows subjects' ε and δ; GROUP BY a declared domain spends no δ",
            budget="subject epsilon and delta", requested=cost.epsilon,
        )  # fmt: skip

    def reserve(self, cost: Cost) -> Debit:
        """Debit the analyst and the subjects in one transaction (see module docstring).

        The personalization rule's plan is computed inside the transaction, from the roster as
        the transaction sees it, so what is charged and what is used always agree.
        """
        con = self._con
        charged = temp = None
        splan = None
        generation = None
        release_rows = release_bytes = None
        with self._instance.ledger_lock:
            try:
                con.execute("BEGIN TRANSACTION")
            except duckdb.Error as e:
                raise (unwritable(e) or e) from None
            try:
                row = self.quota(cost.analyst, shares_too=True)
                eps_left, delta_left = self.check(cost, row)
                asked_eps = charge_eps = charge(cost.epsilon)
                charge_delta = charge(cost.delta)
                used = excluded = 0
                subject_total = Decimal(0)
                limit = shares.limit(con, cost.analyst, cost.table, stated=row[6:8]) if cost.table is not None else None
                if cost.table is not None:
                    splan = self.subject_plan(cost, limit)
                    if cost.check is not None:
                        cost.check(splan)
                if cost.release is not None:  # public facts only: the options, the roster's size, the registry
                    release_rows, release_bytes = caps.check(
                        con, cost.analyst, cost.release, population=splan.population if splan is not None else 0,
                        key=self._key,
                    )  # fmt: skip
                if cost.table is not None:
                    charge_eps = splan.max_charge  # the analyst pays the largest subject charge (≤ ε)
                    excluded = splan.excluded + splan.left_out
                    used = sum(lv.count for lv in splan.levels if splan.charges[lv.allowance] > 0)
                    subject_total = sum((lv.count * splan.charges[lv.allowance] for lv in splan.levels), Decimal(0))
                    if splan.uniform:
                        # Everyone in the space pays the same: one row, the space's common offset;
                        # the units used are the roster as it is now (a later refresh adds a new
                        # generation, which this query does not use).
                        # (no UPDATE ... RETURNING: DuckDB 1.5 runs it on a keyed table as a delete and an
                        # insert, and when the commit then fails to write its log - a full disk - undoing
                        # that insert aborts the whole process)
                        con.execute(
                            f"UPDATE {SCHEMA}.roster_offsets SET epsilon_spent = epsilon_spent + ?, "
                            "delta_spent = delta_spent + ? WHERE roster = ?",
                            [charge_eps, charge_delta, cost.table.roster],
                        )
                        (generation,) = con.execute(
                            f"SELECT generation FROM {SCHEMA}.roster_offsets WHERE roster = ?", [cost.table.roster]
                        ).fetchone()
                        charged = (
                            f"(SELECT unit, 0 AS part FROM {cost.table.roster_table_sql} WHERE added <= {int(generation)})"
                        )
                    else:
                        charged = temp = f"__dp_charged_{next(_temp_ids)}"
                        mapping = splan.rows()
                        allowance = _allowance_sql(limit)
                        con.execute(
                            f"CREATE TEMP TABLE {temp} AS SELECT v.unit, m.round, m.part, m.charge FROM "
                            f"(SELECT unit, {allowance} AS a FROM {cost.table.roster_sql}) v JOIN "
                            "(SELECT unnest(CAST(? AS DECIMAL(38, 18)[])) AS a, unnest(CAST(? AS INTEGER[])) AS round, "
                            "unnest(CAST(? AS INTEGER[])) AS part, unnest(CAST(? AS DECIMAL(38, 18)[])) AS charge) m "
                            "ON v.a = m.a",
                            [
                                dec(cost.table.subject_delta), charge_delta, asked_eps, asked_eps,
                                [r[0] for r in mapping], [r[1] for r in mapping], [r[2] for r in mapping],
                                [r[3] for r in mapping],
                            ],
                        )  # fmt: skip
                        con.execute(
                            f"UPDATE {cost.table.roster_table_sql} AS r SET epsilon_spent = r.epsilon_spent + c.charge, "
                            f"delta_spent = r.delta_spent + ? FROM (SELECT DISTINCT unit, charge FROM {temp} "
                            "WHERE charge > 0) c WHERE r.unit = c.unit",
                            [charge_delta],
                        )
                con.execute(
                    f"UPDATE {SCHEMA}.analysts SET epsilon_spent = epsilon_spent + ?, "
                    "delta_spent = delta_spent + ? WHERE name = ?",
                    [charge_eps, charge_delta, cost.analyst],
                )
                entry_id = con.execute(
                    f"INSERT INTO {SCHEMA}.ledger (entry_id, analyst, query_hash, statement, query_class, "
                    "mechanism, table_name, epsilon, delta, personalization, subjects_charged, "
                    f"subjects_excluded, subject_epsilon, private, roster) VALUES (nextval('{SCHEMA}.ledger_seq'), "
                    "?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING entry_id",
                    [
                        cost.analyst, cost.query_hash, cost.statement, cost.query_class, cost.mechanism,
                        cost.table.name if cost.table else None, charge_eps, charge_delta,
                        cost.rule if cost.table else None, used, excluded, subject_total, cost.private,
                        cost.table.roster if cost.table else None,
                    ],
                ).fetchone()[0]  # fmt: skip
            except BaseException as e:
                _rollback(con)
                if temp:
                    _quietly(con, f"DROP TABLE IF EXISTS {temp}")
                mapped = unwritable(e) if isinstance(e, duckdb.Error) else None
                if mapped is not None:
                    raise mapped from None
                raise
            if release_rows is not None:  # counted against the caps until the release is written or abandoned
                caps.reserve(self._key, entry_id, cost.analyst, release_rows, release_bytes)
            try:
                con.execute("COMMIT")
            except duckdb.Error as e:
                if release_rows is not None:
                    caps.settle(self._key, entry_id)
                if temp:
                    _quietly(con, f"DROP TABLE IF EXISTS {temp}")
                raise uncommitted(e) from None
        return Debit(
            entry_id, charged, temp, used, excluded,
            float(max(eps_left - charge_eps, Decimal(0))), float(max(delta_left - charge_delta, Decimal(0))),
            float(charge_eps), splan, generation, release_rows,
        )  # fmt: skip

    def thin_sample(self, debit: Debit, *, rng) -> None:
        """Sample rule: keep each subject below the threshold with its probability.

        Every subject in the charged set has already paid its allowance, sampled or not.
        """
        subjects = debit.subjects
        rows = self._con.execute(
            f"SELECT unit, charge FROM {debit.temp} WHERE charge < ?", [subjects.requested]
        ).fetchall()
        if not rows:
            return
        probs = np.array([subjects.sample_probability[c] for _, c in rows])
        keep = pdp.draw_sample(probs, rng=rng)
        dropped = [u for (u, _), k in zip(rows, keep) if not k]
        if dropped:
            self._con.execute(f"DELETE FROM {debit.temp} WHERE unit IN (SELECT unnest(?))", [dropped])

    def released(self, debit: Debit, row_count: int, with_it: Callable[[], Any] | None = None) -> None:
        """Record in the release log that the answer paid for by ``debit`` leaves the gateway.

        Written before the answer is handed over: if the log cannot be written (a full disk), the answer
        is withheld (DP609) — its debit stands — so the log never misses an answer that was released.
        ``with_it``: writes of the same moment (the answer remembered), in the same transaction (one
        commit fewer); if they fail, the log's row is written alone."""
        row = (f"INSERT INTO {SCHEMA}.releases (entry_id, row_count) VALUES (?, ?)", [debit.entry_id, row_count])
        if with_it is not None:
            try:
                with database.transaction(self._con):
                    self._con.execute(*row)
                    with_it()
                return
            except Exception:  # noqa: BLE001 - rolled back whole; the log's row alone below, or DP609
                pass
        try:
            self._con.execute(*row)
        except duckdb.Error as e:
            raise errors.OperationalError(
                f"The answer was computed but the database could not record its release ({_first_line(e)}); it is "
                "withheld", code="DP609",
                hint="the debit stands (ledger entry {}); free disk space or ask the data owner to, then ask again"
                .format(debit.entry_id), entry_id=debit.entry_id,
            ) from None  # fmt: skip

    def discard(self, debit: Debit) -> None:
        """After the answer (or its failure): the temporary table of the charged units goes, and a
        release's reservation against the caps ends (a written release is in the registry now)."""
        if debit.release_rows is not None:
            # Under the ledger lock: a reservation checks the caps in a transaction begun under it. Settled
            # outside, a check whose transaction began before this release's commit saw it in neither
            # the registry nor the pending releases (two releases held under a cap of one).
            with self._instance.ledger_lock:
                caps.settle(self._key, debit.entry_id)
        if debit.temp:
            _quietly(self._con, f"DROP TABLE IF EXISTS {debit.temp}")

    @property
    def _key(self) -> tuple:
        """This opening of the database file (the scope of the releases in the making)."""
        return (self._instance.path, self._instance.serial)


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return (text.splitlines()[0] if text else type(e).__name__)[:300]


def _quietly(con: duckdb.DuckDBPyConnection, sql: str) -> None:
    """Clean-up that must not hide the error being raised (DuckDB refuses everything once a failed
    checkpoint has invalidated the database)."""
    try:
        con.execute(sql)
    except duckdb.Error:
        pass


def _rollback(con: duckdb.DuckDBPyConnection) -> None:
    """ROLLBACK, again if an interrupt lands on it; a refusal (a stopped database) must not hide the error
    being raised."""
    for _ in range(3):
        try:
            con.execute("ROLLBACK")
            return
        except duckdb.InterruptException:
            continue
        except duckdb.Error:
            return


def _invalidated(e: BaseException) -> bool:
    return isinstance(e, duckdb.FatalException)


def unwritable(e: duckdb.Error) -> errors.OperationalError | None:
    """A failed write before or at the debit's COMMIT, which DuckDB rolled back: nothing was charged (None:
    not a failed write)."""
    if _invalidated(e):
        return database.failed_write(e)
    if not (isinstance(e, duckdb.IOException) or (isinstance(e, duckdb.TransactionException)
                                                  and "Failed to commit" in str(e))):  # fmt: skip
        return None
    return errors.OperationalError(
        f"The database could not record the debit ({_first_line(e)}); nothing was charged", code="DP605",
        hint="the database file cannot grow (a full disk or a file size limit?): free disk space or ask the data "
        "owner to, then ask again",
    )  # fmt: skip


def uncommitted(e: duckdb.Error) -> errors.OperationalError:
    """The debit's COMMIT failed. DuckDB undoes a commit whose write-ahead log it could not write (nothing
    charged); a commit that reached the log but whose checkpoint failed is durable, and DuckDB then stops
    the database: the debit may stand, and nothing was computed either way."""
    if not _invalidated(e):
        return unwritable(e) or errors.OperationalError(
            f"The database could not record the debit ({_first_line(e)}); nothing was charged", code="DP605",
            hint="ask again; if it keeps failing, the data owner checks the database file",
        )  # fmt: skip
    durable = "succeeded and is durable" in str(e)
    return errors.OperationalError(
        "The database failed while recording the debit: "
        + ("the debit is recorded" if durable else "the debit may be recorded")
        + f", nothing was computed ({_first_line(e)})", code="DP606",
        hint="the database stopped after a failed write (a full disk?) and must be reopened: free disk space, then "
        "reconnect (or restart dpgate serve); the ledger then shows whether the debit stands",
        durable=durable,
    )  # fmt: skip


def _eligible_sql() -> str:
    """Threshold rule (Jorgensen et al., ICDE 2015): the subject has the query's ε and δ left. Params: ε, subject δ, δ."""
    return "epsilon_budget - epsilon_spent >= ? AND ? - delta_spent >= ?"


def _allowance_params(cost: Cost) -> list:
    """The parameters of ``_allowance_sql`` for ``cost``: subject δ budget, query δ, ε, ε."""
    return [dec(cost.table.subject_delta), charge(cost.delta), charge(cost.epsilon), charge(cost.epsilon)]


def _allowance_sql(limit: tuple[Decimal, Decimal] | None = None) -> str:
    """A subject's allowance for this query, exactly as ``pdp.allowance`` computes it [allowance].

    Parameters: subject δ budget, query δ, ε, ε. No δ left for the query means no allowance.
    All in DECIMAL: a DOUBLE budget column is cast first, and the grid is applied by
    multiplying (DuckDB divides DECIMALs in DOUBLE, which would floor 0.95 to 0.949).
    ``limit``: the analyst's budget share and what they used of this subject space: what a subject
    has left for this analyst is also at most share × budget − used (``catalog.shares``).
    """
    left = shares.remaining_sql(limit)
    return (
        "CASE WHEN ? - delta_spent < ? THEN CAST(0 AS DECIMAL(38, 18)) "
        f"WHEN {left} >= ? THEN CAST(? AS DECIMAL(38, 18)) "
        f"WHEN {left} <= 0 THEN CAST(0 AS DECIMAL(38, 18)) "
        f"ELSE CAST(floor({left} * {int(1 / pdp.GRID)}) "
        f"* CAST({pdp.GRID} AS DECIMAL(4, 3)) AS DECIMAL(38, 18)) END"
    )
