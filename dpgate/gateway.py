"""The gateway: the only module that wires the pipeline stages together.

    SQL text -> frontend (parse, classify, bind parameters, allowlist, engine checks, work bound)
             -> a statement that is not a DP query: its handler (``dpgate.statements``), free
             -> a DP query: its query class plans it -> bind checks -> ledger.reserve (the debit,
                one transaction) -> the class's answer (exact bounded statistics in the pinned
                catalog, then noise, then post-processing) -> ledger.released -> ReleaseInfo

A refusal anywhere before ``ledger.reserve`` charges nothing. After it, the debit stands
whatever happens (fail closed).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import threading
from collections.abc import Callable
from typing import Any

from sqlglot import exp

from dpgate import answers, backends, database, errors, noise, queries, statements
from dpgate.backends.charged import bind_scope
from dpgate.catalog import caps, remembered, sample_order, shares
from dpgate.catalog import releases as registry
from dpgate.catalog import tables as catalog_mod
from dpgate.catalog.facts import DuckDBFacts
from dpgate.catalog.snapshot import Moved, Pin, Snapshot, require_queryable
from dpgate.frontend import allowlist, built
from dpgate.frontend import cost as cost_mod
from dpgate.frontend.classify import Classified, classify
from dpgate.frontend.dialect import parse_one
from dpgate.frontend.parameters import bind_parameters
from dpgate.frontend.settings import Session
from dpgate.ledger import Cost, Ledger
from dpgate.memo import Memo
from dpgate.queries.analysis import query_hash
from dpgate.queries.base import Context, Run
from dpgate.release import ReleaseInfo, Result, check_consumed

#: Times a statement is classified again when the catalog moved before its debit.
_ATTEMPTS = 5
#: A session keeps the plans of at most this many statements of at most PLAN_TEXT characters: a plan
#: holds its trees, about 150 bytes per character of the statement, and a refused statement's plan is
#: kept too (free), so the bound is on what a session can make the server hold (~10 MB).
PLANS_KEPT = 32
PLAN_TEXT = 2048


@dataclasses.dataclass(frozen=True)
class _Planned:
    """A DP statement's query class, plan and answer-memory probe, kept for the same text asked again."""

    qc: Any
    plan: Any
    probe: Any


@dataclasses.dataclass
class _Prepared:
    """A statement after every stage before the debit: its pin, and either a free answer or a plan."""

    pin: Pin
    answer: Result | None = None
    qc: Any = None
    plan: Any = None
    #: How the answer is remembered (``dpgate.answers``).
    probe: Any = None


class _Refused(Exception):
    """A dpgate error raised while planning, carried out of the transaction with the pin of the catalog
    the statement was planned under (whether that catalog moved meanwhile is asked after the rollback)."""

    def __init__(self, error: errors.Error, pin: Pin):
        super().__init__()
        self.error = error
        self.pin = pin


class _ReadOnly(Exception):
    """A public statement's result, carried out of its transaction so that it is rolled back."""

    def __init__(self, result: Result):
        super().__init__()
        self.result = result


class Gateway:
    """One analyst's session on one database file."""

    def __init__(self, path: str | os.PathLike, analyst: str, *, test_seed: int | None = None, spark: Any = None):
        if not isinstance(analyst, str) or not analyst:
            raise errors.InterfaceError("connect() needs analyst='<name>'", code="DP101")
        self._instance = database.acquire(path)
        try:
            self._con = self._instance.root.cursor()
            self._con.execute("SET python_enable_replacements = false")
            for name, value in allowlist.REQUIRED_SETTINGS.items():  # e.g. keep TRY() around shared subexpressions
                self._con.execute(f"SET {name} = '{value}'")
            self.analyst = analyst
            self.session = Session()
            self.ledger = Ledger(self._instance, self._con)
            self.facts = DuckDBFacts(self._con)
            self._snapshot = Snapshot(self._con, self._instance, self.facts)
            if not catalog_mod.schema_exists(self._con):
                raise errors.PolicyError(
                    f"{os.fspath(path)!r} has no dpgate catalog", code="DP302",
                    hint="the data owner declares protected tables and analysts first (dpgate policy apply)",
                )  # fmt: skip
            with self._instance.ledger_lock:
                registry.ensure(self._con)  # a database made by an older dpgate
                remembered.ensure(self._con)
                shares.ensure(self._con)
            self.catalog()
            self.ledger.quota(analyst)  # unknown analyst -> PolicyError
            if test_seed is not None and not self.ledger.may_seed(analyst):
                raise errors.PolicyError(
                    f"A fixed test seed was asked for, but the data owner has not allowed {analyst} test seeds",
                    code="DP305",
                    hint="test seeds make noise predictable; the owner grants them with Owner.allow_test_seed(analyst)",
                )
        except BaseException:
            database.release(self._instance)
            raise
        self._test_seed = test_seed
        self._spark = spark
        #: The ε the caller showed the analyst for the next statement (the shell's confirmation; 0 when
        #: it said free), or None: a statement that would charge more is refused free (DP406).
        self.confirmed: float | None = None
        self._planes: dict[str, Any] = {}
        #: DP statements planned in this session (``_plan_key``): the same text asked again under the
        #: same schema and settings is not planned, probed or bind-checked again.
        self._planned = Memo(PLANS_KEPT)
        self._queries = 0
        self._running = False
        # From the debit to the end of the release a statement may not be stopped: whether it would
        # finish before a timeout or a cancel depends on the rows (design rule 11); its work is
        # bounded before the debit instead (frontend.cost).
        self._phase = threading.Lock()
        self._charged = False
        self.closed = False
        #: Called with (fraction done, message) while long work (a synthetic release) runs.
        self.progress: Callable[[float, str], None] | None = None
        #: Reads a public statement's rows (None: all at once). ``dpgate serve`` sets one that sends
        #: them to its client in batches and bounds them, so a large result is never held whole:
        #: ``start()`` as the statement starts to run (its time limit), then ``read(cursor, names,
        #: types, convert)`` returns the rows for the Result (``convert`` maps a row, or is None).
        self.public_reader: Any = None

    @property
    def where(self) -> str:
        """The database this session is on (its file path)."""
        return self._instance.path

    @property
    def charged(self) -> bool:
        """Whether the running statement is past its debit (and so runs to its end)."""
        return self._charged

    def interrupt(self) -> bool:
        """Stop the running statement if it has not been charged yet (a refusal then, free).

        After the debit an interrupt is ignored: ending a charged statement at a deadline would make
        its outcome depend on how long one subject's rows took. Returns whether it was interrupted."""
        with self._phase:
            if self._charged or self.closed:
                return False
            self._con.interrupt()
            for plane in list(self._planes.values()):  # Spark's jobs are not the connection's
                plane.interrupt()
            return True

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            try:
                self._con.close()
            finally:
                database.release(self._instance)

    @property
    def con(self):
        """The session's DuckDB cursor (the pipeline's stages and ``dpgate.statements`` run on it)."""
        return self._con

    @property
    def ledger_lock(self):
        """Held while the budget tables or the release registry change (one per database file)."""
        return self._instance.ledger_lock

    def catalog(self) -> catalog_mod.Catalog:
        """The catalog, re-read when the owner changed it (cheap check each statement)."""
        return self._snapshot.current()

    def context(self, cat: catalog_mod.Catalog) -> Context:
        """What planning may read: the catalog, the session's settings, public facts."""
        return Context(cat, self.session, self.facts)

    def _plane(self, engine: str) -> Any:
        """The data plane of tables whose rows are not in this file (``dpgate.backends``), made once."""
        if engine not in self._planes:
            self._planes[engine] = backends.plane_for(
                engine, spark=self._spark, settings=lambda: self.catalog().settings, progress=lambda: self.progress
            )
        return self._planes[engine]

    def _randomness(self) -> noise.Randomness:
        self._queries += 1
        if self._test_seed is None:
            return noise.fresh()
        return noise.fresh(self._test_seed * 1_000_003 + self._queries)

    # -- the pipeline ------------------------------------------------------------------------
    def run(self, sql: str, params: Any = None) -> Result:
        if self.closed:
            raise errors.InterfaceError("The connection is closed", code="DP100")
        if self._running:
            raise errors.InterfaceError(
                "A statement was started while another runs on the same connection (from a progress callback?)",
                code="DP107", hint="open a second connection for it; the running statement is not affected",
            )  # fmt: skip
        self._running = True
        try:
            for _ in range(_ATTEMPTS):
                try:
                    return self._run_once(sql, params)
                except Moved:  # before any debit: classify (and plan) again under the new catalog
                    continue
        finally:
            self._running = False
            for plane in list(self._planes.values()):  # a Spark statement's progress line ends with it
                plane.end()
        raise errors.OperationalError(
            "The database's tables or views kept changing while this statement was checked", code="DP405",
            hint="nothing was charged; try again when the data owner has finished changing tables and views",
        )  # fmt: skip

    def _run_once(self, sql: str, params: Any) -> Result:
        statement = parse_one(sql)
        # The catalog and everything checked against it — classification, the allowlist, planning
        # (which reads public tables: domains, lookup keys), a public statement's execution — in one
        # transaction: DuckDB versions its catalog per transaction, so a view the owner replaces
        # meanwhile is expanded as it was classified (a replaced view could otherwise return a
        # protected table's rows, or feed protected values to the planner).
        try:
            with database.transaction(self._con):
                prepared = self._prepare(statement, params, sql=sql)
        except _ReadOnly as done:  # defence in depth: a public statement reads, so nothing of it is committed
            return done.result
        except _Refused as refused:  # refused under a catalog the owner has changed since: plan again (free)
            if refused.pin.moved(self._con):
                raise Moved from None
            raise refused.error from refused.error.__cause__
        if prepared.answer is not None:
            return prepared.answer
        return self._dp(prepared.qc, prepared.plan, sql, prepared.pin, prepared.probe)

    def _prepare(self, statement: exp.Expr, params: Any, *, dry: bool = False, sql: str | None = None) -> _Prepared:
        """Every stage before the debit, in the caller's transaction: classify, bind parameters, and
        either answer without a debit (a statement that is not a DP query, or a DP query a public
        release answers) or plan. ``dry`` (``cost``) runs no handler and no public statement."""
        cat = self.catalog()
        classified = classify(statement, cat)
        pin = self._snapshot.pin(statement, cat)
        if classified.kind == "public":
            built.check(statement, params)  # what its values may grow to, with its parameters' sizes
            if dry:
                return _Prepared(pin)
            raise _ReadOnly(statements.public(self, statement, params))
        if params:
            classified = classify(bind_parameters(statement, params), cat)
        elif statement.find(exp.Placeholder):
            raise errors.ProgrammingError(
                "The statement has parameter placeholders but no parameters were given",
                code="DP603", hint="pass them as execute(sql, params)",
            )  # fmt: skip
        handler = statements.HANDLERS.get(classified.kind)
        if handler is not None:
            return _Prepared(pin, answer=None if dry else handler(self, classified, cat))
        if classified.kind not in ("dp", "synthetic"):
            raise errors.InternalError(f"unhandled statement kind {classified.kind}")
        key = self._plan_key(sql) if classified.kind == "dp" and not params else None
        planned = self._planned.get(key) if key is not None else None
        probe = None
        if classified.kind == "dp" and self._test_seed is None:
            probe, known = self._remembered(classified, cat, pin, planned.probe if planned is not None else False)
            if known is not None and known.current and not probe.fresh:
                if dry:
                    return _Prepared(pin)  # free: cost() says so
                eq, dq, _, _, es, ds = self.ledger.quota(self.analyst)
                return _Prepared(pin, answer=answers.served(known, self.analyst, float(eq - es), float(dq - ds)))
        reads = self.facts.data_reads
        try:
            answered, qc, plan = self._free_or_plan(classified, cat, planned)
        except errors.Error as e:
            # Planned in this transaction's snapshot, which the owner may have changed since (a column's
            # type). DuckDB 1.x bound some statements only in the bind check after the transaction, where a
            # moved catalog starts the statement over; DuckDB 2 refuses them here already (DESCRIBE of
            # date_part('year', <TIME>)), and that error ends the transaction: the caller asks after it.
            raise _Refused(e, pin) from None
        if planned is None and key is not None and plan is not None and qc.reusable(plan) and self.facts.data_reads == reads:
            template = None if probe is None else dataclasses.replace(probe, memory=None, replaces=None)
            self._planned.put(key, _Planned(qc, plan, template))
        if plan is not None and plan.writes is not None:
            probe = None
        return _Prepared(pin, answer=answered, qc=qc, plan=plan, probe=probe)

    def _plan_key(self, sql: str | None) -> tuple | None:
        """What a DP statement's plan is a function of, when its planning read no row of any table
        (``DuckDBFacts.data_reads``): its text, the session's settings and the schema (the catalog's
        fingerprint in this database instance: every declaration, table definition and view)."""
        fp = self._snapshot.fingerprint
        if sql is None or fp is None or len(sql) > PLAN_TEXT:
            return None
        settings = tuple(sorted((k, repr(v)) for k, v in self.session.values.items()))
        return (sql, settings, self._instance.path, self._instance.serial, fp)

    def remembered(self, classified: Classified, cat: catalog_mod.Catalog) -> tuple[Any, Any]:
        """(probe, remembered answer or None) of a classified DP statement (EXPLAIN PRIVACY's view)."""
        if self._test_seed is not None:
            return None, None
        return self._remembered(classified, cat, self._snapshot.pin(classified.statement, cat))

    def _remembered(self, classified: Classified, cat: catalog_mod.Catalog, pin: Pin, probe: Any = False) -> tuple[Any, Any]:
        """(probe, remembered answer or None) of a DP statement; (None, None) when answers are not
        remembered (the owner turned it off, or the statement reads tables outside the file).
        ``probe``: the statement's probe computed before under the same plan key (False: compute it)."""
        memory = remembered.from_catalog(cat.settings)
        if not memory.on:
            return None, None
        if probe is False:
            tables = backends.protected_tables(classified, cat)
            probe = answers.probe(classified.statement, self.session.values, tables, pin)
        if probe is None:
            return None, None
        memory, known = answers.lookup(self._con, probe, self.analyst, memory)
        return dataclasses.replace(probe, memory=memory, replaces=known), known

    def _free_or_plan(self, classified: Classified, cat: catalog_mod.Catalog,
                      planned: _Planned | None = None) -> tuple[Result | None, Any, Any]:  # fmt: skip
        """A DP statement's free answer, when a public release (a synopsis) answers it reading nothing
        protected, as (answer, None, None); otherwise (None, query class, plan). ``planned``: the plan
        kept for the same statement under the same key; the checks that read the database (a public
        release that answers it, the work bound's roster count) run again for it."""
        if classified.kind == "dp":
            answered = queries.free_answer(classified, self.context(cat), self._con)
            if answered is not None:
                return answered, None, None
        if planned is None:
            qc, plan = self._plan(classified, cat)
            return None, qc, plan
        allowlist.for_engine(classified.statement, self.facts)  # its rewrite, as planning made it: the work bound reads it
        tables = backends.protected_tables(classified, cat)
        cost_mod.check_rows(self._con, classified.statement, tables, planned.plan.rows_per_subject, self._cores(tables))
        return None, planned.qc, planned.plan

    def cost(self, sql: str, params: Any = None) -> tuple[float, float] | None:
        """What a statement would charge the analyst, as (ε, δ), or None if it is free.

        The same preparation as ``run`` up to the plan; reads no protected row and charges nothing
        (the shell asks for confirmation with it)."""
        statement = parse_one(sql)
        try:
            with database.transaction(self._con):  # planning reads public tables: in the catalog's snapshot
                prepared = self._prepare(statement, params, dry=True, sql=sql)
        except _Refused as refused:
            raise refused.error from refused.error.__cause__
        return None if prepared.plan is None else (prepared.plan.epsilon, prepared.plan.delta)

    def tables(self) -> dict[str, tuple[str, list[tuple[str, str]]]]:
        """Tables and views an analyst may name, with their kind and columns (public facts)."""
        return statements.tables(self.catalog(), self.facts)

    def plan(self, classified: Classified, cat: catalog_mod.Catalog):
        """The plan of a DP statement, by the query class that recognises it (reads no row)."""
        return self._plan(classified, cat)[1]

    def _plan(self, classified: Classified, cat: catalog_mod.Catalog):
        """(query class, plan); the statement must pass the allowlist first."""
        allowlist.check(classified.statement)
        tables = backends.protected_tables(classified, cat)
        require_queryable(tables)
        allowlist.for_engine(classified.statement, self.facts)
        ctx = self.context(cat)
        qc = queries.for_statement(classified, ctx)
        backends.require_served(qc.name, tables, qc.title)
        plan = qc.plan(classified, ctx)
        cost_mod.check_rows(self._con, classified.statement, tables, plan.rows_per_subject, self._cores(tables))
        return qc, plan

    def _cores(self, tables) -> Any:
        """For a statement whose tables are all in Spark, a function of the cores its Spark work may
        count on (the work bound is a minute of each: ``cost.check_rows``); else None. Asked of the
        running session, else of the policy's ``[backends.spark]``: planning never starts Spark."""
        if not tables or any(backends.engine_of(t) != "spark" for t in tables):
            return None
        return lambda: backends.spark_cores(self._spark, lambda: self.catalog().settings)

    def _cost(self, plan, sql: str, private: bool) -> Cost:
        return Cost(
            analyst=self.analyst,
            epsilon=plan.epsilon,
            delta=plan.delta,
            query_class=plan.query_class,
            mechanism=plan.mechanism,
            statement=sql,
            query_hash=query_hash(plan.statement_sql),
            table=plan.table,
            rule=plan.charge.rule,
            private=private,
            options=plan.charge.ledger_options,
            release=caps.release_size(plan),  # checked against the analyst's release caps at the debit
        )

    def _dp(self, qc, plan, sql: str, pin: Pin, probe: Any = None) -> Result:
        """Bind checks, the debit, the answer in a snapshot pinned to the planned catalog, the release.

        A query class may hold a scope from before its debit to the end of its release (``debit_scope``:
        a release's name in the making), and check its plan inside the debit's transaction against the
        personalization plan's ε (``check_at_debit``: a refusal there is free)."""
        with qc.debit_scope(plan, (self._instance.path, self._instance.serial)):
            result = self._dp_scoped(qc, plan, sql, pin, remember=probe)
        if probe is not None and probe.out_of_date is not None:
            result.release.notes.append(answers.stale_note(probe.out_of_date))
        return result

    def _dp_scoped(self, qc, plan, sql: str, pin: Pin, remember: Any = None) -> Result:
        if self.confirmed is not None and plan.epsilon > self.confirmed * (1 + 1e-9):
            raise errors.OperationalError(
                f"This statement would charge ε {plan.epsilon:g}, more than the ε {self.confirmed:g} shown when it was "
                "confirmed (a remembered answer went out of date meanwhile)", code="DP406",
                hint="nothing was charged; run it again to see what it costs now",
            )  # fmt: skip
        randomness = self._randomness()
        cost = self._cost(plan, sql, randomness.private)
        cost = dataclasses.replace(cost, check=functools.partial(qc.check_at_debit, self._con, plan))
        probe = f"(SELECT unit, 0 AS part FROM {plan.table.roster_table_sql})"
        try:
            with backends.planes(self._plane), bind_scope((self._instance.path, self._instance.serial, pin.fingerprint)) as scope:
                with sample_order.announcing(self.progress):  # a stale order's rebuild says so
                    qc.bind_check(self._con, plan, probe)  # tables and views as this statement saw them
        except errors.Error:
            if pin.moved(self._con):  # refused under a catalog the statement was not planned for: start over
                raise Moved from None
            raise
        if pin.moved(self._con):
            # The owner changed a table or view since this statement read the catalog: the plan, and
            # what the bind cache answered or stored, may not describe the schema the run will see.
            scope.forget()
            raise Moved
        with self._phase:  # from here on no interrupt reaches the statement (the debit itself is bounded)
            self._charged = True
        try:
            debit = self.ledger.reserve(cost)  # --- debit before release: from here on, charged
        except BaseException:
            with self._phase:
                self._charged = False
            raise
        try:
            try:
                if plan.charge.rule == "sample" and debit.temp:
                    self.ledger.thin_sample(debit, rng=randomness.rng)
                run = Run(self._con, plan, debit, self.analyst, randomness.rng, randomness.sampling, self.progress)
                with backends.planes(self._plane), pin.held(self._con):
                    answer = qc.answer(run)
                check_consumed(answer, plan, debit)  # the ε the mechanisms ran at is the ε debited, or nothing leaves
            except errors.Error:
                raise
            except Exception:  # noqa: BLE001 - after the debit, nothing of a failure may leave
                # DuckDB's (or Python's) message could quote a protected value (a failed conversion,
                # an overflow), so neither it nor the chained exception leaves the gateway.
                raise errors.OperationalError(
                    "The query failed after it was charged (a database error while computing the exact answer)",
                    code="DP404",
                    hint="the debit stands (fail closed); the database's message is withheld because it could "
                    "quote a protected value",
                ) from None
            finally:
                self.ledger.discard(debit)
            info = ReleaseInfo.of(plan, debit, answer, randomness.private)
            result = Result(answer.names, answer.types, answer.rows, info, message=answer.message)
            store = None
            if remember is not None and randomness.private:
                # Still charged: an interrupt (a cancel, the server's timeout) must not stop the store
                # and leave a paid answer unremembered, to be charged again when next asked.
                store = functools.partial(answers.store, self._con, remember, self.analyst, result, remember.replaces)
            rows = answer.released_rows if answer.released_rows is not None else len(answer.rows)
            self.ledger.released(debit, rows, with_it=store)  # the answer remembered with its release row
        finally:
            with self._phase:
                self._charged = False
        return result
