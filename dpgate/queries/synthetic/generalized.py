"""``CREATE SYNTHETIC TABLE g FROM t USING supermodular WITH (...)``: EXPERIMENTAL generalized release.

Each kept record is written as one node per column of the owner's value generalization
hierarchies (``catalog.hierarchies``): a label such as ``25-29``, ``College`` or ``*``. The
mechanism (``mechanisms.supermodular``, Fouad, Elbassioni and Bertino, TKDE 2014) claims
(ε, δ)-DP but the paper does not prove it (and its δ is of order max|a⁺| / |D|, not the paper's
h^k / |D|²: see the mechanism's docstring), so the release runs only on tables where the owner
set ``experimental = true``, charges the declared δ (the ``delta`` option, else the session's),
refuses it free when that δ cannot cover the random threshold's proved leak at the roster's size,
and says "experimental: (ε, δ) claimed by the paper, δ not verified" in EXPLAIN, in its notes
and in SHOW RELEASES. It runs under personalization 'threshold' (at exactly the ε asked).

Plan (public facts only): the columns (``columns``, default every column with a declared
hierarchy) and their trees — a column with a declared domain and no tree gets the flat one
(value or ``*``) — and the mechanism's parameters; all refusals happen here or in the free
check before the debit (below: the size of the count matrix and the size conditions at the
roster's size, an upper bound of the rows). Run, after the debit: the charged subjects' rows, one per subject (``max_rows`` must be 1:
the paper's unit is one record), each value mapped to its leaf (values outside a tree to
``*``) in one DuckDB pass; a discrete-Laplace row count (``supermodular.ROWS_SHARE`` of ε)
whose lower confidence bound must meet the paper's size conditions, else only the ``*`` row
is released; then Algorithm 2. The release is ``g`` (one row per kept record plus the ``*``
row, shuffled, VARCHAR labels) and ``g_hierarchy`` (every label with its parent, level and the
leaves it covers), both public from then on and in the registry.
"""

from __future__ import annotations

import dataclasses
import math
import secrets

import duckdb
import numpy as np
from sqlglot import exp

from dpgate import database, errors, mechanisms, noise
from dpgate.backends.charged import bind
from dpgate.catalog import hierarchies as vgh
from dpgate.catalog import releases as registry
from dpgate.catalog import reports
from dpgate.catalog import tables as catalog_types
from dpgate.catalog.tables import Catalog, quote_ident
from dpgate.frontend.classify import Classified
from dpgate.frontend.dialect import to_sql
from dpgate.frontend.settings import Session, Spec
from dpgate.mechanisms import supermodular
from dpgate.mechanisms.base import spend
from dpgate.plans import SubjectCharge, SynthesisPlan
from dpgate.queries.synthetic import options
from dpgate.queries.synthetic.common import Release, named, require_free_name, run_epsilon, subject_rows_sql
from dpgate.release import Answer

OPTIONS: dict[str, Spec] = {
    "columns": Spec("str", "comma-separated columns to generalize (default: those with a declared hierarchy)"),
    "beta": Spec("float", "probability a record is left out (default e^(−ε/2); must exceed e^−ε)", 0.0, 1.0,
                 low_open=True),
    "theta0": Spec("float", "least frequency threshold: released cells cover ≥ θ·|D| records, θ ∈ (θ0, 1)",
                   0.0, 1.0, low_open=True),
    "lambda": Spec("float", "λ: weight of the risk term λ·|ρ(x)|/Φ(x) against the utility u(x)^κ", 0.0,
                   supermodular.MAX_LAMBDA, low_open=True),
    "kappa": Spec("int", "κ: power of the utility term", 1, 16),
}  # fmt: skip
GENERAL = ("epsilon", "delta", "personalization", "max_rows_contributed", "privacy_unit_column")
DEFAULT_THETA0 = 0.05


_q = quote_ident


def plan(classified: Classified, catalog: Catalog, session: Session, name: str) -> SynthesisPlan:
    stmt = classified.statement
    table = classified.protected
    settings, own = options.parse(stmt, table, session, OPTIONS, GENERAL, "supermodular")
    # The mechanism's parameters (β > e^−ε, the size conditions) must hold at the ε it runs at, known
    # before the debit: under 'threshold' that is the ε asked (subjects with less are left out);
    # 'sample' and 'minimum' may run at less when budgets are low.
    if "personalization" in settings.explicit and settings.personalization != "threshold":
        raise errors.UnsupportedQueryError(
            f"USING supermodular runs under personalization 'threshold'; '{settings.personalization}' could run "
            "it at a smaller ε than its parameters were checked for", code="DP274",
            hint="drop the personalization option (threshold is used: subjects with less than ε left are left out)",
        )  # fmt: skip
    settings = dataclasses.replace(settings, personalization="threshold")
    max_rows = settings.max_rows or table.max_rows
    if max_rows != 1:
        raise errors.PolicyError(
            f"{table.name} keeps up to {max_rows} rows per subject; the supermodular release's unit is one record",
            code="DP281", hint="add max_rows_contributed = 1 to WITH (...): one row per subject, chosen at random",
        )  # fmt: skip
    delta = settings.delta
    if not delta > 0:
        raise errors.ProgrammingError(
            "USING supermodular claims (ε, δ)-DP and needs δ > 0", code="DP287",
            hint="WITH (delta = 1e-6, ...) or SET dp_delta = 1e-6",
        )  # fmt: skip
    opts = {
        "status": supermodular.CLAIM,
        "beta": own.get("beta"),  # None: e^(−ε/2) at the run's ε
        "theta0": own.get("theta0", DEFAULT_THETA0),
        "lambda": own.get("lambda", 1.0),
        "kappa": own.get("kappa", 1),
        "trees": _trees(own.get("columns"), table),
    }
    try:
        _parameters(opts, settings.epsilon)
    except errors.DataError as e:
        raise errors.ProgrammingError(f"supermodular cannot run with these parameters: {e.message}",
                                      code="DP275" if e.code == "DP275" else "DP287",
                                      hint=e.hint or "change the WITH (...) options") from e  # fmt: skip
    require_free_name(catalog, f"{name}_hierarchy", "choose another name: the release writes NAME and NAME_hierarchy")
    trees = opts["trees"]
    every = [x for h in trees for x in h.labels]
    covered = sum(len(leaves) for h in trees for leaves in h.leaves_under())
    return SynthesisPlan(
        table=table, settings=settings, statement_sql=to_sql(stmt), name=name, mechanism="supermodular", codings=(),
        options=opts, rows=None, bins=0, max_rows=1,
        # a row a kept record and the '*' row: each column's label (``_write``); NAME_hierarchy: every label of
        # every column's hierarchy with its column, parent, level and the leaves it covers
        row_types=tuple(("VARCHAR", h.labels) for h in trees), rows_extra=1,
        side_sizes=((len(every), (("VARCHAR", [h.column for h in trees]), ("VARCHAR", every), ("VARCHAR", every),
                                  "INTEGER", "LIST")),
                    (1, (("LIST", covered, ("VARCHAR", every)),))),  # the leaves each label covers, in all
        charge=SubjectCharge(settings.personalization, settings.epsilon, delta),
        notes=(supermodular.CLAIM,
               "personalization 'threshold': subjects with less than the ε asked left are left out"),
    )  # fmt: skip


def _trees(option: str | None, table) -> list[vgh.Hierarchy]:
    declared = table.hierarchies()
    if option is None:
        names = [c for c in table.columns if c in declared]
        if not names:
            raise errors.PolicyError(
                f"{table.name} has no declared generalization hierarchy", code="DP328",
                hint=f"the owner declares them ([tables.{table.name}.columns.<column>] hierarchy = ...), or name "
                     "columns with declared domains: WITH (columns = 'sex, income')",
            )  # fmt: skip
    else:
        names = [c.strip().lower() for c in option.split(",") if c.strip()]
        if not names or len(set(names)) != len(names):
            raise errors.ProgrammingError("columns must name each column once", code="DP286",
                                          hint="columns = 'age, education, sex'")  # fmt: skip
    out = []
    for c in names:
        if c not in table.columns:
            raise errors.ProgrammingError(f"{table.name} has no column {c!r}", code="DP218",
                                          hint=f"columns are: {', '.join(table.columns)}")  # fmt: skip
        if c == table.unit:
            raise errors.PolicyError(f"{c} is the privacy unit: it is never released", code="DP211",
                                     hint="leave it out of columns")  # fmt: skip
        col = table.columns[c]
        if catalog_types.is_temporal_type(col.type):
            raise errors.PolicyError(f"{table.name}.{c} is {col.type}: generalization hierarchies are not supported for it",
                                     code="DP327", hint="leave it out of columns")  # fmt: skip
        if c in declared:
            tree = declared[c]
            if tree.kind == "intervals" and not catalog_types.is_numeric_type(col.type):
                raise errors.PolicyError(
                    f"{table.name}.{c} is {col.type} now, but its hierarchy is a numeric ladder", code="DP327",
                    hint="the owner declares the column's hierarchy again",
                )  # fmt: skip
            out.append(tree)
            continue
        if col.domain is None:
            raise errors.PolicyError(
                f"{table.name}.{c} has neither a generalization hierarchy nor a declared domain", code="DP328",
                hint=f"the owner declares one ([tables.{table.name}.columns.{c}] hierarchy = ...), or leave it out",
            )  # fmt: skip
        flat = [v for v in col.domain if v is not None]
        out.append(vgh.build(f"{table.name}.{c}", c, flat, sql_type=col.type, numeric=False, integer=False,
                             domain=col.domain, bounds=None))  # fmt: skip
    return out


# -- running -------------------------------------------------------------------------------------
def source_sql(plan: SynthesisPlan, charged: str, salt: int) -> str:
    """Each charged subject's row (one, at random) as leaf nodes; interval columns as DOUBLE."""
    t = plan.table
    trees: list[vgh.Hierarchy] = plan.options["trees"]
    inner = subject_rows_sql(t, [h.column for h in trees], 1, charged, salt)
    cols = []
    for j, h in enumerate(trees):
        c = _q(h.column)
        # TRY_CAST everywhere: no cast can fail on a row (a column whose type the owner changed after
        # declaring its tree maps its values to '*' instead of failing for some rows after the debit).
        if h.kind == "intervals":
            cols.append(f"coalesce(TRY_CAST({c} AS DOUBLE), 'NaN'::DOUBLE) AS __c{j}")
            continue
        typ = t.columns[h.column].type
        whens = []
        for node, value in h.leaf_values:
            if value is None:
                whens.insert(0, f"WHEN {c} IS NULL THEN {node}")
            else:
                whens.append(f"WHEN {c} = TRY_CAST({exp.convert(value).sql(dialect='duckdb')} AS {typ}) THEN {node}")
        cols.append(f"CASE {' '.join(whens)} ELSE 0 END AS __c{j}")
    return f"SELECT {', '.join(cols)} FROM ({inner})"


def fetch_leaves(con: duckdb.DuckDBPyConnection, plan: SynthesisPlan, charged: str, salt: int) -> np.ndarray:
    trees: list[vgh.Hierarchy] = plan.options["trees"]
    got = con.execute(source_sql(plan, charged, salt)).fetchnumpy()
    cols = []
    for j, h in enumerate(trees):
        v = got[f"__c{j}"]
        v = np.ma.filled(v, np.nan) if np.ma.isMaskedArray(v) else np.asarray(v)
        cols.append(vgh.leaf_of_numbers(h, v) if h.kind == "intervals" else np.asarray(v, dtype=np.int64))
    n = len(cols[0]) if cols else 0
    return np.stack(cols, axis=1) if cols else np.zeros((n, 0), dtype=np.int64)


def dry_run(plan: SynthesisPlan, epsilon: float) -> None:
    """The mechanism's parameters at ``epsilon`` (its size condition is checked against the roster)."""
    _parameters(plan.options, epsilon)


def bind_check(con: duckdb.DuckDBPyConnection, plan: SynthesisPlan, charged: str) -> None:
    """The bind check, and what the roster's size (public; |D| is at most it) already rules out, free."""
    bind(con, source_sql(plan, charged, 0))
    (roster,) = con.execute(f"SELECT count(*) FROM {plan.table.roster_table_sql}").fetchone()
    params = _parameters(plan.options, plan.settings.epsilon)
    trees: list[vgh.Hierarchy] = plan.options["trees"]
    cells = supermodular.max_cells(params, [len(t.leaf_values) for t in trees], int(roster))
    if cells > supermodular.MAX_CELLS:
        raise errors.UnsupportedQueryError(
            f"up to {cells:,} (distinct records × generalizations) counts to hold, above the cap of "
            f"{supermodular.MAX_CELLS:,}", code="DP266", hint="generalize fewer columns, or declare flatter hierarchies",
        )  # fmt: skip
    _require_rows(plan, int(roster), f"{plan.table.name} has {roster:,} subjects")


def check_size(plan: SynthesisPlan, population: int, epsilon: float) -> None:
    """In the debit's transaction: the subjects who pay, and so are read (at most one record each;
    not those the threshold rule leaves out), must meet the size conditions. ``bind_check`` tested
    the whole roster; with most subjects' budgets spent the release would run on fewer records
    than it needs and release only the '*' row, charged. (The conditions are at the plan's ε, so
    ``epsilon``, the run's, is not read.)"""
    _require_rows(plan, population, f"{population:,} subjects of {plan.table.name} have the budget for this release")


def _require_rows(plan: SynthesisPlan, count: int, subjects: str) -> None:
    """Refuse (free) when ``count`` records cannot meet the size conditions at the plan's ε and δ."""
    params = _parameters(plan.options, plan.settings.epsilon)
    condition, need = _need(params, plan.charge.delta, plan.settings.epsilon)
    if count < need:
        raise errors.ProgrammingError(
            f"{subjects}; at δ = {plan.charge.delta:g} this release needs at least {math.ceil(need):,} rows "
            f"(condition: {condition}), so it would release only the '*' row", code="DP287",
            hint=_need_hint(params, plan.charge.delta, count) + "; nothing was charged",
        )  # fmt: skip


def _refusal_row(plan: SynthesisPlan, params, need: float, subjects) -> list[tuple]:
    """When the subjects (at most one row each) cannot meet the conditions: the free refusal to expect."""
    population = getattr(subjects, "used", None)  # the subjects whose records it reads (not the ones left out)
    if population is None or population >= need:
        return []
    return [("refused", None, None, None, None, None,
             f"at δ = {plan.charge.delta:g} it would be refused: {population:,} subjects, fewer than the rows needed; "
             + _need_hint(params, plan.charge.delta, int(population)))]  # fmt: skip


def _need_hint(params: supermodular.Parameters, delta: float, roster: int) -> str:
    """What would be accepted: the δ the random threshold needs at the roster's size, and the other levers."""
    smallest = 2 * params.threshold_delta(roster)
    return (f"the random frequency threshold alone leaks with probability up to {smallest / 2:.3g} at {roster:,} "
            f"records, so δ must be at least {smallest:.3g} here; or generalize fewer columns, or raise theta0 "
            "toward 0.5")  # fmt: skip


def _parameters(o: dict, run_eps: float) -> supermodular.Parameters:
    """The mechanism's parameters from a plan's options, at the ε the release runs at (minus the row count's)."""
    eps_mech = run_eps * (1.0 - supermodular.ROWS_SHARE)
    return supermodular.parameters(eps_mech, [t.height for t in o["trees"]], beta=o["beta"], theta0=o["theta0"],
                                   lam=o["lambda"], kappa=o["kappa"])  # fmt: skip


def _margin(run_eps: float, delta: float) -> int:
    """w with P(Z ≥ w) ≤ δ/4 for the row count's discrete Laplace noise: n̂ − w ≤ |D| but rarely."""
    a = noise.discrete_laplace_alpha(run_eps * supermodular.ROWS_SHARE, 1)
    return max(1, math.ceil(math.log(delta / 4 * (1 + a)) / math.log(a)))


def _need(params: supermodular.Parameters, delta: float, run_eps: float) -> tuple[str, float]:
    """(the binding condition, the least noisy row count that meets every condition)."""
    conditions = params.min_rows(delta)
    name = max(conditions, key=conditions.get)
    return name, conditions[name] + _margin(run_eps, delta)


def answer(con: duckdb.DuckDBPyConnection, plan: SynthesisPlan, debit, analyst: str, *,
           rng: np.random.Generator, sampling: np.random.Generator, progress=None) -> Answer:  # fmt: skip
    run_eps = run_epsilon(debit, "a generalized release")
    params = _parameters(plan.options, run_eps)
    delta = plan.charge.delta
    trees: list[vgh.Hierarchy] = plan.options["trees"]
    salt = int(rng.integers(0, 2**62))
    leaves = fetch_leaves(con, plan, debit.charged, salt)
    rows_eps = run_eps * supermodular.ROWS_SHARE
    spend(rows_eps, what="noisy row count")
    n_noisy = int(len(leaves) + noise.discrete_laplace(rows_eps, 1, 1, rng)[0])
    condition, need = _need(params, delta, run_eps)
    notes: list[str] = []  # the plan's note states the claim
    if n_noisy < need:
        rows = np.zeros((1, len(trees)), dtype=np.int64)  # only the all-suppressed row
        # Charged and not run: the mechanism's share (and the δ) is reported as the debited share, named so.
        spend(params.epsilon, delta, what="supermodular (too few rows: not run)")
        notes.append(f"the noisy row count {n_noisy:,} is below the {math.ceil(need):,} rows this release needs "
                     f"(condition: {condition}; with a margin for the count's noise): only the '*' row is released")  # fmt: skip
    else:
        ancestors = [t.ancestors() for t in trees]
        mech = mechanisms.synthesizer("supermodular", allow_unvetted=True)  # the owner's flag was checked at planning
        syn = mech.synthesize(leaves, epsilon=params.epsilon, delta=delta, rng=rng,
                              options={"ancestors": ancestors, "params": params})  # fmt: skip
        spend(syn.epsilon, delta, what="supermodular")
        rows = syn.release
    del leaves
    written, loss = _write(con, plan, rows, debit, analyst, params, n_noisy)
    notes += [
        f"{written - 1:,} generalized record(s) and the '*' row; each released cell covers at least θ0 = "
        f"{params.theta0:g} of the records; records kept with probability 1 − β = {1 - params.beta:.3g}",
        f"ε {params.epsilon:.4g} for the mechanism (ε′ = {params.eps1:.3g}), {run_eps * supermodular.ROWS_SHARE:.3g} "
        f"for the noisy row count {n_noisy:,}; δ {delta:g} charged as claimed",
        f"{plan.name} and {plan.name}_hierarchy are public from now on: queries over them are free",
        reports.describe_loss(loss),
    ]
    if params.eps1 >= 1:
        notes.append(f"ε′ = {params.eps1:.3g} is outside the paper's range (0, 1)")
    message = (f"CREATE SYNTHETIC TABLE {plan.name}: {written:,} generalized rows, {len(trees)} columns "
               f"(supermodular, EXPERIMENTAL)")  # fmt: skip
    return Answer([], [], [], [], {}, notes, message=message, released_rows=written)


def _write(con, plan: SynthesisPlan, rows: np.ndarray, debit, analyst: str, params, n_noisy: int) -> tuple[int, dict]:
    """The release, its hierarchy table and the registry row, in one transaction; and the release's
    information loss, read in that transaction from the tables just written (what Owner.quality
    reports; read later, a table replaced meanwhile would be measured instead)."""
    from dpgate.queries.synthetic.coding import _create

    trees: list[vgh.Hierarchy] = plan.options["trees"]
    name, tree_name = plan.name, f"{plan.name}_hierarchy"
    data = {f"__v{j}": rows[:, j].astype(np.int64) + 1 for j in range(len(trees))}
    selects = []
    for j, h in enumerate(trees):
        labels = "[" + ", ".join("NULL" if x is None else exp.convert(x).sql(dialect="duckdb") for x in h.labels) + "]"
        selects.append(f"CAST(({labels})[__v{j}] AS VARCHAR) AS {_q(h.column)}")
    column, label, parent, level, covers = [], [], [], [], []
    for h in trees:
        depth, under = h.depth, h.leaves_under()
        for node, lab in enumerate(h.labels):
            column.append(h.column)
            label.append(lab)
            parent.append(h.labels[h.parent[node]] if node else None)
            level.append(int(depth[node]))
            covers.append([h.labels[x] for x in under[node]])
    view = f"__dp_release_{secrets.token_hex(8)}"
    with registry.transaction(con):
        database.register(con, view, data)
        try:
            _create(con, name, f"CREATE TABLE main.{_q(name)} AS SELECT {', '.join(selects)} FROM {view}")
        finally:
            con.unregister(view)
        _create(con, tree_name,
                f"CREATE TABLE main.{_q(tree_name)} AS SELECT unnest($1::VARCHAR[]) AS column_name, "
                "unnest($2::VARCHAR[]) AS label, unnest($3::VARCHAR[]) AS parent, unnest($4::INTEGER[]) AS level, "
                "unnest($5::VARCHAR[][]) AS covers", [column, label, parent, level, covers])  # fmt: skip
        o = plan.options
        parameters = {
            "options": {"status": o["status"], "beta": round(params.beta, 6), "theta0": params.theta0,
                        "lambda": params.lam, "kappa": params.kappa, "delta": plan.charge.delta},
            "columns": [h.column for h in trees], "hierarchies": {h.column: h.describe() for h in trees},
            "epsilon_mechanism": params.epsilon, "epsilon_prime": params.eps1, "noisy_rows": n_noisy,
            "personalization": plan.charge.rule, "extra_tables": [tree_name],
        }  # fmt: skip
        registry.record(
            con, entry_id=debit.entry_id, name=name, kind="synthetic table", sources=[plan.table.name],
            mechanism="supermodular", parameters=parameters, epsilon=debit.epsilon, delta=plan.charge.delta,
            analyst=analyst, row_count=len(rows),
        )  # fmt: skip
        loss = reports.generalization_loss(con, name, [h.column for h in trees])
    return int(len(rows)), loss


def explain_rows(plan: SynthesisPlan, subjects=None) -> list[tuple]:
    o = plan.options
    trees: list[vgh.Hierarchy] = o["trees"]
    params = _parameters(plan.options, plan.settings.epsilon)
    beta = "e^(−ε/2)" if o["beta"] is None else f"{o['beta']:g}"
    condition, need = _need(params, plan.charge.delta, plan.settings.epsilon)
    rows = [
        ("model", "supermodular", plan.epsilon, plan.charge.delta, None, None,
         f"{supermodular.CLAIM}. Fouad et al. 2014, Algorithm 2 (exact): each record kept with probability 1 − β "
         f"(β = {beta} = {params.beta:.4g}), θ uniform in ({params.theta0:g}, 1), each kept record becomes one of "
         f"its generalizations covering ≥ θ·|D| records, drawn ∝ exp(ε′·f/|D|), f = λ|ρ|/Φ + u^κ (λ = "
         f"{params.lam:g}, κ = {params.kappa}, ε′ = {params.eps1:.3g}); ε×{supermodular.ROWS_SHARE:g} for a noisy "
         "row count that checks the paper's size conditions"),
        ("conditions", None, None, None, None, None,
         f"needs a noisy row count ≥ {math.ceil(need):,} (binding: {condition}); below it only the '*' row "
         "is released"),
        *_refusal_row(plan, params, need, subjects),
        ("release", None, None, None, None, None,
         f"{plan.name} (one row per kept record plus the '*' row, labels) and {plan.name}_hierarchy"),
    ]  # fmt: skip
    for h in trees:
        rows.append((f"column {h.column}", None, None, None, None, None, "hierarchy: " + h.describe()))
    rows.append(("bounding", None, None, None, None, None, "one row per subject, chosen at random"))
    return rows


RELEASE = Release(name="supermodular", plan=named(plan), dry_run=dry_run,
                  bind_check=bind_check, answer=answer, explain_rows=explain_rows, check_size=check_size,
                  side_tables=("_hierarchy",), scales_sample=False)  # fmt: skip
