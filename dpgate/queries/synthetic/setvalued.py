"""``CREATE SYNTHETIC TABLE name FROM baskets USING diffpart WITH (...)``: set-valued releases.

The protected table holds (subject, item) rows: a subject's items are one record (a basket, a
visit, a user's set of categories). The item column's declared domain is the public universe.

Two paths, chosen from public facts only (``route``: the records that pay, the declared items,
the taxonomy, ε, C1, C2, the most items a record keeps), never from the rows:

- **partition** — DiffPart (``mechanisms.diffpart``): noisy multiplicities of whole itemsets,
  where its partitions can survive: enough records that, spread evenly over the partitions a
  chain can end in, each would pass a height-1 split (``diffpart.records_needed``);
- **marginals** — ``mechanisms.setmarginals``: noisy supports of every item and of the pairs of
  the ``pair_items`` most frequent, corrected for the truncation of long records, and records
  fitted to them, where DiffPart's partitions cannot survive (a few thousand baskets of ~10 of
  ~100 items: DiffPart released nothing there).

``method = 'partition'`` or ``'marginals'`` forces one. Plan: the item column (the ``item``
option, or the table's only column besides the unit) and its declared domain, the taxonomy
(fan-out), C1 and C2 — a C2 at which fake partitions would multiply without end is refused
here, free. Run, after the debit: the charged subjects' rows, at most ``max_rows`` items per
subject (a keyed random choice, as in the counting class), as one boolean record per subject;
one subject is one record whatever ``max_rows`` is, so there is no group-privacy factor. Both
paths write the same three public tables: ``name`` (long format: a synthetic unit and an item
per row), ``name_itemsets`` (items, size, count) and ``name_supports`` (the supports of every
item and of the pairs of the most frequent items: ``support``, and for the marginals path the
noisy ``measured`` value and its ``noise_sd``). The release registry records them together.
"""

from __future__ import annotations

import math
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
from dpgate.mechanisms import diffpart, setmarginals
from dpgate.mechanisms.base import spend
from dpgate.plans import SubjectCharge, SynthesisPlan
from dpgate.queries.synthetic import options
from dpgate.queries.synthetic.coding import domain_lookup, relation_exists, values_list
from dpgate.queries.synthetic.common import Release, named, require_free_name, run_epsilon
from dpgate.release import Answer

#: ``method``: chosen from public facts, or forced.
METHODS = ("auto", "partition", "marginals")
SIDE_TABLES = ("_itemsets", "_supports")
OPTIONS: dict[str, Spec] = {
    "item": Spec("str", "the item column (default: the only column besides the unit)"),
    "method": Spec("str", "partition (DiffPart), marginals (item and pair supports) or auto: chosen from public facts",
                   choices=METHODS),
    "fanout": Spec("int", "fan-out of the taxonomy over the declared items", 2, diffpart.MAX_FANOUT),
    "c1": Spec("float", "leaf threshold constant C1 (released when the noisy count ≥ √2·C1/ε_leaf)", 0.0, None,
               low_open=True),
    "c2": Spec("float", "partition threshold constant C2 (expanded when the noisy count ≥ √2·C2·h/α)", 0.0, None,
               low_open=True),
    "pair_items": Spec("int", "marginals: the most frequent items whose pairs are measured", 2,
                       setmarginals.MAX_PAIR_ITEMS, high_open=False),
}  # fmt: skip
GENERAL = ("epsilon", "personalization", "max_rows_contributed", "privacy_unit_column")


_q = quote_ident


def plan(classified: Classified, catalog: Catalog, session: Session, name: str) -> SynthesisPlan:
    stmt = classified.statement
    table = classified.protected
    settings, own = options.parse(stmt, table, session, OPTIONS, GENERAL, "diffpart")
    others = [c for c in table.columns if c != table.unit]
    item = own.get("item", "").strip().lower() or (others[0] if len(others) == 1 else None)
    if item is None:
        raise errors.ProgrammingError(
            f"{table.name} has several columns besides its unit: say which holds the items", code="DP286",
            hint=f"WITH (item = '{others[0] if others else 'item'}', ...)",
        )  # fmt: skip
    if item not in table.columns or item == table.unit:
        raise errors.ProgrammingError(
            f"{item!r} is not an item column of {table.name}", code="DP218",
            hint="columns besides the unit: " + ", ".join(others),
        )  # fmt: skip
    domain = table.columns[item].domain
    if not domain:
        raise errors.PolicyError(
            f"{table.name}.{item} has no declared domain: a set-valued release needs the public universe of items",
            code="DP312",
            hint=f"the owner declares it (policy: [tables.{table.name}.columns.{item}] domain = [...])",
        )  # fmt: skip
    fanout = own.get("fanout", diffpart.DEFAULT_FANOUT)
    c2 = own.get("c2", diffpart.DEFAULT_C2)
    c1 = own.get("c1", diffpart.DEFAULT_C1)
    critical = diffpart.critical_c2(fanout)
    if c2 <= critical:
        raise errors.ProgrammingError(
            f"c2 = {c2:g} is at or below {critical:.3g}, where fake partitions of fan-out {fanout} multiply "
            "without end", code="DP287",
            hint=f"raise c2 above {critical:.3g} (default {diffpart.DEFAULT_C2:g}) or lower the fan-out",
        )  # fmt: skip
    if c1 > c2:
        raise errors.ProgrammingError(f"c1 = {c1:g} must not exceed c2 = {c2:g}", code="DP287",
                                      hint="the paper takes C1 in [1, C2]")  # fmt: skip
    for suffix in SIDE_TABLES:
        require_free_name(catalog, name + suffix, "choose another name: the release writes NAME, NAME_itemsets "
                          "and NAME_supports")  # fmt: skip
    values = tuple(v for v in domain if v is not None)
    taxonomy = diffpart.Taxonomy.build(len(values), fanout)
    max_rows = settings.max_rows or table.max_rows
    pair_items = min(own.get("pair_items", setmarginals.DEFAULT_PAIR_ITEMS), len(values))
    item_column = (table.columns[item].type, values)
    out = SynthesisPlan(
        table=table, settings=settings, statement_sql=to_sql(stmt), name=name, mechanism="diffpart", codings=(),
        options={"item": item, "items": values, "fanout": fanout, "c1": c1, "c2": c2, "taxonomy": taxonomy,
                 "method": own.get("method", "auto"), "pair_items": pair_items},
        rows=None, bins=0, max_rows=max_rows, charge=SubjectCharge(settings.personalization, settings.epsilon, 0.0),
        # a row: the unit and an item (``_write``); NAME_itemsets: at most a row for each of the release's;
        # NAME_supports: every item and the pairs of the pair_items most frequent
        row_types=(_unit_type(table), item_column),
        side_sizes=((None, ("INTEGER", ("LIST", 1, item_column), "BIGINT", "BIGINT")),  # an item a row, at most
                    (len(values), (("LIST", 1, item_column), "BIGINT", "BIGINT", "DOUBLE", "DOUBLE")),
                    (pair_items * (pair_items - 1) // 2, (("LIST", 2, item_column), "BIGINT", "BIGINT", "DOUBLE", "DOUBLE"))),
        notes=(f"at most {max_rows} item(s) per subject; one subject is one record, so the release runs at the whole ε",),
    )  # fmt: skip
    require_model(out)
    return out


def route(plan: SynthesisPlan, records: int, epsilon: float) -> tuple[str, int]:
    """(path, the records DiffPart needs), from public facts: the records that pay, ε, the taxonomy,
    C1, C2 and the most items a record keeps. ``auto`` takes the partition path when its
    partitions can survive (``diffpart.records_needed``) and its noise can be drawn at ε, the
    marginals path otherwise."""
    o = plan.options
    needed = diffpart.records_needed(o["taxonomy"], epsilon, o["c1"], o["c2"], plan.max_rows)
    if o["method"] != "auto":
        return o["method"], needed
    return ("partition" if records >= needed and _runs(plan, "partition", epsilon) else "marginals"), needed


def _runs(plan: SynthesisPlan, path: str, epsilon: float) -> bool:
    """Whether ``path`` runs at ``epsilon`` over no records (its noise scales are drawable)."""
    try:
        _dry(plan, path, epsilon)
    except (errors.DataError, errors.NotSupportedError, ValueError):
        return False
    return True


def source_sql(plan: SynthesisPlan, charged: str, salt: int) -> str:
    """(record number, item number) of the charged subjects, at most ``max_rows`` items each."""
    t = plan.table
    item = plan.options["item"]
    values = plan.options["items"]
    lookup = domain_lookup(values, t.columns[item].type)  # never casts the column [domain-join]
    rows = (
        f"SELECT __s.{_q(t.unit)} AS __unit, __d.i AS __item FROM main.{_q(t.name)} __s "
        f"JOIN (SELECT DISTINCT unit FROM {charged}) __c ON __s.{_q(t.unit)} = __c.unit "
        f"JOIN ({lookup}) __d ON __s.{_q(item)} = __d.v"
    )
    rank = f"hash(xor(hash(__unit, __item), {int(salt)}::UBIGINT))"
    # DISTINCT before the ranking: a subject's repeated rows of one item took several of its max_rows
    # places and left it fewer distinct items
    kept = (f"SELECT __unit, __item FROM (SELECT DISTINCT __unit, __item FROM ({rows})) "
            f"QUALIFY row_number() OVER (PARTITION BY __unit ORDER BY {rank}, __item) <= {plan.max_rows}")  # fmt: skip
    return f"SELECT dense_rank() OVER (ORDER BY __unit) - 1 AS r, __item FROM ({kept})"


def dry_run(plan: SynthesisPlan, epsilon: float) -> None:
    """The path the plan may take, over no records at ``epsilon``: its data-independent steps (its
    largest noise scales) at that ε. ``auto`` may always take the marginals path (``route`` takes
    the partition path only where it runs), so that is the one that must run."""
    _dry(plan, "marginals" if plan.options["method"] == "auto" else plan.options["method"], epsilon)


def _dry(plan: SynthesisPlan, path: str, epsilon: float) -> None:
    o = plan.options
    if path == "marginals":
        # its noise scales alone: over no records the run would still fit the size model (items ×
        # record sizes, 60 passes), free and before the debit, three times a statement
        setmarginals.check(epsilon, o["taxonomy"].n_items, plan.max_rows, o["pair_items"])
        return
    empty = np.zeros((0, o["taxonomy"].n_items), dtype=bool)
    _synthesize(plan, path, empty, epsilon, np.random.default_rng(0))


def _synthesize(plan: SynthesisPlan, path: str, records: np.ndarray, epsilon: float, rng):
    o = plan.options
    if path == "partition":
        out = mechanisms.synthesizer("diffpart").synthesize(
            records, epsilon=epsilon, rng=rng, options={"taxonomy": o["taxonomy"], "c1": o["c1"], "c2": o["c2"]}
        )
    else:
        out = mechanisms.synthesizer("set_marginals").synthesize(
            records, epsilon=epsilon, rng=rng, options={"max_size": plan.max_rows, "pair_items": o["pair_items"]}
        )
    return out


def check_size(plan: SynthesisPlan, population: int, epsilon: float) -> None:
    """Before the debit (inside its transaction): the record matrix, one byte per subject and
    declared item, must fit ``MAX_RECORD_CELLS`` — the roster and the domain are public; a
    partition path that public facts say is empty is refused, and so is a marginals path whose size
    model would pass ``MODEL_CELLS`` (``require_model``, checked at planning first)."""
    items = plan.options["taxonomy"].n_items
    if population * items > diffpart.MAX_RECORD_CELLS:
        raise errors.UnsupportedQueryError(
            f"USING diffpart over {population:,} subjects and {items:,} declared items would hold a "
            f"{population * items:,}-cell record matrix; a release holds at most {diffpart.MAX_RECORD_CELLS:,}",
            code="DP266",
            hint=f"release at most {diffpart.MAX_RECORD_CELLS // items:,} subjects' records (a table with fewer "
            f"subjects), or declare at most {diffpart.MAX_RECORD_CELLS // max(population, 1):,} items; "
            "nothing was charged",
        )  # fmt: skip
    path = route(plan, population, epsilon)[0]
    if path == "partition":
        _require_records(plan, population, epsilon)
    else:
        require_model(plan)


def require_model(plan: SynthesisPlan) -> None:
    """Refuse (free) a release that may take the marginals path (``auto`` or ``marginals``) whose size
    model would pass ``MODEL_CELLS``: declared items × (longest record + 1), public. Checked at
    planning, before any of the path's work."""
    if plan.options["method"] == "partition":
        return
    items = plan.options["taxonomy"].n_items
    top = setmarginals.longest(plan.max_rows, items)
    work = setmarginals.model_work(items, top)
    if work > setmarginals.MODEL_CELLS:
        raise errors.UnsupportedQueryError(
            f"The marginals path's size model over {items:,} declared items and records of up to {top:,} "
            f"items would take {work:,} cells; it takes at most {setmarginals.MODEL_CELLS:,}", code="DP266",
            hint=f"ask max_rows_contributed = {max(1, setmarginals.MODEL_CELLS // items - 1):,} or less, or declare "
            "fewer items; nothing was charged",
        )  # fmt: skip


#: A release whose first split passes fewer candidates than this, in expectation, is refused free.
EMPTY_BELOW = 0.01


def _expected(plan: SynthesisPlan, records: int, epsilon: float) -> tuple[float, int, int, int]:
    """From public facts (the records that pay, the taxonomy, ε, C1, C2): the expected candidates of
    the first split that pass (an upper bound), its threshold, and the leaf threshold at most."""
    o = plan.options
    tax: diffpart.Taxonomy = o["taxonomy"]
    passing = diffpart.passing_at_root(records, tax, epsilon, o["c1"], o["c2"])
    k_root, _ = diffpart.root_test(tax, epsilon, o["c1"], o["c2"])
    return passing, k_root, diffpart.thresholds(1, epsilon, o["c1"]), diffpart.thresholds(1, epsilon / 2, o["c1"])


def _require_records(plan: SynthesisPlan, records: int, epsilon: float) -> None:
    """Refuse (free) a partition release that public facts say will be empty: with fewer records than
    the first split's threshold, no part passes but by noise (every chain, and so every itemset,
    starts there). ``method = 'auto'`` takes the marginals path long before this."""
    passing, k_root, _, _ = _expected(plan, records, epsilon)
    if passing < EMPTY_BELOW:
        raise errors.ProgrammingError(
            f"USING diffpart WITH (method = 'partition') over {records:,} subjects' records at ε = {epsilon:g}: its "
            f"first split keeps a part only when about {k_root:,} records fall in it, so the release would be empty "
            f"(expected parts kept: {passing:.2g})", code="DP287",
            hint="drop method = 'partition' (the marginals path serves such data), ask a larger epsilon, a smaller "
            "fan-out or fewer declared items; nothing was charged",
        )  # fmt: skip


def spark_sql(plan: SynthesisPlan, salt: int, source: str, units: str) -> str:
    """``source_sql`` for a table in Spark (``SparkPlane.release_rows``): each charged subject's
    (unit, item number) pairs, at most ``max_rows`` distinct items each by a keyed ``xxhash64`` of the
    pair [bound]; the items joined with the declared list, never cast [domain-join]."""
    from dpgate.backends.spark.rows import keyed_rank
    from dpgate.queries.synthetic import coding_spark

    t = plan.table
    item = plan.options["item"]
    lookup = coding_spark.lookup_sql(plan.options["items"], t.columns[item].type)
    unit, col = coding_spark.quoted(t.unit), coding_spark.quoted(item)
    rows = (
        f"SELECT __s.{unit} AS __unit, __d.i AS __item FROM {source} __s JOIN {units} __c ON __s.{unit} = __c.unit "
        f"JOIN ({lookup}) __d ON __s.{col} = __d.v"
    )
    rank = keyed_rank(["__unit", "__item"], salt)
    ranked = (f"SELECT __unit, __item, row_number() OVER (PARTITION BY __unit ORDER BY {rank}, __item) AS __rn "
              f"FROM (SELECT DISTINCT __unit, __item FROM ({rows}) __r) __x")  # fmt: skip
    return f"SELECT __unit, __item FROM ({ranked}) __y WHERE __rn <= {int(plan.max_rows)}"


def read_records(con: duckdb.DuckDBPyConnection, plan: SynthesisPlan, charged: str, salt: int
                 ) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """(record number, item number) of the charged subjects, records numbered in their units' order,
    read where the rows are (the database file or Spark)."""
    if backends.engine_of(plan.table) == "spark":
        found = backends.plane("spark").release_rows(con, plan, partial(spark_sql, plan, salt), charged)
        from dpgate.queries.synthetic.coding_spark import record_numbers

        r = record_numbers(found.column("__unit"))
        return r, np.asarray(found.column("__item").to_numpy(), dtype=np.int64)
    got = con.execute(source_sql(plan, charged, salt)).fetchnumpy()
    return np.asarray(got["r"], dtype=np.int64), np.asarray(got["__item"], dtype=np.int64)


def bind_check(con: duckdb.DuckDBPyConnection, plan: SynthesisPlan, charged: str) -> None:
    bind(con, source_sql(plan, charged, 0))  # a Spark table's stub too
    if backends.engine_of(plan.table) == "spark":  # and Spark must run its own statement
        backends.plane("spark").check_release(plan, partial(spark_sql, plan, 0))


def answer(con: duckdb.DuckDBPyConnection, plan: SynthesisPlan, debit, analyst: str, *,
           rng: np.random.Generator, sampling: np.random.Generator, progress=None) -> Answer:  # fmt: skip
    eps = run_epsilon(debit, "a set-valued release")
    n_items = plan.options["taxonomy"].n_items
    path, _ = route(plan, int(debit.subjects.used), eps)
    salt = int(rng.integers(0, 2**62))
    r, i = read_records(con, plan, debit.charged, salt)
    records = np.zeros((int(r.max()) + 1 if len(r) else 0, n_items), dtype=bool)
    records[r, i] = True
    out = _synthesize(plan, path, records, eps, rng)
    spend(out.epsilon, what=f"diffpart ({path})")  # here, not in _synthesize: route's dry runs spend nothing
    del records
    if path == "partition":
        return _answer_partition(con, plan, out, sampling, debit, analyst, eps)
    return _answer_marginals(con, plan, out, sampling, debit, analyst, eps)


def _answer_partition(con, plan: SynthesisPlan, out, sampling, debit, analyst: str, eps: float) -> Answer:
    itemsets, trace = out.release, out.quality["trace"]
    supports = _supports_of_itemsets(itemsets, plan.options["taxonomy"].n_items, plan.options["pair_items"])
    tax = plan.options["taxonomy"]
    parameters = {"path": "partition", "fanout": plan.options["fanout"], "c1": plan.options["c1"],
                  "c2": plan.options["c2"], "taxonomy": tax.describe(), "itemsets": len(itemsets),
                  "operations": len(trace.operations)}  # fmt: skip
    written = _write(con, plan, itemsets, supports, sampling, debit, analyst, eps, "diffpart", parameters)
    notes = [
        f"{len(itemsets):,} itemsets released ({written:,} synthetic subjects) after {len(trace.operations):,} "
        f"partition operations (DiffPart); {plan.name}_itemsets holds each itemset's noisy count, "
        f"{plan.name}_supports the supports they add up to",
        "counts of rare itemsets are 0 or missing (pruned) and a few itemsets may be fakes; totals are biased low "
        "when many records fall in pruned partitions",
        _public_note(plan),
    ]
    if trace.stopped:
        notes.insert(0, "partitioning stopped at its work cap (a release's work is bounded; fake partitions "
                        "multiply at a small c2): raise c2, or lower the fan-out")  # fmt: skip
    if not itemsets:
        notes.insert(0, "no itemset reached its threshold: the records are spread over too many distinct "
                        "itemsets for this ε (each one rare); method = 'marginals' serves such data")  # fmt: skip
    message = (f"CREATE SYNTHETIC TABLE {plan.name}: {written:,} synthetic {plan.table.unit} values, "
               f"{len(itemsets):,} itemsets (DiffPart)")  # fmt: skip
    return Answer([], [], [], [], {}, notes, message=message, released_rows=written)


def _answer_marginals(con, plan: SynthesisPlan, out, sampling, debit, analyst: str, eps: float) -> Answer:
    m: setmarginals.Marginals = out.release
    synthetic = setmarginals.records(m, rng=sampling, max_records=int(debit.subjects.used))
    itemsets = _itemsets_of_records(synthetic)
    supports = _supports_of_marginals(m)
    parameters = {"path": "marginals", "pair_items": len(m.selected), "truncation_items": m.m1,
                  "truncation_pairs": m.m2, "shrinkage": round(m.shrinkage, 4),
                  "shares": {k: round(v, 12) for k, v in m.epsilon.items()}, "itemsets": len(itemsets)}  # fmt: skip
    written = _write(con, plan, itemsets, supports, sampling, debit, analyst, eps, setmarginals.SetMarginals.NAME,
                     parameters)  # fmt: skip
    pairs = len(m.pairs)
    notes = [
        f"{written:,} synthetic subjects fitted to noisy supports of {m.n_items:,} items and of the {pairs:,} pairs "
        f"of the {len(m.selected)} most frequent items; {plan.name}_supports holds those supports with their noise",
        f"for the noisy counts a record kept at most {m.m1} items ({m.m2} of the selected items for pairs), chosen "
        "from the noisy record sizes; longer records were weighted down and the supports corrected by a model of "
        "record sizes (biased where an item's records are unusually long or short)",
        "co-occurrence beyond pairs in the synthetic records is what a pairwise fit implies, not measured",
        _public_note(plan),
    ]
    message = (f"CREATE SYNTHETIC TABLE {plan.name}: {written:,} synthetic {plan.table.unit} values fitted to "
               f"{m.n_items:,} item and {pairs:,} pair supports")  # fmt: skip
    return Answer([], [], [], [], {}, notes, message=message, released_rows=written)


def _public_note(plan: SynthesisPlan) -> str:
    return f"{plan.name}, {plan.name}_itemsets and {plan.name}_supports are public from now on: queries over them are free"


def _itemsets_of_records(x: np.ndarray) -> dict[tuple[int, ...], int]:
    """Distinct rows of a boolean record matrix with their multiplicities."""
    if not len(x):
        return {}
    rows, counts = np.unique(np.packbits(x, axis=1), axis=0, return_counts=True)
    d = x.shape[1]
    out: dict[tuple[int, ...], int] = {}
    for row, c in zip(np.unpackbits(rows, axis=1)[:, :d].astype(bool), counts.tolist()):
        if row.any():
            out[tuple(np.flatnonzero(row).tolist())] = int(c)
    return out


def _supports_of_itemsets(itemsets: dict, n_items: int, pair_items: int) -> list[tuple]:
    """(items, support, measured, noise_sd) of every item and of the pairs of the ``pair_items`` items
    with the largest supports, summed over released itemsets (post-processing)."""
    single = np.zeros(n_items)
    for key, c in itemsets.items():
        single[list(key)] += c
    top = np.sort(np.lexsort((np.arange(n_items), -single))[: min(pair_items, n_items)])
    pos = {int(j): p for p, j in enumerate(top)}
    pair = np.zeros((len(top), len(top)))
    for key, c in itemsets.items():
        kept = [pos[j] for j in key if j in pos]
        for a in range(len(kept)):
            for b in range(a + 1, len(kept)):
                pair[kept[a], kept[b]] += c
    rows = [((j,), float(single[j]), None, None) for j in range(n_items)]
    rows += [((int(top[a]), int(top[b])), float(pair[a, b]), None, None)
             for a in range(len(top)) for b in range(a + 1, len(top))]  # fmt: skip
    return rows


def _supports_of_marginals(m: setmarginals.Marginals) -> list[tuple]:
    rows = [((j,), float(m.items[j]), float(m.item_measured[j]), float(m.item_sd[j])) for j in range(m.n_items)]
    rows += [((int(a), int(b)), float(s), float(v), float(sd))
             for (a, b), s, v, sd in zip(m.pairs, m.pair_support, m.pair_measured, m.pair_sd)]  # fmt: skip
    return rows


def _write(con, plan: SynthesisPlan, itemsets: dict, supports: list[tuple], sampling, debit, analyst: str, eps: float,
           mechanism: str, parameters: dict) -> int:  # fmt: skip
    """The three public tables and the registry row, in one transaction; returns the synthetic subjects.

    Post-processing keeps the main table within what the release reserved against the analyst's caps
    (``debit.release_rows``: the roster times ``max_rows``): an itemset of more than ``max_rows``
    items holds no real record (each was cut to ``max_rows``) and is left out, NAME_itemsets keeps
    at most that many itemsets and items (the largest counts first), and the synthetic subjects, in
    their random order, stop before their rows would pass it (noisy counts are not bounded by the
    roster)."""
    t = plan.table
    o = plan.options
    name = plan.name
    names = [name] + [name + s for s in SIDE_TABLES]
    for n in names:
        if relation_exists(con, n):
            raise errors.ProgrammingError(f"A table or view named {n!r} already exists", code="DP226",
                                          hint="choose another name for the release")  # fmt: skip
    keys = [k for k in itemsets if len(k) <= plan.max_rows]
    if debit.release_rows is not None:  # NAME_itemsets' reservation: as many itemsets and items as the release's
        keys = sorted(keys, key=lambda k: (-itemsets[k], len(k), k))[: debit.release_rows]  # rows, largest counts first
        keys = keys[: int(np.searchsorted(np.cumsum([len(k) for k in keys]), debit.release_rows, side="right"))]
    keys = sorted(keys, key=lambda k: (len(k), k))
    counts = [int(itemsets[k]) for k in keys]
    owner_of = np.repeat(np.arange(1, len(keys) + 1), counts)  # itemset id of each synthetic subject
    sampling.shuffle(owner_of)  # post-processing: the order of synthetic subjects means nothing
    rows = np.cumsum(np.array([len(k) for k in keys], dtype=np.int64)[owner_of - 1])  # the main table's, so far
    if debit.release_rows is not None:
        owner_of = owner_of[: int(np.searchsorted(rows, debit.release_rows, side="right"))]
    written_rows = int(rows[len(owner_of) - 1]) if len(owner_of) else 0
    item_type = t.columns[o["item"]].type
    domain = values_list(o["items"], item_type)
    unit_sql = _unit_type(t)
    as_items = f"list_transform(idx, lambda x: ({domain})[x + 1])"
    with registry.transaction(con):
        con.execute(
            f"CREATE TABLE main.{_q(names[1])} AS SELECT id AS itemset_id, {as_items} AS items, len(idx) AS size, "
            "n AS count FROM (SELECT unnest($1::INTEGER[]) AS id, unnest($2::INTEGER[][]) AS idx, "
            "unnest($3::BIGINT[]) AS n) ORDER BY id",
            [list(range(1, len(keys) + 1)), [list(k) for k in keys], counts],
        )  # fmt: skip
        con.execute(
            f"CREATE TABLE main.{_q(name)} AS SELECT CAST(s.unit AS {unit_sql}) AS {_q(t.unit)}, "
            f"unnest(i.items) AS {_q(o['item'])} FROM (SELECT unnest($1::BIGINT[]) AS unit, unnest($2::INTEGER[]) AS itemset_id) s "
            f"JOIN main.{_q(names[1])} i USING (itemset_id) ORDER BY 1, 2",
            [list(range(1, len(owner_of) + 1)), owner_of.tolist()],
        )
        con.execute(
            f"CREATE TABLE main.{_q(names[2])} AS SELECT {as_items} AS items, len(idx) AS size, "
            "CAST(round(support) AS BIGINT) AS support, round(measured, 1) AS measured, round(sd, 1) AS noise_sd "
            "FROM (SELECT unnest($1::INTEGER[][]) AS idx, unnest($2::DOUBLE[]) AS support, "
            "unnest($3::DOUBLE[]) AS measured, unnest($4::DOUBLE[]) AS sd) ORDER BY size, support DESC, idx",
            [[list(s[0]) for s in supports], [s[1] for s in supports], [s[2] for s in supports],
             [s[3] for s in supports]],
        )  # fmt: skip
        parameters = {
            "item": o["item"], "method": o["method"], **parameters, "max_rows": plan.max_rows,
            "personalization": plan.charge.rule, "epsilon_run": eps, "extra_tables": names[1:],
        }  # fmt: skip
        registry.record(
            con, entry_id=debit.entry_id, name=name, kind="synthetic table", sources=[t.name], mechanism=mechanism,
            parameters=parameters, epsilon=debit.epsilon, delta=0.0, analyst=analyst, row_count=written_rows,
        )  # fmt: skip
    return len(owner_of)


def _unit_type(table) -> str:
    """The synthetic units' type: the table's when it is an integer DuckDB widens to, else BIGINT."""
    unit_type = table.columns[table.unit].type.upper()
    return unit_type if unit_type in ("INTEGER", "BIGINT", "HUGEINT") else "BIGINT"


def explain_rows(plan: SynthesisPlan, subjects=None) -> list[tuple]:
    o = plan.options
    eps = plan.epsilon
    records = getattr(subjects, "used", None)  # the subjects who pay: one record each (public)
    parts = getattr(subjects, "parts", None)
    run_eps = float(parts[0].epsilon) if parts else float(eps)
    if records is None:
        path, needed = (o["method"] if o["method"] != "auto" else None), None
    else:
        path, needed = route(plan, int(records), run_eps)
    rows = [("path", path, eps, 0.0, None, None, _why(plan, path, records, needed, run_eps))]
    if path in (None, "partition"):
        rows += _partition_rows(plan, records, run_eps)
    if path in (None, "marginals"):
        rows += _marginals_rows(plan, records, run_eps)
    rows.append(("release", None, None, None, None, None,
                 f"{plan.name} (one row per synthetic {plan.table.unit} and item), {plan.name}_itemsets (items, size, "
                 f"count) and {plan.name}_supports (items, size, support, measured, noise_sd)"))  # fmt: skip
    rows.append(("bounding", None, None, None, None, None,
                 f"at most {plan.max_rows} item(s) per subject, chosen at random; one subject is one record"))
    return rows


def _why(plan: SynthesisPlan, path: str | None, records: int | None, needed: int | None, eps: float) -> str:
    o = plan.options
    if o["method"] != "auto":
        return f"method = '{o['method']}'"
    if path is None:
        return "chosen at the debit from the records that pay: the partition path when DiffPart's partitions can survive"
    groups = sum(1 for v in range(len(o["taxonomy"].height)) if o["taxonomy"].height[v] == 1)
    need = (f"{needed:,}" if needed < 10**15 else f"10^{int(math.log10(needed))}") if needed < diffpart.NEEDED_CAP \
        else f"more than 10^{int(math.log10(diffpart.NEEDED_CAP))}"
    if path == "partition":
        return (f"DiffPart: {records:,} records pay, and its partitions can survive from {need} at ε = {eps:g} "
                f"({groups} group(s) of items)")  # fmt: skip
    return (f"noisy item and pair supports: DiffPart's partitions survive only from about {need} records at "
            f"ε = {eps:g} (its {groups} groups of items combine in too many ways for every part to reach a split's "
            f"threshold), and {records:,} pay")  # fmt: skip


def _partition_rows(plan: SynthesisPlan, records: int | None, eps: float) -> list[tuple]:
    o = plan.options
    tax: diffpart.Taxonomy = o["taxonomy"]
    root_alpha = eps / 2 / tax.n_internal if tax.n_internal else None
    root_h = tax.height[tax.root]
    rows = [
        ("model", "diffpart", plan.epsilon, 0.0, None, None,
         f"partition path: itemsets of {plan.table.name}.{o['item']} by top-down partitioning over a context-free "
         f"taxonomy; ε/2 for partitioning (α = unused / internal nodes of the cut, along each chain), ε/2 plus "
         f"what is left for the leaf counts (discrete Laplace); every chain spends exactly ε"),
        ("taxonomy", None, None, None, None, None, tax.describe() + " (items grouped in their declared order)"),
    ]  # fmt: skip
    if root_alpha is not None:
        rows.append(("thresholds", None, None, None, None, None,
                     f"root operation: α = {root_alpha:.4g}, a sub-partition is expanded when its noisy size ≥ "
                     f"{diffpart.thresholds(root_h, root_alpha, o['c2']):,} (√2·C2·h/α, C2 = {o['c2']:g}, h = {root_h}); "
                     f"an itemset is released when its noisy count ≥ √2·C1/ε_leaf (C1 = {o['c1']:g}, ε_leaf ≥ ε/2: "
                     f"at most {diffpart.thresholds(1, eps / 2, o['c1']):,})"))  # fmt: skip
    if records is not None:
        passing, k_root, leaf_low, leaf_high = _expected(plan, int(records), eps)
        size = (f"{records:,} records (subjects who pay); a real itemset is released only when about {leaf_low:,}–"
                f"{leaf_high:,} or more records hold exactly it (after its items are grouped), under parts of at "
                f"least {k_root:,} records at the first split: at most {records // leaf_low:,} itemsets hold real "
                f"records")
        if passing < EMPTY_BELOW:
            size += f"; the first split would keep nothing (expected {passing:.2g}): it would be refused, free"
        rows.append(("expected size", None, None, None, None, None, size))
    return rows


def _marginals_rows(plan: SynthesisPlan, records: int | None, eps: float) -> list[tuple]:
    o = plan.options
    n_items = o["taxonomy"].n_items
    share = setmarginals.shares(eps, n_items)
    k = o["pair_items"]
    longest = setmarginals.longest(plan.max_rows, n_items)
    item_sd = math.sqrt(2) * longest / share["items"]
    rows = [
        ("model", "set_marginals", plan.epsilon, 0.0, None, None,
         f"marginals path: noisy supports of the {n_items:,} declared items and of the {k * (k - 1) // 2:,} pairs of "
         f"the {k} with the largest noisy supports, corrected for truncation by a model of record sizes; synthetic "
         "records fitted to them (post-processing)"),
        ("shares", None, None, None, None, None,
         f"record sizes ε = {share['sizes']:.3g}, item supports {share['items']:.3g}, sizes within the selected "
         f"items {share['kept sizes']:.3g}, pair supports {share['pairs']:.3g} (discrete Laplace each)"),
    ]  # fmt: skip
    quality = (f"a record keeps at most m items for the item counts (m from the noisy record sizes, at most "
               f"{longest}): an item support's noise sd is √2·m/ε_items = {item_sd / longest:.3g}·m records, at "
               f"most {item_sd:,.0f}; a pair's √2·C(m2, 2)/ε_pairs for the m2 selected items a record keeps "
               "(both then divided by the share of the support truncation kept)")  # fmt: skip
    if records:
        quality += (f"; over {records:,} records an item held by 10% of them ({records // 10:,}) has at most "
                    f"{item_sd / max(records // 10, 1):.0%} noise sd")  # fmt: skip
    rows.append(("expected quality", None, None, None, None, None, quality))
    return rows


RELEASE = Release(name="diffpart", plan=named(plan), dry_run=dry_run, bind_check=bind_check,
                  answer=answer, explain_rows=explain_rows, check_size=check_size, side_tables=SIDE_TABLES,
                  scales_sample=False)  # fmt: skip
