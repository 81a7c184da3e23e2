"""Top-k queries: from a ``TopKPlan`` to released rows.

The stages of DESIGN.md section 2 for the top-k class, after the ledger's debit:

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
from typing import Any

import duckdb
import numpy as np

from dpgate import errors, noise
from dpgate.frontend.dialect import to_duckdb
from dpgate.queries.counting.exact import bind
from dpgate.mechanisms import pdp
from dpgate.mechanisms import topk as topk_mech
from dpgate.mechanisms.base import NoisyColumn
from dpgate.mechanisms.keyselection import KeySelector
from dpgate.queries.plans import TopKPlan
from dpgate.release import Answer, ColumnNoise, noisy_rows

_ids = itertools.count(1)


# -- SQL -----------------------------------------------------------------------------------------
def _charged_join(charged: str) -> str:
    """Keep the charged subjects: a hash join built on the (smaller) set of charged units."""
    return f"JOIN (SELECT DISTINCT unit FROM {charged}) __c ON __s.__unit = __c.unit"


#: Integer key types whose every value fits a BIGINT.
_BIGINT_SAFE = {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT", "UINTEGER"}


def _pairs_from_domains(plan: TopKPlan, charged: str, params: dict[str, Any]) -> str:
    """Distinct (unit, cell position) over the product of the keys' public domains."""
    src = to_duckdb(plan.source)
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
            params[f"d{j}"] = list(key.domain)
            joins.append(
                f"JOIN (SELECT unnest(CAST($d{j} AS {key.sql_type}[])) AS __v, unnest(range({sizes[j]})) AS __i) "
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
    src = to_duckdb(plan.source)
    cols = []
    for j, key in enumerate(plan.keys):
        params[f"s{j}"] = [t[j] for t in selected]
        cols.append(f"unnest(CAST($s{j} AS {key.sql_type}[])) AS __v{j}")
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
    src = to_duckdb(plan.source)
    keys = ", ".join(f"__k{j}" for j in range(len(plan.keys)))
    rank = f"hash(xor(hash(__unit, {keys}), {int(salt)}::UBIGINT))"
    distinct = (
        f"SELECT DISTINCT __s.__unit, {', '.join(f'__s.__k{j}' for j in range(len(plan.keys)))} FROM ({src}) __s "
        f"{_charged_join(charged)}"
    )
    # DISTINCT before QUALIFY: a subject keeps max_groups distinct keys, each equally likely.
    return (
        f"SELECT {keys}, count(*) AS __n FROM (SELECT * FROM ({distinct}) "
        f"QUALIFY row_number() OVER (PARTITION BY __unit ORDER BY {rank}, {keys}) <= {plan.max_groups}"
        f") GROUP BY ALL"
    )


def bind_check(con: duckdb.DuckDBPyConnection, plan: TopKPlan, charged: str) -> None:
    """Bind (DESCRIBE) every statement the run sends, before anything is charged."""
    params: dict[str, Any] = {}
    if plan.columns:
        bind(con, _pairs_from_columns(plan, charged))
        _bind_post(con, plan)
    elif plan.key_selection is None:
        bind(con, _pairs_from_domains(plan, charged, params), params)
        for name, values in params.items():  # the public domains must cast to the keys' types
            key = plan.keys[int(name[1:])]
            bind(con, f"SELECT count(*) FROM (SELECT unnest(CAST($v AS {key.sql_type}[])))", {"v": values}, public=True)
    else:
        bind(con, _key_subjects_sql(plan, charged, 0))
        bind(con, _pairs_from_keys(plan, charged, params, []), params)


# -- the run -------------------------------------------------------------------------------------
def answer(
    con: duckdb.DuckDBPyConnection, plan: TopKPlan, charged: str, subjects: pdp.SubjectPlan | None, *, rng
) -> Answer:
    """Select, count (if shown) and post-process; the debit has been made."""
    factor = float(subjects.parts[0].epsilon) / plan.epsilon if subjects is not None else 1.0
    params: dict[str, Any] = {}
    notes: list[str] = []
    if plan.columns:
        pairs, n_items = _pairs_from_columns(plan, charged), len(plan.columns)
        labels: list[Any] = list(plan.columns)
    elif plan.key_selection is None:
        pairs, n_items = _pairs_from_domains(plan, charged, params), plan.n_items
        labels = list(itertools.product(*[k.domain for k in plan.keys]))
    else:
        labels = _select_keys(con, plan, charged, factor, rng)
        notes.append(f"DP key selection released {len(labels)} key(s) to rank")
        if not labels:
            return _empty(con, plan, notes)
        pairs, n_items = _pairs_from_keys(plan, charged, params, labels), len(labels)
    k = min(plan.k, n_items)
    if k < plan.k:
        notes.append(f"only {k} item(s) to choose from: fewer than LIMIT + OFFSET = {plan.k}")
    try:
        if plan.counts is None:
            chosen = topk_mech.top_k(con, pairs, params, n_items, k, plan.selection_epsilon * factor, plan.method, rng=rng)
            exact_noisy = None
        else:
            chosen, exact_noisy = topk_mech.top_k_with_counts(
                con, pairs, params, n_items, k, plan.selection_epsilon * factor, plan.counts.epsilon * factor,
                plan.method, rng=rng, max_items_per_subject=plan.max_groups,
            )  # fmt: skip
    except ValueError as e:  # public inputs only (ε after personalization, k, universe size)
        raise errors.OperationalError(
            f"The top-k selection could not run: {e}", code="DP404",
            hint="the debit stands (fail closed); raise epsilon or ask for fewer items",
        ) from e  # fmt: skip
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


def _select_keys(con, plan: TopKPlan, charged: str, factor: float, rng) -> list[tuple]:
    """DP key selection over per-key subject counts; the released keys, in a data-independent order."""
    from dpgate.queries.analysis import key_selection_threshold

    salt = int(rng.integers(0, 2**62))
    rows = con.execute(_key_subjects_sql(plan, charged, salt)).fetchall()
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
    half = noise.discrete_laplace_half_width(eps, sens, plan.settings.alpha)
    scale = pdp.population_scale(subjects, noise.discrete_laplace_std(eps, sens) ** 2, 0.25)
    desc = f"discrete Laplace, sensitivity {sens}, ε={comp.epsilon:.4g} (subjects per item)"
    if scale != 1.0:
        y = np.array([int(round(v * scale)) for v in values], dtype=object)
        half = int(math.ceil(half * scale))
        desc += "; scaled to all subjects with budget"
    else:
        y = np.array(values, dtype=object)
    low, high = y - half, y + half
    if plan.settings.clamp_counts:
        y, low, high = (np.array([max(0, v) for v in a], dtype=object) for a in (y, low, high))
    return NoisyColumn(y, low, high, True, "laplace (subjects)", comp.epsilon, desc)


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
