"""The gateway: the only module that wires the pipeline stages together.

    SQL text -> dialect.parse -> classify -> planner.plan -> ledger.check
             -> ledger.reserve (debit, one transaction) -> execute (exact, bounded)
             -> mechanism (noise) -> release (post-processing, error bars) -> ledger.released

A refusal anywhere before ``ledger.reserve`` charges nothing. After it, the debit stands
whatever happens (fail closed).
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable
from typing import Any

import duckdb
import numpy as np
from sqlglot import exp

from dpgate.catalog import tables as catalog_mod
from dpgate import database, errors, noise, release
from dpgate.queries.counting import exact as execute
from dpgate.queries import analysis as planner
from dpgate.catalog import releases as registry
from dpgate.queries import subgraph as subgraph_query
from dpgate.queries import synthetic as synthetic_query
from dpgate.queries import topk as topk_query
from dpgate.frontend.classify import Classified, classify
from dpgate.frontend.dialect import parse_one, to_duckdb, to_sql
from dpgate.catalog.facts import DuckDBFacts
from dpgate.ledger import Cost, Ledger
from dpgate.mechanisms import KeySelector, LaplaceCounting
from dpgate.queries.plans import CountPlan, SubgraphPlan, SynthesisPlan, TopKPlan
from dpgate.release import Answer, ColumnNoise, ReleaseInfo, Result
from dpgate.frontend.settings import Session, literal_value


class Gateway:
    """One analyst's session on one database file."""

    def __init__(self, path: str | os.PathLike, analyst: str, *, test_seed: int | None = None):
        if not isinstance(analyst, str) or not analyst:
            raise errors.InterfaceError("connect() needs analyst='<name>'", code="DP101")
        self._instance = database.acquire(path)
        try:
            self._con = self._instance.root.cursor()
            self._con.execute("SET python_enable_replacements = false")
            self.analyst = analyst
            self.session = Session()
            self.ledger = Ledger(self._instance, self._con)
            self.facts = DuckDBFacts(self._con)
            self._catalog: catalog_mod.Catalog | None = None
            self._fingerprint: frozenset | None = None
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
        self._queries = 0
        self.closed = False
        #: Called with (fraction done, message) while long work (a synthetic release) runs.
        self.progress: Callable[[float, str], None] | None = None

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
        fp = catalog_mod.fingerprint(self._con)
        if self._catalog is None or fp != self._fingerprint:
            self._catalog = catalog_mod.load(self._con)
            self._fingerprint = fp
        return dataclasses.replace(self._catalog, views=catalog_mod.Views(self._con))

    def _randomness(self) -> noise.Randomness:
        self._queries += 1
        if self._test_seed is None:
            return noise.fresh()
        return noise.fresh(self._test_seed * 1_000_003 + self._queries)

    # -- the pipeline ------------------------------------------------------------------------
    def run(self, sql: str, params: Any = None) -> Result:
        if self.closed:
            raise errors.InterfaceError("The connection is closed", code="DP100")
        statement = parse_one(sql)
        cat = self.catalog()
        classified = classify(statement, cat)
        kind = classified.kind
        if kind == "public":
            return self._public(statement, params)
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
        if kind in ("dp", "synthetic"):
            return self._dp(classified, cat, sql)
        if kind == "show_releases":
            return self._show_releases()
        if kind == "drop_synthetic":
            return self._drop_synthetic(classified.statement)
        raise errors.InternalError(f"unhandled statement kind {kind}")

    def cost(self, sql: str, params: Any = None) -> tuple[float, float] | None:
        """What a statement would charge the analyst, as (ε, δ), or None if it is free.

        Runs the same stages as the statement up to the plan; reads no protected row and
        charges nothing (the shell asks for confirmation with it).
        """
        statement = parse_one(sql)
        cat = self.catalog()
        classified = classify(statement, cat)
        if classified.kind not in ("dp", "synthetic"):
            return None
        if params:
            classified = classify(bind_parameters(statement, params), cat)
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

    def plan(
        self, classified: Classified, cat: catalog_mod.Catalog
    ) -> CountPlan | TopKPlan | SubgraphPlan | SynthesisPlan:
        if classified.kind == "synthetic":
            return synthetic_query.plan(classified, cat, self.session)
        return planner.plan_query(classified, cat, self.session, self.facts)

    def _cost(self, plan: CountPlan, sql: str, private: bool) -> Cost:
        return Cost(
            analyst=self.analyst,
            epsilon=plan.epsilon,
            delta=plan.delta,
            query_class=plan.query_class,
            mechanism=plan.mechanism,
            statement=sql,
            query_hash=planner.query_hash(plan.statement_sql),
            table=plan.table,
            rule=plan.charge.rule,
            private=private,
            options=plan.charge.ledger_options,
        )

    def _dp(self, classified: Classified, cat: catalog_mod.Catalog, sql: str) -> Result:
        plan = self.plan(classified, cat)
        randomness = self._randomness()
        cost = self._cost(plan, sql, randomness.private)
        rule = plan.charge.rule
        probe = f"(SELECT unit, 0 AS part FROM {plan.table.roster_table_sql})"
        if isinstance(plan, TopKPlan):
            topk_query.bind_check(self._con, plan, probe)
        elif isinstance(plan, SubgraphPlan):
            subgraph_query.bind_check(self._con, plan)
        elif isinstance(plan, SynthesisPlan):
            synthetic_query.bind_check(self._con, plan, probe)
        else:
            unit_type = plan.table.columns[plan.table.unit].type
            execute.bind_check(self._con, plan, probe, unit_type, 2 if rule in ("partition", "t_round") else 1)
        debit = self.ledger.reserve(cost)  # --- debit before release: from here on, charged
        rng = randomness.rng
        subjects = debit.subjects
        try:
            if rule == "sample" and debit.temp:
                thin_sample(self._con, debit.temp, subjects, rng=rng)
            if isinstance(plan, TopKPlan):
                answer = topk_query.answer(self._con, plan, debit.charged, subjects, rng=rng)
            elif isinstance(plan, SubgraphPlan):
                answer = subgraph_query.answer(self._con, plan, rng=rng)
            elif isinstance(plan, SynthesisPlan):
                answer = synthetic_query.answer(self._con, plan, debit, self.analyst, rng=rng, progress=self.progress)
            else:
                answer = self._count_answer(plan, debit, rng)
        except errors.Error:
            raise
        except duckdb.Error:
            # DuckDB's message could quote a protected value (a failed conversion, an overflow),
            # so neither it nor the chained exception leaves the gateway.
            raise errors.OperationalError(
                "The query failed after it was charged (a database error while computing the exact answer)",
                code="DP404",
                hint="the debit stands (fail closed); the database's message is withheld because it could "
                "quote a protected value",
            ) from None
        finally:
            self.ledger.discard(debit)
        self.ledger.released(debit, answer.released_rows if answer.released_rows is not None else len(answer.rows))
        notes = list(plan.notes) + answer.notes
        if not isinstance(plan, SubgraphPlan):
            notes += personalization_notes(plan, subjects, scaled_note=not isinstance(plan, SynthesisPlan))
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
            columns=answer.columns,
            intervals=answer.intervals,
            notes=notes,
        )
        return Result(answer.names, answer.types, answer.rows, info, message=answer.message)

    def _count_answer(self, plan: CountPlan, debit, rng: np.random.Generator) -> Answer:
        """The counting class: exact bounded statistics, (key selection,) noise, post-processing."""
        subjects = debit.subjects
        n_parts = len(subjects.parts) if subjects is not None else 1
        salt = int(rng.integers(0, 2**62))
        exact = execute.run(self._con, plan, debit.charged, salt, n_parts)
        if plan.key_selection is not None:
            ks = plan.key_selection
            run_eps = float(subjects.parts[0].epsilon) * ks.epsilon / plan.epsilon if subjects else ks.epsilon
            selection = planner.key_selection_threshold(run_eps, ks.delta, ks.sensitivity)
            idx = KeySelector().select(exact.subjects, selection, rng=rng)
        else:
            idx = np.arange(len(exact.keys))
        keys = [exact.keys[i] for i in idx]
        if plan.settings.consistent:  # Norm-Sub needs the unclamped noisy counts
            unclamped = dataclasses.replace(plan, settings=dataclasses.replace(plan.settings, clamp_counts=False))
            noisy = release.consistent_counts(plan, LaplaceCounting().release(unclamped, exact, idx, rng=rng, subjects=subjects))
        else:
            noisy = LaplaceCounting().release(plan, exact, idx, rng=rng, subjects=subjects)
        names, types, rows, intervals = release.noisy_rows(self._con, plan, keys, noisy, plan.settings.intervals)
        columns = {}
        for out in plan.outputs:
            if out.agg is not None:
                col = noisy[out.agg]
                columns[out.name] = ColumnNoise(col.mechanism, col.epsilon, col.scale)
        notes = []
        if plan.settings.consistent:
            notes.append("consistent = true: each table of counts is non-negative and keeps its noisy total "
                         "(Norm-Sub, post-processing); its cells carry no intervals")  # fmt: skip
        if plan.key_selection is not None:
            notes.append(
                f"keys chosen by DP key selection (threshold {plan.key_selection.threshold} subjects, "
                f"δ={plan.key_selection.delta:g}); {len(keys)} key(s) released"
            )
        return Answer(names, types, rows, intervals, columns, notes)

    # -- statements that are not DP queries -------------------------------------------------
    def _public(self, statement: exp.Expr, params: Any) -> Result:
        try:
            cur = self._con.execute(to_duckdb(statement), params if params else None)
            rows = cur.fetchall()
            desc = cur.description or []
        except duckdb.Error as e:
            raise _map_duckdb_error(e) from e
        return Result([d[0] for d in desc], [str(d[1]) for d in desc], rows, None)

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
        eq, dq, ecap, dcap, es, ds = self.ledger.quota(self.analyst)
        eps_left, delta_left = self.ledger.remaining(self.analyst)
        rows: list[tuple] = [
            (
                f"analyst {self.analyst}",
                eps_left,
                delta_left,
                None,
                f"quota ε={float(eq):g}, δ={float(dq):g}; per query ε≤{float(ecap):g}, δ≤{float(dcap):g}; "
                f"session ε={self.session.values['epsilon']:g}",
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
            usable, excluded = self.ledger.subject_counts(table, self.session.values["epsilon"], 0.0)
            rows.append(
                (
                    f"{label}: subjects",
                    None,
                    None,
                    usable + excluded,
                    f"{usable} with at least the session ε={self.session.values['epsilon']:g} left",
                )
            )
            for bucket, count in self.ledger.subject_distribution(table):
                rows.append((f"{label}: remaining ε {bucket}", None, None, count, ""))
        return Result(
            ["scope", "epsilon_remaining", "delta_remaining", "subjects", "detail"],
            ["VARCHAR", "DOUBLE", "DOUBLE", "BIGINT", "VARCHAR"],
            rows,
        )

    def _show_releases(self) -> Result:
        rows = []
        for r in registry.records(self._con):
            status = "active" if r.active else f"dropped {r.dropped_at:%Y-%m-%d %H:%M} by {r.dropped_by}"
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
        plan = self.plan(inner, cat)
        try:
            subjects = self.ledger.subject_plan(self._cost(plan, "", True))
        except errors.BudgetExceededError as e:
            subjects = e  # shown in the plan: the query would be refused
        return Result(cols, types, explain_rows(plan, subjects))


def thin_sample(con, charged: str, subjects, *, rng) -> None:
    """Sample rule: keep each subject below the threshold with its probability (coins from the OS).

    Every subject in ``charged`` has already paid its allowance, sampled or not.
    """
    from dpgate.mechanisms import pdp

    rows = con.execute(f"SELECT unit, charge FROM {charged} WHERE charge < ?", [subjects.requested]).fetchall()
    if not rows:
        return
    probs = np.array([subjects.sample_probability[c] for _, c in rows])
    keep = pdp.draw_sample(probs, rng=rng)
    dropped = [u for (u, _), k in zip(rows, keep) if not k]
    if dropped:
        con.execute(f"DELETE FROM {charged} WHERE unit IN (SELECT unnest(?))", [dropped])


def personalization_notes(plan, subjects, *, scaled_note: bool = True) -> list[str]:
    """What the personalization rule did, for the answer's metadata (counts only, no identities)."""
    if subjects is None:
        return []
    notes = []
    if subjects.excluded:
        notes.append(
            f"{subjects.excluded} subject(s) had no budget left"
            + (f" (or less than δ={plan.delta:g})" if plan.delta else "") + " and were excluded (charged nothing)"
        )
    if subjects.left_out:
        notes.append(
            f"{subjects.left_out} subject(s) had less than ε={plan.epsilon:g} left: left out by the threshold rule "
            "(charged nothing)"
        )
    reduced = any(p.epsilon < subjects.requested for p in subjects.parts)
    combined = subjects.combined
    if combined or reduced or subjects.rule in ("minimum", "partition", "t_round"):
        notes.append(f"personalization {subjects.rule}: " + "; ".join(subjects.describe()))
    if combined and scaled_note:
        notes.append(
            "the answer is scaled to all subjects with budget left; unbiased if budgets are independent of "
            "the data; intervals cover the noise only"
        )
    return notes


def _predicted_count_error(plan: CountPlan, subjects) -> str | None:
    """Predicted standard error of the first count-like aggregate under the personalization plan."""
    from dpgate.mechanisms import pdp

    agg = next((a for a in plan.aggs if a.kind in ("count_rows", "count_values", "count_subjects", "count_distinct")), None)
    if agg is None:
        return None
    comp = agg.components[0]
    frac = comp.epsilon / plan.epsilon
    variances = [noise.discrete_laplace_std(float(p.epsilon) * frac, comp.sensitivity) ** 2 for p in subjects.parts]
    combined = len(subjects.parts) > 1 or subjects.left_out or subjects.rule == "sample"
    if not combined:
        return f"{agg.label}: noise std ≈ {variances[0] ** 0.5:.3g} per cell"
    rmse = pdp.predicted_mse(subjects, variances, (plan.max_rows / 2) ** 2) ** 0.5
    return (
        f"{agg.label}: predicted root-mean-square error ≈ {rmse:.3g} per cell "
        "(noise, plus selection error if budgets are independent of the data)"
    )


def _number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(x)


def _subject_rows(plan, subjects) -> list[tuple]:
    """EXPLAIN rows of the personalization rule: who is used, who pays what."""
    rule = plan.charge.rule
    if isinstance(subjects, errors.Error):
        return [("subjects", f"personalization: {rule}", None, None, None, None,
                 f"the query would be refused: {subjects.message}")]  # fmt: skip
    rows = [
        (
            "subjects",
            f"personalization: {rule}",
            float(subjects.max_charge),
            plan.charge.delta,
            None,
            None,
            f"{subjects.population} subject(s) with budget left, {subjects.excluded} with none (excluded)"
            + (f", {subjects.left_out} left out by the threshold" if subjects.left_out else ""),
        )
    ]
    for line in subjects.describe():
        rows.append(("partition", None, None, None, None, None, line))
    for charge, count in subjects.charge_distribution():
        rows.append(("charge", None, float(charge), plan.charge.delta if charge > 0 else 0.0, None, None,
                     f"{count} subject(s) pay ε={float(charge):g}"))  # fmt: skip
    return rows


def explain_rows(plan: CountPlan | TopKPlan | SubgraphPlan | SynthesisPlan, subjects) -> list[tuple]:
    """EXPLAIN PRIVACY: mechanism, ε/δ per release, sensitivities, error bars, who pays what."""
    s = plan.settings
    rows = [
        (
            "query",
            plan.mechanism,
            plan.epsilon,
            plan.delta,
            None,
            None,
            f"class {plan.query_class} over {plan.table.name}; error bars at {100 * (1 - s.alpha):g}%",
        ),
    ]
    if isinstance(plan, SynthesisPlan):
        return rows + _subject_rows(plan, subjects) + synthetic_query.explain_rows(plan)
    if isinstance(plan, SubgraphPlan):
        if isinstance(subjects, errors.Error):
            rows.append(("edge budget", None, None, None, None, None, f"the query would be refused: {subjects.message}"))
        return rows + subgraph_query.explain_rows(plan)
    rows += _subject_rows(plan, subjects)
    if isinstance(plan, TopKPlan):
        return rows + _topk_explain_rows(plan)
    if not isinstance(subjects, errors.Error):
        error = _predicted_count_error(plan, subjects)
        if error is not None:
            rows.append(("expected error", None, None, None, None, None, error))
    rows.append(
        (
            "bounding",
            None,
            None,
            None,
            None,
            None,
            f"at most {plan.max_rows} row(s) per subject"
            + (f", at most {plan.max_groups} group(s)" if plan.bound_groups else "")
            + ", sampled at random; inputs clamped to their bounds",
        )
    )
    for k in plan.keys:
        size = f"{len(k.domain)} values" if k.domain is not None else "unknown"
        rows.append((f"key {k.name}", None, None, None, None, None, f"domain: {k.source} ({size})"))
    if plan.key_selection is not None:
        ks = plan.key_selection
        rows.append(
            (
                "key selection",
                "key_selection",
                ks.epsilon,
                ks.delta,
                str(ks.sensitivity),
                None,
                f"release a key when its noisy subject count reaches {ks.threshold}",
            )
        )
    for agg in plan.aggs:
        for comp in agg.components:
            w = noise.discrete_laplace_half_width(comp.epsilon, comp.sensitivity, s.alpha)
            grid = agg.grid if agg.kind in ("sum", "avg") else 1.0
            half = f"±{w * grid:.6g}" if grid != 1.0 else f"±{w}"
            bounds = f"; input clamped to [{agg.lower:g}, {agg.upper:g}]" if agg.lower is not None else ""
            rows.append(
                (
                    f"{agg.label} ({comp.label})",
                    "discrete Laplace",
                    comp.epsilon,
                    0.0,
                    str(comp.sensitivity) + (f" × 2^{int(np.log2(grid))}" if grid != 1.0 else ""),
                    half,
                    f"{agg.kind}{bounds}",
                )
            )
    if plan.cells is not None:
        rows.append(("cells", None, None, None, None, None, f"{plan.cells} cell(s), every one released with noise"))
    for note in plan.notes:
        rows.append(("note", None, None, None, None, None, note))
    return rows


def _topk_explain_rows(plan: TopKPlan) -> list[tuple]:
    from dpgate.mechanisms import topk as topk_mech

    s = plan.settings
    rows = []
    if plan.columns:
        rows.append(("universe", None, None, None, None, None,
                     f"{len(plan.columns)} 0/1 column(s) of {plan.table.name} (public schema)"))  # fmt: skip
    else:
        for k in plan.keys:
            size = f"{len(k.domain)} values" if k.domain is not None else "unknown"
            rows.append((f"key {k.name}", None, None, None, None, None, f"domain: {k.source} ({size})"))
        if plan.n_items is not None:
            rows.append(("universe", None, None, None, None, None, f"{plan.n_items} item(s): the cells of the keys"))
    if plan.key_selection is not None:
        ks = plan.key_selection
        rows.append(("key selection", "key_selection", ks.epsilon, ks.delta, str(ks.sensitivity), None,
                     f"an item enters the universe when its noisy subject count reaches {ks.threshold}; "
                     f"at most {plan.max_groups} item(s) per subject"))  # fmt: skip
    shares = topk_mech.planned_shares(plan.method, plan.selection_epsilon)
    detail = ", ".join(f"{name} ε={eps:.4g}" for name, eps in shares.items())
    rows.append((f"top {plan.k}", plan.method, plan.selection_epsilon, 0.0, "1 per item (monotone)", None,
                 f"releases {plan.k} item(s) in noisy order, no counts; {detail}"))  # fmt: skip
    if plan.counts is not None:
        c = plan.counts
        w = noise.discrete_laplace_half_width(c.epsilon, c.sensitivity, s.alpha)
        rows.append(("counts", "discrete Laplace", c.epsilon, 0.0, str(c.sensitivity), f"±{w}",
                     f"fresh subject counts of the {plan.k} selected item(s); "
                     f"at most {plan.max_groups} item(s) per subject"))  # fmt: skip
    rows.append(("semantics", None, None, None, None, None,
                 "an item's frequency is the number of subjects holding it; one subject changes each by at most 1"))  # fmt: skip
    for note in plan.notes:
        rows.append(("note", None, None, None, None, None, note))
    return rows


def bind_parameters(statement: exp.Expr, params: Any) -> exp.Expr:
    """Replace placeholders by literal values (DP queries are planned on the bound statement)."""
    positional = list(params) if isinstance(params, (list, tuple)) else None
    named = dict(params) if isinstance(params, dict) else None
    if positional is None and named is None:
        raise errors.ProgrammingError("parameters must be a sequence or a mapping", code="DP601")
    counter = iter(range(10**9))

    def value_for(node: exp.Placeholder) -> Any:
        key = node.this
        if key is None:
            if positional is None:
                raise errors.ProgrammingError("? placeholders need a sequence of parameters", code="DP601")
            i = next(counter)
            if i >= len(positional):
                raise errors.ProgrammingError(
                    f"Not enough parameters: the statement has more than {len(positional)} placeholders",
                    code="DP602",
                )
            return positional[i]
        key = str(key)
        if key.isdigit():
            if positional is None or not 1 <= int(key) <= len(positional):
                raise errors.ProgrammingError(f"No parameter ${key}", code="DP602")
            return positional[int(key) - 1]
        if named is None or key not in named:
            raise errors.ProgrammingError(f"No parameter named ${key}", code="DP602")
        return named[key]

    def replace(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Placeholder):
            value = value_for(node)
            if isinstance(value, float) and not math.isfinite(value):
                # exp.convert would write inf as a bare identifier and nan as NULL
                return exp.cast(exp.Literal.string(repr(value)), exp.DataType.build("DOUBLE"))
            try:
                return exp.convert(value)
            except ValueError as e:
                raise errors.DataError(f"Cannot use parameter value {value!r} in SQL", code="DP604") from e
        return node

    bound = statement.copy().transform(replace)
    if positional is not None:
        used = sum(1 for n in statement.find_all(exp.Placeholder) if n.this is None)
        if used and used != len(positional):
            raise errors.ProgrammingError(
                f"The statement has {used} ? placeholders but {len(positional)} parameters were given",
                code="DP602",
            )
    return bound


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
