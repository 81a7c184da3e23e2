"""The counting class: COUNT / SUM / AVG with WHERE and GROUP BY over one protected table.

Plan: the shared SQL analysis (``dpgate.queries.analysis``) fixes the rows, keys, bounded
aggregate inputs and post-processing; this module gives every aggregate an equal share of ε
(one more share for DP key selection when a key has no public domain) and fixes the charge.
Answer: one bounded exact pass on the table's data plane (``dpgate.backends``), discrete Laplace
noise per cell (``dpgate.mechanisms.laplace``), optional Norm-Sub consistency, post-processing in
DuckDB over the noisy relation only.
"""

from __future__ import annotations

import dataclasses
import math

import duckdb
import numpy as np

from dpgate import backends, errors, mechanisms, noise, release
from dpgate.backends.charged import mark_plan_bound, plan_bound
from dpgate.backends.duckdb import orderable
from dpgate.frontend.classify import Classified
from dpgate.mechanisms.base import COUNT_SUBJECTS, QUANTILE, VALUE_KINDS, metered
from dpgate.mechanisms.keyselection import threshold as key_selection_threshold
from dpgate.plans import CountPlan, SubjectCharge
from dpgate.queries.analysis import _with_epsilon, analyse
from dpgate.queries.base import Context, QueryClass, Run, _subject_rows, personalization_notes
from dpgate.release import Answer, ColumnNoise

#: The registered mechanisms (``dpgate.mechanisms.MECHANISMS``) that add the noise and select keys.
NOISE = "laplace"
SELECTION = "key_selection"


class CountingQuery(QueryClass):
    """Every DP SELECT over a non-graph protected table that no other class recognised."""

    name = "count"
    title = "counting queries"
    plan_type = CountPlan

    def recognises(self, classified: Classified, ctx: Context) -> bool:
        return classified.kind == "dp" and classified.protected.kind != "graph"

    def plan(self, classified: Classified, ctx: Context) -> CountPlan:
        a = analyse(classified, ctx)
        p = a.prepare()
        x = p.syntax
        s, table = a.settings, a.table
        types, key_specs, needs_selection, cells = p.types, p.key_specs, p.needs_selection, p.cells
        max_rows, max_groups = p.max_rows, p.max_groups
        if "topk_method" in s.explicit:
            raise errors.UnsupportedQueryError(
                "topk_method applies to top-k queries, and this query is not one",
                code="DP272",
                hint="a top-k query is SELECT key, COUNT(*) AS n FROM t GROUP BY key ORDER BY n DESC LIMIT k "
                "(no HAVING, no other aggregate); drop the option otherwise",
            )

        has_subject_count = any(kind == COUNT_SUBJECTS for kind, _ in x.agg_inputs)
        group_limit = cells if cells is not None else math.inf
        bound_groups = (has_subject_count or needs_selection) and max_groups < min(max_rows, group_limit)
        groups_per_subject = min(max_rows, max_groups if bound_groups else max_rows, group_limit)

        releases = len(x.aggs_nodes) + (1 if needs_selection else 0)
        share = s.epsilon / releases
        if needs_selection:
            # The last share absorbs rounding so the shares sum to ε exactly.
            sel_eps = s.epsilon - share * len(x.aggs_nodes)
            key_selection = key_selection_threshold(sel_eps, s.delta, int(groups_per_subject))
        else:
            key_selection = None

        aggs = []
        for i, (node, (kind, inp)) in enumerate(zip(x.aggs_nodes, x.agg_inputs)):
            eps_i = share
            aggs.append(
                a._agg_spec(i, node, kind, inp, eps_i, max_rows, groups_per_subject, types.get(f"__v{i}"))
            )
        if key_selection is None and len(aggs) > 0:
            # Make the shares add up to ε exactly despite floating point.
            spent = sum(a.epsilon for a in aggs[:-1])
            aggs[-1] = _with_epsilon(aggs[-1], s.epsilon - spent)

        post, outputs = a._post(x.q, x.projections, x.keys_exprs, x.aggs_nodes, key_specs, x.original_sql)
        if key_selection is not None and s.personalization in ("partition", "t_round"):
            raise errors.UnsupportedQueryError(
                f"DP key selection cannot be combined with personalization = '{s.personalization}'",
                code="DP274",
                hint="use a declared domain, or personalization 'threshold', 'sample' or 'minimum'",
            )
        options = {}
        quantiles = [agg for agg in aggs if agg.kind == QUANTILE]
        if quantiles and s.personalization in ("partition", "t_round"):
            raise errors.UnsupportedQueryError(
                f"{quantiles[0].label}: a quantile cannot combine partitions of subjects "
                f"(personalization = '{s.personalization}')",
                code="DP274",
                hint="use personalization 'sample', 'threshold' or 'minimum' for quantiles",
            )
        if s.personalization == "sample" and key_selection is None and not quantiles:
            options = {"strata": True}  # one part per inclusion probability: unbiased totals [ht]
        if s.personalization in ("partition", "t_round"):
            options = {"partitioning": s.partitioning, "partitions": s.partitions, "min_size": s.min_partition_size}
            if s.personalization == "t_round":
                options["rounds"] = s.rounds
        charge = SubjectCharge(
            rule=s.personalization,
            epsilon=s.epsilon,
            delta=key_selection.delta if key_selection else 0.0,
            options=options,
        )
        notes: tuple[str, ...] = ()
        if key_selection is not None:
            notes = (f"to avoid key selection: {a.declaration_hint(key_specs)}",)
        if a.per_subject:
            values = ", ".join(
                f"{c.name} in [{c.lower:g}, {c.upper:g}]" for c in a.rows_table.columns.values() if c.bounded
            )
            notes += (
                f"per subject: {table.name}'s rows are cut to {table.max_rows} per subject (at random, before WHERE), then each "
                f"subject is one row{': ' + values if values else ''}",
            )
        kinds = {agg.kind == QUANTILE for agg in aggs}
        mechanism = {frozenset({True}): "exponential", frozenset({False}): "laplace"}.get(
            frozenset(kinds), "laplace + exponential"
        )
        return CountPlan(
            table=table,
            notes=notes,
            mechanism=mechanism,
            settings=s,
            statement_sql=x.original_sql,
            source=p.base,
            unit=x.unit,
            keys=tuple(key_specs),
            aggs=tuple(aggs),
            key_selection=key_selection,
            max_rows=max_rows,
            max_groups=max_groups,
            bound_groups=bound_groups,
            post=post,
            outputs=tuple(outputs),
            charge=charge,
            joined=a.joined,
            prebound=a.per_subject,
        )

    def reusable(self, plan: CountPlan) -> bool:
        """A counting plan is frozen, and what it reads at planning are the catalog, the session's
        settings and the schema's binds (``DuckDBFacts.data_reads`` counts the rest); over a Spark table
        the other engine's own checks run each time, so only plans over the database file are kept."""
        return all(backends.engine_of(t) == "duckdb" for t in (plan.table, *plan.joined))

    def bind_check(self, con: duckdb.DuckDBPyConnection, plan: CountPlan, probe: str) -> None:
        if plan.key_selection is not None:
            # The roster's size is public: a threshold above it could release nothing [waste].
            (roster,) = con.execute(f"SELECT count(*) FROM {plan.table.roster_table_sql}").fetchone()
            if plan.key_selection.threshold > roster:
                raise errors.PolicyError(
                    f"DP key selection would need {plan.key_selection.threshold} subjects per key at "
                    f"ε={plan.key_selection.epsilon:.3g}, δ={plan.key_selection.delta:g}, and {plan.table.name} has "
                    f"{roster:,}: no key could be released",
                    code="DP214",
                    hint=next((n.removeprefix("to avoid key selection: ") for n in plan.notes
                               if n.startswith("to avoid key selection: ")), "declare the keys' domains")
                    + "; or raise epsilon",
                )  # fmt: skip
        backends.plane("duckdb").bind_check(con, plan, probe)  # a Spark table's stub binds too
        if not plan_bound(("post",), plan):
            release.check_post(con, plan, len(plan.aggs))
            mark_plan_bound(("post",), plan)
        if backends.engine_of(plan.table) != "duckdb":  # the rows live elsewhere: that engine must run it too
            backends.plane(backends.engine_of(plan.table)).bind_check(con, plan, probe)

    def answer(self, run: Run) -> Answer:
        """Exact bounded statistics, (key selection,) noise, post-processing; with the loss the
        mechanisms recorded at their draws (every aggregate's components and the key selection
        compose sequentially on each part: their shares add up to the part's ε)."""
        with metered() as spent:
            out = self._answer(run)
        out.consumed = tuple(spent)
        return out

    def _answer(self, run: Run) -> Answer:
        plan, debit, rng = run.plan, run.debit, run.rng
        subjects = debit.subjects
        n_parts = len(subjects.parts) if subjects is not None else 1
        salt = int(rng.integers(0, 2**62))
        generation = debit.generation if debit.temp is None else None  # charged is the uniform roster relation
        plane = backends.plane(backends.engine_of(plan.table))
        exact = plane.exact(run.con, plan, debit.charged, salt, n_parts, generation=generation)
        if plan.key_selection is not None:
            ks = plan.key_selection
            run_eps = float(subjects.parts[0].epsilon) * ks.epsilon / plan.epsilon if subjects else ks.epsilon
            selection = key_selection_threshold(run_eps, ks.delta, ks.sensitivity)
            idx = mechanisms.lookup(SELECTION)().select(exact.subjects, selection, rng=rng)
            # DuckDB returns groups in an order that follows the rows' storage order; the released
            # keys are shuffled so that no output order (or tie in ORDER BY) depends on it.
            idx = idx[rng.permutation(len(idx))]
        else:
            idx = np.arange(len(exact.keys))
        keys = [exact.keys[i] for i in idx]
        counts = mechanisms.lookup(NOISE)()
        if plan.settings.consistent:  # Norm-Sub needs the unclamped noisy counts
            unclamped = dataclasses.replace(plan, settings=dataclasses.replace(plan.settings, clamp_counts=False))
            noisy = release.consistent_counts(plan, counts.release(unclamped, exact, idx, rng=rng, subjects=subjects))
        else:
            noisy = counts.release(plan, exact, idx, rng=rng, subjects=subjects)
        noisy = _quantiles(plan, exact, idx, noisy, subjects, rng)
        names, types, rows, intervals = release.noisy_rows(run.con, plan, keys, noisy, plan.settings.intervals)
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
        for agg in plan.aggs:
            if agg.kind == QUANTILE:
                notes.append(f"{agg.label}: {noisy[agg.index].scale}; no interval of values is released for it")
        notes += personalization_notes(plan, subjects)
        return Answer(names, types, rows, intervals, columns, notes)


    def explain_rows(self, plan: CountPlan, subjects) -> list[tuple]:
        s = plan.settings
        rows = _subject_rows(plan, subjects)
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
                + (", sampled at random in the table's stored sample order (the same rows for every query "
                   "until the table changes)" if orderable(plan) else ", sampled at random per query")
                + "; inputs clamped to their bounds",
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
                    f"release a key when its noisy subject count reaches {ks.threshold}: keys fewer than "
                    f"about {ks.threshold} subjects have are never released",
                )
            )
        for agg in plan.aggs:
            if agg.kind == QUANTILE:
                from dpgate.mechanisms import quantile as qmech

                comp = agg.components[0]
                points = round(agg.upper / agg.grid) - round(agg.lower / agg.grid) + 1
                t = qmech.rank_error_bound(comp.epsilon, comp.sensitivity, points, s.alpha, agg.level)
                rows.append(
                    (
                        f"{agg.label} (quantile)",
                        "exponential (quantile)",
                        comp.epsilon,
                        0.0,
                        f"{comp.sensitivity} (rank)",
                        f"rank ±{t:,}",
                        f"the {agg.level:g}-quantile: one of {points:,} grid points in [{agg.lower:g}, {agg.upper:g}]; "
                        "no interval of values",
                    )
                )
                continue
            for comp in agg.components:
                w = noise.discrete_laplace_half_width(comp.epsilon, comp.sensitivity, s.alpha)
                grid = agg.grid if agg.kind in VALUE_KINDS and comp.label != "count" else 1.0
                if comp.label == "centered squares":
                    grid = grid * grid
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




def _quantiles(plan: CountPlan, exact, idx, noisy: list, subjects, rng) -> list:
    """Fill in the quantile aggregates: the exponential mechanism on each cell's sorted values.

    One partition of subjects (the plan refuses rules that combine several); the mechanism runs
    at the partition's ε times the aggregate's share. The error bar is a rank bound, not an
    interval of values, so the value columns carry no interval (the notes state the bound).
    """
    from dpgate.mechanisms.base import NoisyColumn

    out = list(noisy)
    for agg in plan.aggs:
        if agg.kind != QUANTILE:
            continue
        from dpgate.mechanisms import quantile as qmech
        run_eps = float(subjects.parts[0].epsilon) if subjects is not None else plan.epsilon
        eps = run_eps * agg.epsilon / plan.epsilon
        lo_i, hi_i = round(agg.lower / agg.grid), round(agg.upper / agg.grid)
        cells = [exact.components[(agg.index, "quantile")][0, i] for i in idx]
        picked = qmech.quantiles(cells, lo_i, hi_i, [agg.level], eps, agg.components[0].sensitivity, rng)[:, 0]
        values = np.array([float(v) * agg.grid for v in picked], dtype=float)
        none = np.array([None] * len(values), dtype=object)
        t = qmech.rank_error_bound(eps, agg.components[0].sensitivity, hi_i - lo_i + 1, plan.settings.alpha, agg.level)
        desc = (
            f"exponential mechanism on ranks (sensitivity {agg.components[0].sensitivity}, ε={eps:.4g}, "
            f"{hi_i - lo_i + 1:,} grid points): with {release.confidence_label(plan.settings.alpha)} probability the value's rank "
            f"is within {t:,} rows of the true {agg.level:g}-quantile's"
        )
        out[agg.index] = NoisyColumn(values, none, none, False, "exponential (quantile)", eps, desc)
    return out


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



QUERY_CLASS = CountingQuery()
