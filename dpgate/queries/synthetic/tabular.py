"""Tabular synthesizers: MST (the default), PrivBayes and independent columns.

Plan (public facts only): the columns and their code spaces (``coding.coding_for``: declared
domains, integer and real bounds cut into ``bins`` equi-width bins; a column with neither is
refused), the mechanism's parameters, the charge. Run, after the debit:

1. the rows of the charged subjects, at most ``max_rows`` per subject (a keyed random choice, as
   in the counting class), encoded in one DuckDB pass;
2. the model (``mechanisms.mst``, ``mechanisms.privbayes`` or independent columns) at
   ``ε / max_rows``: one subject's rows are at most ``max_rows`` added or removed tuples, and the
   model is ε-DP per tuple (group privacy);
3. sampling and decoding (post-processing), written as an ordinary table in schema ``main``
   together with its row in the release registry, in one transaction.

Under the ``sample`` (default), ``threshold`` and ``minimum`` personalization rules the model is
fit to the charged subjects at the rule's ε; the number of rows written is the model's DP row
estimate scaled to everyone with budget, unless ``rows`` is given.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import duckdb
import numpy as np

from dpgate import backends, errors, mechanisms
from dpgate.backends.charged import bind
from dpgate.catalog import releases as registry
from dpgate.frontend.classify import Classified
from dpgate.frontend.dialect import to_sql
from dpgate.frontend.settings import Session, Spec
from dpgate.mechanisms import mst, pdp, privbayes
from dpgate.mechanisms.base import CodedRows, spend
from dpgate.plans import SubjectCharge, SynthesisPlan
from dpgate.queries.synthetic import coding as synthesis
from dpgate.queries.synthetic import options as synthetic_options
from dpgate.queries.synthetic.common import Release, release_name, run_epsilon, subject_rows_sql
from dpgate.release import Answer

DEFAULT_BINS = 16
#: Options of the mechanism (the rest are the usual DP options listed in GENERAL).
SYNTHESIS_OPTIONS: dict[str, Spec] = {
    "degree": Spec("int", "PrivBayes degree k (default: chosen by θ-usefulness)", 0, None),
    "theta": Spec("float", "θ of θ-usefulness", 0.0, None, low_open=True),
    "score": Spec("str", "network score", choices=("r", "f", "mi")),
    "beta": Spec("float", "share of ε spent on the network", 0.0, 1.0, low_open=True),
    "encoding": Spec("str", "encoding of non-binary attributes", choices=("vanilla", "binary", "gray")),
    "rows": Spec("int", "rows to write (default: the model's DP row estimate)", 1, 10_000_000),  # sampled after the debit: a bound on its memory and time
    "bins": Spec("int", "equi-width bins per numeric column", 2, 1025),
    "columns": Spec("str", "comma-separated columns to synthesize (default: all but the privacy unit)"),
}
#: The options of MST and of the independent-columns model (no network parameters).
COLUMN_OPTIONS = ("rows", "bins", "columns")
GENERAL = ("epsilon", "personalization", "max_rows_contributed", "privacy_unit_column")


@dataclass(frozen=True)
class _Model:
    """What differs between the tabular synthesizers: their options, how the plan's options become
    the mechanism's, and how the model is described."""

    specs: dict[str, Spec]
    options: Callable[[dict], dict]  # the plan's options from the statement's own options
    #: the mechanism's options at a roster's size (and, in the dry run, a row estimate)
    fit_options: Callable[[SynthesisPlan, int, float | None], dict]
    model_row: Callable[[SynthesisPlan], str]  # EXPLAIN's description of the model
    shape: Callable[[Any, list[str]], str]  # the answer's note on the fitted model


def _privbayes_options(own: dict) -> dict:
    return {
        "degree": own.get("degree"),
        "theta": own.get("theta", 4.0),
        "score": own.get("score", "r").upper(),
        "beta": own.get("beta", 0.3),
        "encoding": own.get("encoding", "vanilla"),
    }


def _privbayes_fit_options(plan: SynthesisPlan, population: int, noisy_rows: float | None) -> dict[str, Any]:
    o = plan.options
    return {
        "degree": o["degree"],
        "theta": o["theta"],
        "score": o["score"],
        "beta": o["beta"],
        "encoding": o["encoding"],
        "max_rows": max(1, population * plan.max_rows) if o["score"] == "MI" else None,
        "row_bound": max(1, population * plan.max_rows),  # public: bounds the network search's work
        "noisy_rows": noisy_rows,  # the dry run fixes the row estimate that sets the degree
    }


def _mst_row(plan: SynthesisPlan) -> str:
    d = len(plan.codings)
    if d == 1:
        return "1 column: its noisy 1-way marginal (discrete Laplace)"
    lo, hi = mst.ONE_WAY_SHARES
    return (f"{d} column(s): ε×{mst.ROWS_SHARE:g} for a noisy row count that sets the split; of the rest "
            f"{hi:.0%} to {lo:.0%} (more when rows × ε / columns is small) for every column's noisy 1-way "
            f"marginal, then 1 : 4 between choosing up to {d - 1} pairs of columns that form a tree "
            f"(exponential mechanism) and measuring their 2-way marginals (discrete Laplace); the tables "
            f"are made consistent, then sampled along the tree")  # fmt: skip


def _independent_row(plan: SynthesisPlan) -> str:
    d = len(plan.codings)
    return (f"{d} column(s), each sampled from its own noisy 1-way marginal at ε/{d} (discrete Laplace): "
            f"no correlations between columns are kept")  # fmt: skip


def _privbayes_row(plan: SynthesisPlan) -> str:
    o, d = plan.options, len(plan.codings)
    degree = f"degree {o['degree']}" if o["degree"] is not None else f"degree by θ-usefulness (θ={o['theta']:g})"
    return (f"{d} column(s), {degree}, score {o['score']}, encoding {o['encoding']}, β={o['beta']:g}: "
            f"ε×{privbayes.ROWS_SHARE:g} noisy row count, then ε×{o['beta']:g} for the network "
            f"(exponential mechanism per attribute) and the rest for noisy marginals (discrete Laplace)")  # fmt: skip


def _privbayes_shape(model, names: list[str]) -> str:
    return (f"network: {len(model.network)} attribute(s), degree {model.degree}, score {model.score}, "
            f"encoding {model.encoding}")  # fmt: skip


def _mst_shape(model, names: list[str]) -> str:
    pairs = [f"{names[p[0]]}–{names[x]}" for x, p in model.network if p]
    kind = "a tree over all columns" if len(pairs) == len(names) - 1 else "a forest: the other columns independent"
    return f"{len(pairs)} measured pair(s) of columns ({kind}): " + (", ".join(pairs) if pairs else "none")


def _independent_shape(model, names: list[str]) -> str:
    return f"independent columns: {len(names)} noisy 1-way marginal(s)"


_COLUMNS_ONLY = {k: SYNTHESIS_OPTIONS[k] for k in COLUMN_OPTIONS}
MODELS = {
    "mst": _Model(_COLUMNS_ONLY, lambda own: {"split": "by noisy row count"}, lambda plan, population, noisy_rows: {},
                  _mst_row, _mst_shape),
    "privbayes": _Model(SYNTHESIS_OPTIONS, _privbayes_options, _privbayes_fit_options, _privbayes_row,
                        _privbayes_shape),
    "independent": _Model(_COLUMNS_ONLY, lambda own: {}, lambda plan, population, noisy_rows: {}, _independent_row,
                          _independent_shape),
}  # fmt: skip
LABELS = {"mst": "MST", "privbayes": "PrivBayes", "independent": "independent columns"}


# -- planning ------------------------------------------------------------------------------------
def planner(mechanism: str) -> Callable[..., SynthesisPlan]:
    def plan(classified: Classified, catalog, session: Session) -> SynthesisPlan:
        stmt = classified.statement
        table = classified.protected
        model = MODELS[mechanism]
        settings, own = synthetic_options.parse(stmt, table, session, model.specs, GENERAL, mechanism)
        name = release_name(stmt.this, catalog)
        bins = own.get("bins", DEFAULT_BINS)
        columns = _columns(own.get("columns"), table)
        codings = tuple(synthesis.coding_for(table.columns[c], bins=bins) for c in columns)
        max_rows = settings.max_rows or table.max_rows
        return SynthesisPlan(
            table=table,
            settings=settings,
            statement_sql=to_sql(stmt),
            name=name,
            mechanism=mechanism,
            codings=codings,
            options=model.options(own),
            rows=own.get("rows"),
            rows_option=True,
            bins=bins,
            max_rows=max_rows,
            charge=SubjectCharge(settings.personalization, settings.epsilon, 0.0),
            notes=tuple(
                [f"{max_rows} row(s) per subject: the model runs at ε/{max_rows} (group privacy)"] if max_rows > 1 else []
            ),
        )

    return plan


def _columns(option: str | None, table) -> list[str]:
    if option is None:
        return [c for c in table.columns if c != table.unit]
    names = [c.strip().lower() for c in option.split(",") if c.strip()]
    if not names:
        raise errors.ProgrammingError("columns lists no column", code="DP286", hint="columns = 'age, sex, income'")
    for c in names:
        if c not in table.columns:
            raise errors.ProgrammingError(
                f"{table.name} has no column {c!r}", code="DP218", hint=f"columns are: {', '.join(table.columns)}"
            )
        if c == table.unit:
            raise errors.PolicyError(
                f"{c} is the privacy unit: it identifies subjects and is never synthesized", code="DP211",
                hint="leave it out of columns",
            )  # fmt: skip
    if len(set(names)) != len(names):
        raise errors.ProgrammingError("columns repeats a column", code="DP286", hint="name each column once")
    return names


def _fit(plan: SynthesisPlan, data: CodedRows, epsilon: float, *, population: int, rng, progress=None,
         noisy_rows: float | None = None):  # fmt: skip
    options = MODELS[plan.mechanism].fit_options(plan, population, noisy_rows)
    syn = mechanisms.synthesizer(plan.mechanism).synthesize(data, epsilon=epsilon, rng=rng, options=options,
                                                            progress=progress)  # fmt: skip
    # ε-DP per tuple, and one subject is at most max_rows tuples: group privacy multiplies [bound].
    spend(syn.epsilon * plan.max_rows, what=f"{plan.mechanism} (ε={syn.epsilon:.6g} per row × {plan.max_rows} rows)")
    return syn.release


def dry_run(plan: SynthesisPlan, eps: float) -> None:
    """Fit to an empty table at ``eps`` (the statement's, or the one its personalization rule leaves
    it): every refusal of the mechanism's parameters happens here, free."""
    sizes = [c.size for c in plan.codings]
    try:
        empty = CodedRows(np.zeros((0, len(sizes)), dtype=np.int64), tuple(sizes))
        _fit(plan, empty, eps / plan.max_rows, population=1,
             rng=np.random.default_rng(0), noisy_rows=1.0)  # fmt: skip
    except (errors.DataError, errors.NotSupportedError, ValueError) as e:
        # a sampler's own refusal (ε per cell below its floor) is a ValueError: free here, not after the debit
        message, hint = (e.message, e.hint) if isinstance(e, errors.Error) else (str(e), None)
        at = "" if eps == plan.epsilon else f" at ε={eps:.3g}, what the personalization rule leaves this release"
        raise errors.ProgrammingError(
            f"{LABELS[plan.mechanism]} cannot run with these parameters{at}: {message}",
            code="DP275" if not isinstance(e, errors.Error) or e.code == "DP275" else "DP287",
            hint=hint or "raise epsilon or lower max_rows_contributed, or change the WITH (...) options",
        ) from e  # fmt: skip


# -- running -------------------------------------------------------------------------------------
def source_sql(plan: SynthesisPlan, charged: str, salt: int) -> str:
    """The charged subjects' rows, at most ``max_rows`` each (keyed random choice) [bound]."""
    return subject_rows_sql(plan.table, [c.name for c in plan.codings], plan.max_rows, charged, salt)


def bind_check(con: duckdb.DuckDBPyConnection, plan: SynthesisPlan, charged: str) -> None:
    bind(con, synthesis.encode_query(source_sql(plan, charged, 0), list(plan.codings)))  # a Spark table's stub too
    if backends.engine_of(plan.table) == "spark":  # and Spark must run its own coding statement
        from dpgate.queries.synthetic.coding_spark import coded_rows_sql

        backends.plane("spark").check_release(plan, partial(coded_rows_sql, plan, 0))


def coded_rows(con: duckdb.DuckDBPyConnection, plan: SynthesisPlan, charged: str, salt: int) -> CodedRows:
    """The charged subjects' rows as codes, at most ``max_rows`` each [bound], read where the rows
    are, as each distinct coded row and its count (the synthesizers' marginals are the same weighted
    counts; rows in lexicographic order on both engines, so the same rows give the same input)."""
    sizes = tuple(c.size for c in plan.codings)
    if backends.engine_of(plan.table) == "spark":
        from dpgate.backends.spark.plane import counted_rows
        from dpgate.queries.synthetic.coding_spark import coded_rows_sql

        found = backends.plane("spark").release_rows(con, plan, partial(coded_rows_sql, plan, salt), charged)
        codes, counts = counted_rows(found, len(sizes))
    else:
        names = ", ".join(f"__c{j}" for j in range(len(sizes)))
        encoded = synthesis.encode_query(source_sql(plan, charged, salt), list(plan.codings))
        grouped = synthesis.fetch_codes(con, f"SELECT {names}, count(*) AS __n FROM ({encoded}) GROUP BY ALL")
        codes, counts = grouped[:, :-1], grouped[:, -1]  # a row with a NULL code has none: fetch_codes drops it
    order = np.lexsort(codes.T[::-1]) if len(sizes) else np.arange(len(codes))  # engines group in no fixed order
    return CodedRows(np.ascontiguousarray(codes[order]), sizes, counts[order])


def answer(
    con: duckdb.DuckDBPyConnection, plan: SynthesisPlan, debit, analyst: str, *, rng: np.random.Generator,
    sampling: np.random.Generator | None = None,
    progress: Callable[[float, str], None] | None = None,
) -> Answer:  # fmt: skip
    """Fit, sample and publish; the debit has been made."""

    def report(fraction: float, message: str) -> None:
        if progress is not None:
            progress(min(1.0, max(0.0, fraction)), message)

    run_eps = run_epsilon(debit, "a synthetic release")
    subjects = debit.subjects
    fit_eps = run_eps / plan.max_rows
    report(0.0, f"reading {plan.table.name}")
    salt = int(rng.integers(0, 2**62))
    codes = coded_rows(con, plan, debit.charged, salt)
    population = subjects.population  # public: the roster, never the rows
    model = _fit(plan, codes, fit_eps, population=population, rng=rng, progress=lambda f, m: report(0.05 + 0.8 * f, m))
    del codes
    scale = pdp.population_scale(subjects, 1.0, 0.25)
    n_rows = plan.rows if plan.rows is not None else max(0, int(round(model.noisy_rows * scale)))
    if plan.rows is None:  # no more rows than the roster may hold (public; the release caps assume it):
        n_rows = min(n_rows, population * plan.max_rows)  # at a small ε the noisy estimate runs to millions
    report(0.88, f"sampling {n_rows:,} rows")
    sampling = rng if sampling is None else sampling  # post-processing: its own stream
    synth = privbayes.sample(model, n_rows, rng=sampling)
    report(0.95, f"writing {plan.name}")
    names = [c.name for c in plan.codings]
    parameters = {
        "options": plan.options,
        "bins": plan.bins,
        "rows_option": plan.rows,
        "max_rows": plan.max_rows,
        "personalization": plan.charge.rule,
        "epsilon_model": fit_eps,
        "codings": [synthesis_coding_dict(c) for c in plan.codings],
        "charges": [list(c) for c in model.charges],
        "network": model.describe(names),
    }
    with registry.transaction(con):
        written = synthesis.write_table(con, plan.name, list(plan.codings), synth, rng=sampling)
        registry.record(
            con, entry_id=debit.entry_id, name=plan.name, kind="synthetic table", sources=[plan.table.name],
            mechanism=plan.mechanism, parameters=parameters, epsilon=debit.epsilon, delta=0.0, analyst=analyst,
            row_count=written,
        )  # fmt: skip
    report(1.0, "done")
    shape = MODELS[plan.mechanism].shape(model, names)
    notes = [
        f"{shape}; ε {fit_eps:.4g} for the model",
        f"{plan.name} is public from now on: queries over it are free (SHOW RELEASES lists its lineage)",
    ]
    if scale != 1.0 and plan.rows is None:
        notes.append("the row count is scaled from the sampled subjects to everyone with budget")
    message = f"CREATE SYNTHETIC TABLE {plan.name}: {written:,} rows, {len(names)} columns ({LABELS[plan.mechanism]})"
    return Answer([], [], [], [], {}, notes, message=message, released_rows=written)


def synthesis_coding_dict(c: synthesis.ColumnCoding) -> dict[str, Any]:
    return {
        "name": c.name, "sql_type": c.sql_type, "kind": c.kind, "values": list(c.values) if c.values else None,
        "lower": c.lower, "upper": c.upper, "bins": c.bins, "null_code": c.null_code, "temporal": c.temporal,
    }  # fmt: skip


def coding_from_dict(d: dict[str, Any]) -> synthesis.ColumnCoding:
    return synthesis.ColumnCoding(
        name=d["name"], sql_type=d["sql_type"], kind=d["kind"], values=tuple(d["values"]) if d["values"] else None,
        lower=d["lower"], upper=d["upper"], bins=d["bins"], null_code=d["null_code"], temporal=d.get("temporal"),
    )  # fmt: skip


def explain_rows(plan: SynthesisPlan, subjects=None) -> list[tuple]:
    model = ("model", plan.mechanism, plan.fit_epsilon, 0.0, None, None, MODELS[plan.mechanism].model_row(plan))
    rows = [
        model,
        ("release", None, None, None, None, None,
         f"{plan.rows:,} rows" if plan.rows is not None else "as many rows as the model's DP row estimate"),
    ]  # fmt: skip
    for c in plan.codings:
        rows.append((f"column {c.name}", None, None, None, None, None, f"{c.sql_type}: {c.describe()}"))
    rows.append(("bounding", None, None, None, None, None,
                 f"at most {plan.max_rows} row(s) per subject, sampled at random; numeric values clamped to their bounds"))  # fmt: skip
    for note in plan.notes:
        rows.append(("note", None, None, None, None, None, note))
    return rows


def _release(mechanism: str) -> Release:
    return Release(name=mechanism, plan=planner(mechanism), dry_run=dry_run,
                   bind_check=bind_check, answer=answer, explain_rows=explain_rows)  # fmt: skip


MST = _release("mst")
PRIVBAYES = _release("privbayes")
INDEPENDENT = _release("independent")
