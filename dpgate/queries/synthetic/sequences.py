"""``CREATE SYNTHETIC TABLE trips_syn FROM trips USING privtree_markov WITH (...)``: sequences.

The protected table holds (subject, position, symbol) rows: a subject's rows ordered by the
position column are one sequence over the symbol column's **declared domain**. The release
(``mechanisms.privtree.sequence_release``) is a private prediction suffix tree (a variable-order
Markov model, thesis §4.3) and synthetic sequences sampled from it.

Plan (public facts only): the position and symbol columns (``position`` / ``symbol`` options,
or the table's only orderable column and only column with a domain), the truncation length
l⊤ (``max_length``; default the table's ``max_rows`` + 1: the rows a subject may have and the end
marker), the model's
parameters. Run, after the debit: the charged subjects' first l⊤ rows by position (their
symbol mapped to the domain; rows with a symbol outside it are dropped), the model at the
rule's ε (one subject = one sequence), then post-processing: ``rows`` sequences (default: the
model's own estimate of how many there are) sampled into ``name`` (unit, position, symbol) and
the model itself as ``name_model`` (context, next symbol, noisy count). Both are public.
"""

from __future__ import annotations

from functools import partial

import duckdb
import numpy as np

from dpgate import backends, errors, mechanisms
from dpgate.backends.charged import bind
from dpgate.catalog import releases as registry
from dpgate.catalog.tables import Catalog, quote_ident
from dpgate.frontend.classify import Classified
from dpgate.frontend.dialect import to_sql
from dpgate.frontend.settings import Session, Spec
from dpgate.mechanisms import privtree
from dpgate.mechanisms.base import spend
from dpgate.plans import SubjectCharge, SynthesisPlan
from dpgate.queries.synthetic import options
from dpgate.queries.synthetic.coding import domain_lookup, values_list
from dpgate.queries.synthetic.common import Release, named, require_free_name, run_epsilon
from dpgate.release import Answer

#: Symbols a release samples at most (rows × max_length): sampling runs in Python, about 150,000
#: symbols a second here, after the debit; 10,000,000 rows of up to 10,000 symbols would hold a
#: server's worker for days.
MAX_SYMBOLS = 5_000_000
#: Symbols a model may have: a context that splits makes |I| + 1 children of |I| + 1 cells each, so
#: one split at 256 symbols is 66,049 cells; the tree's cell cap
#: (``privtree.MAX_MODEL_CELLS``) bounds the whole model.
MAX_ALPHABET = 256

OPTIONS: dict[str, Spec] = {
    "position": Spec("str", "the column that orders a subject's rows"),
    "symbol": Spec("str", "the column of symbols (needs a declared domain)"),
    "max_length": Spec("int", "truncation length l⊤ (symbols plus the end marker; default the table's max_rows + 1)", 1, 10_000),
    "rows": Spec("int", "sequences to sample (default: the model's estimate)", 1, 10_000_000),
}  # fmt: skip
GENERAL = ("epsilon", "personalization", "privacy_unit_column")


_q = quote_ident


def plan(classified: Classified, catalog: Catalog, session: Session, name: str) -> SynthesisPlan:
    stmt = classified.statement
    table = classified.protected
    settings, own = options.parse(stmt, table, session, OPTIONS, GENERAL, "privtree_markov")
    others = [c for c in table.columns if c != table.unit]
    with_domain = [c for c in others if table.columns[c].domain]
    symbol = own.get("symbol", "").strip().lower() or (with_domain[0] if len(with_domain) == 1 else None)
    if symbol is None or symbol not in table.columns or symbol == table.unit:
        raise errors.ProgrammingError(
            "Say which column holds the symbols", code="DP286",
            hint=f"WITH (symbol = '{with_domain[0] if with_domain else 'state'}', position = '...')",
        )  # fmt: skip
    domain = table.columns[symbol].domain
    if not domain:
        raise errors.PolicyError(f"{table.name}.{symbol} has no declared domain: the alphabet must be public",
                                 code="DP312", hint=f"the owner declares it ([tables.{table.name}.columns.{symbol}] domain = [...])")  # fmt: skip
    rest = [c for c in others if c != symbol]
    position = own.get("position", "").strip().lower() or (rest[0] if len(rest) == 1 else None)
    if position is None or position not in table.columns or position in (table.unit, symbol):
        raise errors.ProgrammingError("Say which column orders a subject's rows", code="DP286",
                                      hint=f"WITH (position = '{rest[0] if rest else 'month'}')")  # fmt: skip
    require_free_name(catalog, f"{name}_model", "choose another name: the release writes NAME and NAME_model")
    values = tuple(v for v in domain if v is not None)
    max_length = own.get("max_length", table.max_rows + 1)  # a subject's rows and the end marker
    rows = own.get("rows")
    if rows is not None and rows * max_length > MAX_SYMBOLS:
        raise errors.UnsupportedQueryError(
            f"rows = {rows:,} sequences of up to {max_length:,} symbols would be up to {rows * max_length:,} "
            f"symbols; a release samples at most {MAX_SYMBOLS:,}", code="DP266",
            hint=f"ask for at most rows = {MAX_SYMBOLS // max_length:,} (or a smaller max_length); nothing was charged",
        )  # fmt: skip
    if len(values) > MAX_ALPHABET:
        raise errors.UnsupportedQueryError(
            f"{len(values):,} symbols: the model's fan-out would be {len(values) + 1:,} (at most {MAX_ALPHABET + 1})",
            code="DP284", hint=f"declare at most {MAX_ALPHABET} symbols (group rare ones into one); nothing was charged",
        )  # fmt: skip
    return SynthesisPlan(
        table=table, settings=settings, statement_sql=to_sql(stmt), name=name, mechanism="privtree_markov",
        codings=(), options={"symbol": symbol, "position": position, "symbols": values, "max_length": max_length},
        rows=own.get("rows"), bins=0, max_rows=max_length, rows_option=True, rows_each=max_length,
        # a row: the unit (BIGINT), the position, the symbol; NAME_model: a row a (node, next symbol), the
        # root's and at most as many more as the release's rows (the model stops growing there, ``answer``)
        row_types=("BIGINT", "INTEGER", (table.columns[symbol].type, values)),
        side_sizes=((None, _model_types(table.columns[symbol].type, values, CONTEXT_RESERVED)),
                    (len(values) + 1, _model_types(table.columns[symbol].type, values, 0))),
        charge=SubjectCharge(settings.personalization, settings.epsilon, 0.0),
        notes=(f"each subject's first {max_length - 1} row(s) by {position} and the end (a longer sequence is "
               f"truncated to {max_length} without its end)",),
    )  # fmt: skip


def source_sql(plan: SynthesisPlan, charged: str) -> str:
    """(sequence number, position 1.., symbol number) of the charged subjects' first l⊤ rows."""
    t = plan.table
    o = plan.options
    lookup = domain_lookup(o["symbols"], t.columns[o["symbol"]].type)  # never casts the column [domain-join]
    rows = (
        f"SELECT __s.{_q(t.unit)} AS __unit, __s.{_q(o['position'])} AS __pos, __d.i AS __sym "
        f"FROM main.{_q(t.name)} __s JOIN (SELECT DISTINCT unit FROM {charged}) __c ON __s.{_q(t.unit)} = __c.unit "
        f"JOIN ({lookup}) __d ON __s.{_q(o['symbol'])} = __d.v"
    )
    ranked = (f"SELECT __unit, __sym, row_number() OVER (PARTITION BY __unit ORDER BY __pos NULLS LAST, __sym) AS k "
              f"FROM ({rows})")  # fmt: skip
    return (f"SELECT dense_rank() OVER (ORDER BY __unit) - 1 AS r, k, __sym FROM ({ranked}) "
            f"WHERE k <= {int(o['max_length'])} ORDER BY r, k")  # fmt: skip  (a row past l⊤ − 1 only drops the end)


def dry_run(plan: SynthesisPlan, epsilon: float) -> None:
    """The Markov model over no sequences at ``epsilon``: its parameters and the root's noise at that ε."""
    _synthesize(plan, [], epsilon, np.random.default_rng(0))


#: The context symbols reserved for each row of NAME_model beyond the root's: the model stops growing
#: within ``(1 + CONTEXT_RESERVED)`` cells a reserved row (a cell a row and each of its context's
#: symbols, ``privtree.sequence_release``), so contexts up to this long on average fit.
CONTEXT_RESERVED = 3


def _model_types(symbol_type: str, symbols: tuple, context: int) -> tuple:
    """NAME_model's columns, as its widths are counted against the release caps (``_write``): node,
    context (``context`` symbols), from_start, depth, is_leaf, next (a symbol), count."""
    symbol = (symbol_type, symbols)
    return ("BIGINT", ("LIST", context, symbol), "BOOLEAN", "BIGINT", "BOOLEAN", symbol, "DOUBLE")


def _synthesize(plan: SynthesisPlan, sequences: list, epsilon: float, rng,
                max_rows: int | None = None, max_cells: int | None = None) -> privtree.SequenceModel:  # fmt: skip
    options = {"n_symbols": len(plan.options["symbols"]), "max_length": plan.options["max_length"],
               "max_rows": max_rows, "max_cells": max_cells}  # fmt: skip
    syn = mechanisms.synthesizer("privtree_markov").synthesize(sequences, epsilon=epsilon, rng=rng, options=options)
    spend(syn.epsilon, what="privtree_markov")
    return syn.release


def spark_sql(plan: SynthesisPlan, source: str, units: str) -> str:
    """``source_sql`` for a table in Spark (``SparkPlane.release_rows``): each charged subject's
    (unit, position 1.., symbol number) rows, its first l⊤ in position order [bound]; the symbols
    joined with the declared alphabet, never cast [domain-join]. Spark orders positions as DuckDB
    does (NULL last, NaN above every number, text by its bytes); equal positions by symbol."""
    from dpgate.queries.synthetic import coding_spark

    t, o = plan.table, plan.options
    lookup = coding_spark.lookup_sql(o["symbols"], t.columns[o["symbol"]].type)
    unit, pos, sym = (coding_spark.quoted(c) for c in (t.unit, o["position"], o["symbol"]))
    rows = (
        f"SELECT __s.{unit} AS __unit, __s.{pos} AS __pos, __d.i AS __sym FROM {source} __s "
        f"JOIN {units} __c ON __s.{unit} = __c.unit JOIN ({lookup}) __d ON __s.{sym} = __d.v"
    )
    ranked = (f"SELECT __unit, __sym, row_number() OVER (PARTITION BY __unit ORDER BY __pos NULLS LAST, __sym) "
              f"AS __k FROM ({rows}) __r")  # fmt: skip
    return f"SELECT __unit, __k, __sym FROM ({ranked}) __x WHERE __k <= {int(o['max_length'])}"


def read_sequences(con, plan: SynthesisPlan, charged: str) -> list[np.ndarray]:
    """The charged subjects' sequences of symbol numbers (in their units' order), each at most l⊤
    long, read where the rows are (the database file or Spark)."""
    if backends.engine_of(plan.table) == "spark":
        found = backends.plane("spark").release_rows(con, plan, partial(spark_sql, plan), charged)
        from dpgate.queries.synthetic.coding_spark import record_numbers

        r = record_numbers(found.column("__unit"))
        if not len(r):
            return []
        k, sym = (np.asarray(found.column(c).to_numpy(), dtype=np.int64) for c in ("__k", "__sym"))
        order = np.lexsort((k, r))  # by unit, then position: Spark returns them in no order
        r, sym = r[order], sym[order]
    else:
        got = con.execute(source_sql(plan, charged)).fetchnumpy()
        r, sym = np.asarray(got["r"], dtype=np.int64), np.asarray(got["__sym"], dtype=np.int64)
    cuts = np.flatnonzero(np.diff(r)) + 1 if len(r) else np.array([], dtype=np.int64)
    return np.split(sym, cuts) if len(r) else []


def bind_check(con: duckdb.DuckDBPyConnection, plan: SynthesisPlan, charged: str) -> None:
    bind(con, source_sql(plan, charged))  # a Spark table's stub too
    if backends.engine_of(plan.table) == "spark":  # and Spark must run its own statement
        backends.plane("spark").check_release(plan, partial(spark_sql, plan))


def answer(con, plan: SynthesisPlan, debit, analyst: str, *, rng: np.random.Generator,
           sampling: np.random.Generator, progress=None) -> Answer:  # fmt: skip
    eps = run_epsilon(debit, "a sequence model")
    o = plan.options
    sequences = read_sequences(con, plan, debit.charged)
    # NAME_model writes a row a (node, next symbol) with its context: beyond the root's, the model stops
    # within the rows and context symbols its release reserved (a stop that reads only the tree released
    # so far, as at MAX_MODEL_CELLS)
    root = len(o["symbols"]) + 1
    reserved = debit.release_rows
    max_rows = None if reserved is None else root + reserved
    max_cells = None if reserved is None else root + (1 + CONTEXT_RESERVED) * reserved
    model = _synthesize(plan, sequences, eps, rng, max_rows, max_cells)
    del sequences
    n = plan.rows if plan.rows is not None else model.expected_sequences()
    if plan.rows is None:  # one sequence a subject: no more than the roster (public) holds; at a small ε
        n = min(n, debit.subjects.population)  # the noisy estimate ran to millions (30 s of sampling)
    cap = MAX_SYMBOLS // int(o["max_length"])
    capped = plan.rows is None and n > cap  # the model's estimate (post-processing): sample at most the cap
    synthetic = model.sample(min(n, cap), sampling)
    _write(con, plan, model, synthetic, debit, analyst, eps)
    p = privtree.sequence_parameters(eps, len(o["symbols"]), o["max_length"])
    notes = [
        f"model: {len(model.contexts):,} contexts ({int(model.leaf.sum()):,} leaves, longest "
        f"{max(len(c) for c in model.contexts)}); λ = {p['lambda']:.4g}, δ = {p['delta']:.4g}; histograms with "
        f"noise of scale {p['hist_scale']:.4g}",
        f"{len(synthetic):,} synthetic sequences in {plan.name}; the model in {plan.name}_model; both are public "
        "from now on",
    ]
    if model.stopped:
        at = f"{privtree.MAX_MODEL_CELLS:,} cells (a release's work is bounded)"
        if max_cells is not None and max_cells < privtree.MAX_MODEL_CELLS:
            at += f" or {max_rows:,} model rows with {max_cells:,} cells (what your release caps allow)"
        notes.append(f"the tree stopped growing within {at}: at this ε PrivTree would extend some of the longest "
                     "contexts further")  # fmt: skip
    if capped:
        notes.append(f"the model estimates {n:,} sequences; {cap:,} were sampled (at most {MAX_SYMBOLS:,} symbols "
                     "a release); sample more from the model table if needed")  # fmt: skip
    message = f"CREATE SYNTHETIC TABLE {plan.name}: {len(synthetic):,} sequences (PrivTree Markov model)"
    return Answer([], [], [], [], {}, notes, message=message, released_rows=sum(len(s) for s in synthetic))


def _write(con, plan: SynthesisPlan, model: privtree.SequenceModel, synthetic: list[list[int]], debit, analyst: str,
           eps: float) -> None:  # fmt: skip
    from dpgate.queries.synthetic.coding import relation_exists

    t, o = plan.table, plan.options
    name, model_name = plan.name, f"{plan.name}_model"
    for nm in (name, model_name):
        if relation_exists(con, nm):
            raise errors.ProgrammingError(f"A table or view named {nm!r} already exists", code="DP226",
                                          hint="choose another name: the release writes NAME and NAME_model")  # fmt: skip
    sym_type = t.columns[o["symbol"]].type
    domain = f"({values_list(o['symbols'], sym_type)})"
    units = [i + 1 for i, s in enumerate(synthetic) for _ in s]
    positions = [k + 1 for s in synthetic for k in range(len(s))]
    symbols = [x for s in synthetic for x in s]
    node, ctx, start, depth, leaf, nxt, cnt = [], [], [], [], [], [], []
    k = len(o["symbols"])
    for v, c in enumerate(model.contexts):
        body = [x for x in c if x != privtree.START]
        for x in range(k + 1):
            node.append(v), ctx.append(body), start.append(bool(c) and c[0] == privtree.START)
            depth.append(len(c)), leaf.append(bool(model.leaf[v])), nxt.append(x if x < k else None)
            cnt.append(float(model.hist[v][x]))
    with registry.transaction(con):
        con.execute(
            f"CREATE TABLE main.{_q(name)} AS SELECT CAST(u AS BIGINT) AS {_q(t.unit)}, CAST(p AS INTEGER) AS "
            f"{_q(o['position'])}, {domain}[s + 1] AS {_q(o['symbol'])} "
            "FROM (SELECT unnest($1) AS u, unnest($2) AS p, unnest($3) AS s) ORDER BY 1, 2",
            [units, positions, symbols],
        )
        con.execute(
            f"CREATE TABLE main.{_q(model_name)} AS SELECT n AS node, list_transform(c, lambda x: {domain}[x + 1]) "
            f"AS context, st AS from_start, d AS depth, l AS is_leaf, CASE WHEN x IS NULL THEN NULL ELSE "
            f"{domain}[x + 1] END AS next, cnt AS count FROM (SELECT unnest($1) AS n, unnest($2) AS c, "
            "unnest($3) AS st, unnest($4) AS d, unnest($5) AS l, unnest($6) AS x, unnest($7) AS cnt) ORDER BY n, x NULLS LAST",
            [node, ctx, start, depth, leaf, nxt, cnt],
        )  # fmt: skip
        parameters = {
            "symbol": o["symbol"], "position": o["position"], "max_length": o["max_length"], "epsilon_run": eps,
            "personalization": plan.charge.rule, "contexts": len(model.contexts), "sequences": len(synthetic),
            "extra_tables": [model_name],
        }  # fmt: skip
        registry.record(
            con, entry_id=debit.entry_id, name=name, kind="synthetic table", sources=[t.name],
            mechanism="privtree_markov", parameters=parameters, epsilon=debit.epsilon, delta=0.0, analyst=analyst,
            row_count=len(units),
        )  # fmt: skip


def explain_rows(plan: SynthesisPlan, subjects=None) -> list[tuple]:
    o = plan.options
    p = privtree.sequence_parameters(plan.epsilon, len(o["symbols"]), o["max_length"])
    return [
        ("model", "privtree_markov", plan.epsilon, 0.0, None, None,
         f"prediction suffix tree over {len(o['symbols'])} symbols of {plan.table.name}.{o['symbol']} ordered by "
         f"{o['position']} (fan-out β = {p['beta']}): ε/β = {p['epsilon_tree']:.4g} for the tree (λ = {p['lambda']:.4g}, "
         f"δ = {p['delta']:.4g}, θ = 0, score = total − largest next-symbol count), the rest for the leaf "
         f"histograms (discrete Laplace, sensitivity l⊤ = {o['max_length']})"),
        ("release", None, None, None, None, None,
         f"{plan.name} ({plan.table.unit}, {o['position']}, {o['symbol']}): "
         + (f"{plan.rows:,} sampled sequences" if plan.rows is not None else "as many sequences as the model estimates")
         + f"; {plan.name}_model: context, next symbol (NULL: the end), noisy count"),
    ]  # fmt: skip


RELEASE = Release(name="privtree_markov", plan=named(plan), dry_run=dry_run,
                  bind_check=bind_check, answer=answer, explain_rows=explain_rows, side_tables=("_model",),
                  scales_sample=False)  # fmt: skip
