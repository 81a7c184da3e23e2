"""``CREATE SYNTHETIC TABLE name FROM baskets USING diffpart WITH (...)``: set-valued releases.

The protected table holds (subject, item) rows: a subject's items are one record (a basket, a
visit, a user's set of categories). The item column's declared domain is the public universe;
DiffPart (``mechanisms.diffpart``) releases noisy multiplicities of itemsets over it.

Plan (public facts only): the item column (the ``item`` option, or the table's only column
besides the unit) and its declared domain, the taxonomy (fan-out), the thresholds C1 and C2 —
a C2 at which fake partitions would multiply without end is refused here, free. Run, after the
debit: the charged subjects' rows, at most ``max_rows`` items per subject (a keyed random
choice, as in the counting class), as one boolean record per subject; DiffPart at the rule's
ε — one subject is one record whatever ``max_rows`` is, so there is no group-privacy factor;
then post-processing: each released itemset with multiplicity c becomes c synthetic subjects
in ``name`` (long format: a new unit id and the item, one row per item) and one row in
``name_itemsets`` (items, size, count). Both tables are public from then on, and the release
registry records the pair.
"""

from __future__ import annotations

import duckdb
import numpy as np

from dpgate import errors, mechanisms
from dpgate.backends.charged import bind
from dpgate.catalog import releases as registry
from dpgate.catalog.tables import Catalog, quote_ident
from dpgate.frontend.classify import Classified
from dpgate.frontend.dialect import to_sql
from dpgate.frontend.settings import Session, Spec
from dpgate.mechanisms import diffpart
from dpgate.mechanisms.base import spend
from dpgate.plans import SubjectCharge, SynthesisPlan
from dpgate.queries.synthetic import options
from dpgate.queries.synthetic.coding import domain_lookup, values_list
from dpgate.queries.synthetic.common import Release, named, require_free_name, run_epsilon
from dpgate.release import Answer

OPTIONS: dict[str, Spec] = {
    "item": Spec("str", "the item column (default: the only column besides the unit)"),
    "fanout": Spec("int", "fan-out of the taxonomy over the declared items", 2, diffpart.MAX_FANOUT),
    "c1": Spec("float", "leaf threshold constant C1 (released when the noisy count ≥ √2·C1/ε_leaf)", 0.0, None,
               low_open=True),
    "c2": Spec("float", "partition threshold constant C2 (expanded when the noisy count ≥ √2·C2·h/α)", 0.0, None,
               low_open=True),
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
            f"{table.name}.{item} has no declared domain: DiffPart needs the public universe of items", code="DP312",
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
    extra = f"{name}_itemsets"
    require_free_name(catalog, extra, "choose another name: the release writes NAME and NAME_itemsets")
    values = tuple(v for v in domain if v is not None)
    taxonomy = diffpart.Taxonomy.build(len(values), fanout)
    max_rows = settings.max_rows or table.max_rows
    return SynthesisPlan(
        table=table, settings=settings, statement_sql=to_sql(stmt), name=name, mechanism="diffpart", codings=(),
        options={"item": item, "items": values, "fanout": fanout, "c1": c1, "c2": c2, "taxonomy": taxonomy},
        rows=None, bins=0, max_rows=max_rows, charge=SubjectCharge(settings.personalization, settings.epsilon, 0.0),
        notes=(f"at most {max_rows} item(s) per subject; one subject is one record, so DiffPart runs at the whole ε",),
    )  # fmt: skip


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
    """DiffPart over no records at ``epsilon``: its data-independent steps (the root's noise) at that ε."""
    o = plan.options
    empty = np.zeros((0, o["taxonomy"].n_items), dtype=bool)
    _synthesize(plan, empty, epsilon, np.random.default_rng(0))


def _synthesize(plan: SynthesisPlan, records: np.ndarray, epsilon: float, rng):
    o = plan.options
    out = mechanisms.synthesizer("diffpart").synthesize(
        records, epsilon=epsilon, rng=rng, options={"taxonomy": o["taxonomy"], "c1": o["c1"], "c2": o["c2"]}
    )
    spend(out.epsilon, what="diffpart")
    return out


def check_size(plan: SynthesisPlan, population: int) -> None:
    """Before the debit (inside its transaction): the record matrix, one byte per subject and
    declared item, must fit ``MAX_RECORD_CELLS`` — the roster and the domain are public."""
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


    _require_records(plan, population)


#: A release whose first split passes fewer candidates than this, in expectation, is refused free.
EMPTY_BELOW = 0.01


def _expected(plan: SynthesisPlan, records: int) -> tuple[float, int, int, int]:
    """From public facts (the records that pay, the taxonomy, ε, C1, C2): the expected candidates of
    the first split that pass (an upper bound), its threshold, and the leaf threshold at most."""
    o = plan.options
    eps = float(plan.epsilon)
    tax: diffpart.Taxonomy = o["taxonomy"]
    passing = diffpart.passing_at_root(records, tax, eps, o["c1"], o["c2"])
    k_root, _ = diffpart.root_test(tax, eps, o["c1"], o["c2"])
    return passing, k_root, diffpart.thresholds(1, eps, o["c1"]), diffpart.thresholds(1, eps / 2, o["c1"])


def _require_records(plan: SynthesisPlan, records: int) -> None:
    """Refuse (free) a release that public facts say will be empty: with fewer records than the first
    split's threshold, no part passes but by noise (every chain, and so every itemset, starts there)."""
    passing, k_root, _, _ = _expected(plan, records)
    if passing < EMPTY_BELOW:
        raise errors.ProgrammingError(
            f"USING diffpart over {records:,} subjects' records at ε = {float(plan.epsilon):g}: its first split "
            f"keeps a part only when about {k_root:,} records fall in it, so the release would be empty "
            f"(expected parts kept: {passing:.2g})", code="DP287",
            hint="ask a larger epsilon, a smaller fan-out or fewer declared items (fewer internal nodes share the "
            "budget), or count items with COUNT(DISTINCT unit) GROUP BY item; nothing was charged",
        )  # fmt: skip


def bind_check(con: duckdb.DuckDBPyConnection, plan: SynthesisPlan, charged: str) -> None:
    bind(con, source_sql(plan, charged, 0))


def answer(con: duckdb.DuckDBPyConnection, plan: SynthesisPlan, debit, analyst: str, *,
           rng: np.random.Generator, sampling: np.random.Generator, progress=None) -> Answer:  # fmt: skip
    eps = run_epsilon(debit, "a set-valued release")
    o = plan.options
    taxonomy: diffpart.Taxonomy = o["taxonomy"]
    salt = int(rng.integers(0, 2**62))
    got = con.execute(source_sql(plan, debit.charged, salt)).fetchnumpy()
    r, i = np.asarray(got["r"], dtype=np.int64), np.asarray(got["__item"], dtype=np.int64)
    records = np.zeros((int(r.max()) + 1 if len(r) else 0, taxonomy.n_items), dtype=bool)
    records[r, i] = True
    out = _synthesize(plan, records, eps, rng)
    itemsets, trace = out.release, out.quality["trace"]
    del records
    written = _write(con, plan, itemsets, sampling, debit, analyst, eps, trace)
    itemset_table = f"{plan.name}_itemsets"
    notes = [
        f"{len(itemsets):,} itemsets released ({written:,} synthetic subjects) after {len(trace.operations):,} "
        f"partition operations; {itemset_table} holds each itemset's noisy count",
        "counts of rare itemsets are 0 or missing (pruned) and a few itemsets may be fakes; totals are biased low "
        "when many records fall in pruned partitions",
        f"{plan.name} and {itemset_table} are public from now on: queries over them are free",
    ]
    if trace.stopped:
        notes.insert(0, "partitioning stopped at its work cap (a release's work is bounded; fake partitions "
                        "multiply at a small c2): raise c2, or lower the fan-out")  # fmt: skip
    if not itemsets:
        notes.insert(0, "no itemset reached its threshold: the records are spread over too many distinct "
                        "itemsets for this ε (each one rare); a larger ε, fewer declared items, or top-k / "
                        "marginal queries over the table serve such data better")  # fmt: skip
    message = (f"CREATE SYNTHETIC TABLE {plan.name}: {written:,} synthetic {plan.table.unit} values, "
               f"{len(itemsets):,} itemsets (DiffPart)")  # fmt: skip
    return Answer([], [], [], [], {}, notes, message=message, released_rows=written)


def _write(con, plan: SynthesisPlan, itemsets: dict, sampling, debit, analyst: str, eps: float, trace) -> int:
    """Both public tables and the registry row, in one transaction; returns the synthetic subjects."""
    from dpgate.queries.synthetic.coding import relation_exists

    t = plan.table
    o = plan.options
    name, itemsets_name = plan.name, f"{plan.name}_itemsets"
    for n in (name, itemsets_name):
        if relation_exists(con, n):
            raise errors.ProgrammingError(f"A table or view named {n!r} already exists", code="DP226",
                                          hint="choose another name for the release")  # fmt: skip
    keys = sorted(itemsets, key=lambda k: (len(k), k))
    counts = [int(itemsets[k]) for k in keys]
    owner_of = np.repeat(np.arange(1, len(keys) + 1), counts)  # itemset id of each synthetic subject
    sampling.shuffle(owner_of)  # post-processing: the order of synthetic subjects means nothing
    item_type = t.columns[o["item"]].type
    domain = values_list(o["items"], item_type)
    unit_type = t.columns[t.unit].type.upper()
    unit_sql = unit_type if unit_type in ("INTEGER", "BIGINT", "HUGEINT") else "BIGINT"
    with registry.transaction(con):
        con.execute(
            f"CREATE TABLE main.{_q(itemsets_name)} AS SELECT id AS itemset_id, "
            f"list_transform(idx, lambda x: ({domain})[x + 1]) AS items, len(idx) AS size, n AS count "
            "FROM (SELECT unnest($1::INTEGER[]) AS id, unnest($2::INTEGER[][]) AS idx, unnest($3::BIGINT[]) AS n) ORDER BY id",
            [list(range(1, len(keys) + 1)), [list(k) for k in keys], counts],
        )
        con.execute(
            f"CREATE TABLE main.{_q(name)} AS SELECT CAST(s.unit AS {unit_sql}) AS {_q(t.unit)}, "
            f"unnest(i.items) AS {_q(o['item'])} FROM (SELECT unnest($1::BIGINT[]) AS unit, unnest($2::INTEGER[]) AS itemset_id) s "
            f"JOIN main.{_q(itemsets_name)} i USING (itemset_id) ORDER BY 1, 2",
            [list(range(1, len(owner_of) + 1)), owner_of.tolist()],
        )
        tax = o["taxonomy"]
        parameters = {
            "item": o["item"], "fanout": o["fanout"], "c1": o["c1"], "c2": o["c2"], "max_rows": plan.max_rows,
            "personalization": plan.charge.rule, "epsilon_run": eps, "taxonomy": tax.describe(),
            "itemsets": len(keys), "operations": len(trace.operations), "extra_tables": [itemsets_name],
        }  # fmt: skip
        registry.record(
            con, entry_id=debit.entry_id, name=name, kind="synthetic table", sources=[t.name], mechanism="diffpart",
            parameters=parameters, epsilon=debit.epsilon, delta=0.0, analyst=analyst, row_count=len(owner_of),
        )  # fmt: skip
    return int(len(owner_of))


def explain_rows(plan: SynthesisPlan, subjects=None) -> list[tuple]:
    o = plan.options
    tax: diffpart.Taxonomy = o["taxonomy"]
    eps = plan.epsilon
    root_alpha = eps / 2 / tax.n_internal if tax.n_internal else None
    root_h = tax.height[tax.root]
    rows = [
        ("model", "diffpart", eps, 0.0, None, None,
         f"set-valued release of {plan.table.name}.{o['item']}: top-down partitioning over a context-free "
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
    records = getattr(subjects, "used", None)  # the subjects who pay: one record each (public)
    if records is not None:
        passing, k_root, leaf_low, leaf_high = _expected(plan, int(records))
        size = (f"{records:,} records (subjects who pay); a real itemset is released only when about {leaf_low:,}–"
                f"{leaf_high:,} or more records hold exactly it (after its items are grouped), under parts of at "
                f"least {k_root:,} records at the first split: at most {records // leaf_low:,} itemsets hold real "
                f"records")
        if passing < EMPTY_BELOW:
            size += f"; the first split would keep nothing (expected {passing:.2g}): it would be refused, free"
        rows.append(("expected size", None, None, None, None, None, size))
    rows.append(("release", None, None, None, None, None,
                 f"{plan.name} (one row per synthetic {plan.table.unit} and item) and {plan.name}_itemsets "
                 "(items, size, count)"))  # fmt: skip
    rows.append(("bounding", None, None, None, None, None,
                 f"at most {plan.max_rows} item(s) per subject, chosen at random; one subject is one record"))
    return rows


RELEASE = Release(name="diffpart", plan=named(plan), dry_run=dry_run, bind_check=bind_check,
                  answer=answer, explain_rows=explain_rows, check_size=check_size, side_table="_itemsets",
                  scales_sample=False)  # fmt: skip
