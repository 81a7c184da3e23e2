"""The gateway: the only module that wires the pipeline stages together.

    SQL text -> dialect.parse -> classify -> planner.plan -> ledger.check
             -> ledger.reserve (debit, one transaction) -> execute (exact, bounded)
             -> mechanism (noise) -> release (post-processing, error bars) -> ledger.released

A refusal anywhere before ``ledger.reserve`` charges nothing. After it, the debit stands
whatever happens (fail closed).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import functools
import os
import threading
import time
from collections.abc import Callable
from typing import Any

import duckdb
from sqlglot import exp

from dpgate import backends, database, errors, noise, queries
from dpgate.backends import spark as spark_backend
from dpgate.catalog import caps
from dpgate.catalog import releases as registry
from dpgate.catalog import tables as catalog_mod
from dpgate.catalog.facts import DuckDBFacts
from dpgate.frontend import allowlist
from dpgate.frontend.parameters import bind_parameters
from dpgate.frontend import cost as cost_mod
from dpgate.frontend.classify import Classified, classify
from dpgate.frontend.dialect import parse_one, to_duckdb, to_sql
from dpgate.frontend.settings import Session, literal_value
from dpgate.ledger import Cost, Ledger
from dpgate.queries.analysis import query_hash
from dpgate.queries.base import Context, Run, bind_scope, explain_head
from dpgate.release import ReleaseInfo, Result


#: Times a statement is classified again when the catalog moved before its debit.
_ATTEMPTS = 5


class _CatalogMoved(Exception):
    """The catalog changed after the statement was classified, before any debit: start over."""


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
            self._catalog: catalog_mod.Catalog | None = None
            self._fingerprint: frozenset | None = None
            self._views: dict[str, str] = {}
            if not catalog_mod.schema_exists(self._con):
                raise errors.PolicyError(
                    f"{os.fspath(path)!r} has no dpgate catalog", code="DP302",
                    hint="the data owner declares protected tables and analysts first (dpgate policy apply)",
                )  # fmt: skip
            with self._instance.ledger_lock:
                registry.ensure(self._con)  # a database made by an older dpgate
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
        self._planes: dict[str, Any] = {}
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
            return True

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            try:
                self._con.close()
            finally:
                database.release(self._instance)

    # -- catalog ---------------------------------------------------------------------------
    def catalog(self) -> catalog_mod.Catalog:
        """The catalog, re-read when the owner changed it (cheap check each statement)."""
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
        if self._catalog is None or fp != self._fingerprint:
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
            self._catalog, self._fingerprint, self._views = catalog, fp, views
        self.facts.schema_key = (self._instance.path, self._instance.serial, fp)
        return dataclasses.replace(self._catalog, views=catalog_mod.Views(sql=dict(self._views)))

    def _plane(self, engine: str) -> Any:
        """The data plane of tables whose rows are not in this file (``dpgate.backends``)."""
        if engine not in self._planes:
            session = self._spark if self._spark is not None else spark_backend.session_from_settings(
                self.catalog().settings
            )
            self._planes[engine] = spark_backend.SparkPlane(session)
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
                except _CatalogMoved:  # before any debit: classify (and plan) again under the new catalog
                    continue
        finally:
            self._running = False
        raise errors.OperationalError(
            "The database's tables or views kept changing while this statement was checked", code="DP405",
            hint="nothing was charged; try again when the data owner has finished changing tables and views",
        )  # fmt: skip

    def _moved(self, fp: frozenset, names: set[str], views: dict[str, str]) -> bool:
        """The catalog as ``self._con`` sees it now differs from ``fp`` where the statement looks."""
        now = catalog_mod.fingerprint(self._con)
        return now != fp and catalog_mod.relevant(now, names, views) != catalog_mod.relevant(fp, names, views)

    @contextlib.contextmanager
    def _pinned(self, fp: frozenset, names: set[str], views: dict[str, str]):
        """After the debit: the block (the answer) runs in one transaction whose catalog is, where the
        statement looks, the one it was planned against (``_run_once`` read that one in the planning
        transaction); a difference fails closed rather than run a plan made for another schema."""
        with database.transaction(self._con):
            if self._moved(fp, names, views):
                raise errors.OperationalError(
                    "The data owner changed tables or views after this query was planned and charged; "
                    "nothing was computed", code="DP404",
                    hint="the debit stands (fail closed); run the query again",
                )  # fmt: skip
            yield

    def _run_once(self, sql: str, params: Any) -> Result:
        statement = parse_one(sql)
        # The catalog and everything checked against it — classification, the allowlist, planning
        # (which reads public tables: domains, lookup keys), a public statement's execution — in one
        # transaction: DuckDB versions its catalog per transaction, so a view the owner replaces
        # meanwhile is expanded as it was classified (red teams helper-29 and -30: a replaced view
        # returned a protected table's rows, and fed protected values to the planner).
        try:
            return self._checked(statement, sql, params)
        except _ReadOnly as done:  # defence in depth: a public statement reads, so nothing of it is committed
            return done.result

    def _checked(self, statement: exp.Expr, sql: str, params: Any) -> Result:
        with database.transaction(self._con):
            cat = self.catalog()
            classified = classify(statement, cat)
            kind = classified.kind
            pin = (self._fingerprint, _names(statement, cat), self._views)
            if kind == "public":
                raise _ReadOnly(self._public(statement, params))
            if params:
                statement = bind_parameters(statement, params)
                classified = classify(statement, cat)
            elif statement.find(exp.Placeholder):
                raise errors.ProgrammingError(
                    "The statement has parameter placeholders but no parameters were given",
                    code="DP603", hint="pass them as execute(sql, params)",
                )  # fmt: skip
            if kind == "set":
                return self._set(statement)
            if kind == "show_budget":
                return self._show_budget(cat)
            if kind == "show_tables":
                return self._show_tables(cat)
            if kind == "describe":
                return self._describe(classified)
            if kind == "explain":
                return self._explain(classified, cat)
            if kind == "show_releases":
                return self._show_releases()
            if kind == "drop_synthetic":
                return self._drop_synthetic(classified.statement)
            if kind not in ("dp", "synthetic"):
                raise errors.InternalError(f"unhandled statement kind {kind}")
            if classified.kind == "dp":  # answered from a public release (a synopsis): free, nothing protected is read
                answered = queries.free_answer(classified, self._context(cat), self._con)
                if answered is not None:
                    return answered
            qc, plan = self._plan(classified, cat)
        return self._dp(qc, plan, sql, pin)

    def cost(self, sql: str, params: Any = None) -> tuple[float, float] | None:
        """What a statement would charge the analyst, as (ε, δ), or None if it is free.

        Runs the same stages as the statement up to the plan; reads no protected row and
        charges nothing (the shell asks for confirmation with it).
        """
        statement = parse_one(sql)
        with database.transaction(self._con):  # planning reads public tables: in the catalog's snapshot
            cat = self.catalog()
            classified = classify(statement, cat)
            if classified.kind not in ("dp", "synthetic"):
                return None
            if params:
                classified = classify(bind_parameters(statement, params), cat)
            # as run() does: a statement a public release answers (a synopsis range count) is free
            if classified.kind == "dp" and queries.free_answer(classified, self._context(cat), self._con) is not None:
                return None
            plan = self.plan(classified, cat)
        return plan.epsilon, plan.delta

    def tables(self) -> dict[str, tuple[str, list[tuple[str, str]]]]:
        """Tables and views an analyst may name, with their kind and columns (public facts)."""
        cat = self.catalog()
        out: dict[str, tuple[str, list[tuple[str, str]]]] = {}
        for name, t in sorted(cat.tables.items()):
            out[name] = ("graph" if t.kind == "graph" else "protected", [(c.name, c.type) for c in t.columns.values()])
        for name in sorted(cat.public_tables):
            out[name] = ("release" if name in cat.releases else "public", self.facts.columns(name))
        for name in sorted(cat.views):
            out.setdefault(name, ("view", self.facts.columns(name)))
        return out

    def _context(self, cat: catalog_mod.Catalog) -> Context:
        return Context(cat, self.session, self.facts)

    def plan(self, classified: Classified, cat: catalog_mod.Catalog):
        """The plan of a DP statement, by the query class that recognises it (reads no row)."""
        return self._plan(classified, cat)[1]

    def _plan(self, classified: Classified, cat: catalog_mod.Catalog):
        """(query class, plan); the statement must pass the allowlist first."""
        allowlist.check(classified.statement)
        for table in backends.protected_tables(classified, cat):
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
                    hint=f"the data owner declares the domain of {bad.name} again (Owner.declare(table, column, domain=...) or "
                    "dpgate policy apply); nothing was charged",
                )  # fmt: skip
        if classified.statement.find(exp.DateDiff) is not None:  # only then are column types needed
            types: dict[str, set[str]] = {}
            for t in {t.name for t in classified.statement.find_all(exp.Table) if t.name}:
                for name, dtype in self.facts.columns(t):
                    types.setdefault(name.lower(), set()).add(dtype.upper())
            allowlist.check_engine_hazards(classified.statement, types)
        allowlist.rewrite_for_engine(classified.statement)
        ctx = self._context(cat)
        qc = queries.for_statement(classified, ctx)
        tables = backends.protected_tables(classified, cat)
        backends.require_served(qc.name, tables, qc.name)
        plan = qc.plan(classified, ctx)
        self._check_work(classified.statement, plan, tables)
        return qc, plan

    def _check_work(self, statement: exp.Expr, plan, tables) -> None:
        """The statement's constant work per row times a public bound on its rows (the roster times
        the rows a subject keeps), refused free when it would hold a core for minutes [cost]."""
        _, per_row = cost_mod.row_work(statement)
        if not tables or per_row * 2**26 <= cost_mod.MAX_STATEMENT_WORK:
            return  # within the bound for any roster below 67 million subjects: no count needed
        rows = 0
        for table in tables:
            (subjects,) = self._con.execute(f"SELECT count(*) FROM {table.roster_sql}").fetchone()
            rows += subjects * max(getattr(plan, "max_rows", None) or table.max_rows, 1)
        cost_mod.check_statement(per_row, rows)

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

    def _dp(self, qc, plan, sql: str, pin: tuple) -> Result:
        """Bind checks, the debit, the answer in a snapshot pinned to the planned catalog, the release.

        A query class may hold a scope from before its debit to the end of its release (``debit_scope``:
        a release's name in the making), and check its plan inside the debit's transaction against the
        personalization plan's ε (``check_at_debit``: a refusal there is free)."""
        scope = getattr(qc, "debit_scope", None)
        with scope(plan, (self._instance.path, self._instance.serial)) if scope is not None else contextlib.nullcontext():
            return self._dp_scoped(qc, plan, sql, pin)

    def _dp_scoped(self, qc, plan, sql: str, pin: tuple) -> Result:
        randomness = self._randomness()
        cost = self._cost(plan, sql, randomness.private)
        check = getattr(qc, "check_at_debit", None)
        if check is not None:
            cost = dataclasses.replace(cost, check=functools.partial(check, self._con, plan))
        probe = f"(SELECT unit, 0 AS part FROM {plan.table.roster_table_sql})"
        fp = pin[0]
        try:
            with backends.planes(self._plane), bind_scope((self._instance.path, self._instance.serial, fp)) as scope:
                qc.bind_check(self._con, plan, probe)  # tables and views as this statement saw them
        except errors.Error:
            if self._moved(*pin):  # refused under a catalog the statement was not planned for: start over
                raise _CatalogMoved from None
            raise
        if self._moved(*pin):
            # The owner changed a table or view since this statement read the catalog: the plan, and
            # what the bind cache answered or stored, may not describe the schema the run will see.
            scope.forget()
            raise _CatalogMoved
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
                with backends.planes(self._plane), self._pinned(*pin):
                    answer = qc.answer(run)
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
            self.ledger.released(debit, answer.released_rows if answer.released_rows is not None else len(answer.rows))
        finally:
            with self._phase:
                self._charged = False
        notes = list(plan.notes) + answer.notes
        if not randomness.private:
            notes.append("NOT PRIVATE: a fixed test seed was used")
        info = ReleaseInfo(
            entry_id=debit.entry_id,
            query_class=plan.query_class,
            mechanism=plan.mechanism,
            epsilon=debit.epsilon,
            delta=plan.delta,
            epsilon_remaining=debit.epsilon_remaining,
            delta_remaining=debit.delta_remaining,
            alpha=plan.settings.alpha,
            private=randomness.private,
            subjects_charged=debit.subjects_charged,
            subjects_excluded=debit.subjects_excluded,
            subjects_left_out=debit.subjects.left_out if debit.subjects is not None else 0,
            columns=answer.columns,
            intervals=answer.intervals,
            notes=notes,
        )
        return Result(answer.names, answer.types, answer.rows, info, message=answer.message)

    # -- statements that are not DP queries -------------------------------------------------
    def _public(self, statement: exp.Expr, params: Any) -> Result:
        sql = to_duckdb(statement)
        reader = self.public_reader
        try:
            if reader is not None:
                reader.start()
            cur = self._con.execute(sql, params if params else None)
            desc = cur.description or []
            names, types = [d[0] for d in desc], [str(d[1]) for d in desc]
            zoned = [i for i, d in enumerate(desc) if str(d[1]) == "TIMESTAMP WITH TIME ZONE"]
            convert = None
            if zoned:
                cur, convert = self._zoned(sql, params, len(desc), zoned)
            if reader is not None:
                rows = reader.read(cur, names, types, convert)
            else:
                rows = cur.fetchall() if convert is None else [convert(r) for r in cur.fetchall()]
        except duckdb.Error as e:
            raise _map_duckdb_error(e) from e
        return Result(names, types, rows, None)

    def _zoned(self, sql: str, params: Any, width: int, zoned: list[int]):
        """The statement again with its TIMESTAMPTZ columns as UTC timestamps, and the map of a row
        to aware datetimes in UTC.

        DuckDB's own conversion of TIMESTAMPTZ needs the pytz package, which dpgate does not
        depend on.
        """
        names = [f"c{i}" for i in range(width)]
        cols = [f"timezone('UTC', {n})" if i in zoned else n for i, n in enumerate(names)]
        wrapped = f"SELECT {', '.join(cols)} FROM ({sql}) AS q({', '.join(names)})"
        cur = self._con.execute(wrapped, params if params else None)
        utc = datetime.timezone.utc

        def convert(row: tuple) -> tuple:
            # DuckDB gives a year before 1 (or after 9999) as text, which Python's datetime cannot hold: it stays text
            return tuple(v.replace(tzinfo=utc) if i in zoned and isinstance(v, datetime.datetime) else v
                         for i, v in enumerate(row))  # fmt: skip

        return cur, convert

    def _set(self, statement: exp.Set) -> Result:
        changed = []
        for item in statement.expressions:
            if not isinstance(item, exp.SetItem) or item.args.get("kind") not in (None, "SESSION"):
                raise errors.NotSupportedError(
                    f"{to_sql(statement)} is not a dpgate session setting", code="DP221",
                    hint="use SET dp_epsilon = 0.5 (and other dp_ settings)",
                )  # fmt: skip
            eq = item.this
            if not isinstance(eq, exp.EQ):
                raise errors.ProgrammingError("SET needs name = value", code="DP205")
            name = eq.this.name
            self.session.set(name, literal_value(eq.expression, name))
            changed.append(f"{name.lower()} = {self.session.values[name.lower()[3:]]}")
        return Result([], [], [], None, message="SET " + ", ".join(changed))

    def _show_budget(self, cat: catalog_mod.Catalog) -> Result:
        """Every budget a query draws on: the analyst's ε and δ quota, and the subjects' ε and δ.

        Subjects' budgets are shown as counts per range (never an individual's): ε in buckets,
        δ as how many subjects can still take part in key selection at the session δ.
        """
        from decimal import Decimal

        from dpgate.ledger import dec

        eq, dq, ecap, dcap, es, ds = self.ledger.quota(self.analyst)
        eps_left, delta_left = self.ledger.remaining(self.analyst)
        session_eps, session_delta = self.session.values["epsilon"], self.session.values["delta"]
        rows: list[tuple] = [
            (
                f"analyst {self.analyst}",
                eps_left,
                delta_left,
                None,
                f"your quota ε={float(eq):g}, δ={float(dq):g}; per query ε≤{float(ecap):g}, δ≤{float(dcap):g}; "
                f"session ε={session_eps:g}, δ={session_delta:g}",
            )
        ]
        spaces: dict[str, list[str]] = {}
        for name in sorted(cat.tables):
            spaces.setdefault(cat.tables[name].roster, []).append(name)
        for roster, names in sorted(spaces.items()):
            table = cat.tables[names[0]]
            label = roster.removeprefix("roster_")
            if table.kind == "graph":
                left = self.ledger.graph_remaining(table)
                rows.append((f"{label}: edge budget", left, None, None,
                             "edge-level DP: one ε budget shared by every potential edge"))  # fmt: skip
                continue
            if names != [label]:
                label += f" ({', '.join(names)})"
            usable, excluded = self.ledger.subject_counts(table, session_eps, 0.0)
            rows.append(
                (
                    f"{label}: subjects",
                    None,
                    None,
                    usable + excluded,
                    f"{usable} with at least the session ε={session_eps:g} left"
                    + (f"; {excluded} with less are left out of queries at that ε" if excluded else ""),
                )
            )
            for bucket, count in self.ledger.subject_distribution(table):
                if count or bucket.startswith("0 "):
                    rows.append((f"{label}: remaining ε {bucket}", None, None, count, ""))
            # δ: spent by DP key selection (GROUP BY over an undeclared domain) and by the experimental
            # supermodular release; a subject takes part only with at least the query's δ left of
            # their lifetime δ.
            lifetime = dec(table.subject_delta)
            need = dec(session_delta) if session_delta > 0 else None
            spread = self._con.execute(
                f"SELECT ? - delta_spent AS delta_left, count(*) FROM {table.roster_sql} GROUP BY delta_left", [lifetime]
            ).fetchall()
            if need is None:
                enough = [(Decimal(r), n) for r, n in spread if r > 0]
            else:
                enough = [(Decimal(r), n) for r, n in spread if r >= need]
            short = sum(n for _, n in spread) - sum(n for _, n in enough)
            what = f"the session δ={session_delta:g}" if need is not None else "some δ"
            room = ""
            if enough and need is not None:
                ks = sorted({int(r // need) for r, _ in enough})
                room = f": room for {ks[0]}" + (f" to {ks[-1]}" if ks[-1] != ks[0] else "") + " more key selection(s)"
            rows.append((f"{label}: δ for key selection: left", None, None, sum(n for _, n in enough),
                         f"at least {what} of their lifetime δ={float(lifetime):g} left{room}"))  # fmt: skip
            rows.append((f"{label}: δ for key selection: spent", None, None, short,
                         f"less than {what} left: left out of key selection (GROUP BY an undeclared "
                         "domain); besides key selection only experimental releases (USING supermodular) spend δ"))  # fmt: skip
        return Result(
            ["scope", "epsilon_remaining", "delta_remaining", "subjects", "detail"],
            ["VARCHAR", "DOUBLE", "DOUBLE", "BIGINT", "VARCHAR"],
            rows,
        )

    def _show_releases(self) -> Result:
        rows = []
        for r in registry.records(self._con):
            status = "active" if r.active else f"dropped {r.dropped_at:%Y-%m-%d %H:%M} by {r.dropped_by}"
            if not r.private:  # its noise came from a fixed test seed: whoever knows it can remove the noise
                status += "; NOT PRIVATE (made with a fixed test seed)"
            options = r.parameters.get("options", {})
            detail = ", ".join(f"{k}={v}" for k, v in options.items() if v is not None)
            rows.append((r.name, r.kind, ", ".join(r.sources), r.mechanism, r.epsilon, r.delta, r.analyst,
                         r.row_count, r.created_at, status, detail))  # fmt: skip
        return Result(
            ["name", "kind", "source", "mechanism", "epsilon", "delta", "analyst", "rows", "created_at", "status",
             "parameters"],
            ["VARCHAR", "VARCHAR", "VARCHAR", "VARCHAR", "DOUBLE", "DOUBLE", "VARCHAR", "BIGINT", "TIMESTAMP",
             "VARCHAR", "VARCHAR"],
            rows,
        )  # fmt: skip

    def _drop_synthetic(self, statement) -> Result:
        name = statement.this.name.lower()
        schema = statement.this.args.get("db")
        if statement.this.args.get("catalog") is not None or (schema is not None and schema.name.lower() != "main"):
            # releases live in main; other.r named main.r (red team helper-43)
            raise errors.ProgrammingError(f"No release {statement.this.sql(dialect='duckdb')}: releases are tables of "
                                          "schema main", code="DP225", hint=f"DROP SYNTHETIC TABLE {name}")  # fmt: skip
        cat = self.catalog()
        graph_nodes = {t.graph.get("node_table") for t in cat.tables.values() if t.graph}
        if cat.protected(name) is not None or name in cat.budget_tables or name in graph_nodes:
            raise errors.PolicyError(
                f"{name} is now declared by the data owner (protected, a budget table or a node universe)",
                code="DP320",
                hint="only the owner can remove it",
            )
        with self._instance.ledger_lock:
            if registry.active(self._con, name) is None and statement.args.get("exists"):
                return Result([], [], [], None, message=f"DROP SYNTHETIC TABLE: no release named {name}")
            registry.drop(self._con, name, by=self.analyst)
        return Result([], [], [], None, message=f"DROP SYNTHETIC TABLE {name} (its lineage stays in SHOW RELEASES)")

    def _show_tables(self, cat: catalog_mod.Catalog) -> Result:
        rows = []
        for name in sorted(cat.tables):
            t = cat.tables[name]
            if t.kind == "graph":
                rows.append((name, "graph", None, None, None))
                continue
            rows.append((name, "protected", t.unit, t.max_rows, t.max_groups))
        for name in sorted(cat.public_tables):
            rows.append((name, "release" if name in cat.releases else "public", None, None, None))
        for name in sorted(cat.views):
            rows.append((name, "view", None, None, None))
        return Result(
            ["name", "kind", "privacy_unit", "max_rows", "max_groups"],
            ["VARCHAR", "VARCHAR", "VARCHAR", "INTEGER", "INTEGER"],
            rows,
        )

    def _describe(self, classified: Classified) -> Result:
        ref = classified.refs[0]
        rows = []
        if ref.protected is not None:
            t = ref.protected
            ends = {t.graph["src"]: "edge source", t.graph["dst"]: "edge target"} if t.graph else {}
            for c in t.columns.values():
                role = ends.get(c.name) or ("privacy unit" if c.name == t.unit and not t.graph else "")
                shown = c.shown_bounds()
                if shown is not None and (c.is_date or c.is_timestamp):
                    bounds = f"[{shown[0]}, {shown[1]}]"
                else:
                    bounds = f"[{_number(c.lower)}, {_number(c.upper)}]" if c.bounded else None
                domain = None
                if c.domain is not None:
                    shown = ", ".join("NULL" if v is None else repr(v) for v in c.domain[:6])
                    domain = shown + (f", ... ({len(c.domain)} values)" if len(c.domain) > 6 else "")
                rows.append((c.name, c.type, role, bounds, domain))
        else:
            for name, typ in self.facts.columns(ref.name):
                rows.append((name, typ, "", None, None))
        return Result(
            ["column_name", "column_type", "role", "bounds", "domain"],
            ["VARCHAR"] * 5,
            rows,
        )

    def _explain(self, classified: Classified, cat: catalog_mod.Catalog) -> Result:
        inner = classified.inner
        cols = ["item", "mechanism", "epsilon", "delta", "sensitivity", "ci_half_width", "detail"]
        types = ["VARCHAR", "VARCHAR", "DOUBLE", "DOUBLE", "VARCHAR", "VARCHAR", "VARCHAR"]
        if inner.kind == "public":
            return Result(cols, types, [("query", "none", 0.0, 0.0, None, None, "reads no protected table: free")])
        if inner.kind == "dp":
            answered = queries.free_answer(inner, self._context(cat), self._con)
            if answered is not None:
                detail = (answered.message or "answered from a release: free").splitlines()[0]
                return Result(cols, types, [("query", "release", 0.0, 0.0, None, None, detail)])
        qc, plan = self._plan(inner, cat)
        try:
            subjects = self.ledger.subject_plan(self._cost(plan, "", True))
        except errors.BudgetExceededError as e:
            subjects = e  # shown in the plan: the query would be refused
        return Result(cols, types, [explain_head(plan), *qc.explain_rows(plan, subjects)])


def _names(statement: exp.Expr, cat: catalog_mod.Catalog) -> set[str]:
    """The relations a statement may depend on, for ``catalog.tables.relevant``: those it names, every
    protected table and roster (a table function names its table in a string), and the string
    constants it holds."""
    names = {t.name.lower() for t in statement.find_all(exp.Table)}
    names |= {lit.this.lower() for lit in statement.find_all(exp.Literal) if lit.is_string}
    for t in cat.tables.values():
        names |= {t.name.lower(), t.roster.lower()}
    return names


def _number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(x)


def _map_duckdb_error(e: duckdb.Error) -> errors.Error:
    text = str(e).splitlines()[0] if str(e) else type(e).__name__
    if isinstance(e, (duckdb.ParserException, duckdb.BinderException, duckdb.CatalogException)):
        return errors.ProgrammingError(text, code="DP230")
    if isinstance(e, duckdb.PermissionException):
        return errors.NotSupportedError(text, code="DP220")
    if isinstance(e, (duckdb.ConversionException, duckdb.OutOfRangeException, duckdb.InvalidInputException)):
        return errors.DataError(text, code="DP600")
    if isinstance(e, duckdb.IntegrityError):
        return errors.IntegrityError(text, code="DP610")
    return errors.OperationalError(text, code="DP405")
