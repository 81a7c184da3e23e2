"""Top-k queries: from a ``TopKPlan`` to released rows.

The pipeline stages (docs/layout.md) for the top-k class, after the ledger's debit:

1. the *pairs* relation, generated SQL (never the analyst's text): one row per distinct
   (subject, item) over the subjects the ledger charged, an item being a cell's position in
   the public universe (the product of the GROUP BY keys' domains, or the table's 0/1
   columns). Keys outside the universe are dropped; items are matched by a hash join on the
   domain values with ``IS NOT DISTINCT FROM`` (NULL is a value like any other);
2. when the keys have no public domain, DP key selection first (``mechanisms.keyselection``)
   over per-key subject counts, each subject keeping at most ``max_groups`` keys (a keyed
   random choice); the keys it releases become the universe;
3. the selection (``mechanisms.topk``), at its share of ε;
4. if the query shows the count: fresh discrete-Laplace counts of the selected items
   (``topk.noisy_counts``), scaled like the counting class when the personalization rule
   sampled or left out subjects;
5. post-processing: the analyst's projections, ORDER BY and LIMIT / OFFSET over ``__noisy``
   (selected items, their counts, their rank), as in ``release``.

Under the personalization rules ``sample``, ``threshold`` and ``minimum`` the selection runs
over the charged subjects at the rule's ε (``subjects.parts[0]``); each subject's guarantee
is then the rule's (``mechanisms.pdp``).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace
from typing import Any

import duckdb
import numpy as np
from sqlglot import exp

from dpgate import backends, database, errors, noise
from dpgate.backends.charged import bind, restrict_to_charged
from dpgate.catalog.tables import is_numeric_type
from dpgate.frontend.classify import TOPK_COLUMNS_FUNCTION, Classified, function_name
from dpgate.frontend.dialect import to_duckdb
from dpgate.mechanisms import pdp
from dpgate.mechanisms import topk as topk_mech
from dpgate.mechanisms.base import COUNT_ROWS, COUNT_SUBJECTS, Component, NoisyColumn, metered, spend
from dpgate.mechanisms.keyselection import KeySelector
from dpgate.mechanisms.pairs import SQLPairs
from dpgate.plans import KeySpec, SubjectCharge, TopKPlan
from dpgate.queries.analysis import Analysis, Syntax, analyse, key_selection_threshold
from dpgate.queries.base import Context, QueryClass, Run, _subject_rows, personalization_notes
from dpgate.release import Answer, ColumnNoise, check_post, noisy_rows

_ids = itertools.count(1)


# -- SQL -----------------------------------------------------------------------------------------
def _charged_join(charged: str) -> str:
    """Keep the charged subjects: a hash join built on the (smaller) set of charged units."""
    return f"JOIN (SELECT DISTINCT unit FROM {charged}) __c ON __s.__unit = __c.unit"


#: Integer key types whose every value fits a BIGINT.
_BIGINT_SAFE = {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT", "UINTEGER"}


def _pairs_from_domains(plan: TopKPlan, charged: str, params: dict[str, Any]) -> str:
    """Distinct (unit, cell position) over the product of the keys' public domains."""
    src = restrict_to_charged(plan.source, plan.table, charged)
    sizes = [len(k.domain) for k in plan.keys]
    joins, terms, conds = [], [], []
    for j, key in enumerate(plan.keys):
        stride = math.prod(sizes[j + 1 :])
        if key.source == "integer bounds" and key.sql_type.upper() in _BIGINT_SAFE:
            # The domain is lo .. hi of a type that fits BIGINT: the position is arithmetic, and
            # no value can make the cast fail (TRY_CAST all the same).
            lo, hi = key.domain[0], key.domain[-1]
            conds.append(f"__s.__k{j} BETWEEN {lo} AND {hi}")
            pos = f"(TRY_CAST(__s.__k{j} AS BIGINT) - {lo})"
        else:
            domain_sql, params[f"d{j}"] = database.typed_list(f"d{j}", list(key.domain), key.sql_type)
            joins.append(
                f"JOIN (SELECT unnest({domain_sql}) AS __v, unnest(range({sizes[j]})) AS __i) "
                f"__d{j} ON __s.__k{j} IS NOT DISTINCT FROM __d{j}.__v"
            )
            pos = f"__d{j}.__i"
        terms.append(f"{pos} * {stride}" if stride != 1 else pos)
    distinct = "" if plan.distinct_by_schema else "DISTINCT "
    where = f" WHERE {' AND '.join(conds)}" if conds else ""
    return (
        f"SELECT {distinct}__s.__unit, {' + '.join(terms)} AS __item FROM ({src}) __s {' '.join(joins)} "
        f"{_charged_join(charged)}{where}"
    )


def _pairs_from_keys(plan: TopKPlan, charged: str, params: dict[str, Any], selected: list[tuple]) -> str:
    """Distinct (unit, index) over an explicit list of key tuples (those key selection released)."""
    src = restrict_to_charged(plan.source, plan.table, charged)
    cols = []
    for j, key in enumerate(plan.keys):
        key_sql, params[f"s{j}"] = database.typed_list(f"s{j}", [t[j] for t in selected], key.sql_type)
        cols.append(f"unnest({key_sql}) AS __v{j}")
    cols.append(f"unnest(range({len(selected)})) AS __i")
    on = " AND ".join(f"__s.__k{j} IS NOT DISTINCT FROM __u.__v{j}" for j in range(len(plan.keys)))
    distinct = "" if plan.distinct_by_schema else "DISTINCT "
    return (
        f"SELECT {distinct}__s.__unit, __u.__i AS __item FROM ({src}) __s "
        f"JOIN (SELECT {', '.join(cols)}) __u ON {on} {_charged_join(charged)}"
    )


def _pairs_from_columns(plan: TopKPlan, charged: str) -> str:
    """Distinct (unit, column index) where the subject has the 0/1 column set in some row."""
    types = {c.name: c.type.upper() for c in plan.table.columns.values()}
    flags = []
    for i, name in enumerate(plan.columns):
        col = '"' + name.replace('"', '""') + '"'
        cond = f"{col} IS TRUE" if types[name] == "BOOLEAN" else f"TRY_CAST({col} AS DOUBLE) <> 0"
        flags.append(f"CASE WHEN {cond} THEN {i} END")
    table = f'main."{plan.table.name}"'
    unit = '"' + plan.table.unit.replace('"', '""') + '"'
    return (
        f"SELECT DISTINCT __unit, __item FROM (SELECT __s.__unit, unnest([{', '.join(flags)}]) AS __item "
        f"FROM (SELECT {unit} AS __unit, * FROM {table} WHERE {unit} IS NOT NULL) __s "
        f"{_charged_join(charged)}) WHERE __item IS NOT NULL"
    )


def _key_subjects_sql(plan: TopKPlan, charged: str, salt: int) -> str:
    """Per key tuple: subjects holding it, each subject keeping at most ``max_groups`` keys [bound]."""
    src = restrict_to_charged(plan.source, plan.table, charged)
    keys = ", ".join(f"__k{j}" for j in range(len(plan.keys)))
    rank = f"hash(xor(hash(__unit, {keys}), {int(salt)}::UBIGINT))"
    distinct = (
        f"SELECT DISTINCT __s.__unit, {', '.join(f'__s.__k{j}' for j in range(len(plan.keys)))} FROM ({src}) __s "
        f"{_charged_join(charged)}"
    )
    # DISTINCT before QUALIFY: a subject keeps max_groups distinct keys, each equally likely.
    # The keys travel as text (see backends.duckdb [transport]): dropped keys never meet Python.
    as_text = ", ".join(f"CAST(__k{j} AS VARCHAR)" for j in range(len(plan.keys)))
    return (
        f"SELECT {as_text}, __n FROM (SELECT {keys}, count(*) AS __n FROM (SELECT * FROM ({distinct}) "
        f"QUALIFY row_number() OVER (PARTITION BY __unit ORDER BY {rank}, {keys}) <= {plan.max_groups}"
        f") GROUP BY ALL)"
    )


def bind_check(con: duckdb.DuckDBPyConnection, plan: TopKPlan, charged: str) -> None:
    """Bind (DESCRIBE) every statement the run sends, before anything is charged."""
    params: dict[str, Any] = {}
    if plan.columns:
        bind(con, _pairs_from_columns(plan, charged))
        _bind_post(con, plan)
        return
    check_post(con, plan, 2)  # the noisy score and its rank (HAVING n > 'abc')
    if plan.key_selection is None:
        bind(con, _pairs_from_domains(plan, charged, params), params)
        for name, values in params.items():  # the public domains must cast to the keys' types
            key = plan.keys[int(name[1:])]
            domain_sql, value = database.typed_list("v", list(key.domain), key.sql_type)
            bind(con, f"SELECT count(*) FROM (SELECT unnest({domain_sql}))", {"v": value}, public=True)
    else:
        bind(con, _key_subjects_sql(plan, charged, 0))
        bind(con, _pairs_from_keys(plan, charged, params, []), params)


# -- the run -------------------------------------------------------------------------------------
class _InFile:
    """The exact statistics of a top-k plan in the database file (the SQL above); the Spark plane's
    ``top_k`` offers the same (``backends.DataPlane``)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, plan: TopKPlan, charged: str):
        self.con, self.plan, self.charged = con, plan, charged

    def __enter__(self) -> _InFile:
        return self

    def __exit__(self, *exc) -> None:
        return None

    def key_subjects(self, salt: int) -> list[tuple]:
        return self.con.execute(_key_subjects_sql(self.plan, self.charged, salt)).fetchall()

    def pairs(self, labels: list[tuple] | None = None) -> SQLPairs:
        plan, params = self.plan, {}
        if plan.columns:
            return SQLPairs(self.con, _pairs_from_columns(plan, self.charged))
        if plan.key_selection is None:
            return SQLPairs(self.con, _pairs_from_domains(plan, self.charged, params), params)
        return SQLPairs(self.con, _pairs_from_keys(plan, self.charged, params, labels or []), params)


def _exact(con: duckdb.DuckDBPyConnection, plan: TopKPlan, charged: str):
    """Where the plan's rows are: the database file, or the data plane of their engine."""
    engine = backends.engine_of(plan.table)
    if engine == "duckdb":
        return _InFile(con, plan, charged)
    return backends.plane(engine).top_k(con, plan, charged)


def answer(
    con: duckdb.DuckDBPyConnection, plan: TopKPlan, charged: str, subjects: pdp.SubjectPlan | None, *, rng
) -> Answer:
    """Select, count (if shown) and post-process; the debit has been made."""
    with _exact(con, plan, charged) as exact:
        return _answer(con, plan, exact, subjects, rng=rng)


def _answer(con: duckdb.DuckDBPyConnection, plan: TopKPlan, exact, subjects: pdp.SubjectPlan | None, *, rng
) -> Answer:  # fmt: skip
    factor = _run_factor(plan, subjects)
    notes: list[str] = []
    if plan.columns:
        n_items = len(plan.columns)
        labels: list[Any] = list(plan.columns)
    elif plan.key_selection is None:
        n_items = plan.n_items
        labels = list(itertools.product(*[k.domain for k in plan.keys]))
    else:
        labels = _select_keys(exact, plan, factor, rng)
        notes.append(f"DP key selection released {len(labels)} key(s) to rank")
        if not labels:
            # Charged and not run (the mechanism's rule for a share it turns out not to need):
            # the loss reported is the debited share, named as such, so the check still balances.
            spend(plan.selection_epsilon * factor, what="top-k selection (no key to rank: not run)")
            if plan.counts is not None:
                spend(plan.counts.epsilon * factor, what="top-k counts (no key to rank: not run)")
            return _empty(con, plan, notes)
        most = topk_mech.item_cap(plan.k, plan.method)
        if len(labels) > most:  # post-processing of the released keys: the selection's work stays bounded
            keep = np.sort(rng.choice(len(labels), size=most, replace=False))
            labels = [labels[i] for i in keep.tolist()]
            notes.append(f"{most:,} of them, drawn at random, were ranked: a selection by {plan.method} takes at "
                         f"most {most:,} items at LIMIT {plan.k}")  # fmt: skip
        n_items = len(labels)
    pairs = exact.pairs(labels if plan.key_selection is not None else None)
    k = min(plan.k, n_items)
    if k < plan.k:
        notes.append(f"only {k} item(s) to choose from: fewer than LIMIT + OFFSET = {plan.k}")
    count_eps = plan.counts.epsilon * factor if plan.counts is not None else 0.0
    try:
        if plan.counts is None:
            chosen = topk_mech.select_top_k(pairs, n_items, k, plan.selection_epsilon * factor, plan.method, rng=rng)
            exact_noisy = None
        else:
            chosen, exact_noisy = topk_mech.select_top_k_with_counts(
                pairs, n_items, k, plan.selection_epsilon * factor, count_eps,
                plan.method, rng=rng, max_items_per_subject=plan.max_groups,
            )  # fmt: skip
            spend(count_eps, what="top-k counts")
    except ValueError as e:  # public inputs only (ε after personalization, k, universe size)
        raise errors.OperationalError(
            f"The top-k selection could not run: {e}", code="DP404",
            hint="the debit stands (fail closed); raise epsilon or ask for fewer items",
        ) from e  # fmt: skip
    for share, eps in chosen.shares.items():  # what the selection says it spent, step by step
        spend(eps, what=f"top-k {share}")
    items = list(chosen.items)
    if chosen.truncation is not None:
        notes.append(f"records truncated to {chosen.truncation} item(s) for the selection (chosen privately)")
    if chosen.filled:
        notes.append(f"{chosen.filled} item(s) filled in phase-1 order by the block mechanism")
    columns: dict[str, ColumnNoise] = {}
    count_col = None
    if exact_noisy is not None:
        count_col = _counts(plan, exact_noisy, len(items), subjects, factor)
    rank = np.arange(1, len(items) + 1, dtype=object)
    if count_col is None:
        # Not shown: a score that orders like the selection (ORDER BY <count> DESC), never output.
        score = NoisyColumn(len(items) - rank + 1, len(items) - rank + 1, len(items) - rank + 1, True, "", 0.0, "")
    else:
        score = count_col
    rank_col = NoisyColumn(rank, rank, rank, True, "", 0.0, "")
    selected = [labels[i] for i in items]
    if plan.columns:
        names, types, rows, intervals = _columns_rows(con, plan, selected, count_col)
        if count_col is not None:
            columns["count"] = ColumnNoise(count_col.mechanism, count_col.epsilon, count_col.scale)
    else:
        names, types, rows, intervals = noisy_rows(con, plan, selected, [score, rank_col], plan.settings.intervals)
        if count_col is not None:
            for out in plan.outputs:
                if out.agg == 0:
                    columns[out.name] = ColumnNoise(count_col.mechanism, count_col.epsilon, count_col.scale)
            intervals = [{k: v for k, v in iv.items() if k in columns} for iv in intervals]
        else:
            intervals = [{} for _ in rows]
    return Answer(names, types, rows, intervals, columns, notes)


def _select_keys(exact, plan: TopKPlan, factor: float, rng) -> list[tuple]:
    """DP key selection over per-key subject counts; the released keys, in a data-independent order."""
    salt = int(rng.integers(0, 2**62))
    rows = exact.key_subjects(salt)
    nk = len(plan.keys)
    ks = plan.key_selection
    selection = key_selection_threshold(ks.epsilon * factor, ks.delta, ks.sensitivity)
    subjects = np.array([int(r[nk]) for r in rows], dtype=np.int64)
    idx = KeySelector().select(subjects, selection, rng=rng)
    keys = [tuple(rows[i][:nk]) for i in idx]
    # The order of DuckDB's GROUP BY output depends on the data; shuffle with public randomness
    # so that ties in the later selection are broken without favouring that order.
    order = rng.permutation(len(keys))
    return [keys[i] for i in order]


def _counts(plan: TopKPlan, values: list[int], n_items: int, subjects, factor: float) -> NoisyColumn:
    """The noisy counts with their intervals, scaled like the counting class, clamped if asked."""
    comp = plan.counts
    eps = comp.epsilon * factor
    sens = min(n_items, plan.max_groups)
    alpha = plan.settings.alpha
    scale = pdp.population_scale(subjects, noise.discrete_laplace_std(eps, sens) ** 2, 0.25)
    desc = f"discrete Laplace, sensitivity {sens}, ε={eps:.4g} (subjects per item)"
    if scale != 1.0:
        # Scaled from a sample: the interval adds the sampling error and the bias bound of the
        # ratio estimate (one subject adds at most 1 to an item's count) [ci-extrapolation].
        half = noise.discrete_laplace_half_width(eps, sens, alpha / 2)
        sampling, bias = pdp.extrapolation(subjects, [scale], 1.0, alpha / 2)
        y = np.array([int(round(v * scale)) for v in values], dtype=object)
        half = int(math.ceil(half * scale + sampling + bias))
        desc += "; scaled to everyone with budget (sample rule)"
    else:
        half = noise.discrete_laplace_half_width(eps, sens, alpha)
        y = np.array(values, dtype=object)
    low, high = y - half, y + half
    if plan.settings.clamp_counts:
        y, low, high = (np.array([max(0, v) for v in a], dtype=object) for a in (y, low, high))
    return NoisyColumn(y, low, high, True, "laplace (subjects)", eps, desc)


# -- the wide-table form -------------------------------------------------------------------------
def _noisy_relation(plan: TopKPlan, with_counts: bool) -> str:
    cols = ["unnest(CAST($rank AS BIGINT[])) AS rank", "unnest(CAST($name AS VARCHAR[])) AS column_name"]
    if with_counts:
        cols.append("unnest(CAST($count AS BIGINT[])) AS count")
        if plan.settings.intervals:
            cols += ["unnest(CAST($lo AS BIGINT[])) AS count_ci_low", "unnest(CAST($hi AS BIGINT[])) AS count_ci_high"]
    return "SELECT " + ", ".join(cols)


def _bind_post(con, plan: TopKPlan) -> None:
    relation = _noisy_relation(plan, plan.counts is not None)
    used = {k: [] for k in ("rank", "name", "count", "lo", "hi") if f"${k}" in relation}
    bind(con, f"WITH __noisy AS ({relation}) {to_duckdb(plan.post)}", used)


def _columns_rows(con, plan: TopKPlan, selected: list[str], count_col: NoisyColumn | None):
    params: dict[str, Any] = {"rank": list(range(1, len(selected) + 1)), "name": list(selected)}
    if count_col is not None:
        params["count"] = [int(v) for v in count_col.values]
        if plan.settings.intervals:
            params["lo"] = [int(v) for v in count_col.low]
            params["hi"] = [int(v) for v in count_col.high]
    try:
        cur = con.execute(f"WITH __noisy AS ({_noisy_relation(plan, count_col is not None)}) {to_duckdb(plan.post)}", params)
        rows = cur.fetchall()
    except duckdb.Error as e:
        raise errors.ProgrammingError(
            f"Post-processing of the noisy answer failed: {str(e).splitlines()[0]}", code="DP231",
            hint="the query was charged; simplify the SELECT / ORDER BY expressions",
        ) from e  # fmt: skip
    names = [d[0] for d in cur.description]
    types = [str(d[1]) for d in cur.description]
    intervals: list[dict[str, tuple[Any, Any]]] = [{} for _ in rows]
    if count_col is not None and "count" in names and "column_name" in names:
        by_name = {n: (lo, hi) for n, lo, hi in zip(selected, count_col.low, count_col.high)}
        c = names.index("column_name")
        intervals = [{"count": by_name[r[c]]} if r[c] in by_name else {} for r in rows]
    return names, types, rows, intervals


def _empty(con, plan: TopKPlan, notes: list[str]) -> Answer:
    """No key survived key selection: the analyst's columns with no rows."""
    empty = NoisyColumn(np.array([], dtype=object), np.array([], dtype=object), np.array([], dtype=object), True, "", 0.0, "")
    names, types, rows, intervals = noisy_rows(con, plan, [], [empty, empty], plan.settings.intervals)
    return Answer(names, types, rows, intervals, {}, notes)


# -- the class -----------------------------------------------------------------------------------
class TopKQuery(QueryClass):
    """``GROUP BY keys ORDER BY COUNT(*) DESC LIMIT k`` and ``dp_top_k_columns(...)``."""

    name = "top_k"
    title = "top-k queries"
    plan_type = TopKPlan

    def recognises(self, classified: Classified, ctx: Context) -> bool:
        if classified.kind != "dp" or classified.protected.kind == "graph" or classified.joined or classified.per_subject:
            return False  # joins of protected tables are answered by the counting class
        if topk_columns_call(classified.statement) is not None:
            return True
        if classified.statement.find(exp.Limit, exp.Fetch) is None:
            return False  # the shape needs a LIMIT (``_topk_shape``): skip analysing the statement
        a = analyse(classified, ctx)
        return _topk_shape(a, a.syntax()) is not None

    def plan(self, classified: Classified, ctx: Context) -> TopKPlan:
        a = analyse(classified, ctx)
        q = classified.statement.copy()
        q.set("hint", None)
        if topk_columns_call(q) is not None:
            return _columns_topk_plan(a, q, to_duckdb(q))
        p = a.prepare()
        x = p.syntax
        shape = _topk_shape(a, x)
        return _topk_plan(a, x.q, p.base, p.key_specs, shape, x.projections, x.keys_exprs, x.aggs_nodes, x.original_sql)

    def check_at_debit(self, con: duckdb.DuckDBPyConnection, plan: TopKPlan, subjects) -> None:
        """In the debit's transaction, before anything is written: the selection runs at the ε the
        personalization plan leaves (``minimum`` can leave far less than asked: tps_pfm over 20,000
        items failed after the debit). A refusal here rolls the debit back: free."""
        factor = _run_factor(plan, subjects)
        _check_selection(plan.n_items or plan.k, plan.k, plan.selection_epsilon * factor, plan.method,
                         f"Top-k at ε={plan.epsilon * factor:.3g}, what the personalization rule leaves this query",
                         "raise epsilon, ask for fewer items, choose another topk_method, or use personalization "
                         "'threshold'; nothing was charged")  # fmt: skip

    def bind_check(self, con: duckdb.DuckDBPyConnection, plan: TopKPlan, probe: str) -> None:
        bind_check(con, plan, probe)  # a Spark table's stub binds too
        engine = backends.engine_of(plan.table)
        if engine != "duckdb":  # the rows live elsewhere: that engine must run every statement too
            backends.plane(engine).check_top_k(plan)

    def answer(self, run: Run) -> Answer:
        with metered() as spent:
            out = answer(run.con, run.plan, run.charged, run.subjects, rng=run.rng)
        out.consumed = tuple(spent)
        out.notes += personalization_notes(run.plan, run.subjects)
        return out

    def explain_rows(self, plan: TopKPlan, subjects) -> list[tuple]:
        return _subject_rows(plan, subjects) + _topk_explain_rows(plan)


# -- planning ------------------------------------------------------------------------------------
def _topk_shape(a: Analysis, x: Syntax) -> _TopKShape | None:
    """``GROUP BY keys ORDER BY <count> DESC LIMIT k [OFFSET o]`` with one unfiltered count.

    Near misses (another ORDER BY, no LIMIT, HAVING, several aggregates) are counting-class
    queries: every cell gets a noisy count and the ORDER BY / LIMIT is post-processing.
    """
    q, projections, aggs, agg_inputs = x.q, x.projections, x.aggs_nodes, x.agg_inputs
    if not x.keys_exprs or len(aggs) != 1 or q.args.get("having") is not None:
        return None
    kind, inp = agg_inputs[0]
    if kind not in (COUNT_ROWS, COUNT_SUBJECTS) or inp is not None:
        return None
    order, limit = q.args.get("order"), q.args.get("limit")
    if order is None or limit is None or not order.expressions or not order.expressions[0].args.get("desc"):
        return None
    text = aggs[0].sql(dialect="duckdb")
    target = order.expressions[0].this
    if isinstance(target, exp.Column) and not target.table:
        named = [p.this for p in projections if isinstance(p, exp.Alias) and p.alias.lower() == target.name.lower()]
        target = named[0] if named else target
    elif isinstance(target, exp.Literal) and not target.is_string and 1 <= int(target.this) <= len(projections):
        target = projections[int(target.this) - 1].unalias()
    if target.sql(dialect="duckdb") != text:
        return None
    shown = any(n.sql(dialect="duckdb") == text for p in projections for n in p.walk())
    offset = q.args.get("offset")
    k = _int_literal(limit.expression, "LIMIT")
    o = _int_literal(offset.expression, "OFFSET") if offset is not None else 0
    return _TopKShape(k, o, shown, kind)

def _topk_max_groups(s, table, k: int) -> int:
    """Items a subject may count for: the query's option, the owner's declaration, or, when the
    owner declared none, min(k, max_rows) — a cap that does not bias the k counts (a subject
    holds at most max_rows items, and only k are counted). Public either way."""
    if s.max_groups:
        return s.max_groups
    if table.max_groups_declared:
        return table.max_groups
    return max(table.max_groups, min(k, table.max_rows))


def _bias_note(max_groups: int, k: int, table) -> str | None:
    """Said with the counts when the cap can make them low (data-independent: k, the cap, the schema)."""
    if max_groups >= k or table.unique_unit:  # one row per subject: nobody holds two items
        return None
    return (f"each subject counts for at most {max_groups} of the {k} items, so the counts can be low "
            f"(contribution bounding); OPTIONS (max_groups_contributed = {k}) counts every item a subject holds")


def _topk_common(a: Analysis, k: int, n_items: int | None, what: str) -> None:
    s = a.settings
    if s.consistent and "consistent" in s.explicit:
        raise errors.UnsupportedQueryError(
            "consistent = true applies to tables of counts, not to a top-k selection", code="DP272",
            hint="drop consistent, or drop ORDER BY ... LIMIT to get the whole table",
        )  # fmt: skip
    if k < 1:
        raise errors.UnsupportedQueryError(
            "LIMIT 0 asks for no items", code="DP277", hint="ask for the top k with LIMIT k, k >= 1"
        )
    if n_items is not None and k > n_items:
        raise errors.UnsupportedQueryError(
            f"The query asks for the top {k} of {what}, which has only {n_items} item(s)",
            code="DP277",
            hint=f"ask for at most {n_items} (LIMIT + OFFSET), or drop ORDER BY ... LIMIT "
            "to get a noisy count for every item",
        )
    if s.personalization in ("partition", "t_round"):
        raise errors.UnsupportedQueryError(
            f"Top-k selection cannot be combined with personalization = '{s.personalization}'",
            code="DP274",
            hint="use personalization 'sample' (the default), 'threshold' or 'minimum'",
        )

def _topk_shares(a: Analysis, k: int, n_items: int | None, counts: bool, selection: bool, max_length: int | None
) -> tuple[str, float, float | None, float | None]:
    """The method, and equal shares of ε for the selection, the counts (if shown) and key
    selection (if needed). ``topk_method = 'auto'`` is resolved here from public facts only
    (``topk_mech.default_method``): k, the selection's ε, the universe, ``max_length``."""
    s = a.settings
    releases = 1 + int(counts) + int(selection)
    share = s.epsilon / releases
    sel = s.epsilon - share * (releases - 1)  # absorbs rounding: the shares sum to ε exactly
    method = s.topk_method
    if method == topk_mech.AUTO:
        method = topk_mech.default_method(k, sel, n_items, max_length)  # [default] public facts only
    _check_selection(n_items or k, k, sel, method, "Top-k",
                     "raise epsilon, ask for fewer items, or choose another topk_method")  # fmt: skip
    return method, sel, (share if counts else None), (share if selection else None)


def _check_selection(n_items: int, k: int, epsilon: float, method: str, what: str, hint: str) -> None:
    """The selection method's limits at ``epsilon`` (public inputs only), as a refusal; and its work
    over the public universe, which runs after the debit (keys from key selection are capped when
    released, ``_select_keys``)."""
    try:
        topk_mech.check_public_inputs(n_items, k, epsilon, method)
    except ValueError as e:
        raise errors.UnsupportedQueryError(f"{what}: {e}", code="DP275", hint=hint) from e
    why = topk_mech.work_limit(n_items, k, method)
    if why is not None:
        cheaper = "oneshot" if method in ("tps_pfm", "tps_em", "laplace") else "a smaller LIMIT"
        raise errors.UnsupportedQueryError(
            f"{what}: {why}", code="DP266",
            hint=f"ask with {cheaper}, or GROUP BY keys with fewer cells; nothing was charged",
        )  # fmt: skip


def _run_factor(plan: TopKPlan, subjects: pdp.SubjectPlan | None) -> float:
    """The share of the statement's ε its personalization plan runs it at (its first part's ε / ε)."""
    return float(subjects.parts[0].epsilon) / plan.epsilon if subjects is not None else 1.0

def _topk_plan(a: Analysis, q: exp.Select, base: exp.Select, key_specs: list[KeySpec], shape: _TopKShape,
    projections: list[exp.Expr], keys_exprs: list[exp.Expr], aggs: list[exp.Expr], original_sql: str,
) -> TopKPlan:  # fmt: skip
    s, table = a.settings, a.table
    k = shape.limit + shape.offset
    universe = None if any(ks.domain is None for ks in key_specs) else math.prod(len(ks.domain) for ks in key_specs)
    names = ", ".join(ks.name for ks in key_specs)
    _topk_common(a, k, universe, f"the cells of {names}")
    max_groups = _topk_max_groups(s, table, k)
    # a subject keeps at most max_rows rows, so holds at most max_rows distinct items
    method, sel_eps, count_eps, ks_eps = _topk_shares(a, k, universe, shape.counts_shown, universe is None,
                                                      table.max_rows)
    counts = Component("subjects", min(k, max_groups), count_eps) if count_eps is not None else None
    key_selection = key_selection_threshold(ks_eps, s.delta, max_groups) if ks_eps is not None else None
    post, outputs = a._post(q, projections, keys_exprs, aggs, key_specs, original_sql)
    order = post.args["order"].copy()
    order.append("expressions", exp.Ordered(this=exp.column("__a1")))  # the selection's rank breaks ties
    post.set("order", order)
    notes = []
    if counts is None:
        notes.append("only which items win is released, in noisy order; show the count column for noisy counts")
    elif _bias_note(max_groups, k, table):
        notes.append(_bias_note(max_groups, k, table))
    if universe is None:
        notes.append("the items are discovered by DP key selection first: fewer than LIMIT may come back")
    plan = TopKPlan(
        table=table,
        settings=s,
        statement_sql=original_sql,
        source=base,
        keys=tuple(key_specs),
        columns=(),
        k=k,
        method=method,
        selection_epsilon=sel_eps,
        counts=counts,
        key_selection=key_selection,
        max_groups=max_groups,
        post=post,
        outputs=tuple(outputs),
        charge=SubjectCharge(s.personalization, s.epsilon, key_selection.delta if key_selection else 0.0),
        notes=tuple(notes),
    )
    if shape.kind == COUNT_ROWS and not plan.distinct_by_schema:
        note = "COUNT(*) ranks items by the number of subjects holding them (a subject counts once per item)"
        plan = replace(plan, notes=(note, *plan.notes))
    return plan

def _columns_topk_plan(a: Analysis, q: exp.Select, original_sql: str) -> TopKPlan:
    """``dp_top_k_columns('table', k => n [, counts => true])``: the k most frequent 0/1 columns."""
    s, table = a.settings, a.table
    call = topk_columns_call(q)
    k, counts_shown = topk_columns_arguments(call)
    items = tuple(
        c.name for c in table.columns.values()
        if c.name != table.unit and (c.type.upper() == "BOOLEAN" or is_numeric_type(c.type))
    )  # fmt: skip
    if not items:
        raise errors.UnsupportedQueryError(
            f"{table.name} has no BOOLEAN or numeric columns to rank", code="DP277",
            hint="dp_top_k_columns ranks 0/1 (or BOOLEAN) columns by how many subjects have them set",
        )  # fmt: skip
    _topk_common(a, k, len(items), f"the {len(items)} 0/1 columns of {table.name}")
    max_groups = _topk_max_groups(s, table, k)
    # one row may set every column: no length bound but the number of columns
    method, sel_eps, count_eps, _ = _topk_shares(a, k, len(items), counts_shown, False, None)
    counts = Component("subjects", min(k, max_groups), count_eps) if count_eps is not None else None
    unit = exp.column(table.unit, quoted=True)
    source = exp.select(exp.alias_(unit.copy(), "__unit")).from_(exp.table_(table.name, db="main", quoted=True))
    source = source.where(exp.Not(this=exp.Is(this=unit, expression=exp.Null())))
    post = q.copy()
    node = next(t for t in post.find_all(exp.Table) if t.this is not None and topk_columns_call_node(t))
    node.replace(exp.Table(this=exp.to_identifier("__noisy"), alias=node.args.get("alias")))
    if post.args.get("order") is None:
        post = post.order_by("rank")
    notes = ["a column counts for a subject when any of its rows has it non-zero / true"]
    if counts is None:
        notes.append("only which columns win is released, in noisy order; add counts => true for noisy counts")
    elif _bias_note(max_groups, k, table):
        notes.append(_bias_note(max_groups, k, table))
    return TopKPlan(
        table=table,
        settings=s,
        statement_sql=original_sql,
        source=source,
        keys=(),
        columns=items,
        k=k,
        method=method,
        selection_epsilon=sel_eps,
        counts=counts,
        key_selection=None,
        max_groups=max_groups,
        post=post,
        outputs=(),
        charge=SubjectCharge(s.personalization, s.epsilon, 0.0),
        notes=tuple(notes),
    )


@dataclass(frozen=True)
class _TopKShape:
    limit: int
    offset: int
    counts_shown: bool
    kind: str


def topk_columns_call_node(table: exp.Table) -> exp.Anonymous | None:
    func = table.this
    if isinstance(func, exp.Anonymous) and function_name(func) == TOPK_COLUMNS_FUNCTION:
        return func
    return None


def topk_columns_call(q: exp.Expr) -> exp.Anonymous | None:
    """The ``dp_top_k_columns(...)`` call in a statement, if any."""
    for t in q.find_all(exp.Table):
        call = topk_columns_call_node(t)
        if call is not None:
            return call
    return None


def topk_columns_arguments(call: exp.Anonymous) -> tuple[int, bool]:
    """(k, counts) of ``dp_top_k_columns('table', k => n [, counts => true])``; the table is checked in classify."""
    usage = "dp_top_k_columns('table', k => 10) or dp_top_k_columns('table', k => 10, counts => true)"
    k: int | None = None
    counts = False
    for i, arg in enumerate(call.expressions[1:], start=1):
        if isinstance(arg, (exp.Kwarg, exp.PropertyEQ, exp.EQ)):
            name, value = arg.this.name.lower(), arg.expression
        elif i == 1:
            name, value = "k", arg
        else:
            raise errors.ProgrammingError(f"Unexpected argument {arg.sql(dialect='duckdb')}", code="DP285", hint=usage)
        if name == "k":
            k = _int_literal(value, "k")
        elif name == "counts":
            if not isinstance(value, exp.Boolean):
                raise errors.ProgrammingError("counts takes true or false", code="DP285", hint=usage)
            counts = bool(value.this)
        else:
            raise errors.ProgrammingError(f"Unknown argument {name} of dp_top_k_columns", code="DP285", hint=usage)
    if k is None:
        raise errors.ProgrammingError("dp_top_k_columns needs k", code="DP285", hint=usage)
    return k, counts


def _int_literal(node: exp.Expr, what: str) -> int:
    if isinstance(node, exp.Literal) and not node.is_string:
        try:
            return int(node.this)
        except ValueError:
            pass
    raise errors.UnsupportedQueryError(
        f"{what} {node.sql(dialect='duckdb')} must be a whole number for a top-k query",
        code="DP278",
        hint=f"write {what} 10 (parameters are fine: they are bound before planning)",
    )



def _topk_explain_rows(plan: TopKPlan) -> list[tuple]:
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




QUERY_CLASS = TopKQuery()
