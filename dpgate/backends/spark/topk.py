"""Top-k queries over a Spark table: the exact statistics computed in Spark.

The top-k class (``dpgate.mechanisms.topk``) perturbs statistics of a *pairs* relation, one row per
distinct (charged subject, item): per item, the subjects holding it; per (item, record length) for
the methods that truncate records; the selected items' counts with each subject keeping at most
``max_groups`` of them; and, when the keys have no public domain, per key the subjects holding it,
each subject keeping at most ``max_groups`` keys (DP key selection). This module writes each as one
Spark statement and returns only those aggregated rows (``SparkPairs``, ``SparkTopK``); the noise,
the selection and the post-processing run in dpgate's process, as for DuckDB.

**Guarantee and sensitivity:** those of the mechanisms (``mechanisms.topk``, ``mechanisms.pairs``,
``mechanisms.keyselection``), which hold because the statements keep the properties their proofs
use, on Spark as on DuckDB:

- the pairs are DISTINCT on (unit, item), over the charged subjects only, every analyst expression
  guarded by the charged units' ``__seen`` [charged-only] (``plane.charged_rows``, shared with the
  counting class); so one subject changes each item's count by at most 1 [sens-freq];
- an item is a cell's position in the keys' public domains (``plane._position``, as the counting
  class writes it), a column's index (``dp_top_k_columns``), or the index of a key tuple that key
  selection released; a value outside them is no item;
- a subject's items (for the counts) and keys (for key selection) are sampled by
  ``xxhash64(xxhash64(xxhash64(unit), xxhash64(item...)) ^ salt)``, the keyed hash of
  ``bounded.rank_tree`` written for Spark: a subject's ranks depend on its own rows and the salt
  only [sens-counts] [bound]. The hash differs from DuckDB's, so a sampled statistic is not the
  DuckDB one for the same salt; without sampling the statistics are equal (tested);
- no runtime error that a value decides: the analyst's expressions are translated as for counting
  (``translate.to_spark``), dpgate's own casts are ``TRY_CAST``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from sqlglot import exp

from dpgate import errors
from dpgate.backends.spark.plane import (
    GUARD,
    _position,
    _source_parts,
    changed_after_debit,
    charged_rows,
    refuse_variables,
)
from dpgate.backends.spark.rows import keyed_rank
from dpgate.backends.spark.source import _first_line
from dpgate.backends.spark.translate import _unsupported
from dpgate.mechanisms import pairs as pairs_mod
from dpgate.plans import TopKPlan

_ids = itertools.count(1)

#: Key types that travel back as the same text from Spark as from DuckDB (key selection's keys).
_TEXT_KEYS = ("VARCHAR", "TINYINT", "SMALLINT", "INTEGER", "BIGINT")


def check_plan(plan: TopKPlan) -> None:
    """Refuse, before the debit, a top-k plan the Spark backend does not run (DP261)."""
    table = plan.source.args.get("from_")
    if table is not None and table.this.alias_or_name.startswith("__"):
        raise _unsupported(f"The table alias {table.this.alias_or_name} (names starting with __ are dpgate's)")
    if plan.source.args.get("joins"):
        raise _unsupported("A join")
    if plan.key_selection is not None:
        for key in plan.keys:
            if not key.sql_type.upper().startswith(_TEXT_KEYS):
                raise _unsupported(f"A GROUP BY key of type {key.sql_type} in a top-k query with DP key selection")
    if not plan.columns:
        _source_parts(plan)  # the analyst's expressions translate, within the size cap


def _columns_rows(plan: TopKPlan, view: str, units: str) -> str:
    """``dp_top_k_columns``: one row per (charged subject's row, set column index), as on DuckDB:
    a column is set when it IS TRUE (BOOLEAN) or casts to a non-zero DOUBLE."""
    types = {c.name: c.type.upper() for c in plan.table.columns.values()}
    flags = []
    for i, name in enumerate(plan.columns):
        col = "__t." + exp.to_identifier(name, quoted=True).sql("spark")  # __t: a column may be named unit
        cond = f"{col} IS TRUE" if types[name] == "BOOLEAN" else f"TRY_CAST({col} AS DOUBLE) <> 0"
        flags.append(f"CASE WHEN {GUARD} AND {cond} THEN {i} END")
    unit = "__t." + exp.to_identifier(plan.table.unit, quoted=True).sql("spark")
    return (
        f"SELECT __unit, __item FROM (SELECT {unit} AS __unit, explode(array({', '.join(flags)})) AS __item "
        f"FROM {view} AS __t JOIN {units} AS __c ON {unit} = __c.unit WHERE {unit} IS NOT NULL) __x "
        "WHERE __item IS NOT NULL"
    )


def held_keys_statement(plan: TopKPlan, view: str, units: str) -> str:
    """DISTINCT (``__unit``, ``__k0``..) of the charged subjects: what key selection counts and what
    the released keys are matched against (computed once, held in Spark for both)."""
    keys = ", ".join(f"__k{j}" for j in range(len(plan.keys)))
    return f"SELECT DISTINCT __unit, {keys} FROM ({charged_rows(plan, view, units)}) __s"


def pairs_statement(plan: TopKPlan, view: str, units: str, held: str | None = None, keys_view: str | None = None
) -> str:  # fmt: skip
    """DISTINCT (``__unit``, ``__item`` BIGINT) over the charged subjects: the cells of the keys'
    domains, the columns, or (with ``held``, the ``held_keys_statement`` relation) the released key
    tuples in ``keys_view`` (``__v0..`` as text, ``__i`` their index). The text of a text or
    integer key is one value's only, so each (subject, key tuple) gives one pair."""
    if plan.columns:
        return f"SELECT DISTINCT __unit, CAST(__item AS BIGINT) AS __item FROM ({_columns_rows(plan, view, units)}) __p"
    if held is not None:
        on = " AND ".join(f"CAST(__s.__k{j} AS STRING) <=> __u.__v{j}" for j in range(len(plan.keys)))
        return (
            f"SELECT DISTINCT __s.__unit, CAST(__u.__i AS BIGINT) AS __item FROM {held} AS __s "
            f"JOIN {keys_view} AS __u ON {on}"
        )
    src = charged_rows(plan, view, units)
    sizes = [len(k.domain) for k in plan.keys]
    positions = [_position(j, key) for j, key in enumerate(plan.keys)]
    terms = [f"(({p}) - 1) * {math.prod(sizes[j + 1 :])}" for j, p in enumerate(positions)]
    inside = " AND ".join(f"({p}) IS NOT NULL" for p in positions)
    return f"SELECT DISTINCT __unit, CAST({' + '.join(terms)} AS BIGINT) AS __item FROM ({src}) __s WHERE {inside}"


def key_subjects_statement(plan: TopKPlan, held: str, salt: int) -> str:
    """Per key tuple (as text): the charged subjects holding it, each subject keeping at most
    ``max_groups`` distinct keys chosen by the keyed hash [bound] (DP key selection's input);
    ``held``: the ``held_keys_statement`` relation."""
    keys = [f"__k{j}" for j in range(len(plan.keys))]
    order = ", ".join([f"{keyed_rank(['__unit', *keys], salt)} NULLS LAST", *(f"{k} NULLS LAST" for k in keys)])
    as_text = ", ".join(f"CAST({k} AS STRING) AS __t{j}" for j, k in enumerate(keys))
    return (
        f"SELECT {as_text}, count(*) AS __n FROM (SELECT *, row_number() OVER (PARTITION BY __unit ORDER BY "
        f"{order}) AS __r FROM {held}) __q WHERE __r <= {int(plan.max_groups)} GROUP BY {', '.join(keys)}"
    )


def frequencies_statement(pairs: str, n_items: int, lengths: bool) -> str:
    """Per item (and record length): the records holding it [sens-freq] (``SQLPairs.frequencies``)."""
    inside = f"SELECT __unit, __item FROM ({pairs}) __a WHERE __unit IS NOT NULL AND __item >= 0 AND __item < {int(n_items)}"
    if not lengths:
        return f"SELECT __item AS item, count(*) AS n FROM ({inside}) __b GROUP BY __item"
    return (
        f"SELECT __item AS item, __len AS len, count(*) AS n FROM (SELECT __item, "
        f"CAST(count(*) OVER (PARTITION BY __unit) AS INT) AS __len FROM ({inside}) __b) __c GROUP BY __item, __len"
    )


def sampled_statement(pairs: str, items: Sequence[int], m: int, salt: int) -> str:
    """Per requested item: the records holding it, each keeping at most ``m`` of the requested items
    ranked by the keyed hash of (unit, item) [sens-counts] (``SQLPairs.sampled_frequencies``)."""
    wanted = ", ".join(str(int(i)) for i in sorted(items))
    inside = f"SELECT __unit, __item FROM ({pairs}) __a WHERE __unit IS NOT NULL AND __item IN ({wanted})"
    if m < len(items):
        order = f"{keyed_rank(['__unit', '__item'], salt)} NULLS LAST, __item"
        inside = (
            f"SELECT __unit, __item FROM (SELECT *, row_number() OVER (PARTITION BY __unit ORDER BY {order}) AS __r "
            f"FROM ({inside}) __b) __c WHERE __r <= {int(m)}"
        )
    return f"SELECT __item AS item, count(*) AS n FROM ({inside}) __d GROUP BY __item"


class SparkPairs:
    """``mechanisms.pairs.PairStatistics`` of a pairs statement, run in Spark by ``run``."""

    def __init__(self, run, pairs: str):
        self._run, self.pairs = run, pairs

    def frequencies(self, n_items: int, lengths: bool) -> pairs_mod.Frequencies:
        rows = self._run(frequencies_statement(self.pairs, n_items, lengths))
        item = np.array([r[0] for r in rows], dtype=np.int64)
        n = np.array([r[-1] for r in rows], dtype=np.int64)
        return item, (np.array([r[1] for r in rows], dtype=np.int64) if lengths else None), n

    def sampled_frequencies(self, items: Sequence[int], m: int, salt: int) -> dict[int, int]:
        return {int(i): int(n) for i, n in self._run(sampled_statement(self.pairs, items, m, salt))}


class SparkTopK:
    """The exact statistics of one top-k plan over the charged subjects, in Spark (a context manager:
    the source, charged and intermediate views live until it closes). ``plane``: the ``SparkPlane``;
    ``charged``: the charged units (``backends.Charged``), or None to check the statements before
    the debit against an empty set.

    The relations several statements read (the pairs; with key selection, each subject's distinct
    keys) are computed once and held in Spark (``persist``) while the context is open: measured at
    1M rows, reading the source once instead of two or three times.
    """

    def __init__(self, plane: Any, plan: TopKPlan, charged: Any):
        self.plane, self.plan, self.charged = plane, plan, charged
        self.drop: list[str] = []
        self.held: list[Any] = []
        self._keys: str | None = None
        self._pairs: str | None = None

    def __enter__(self) -> SparkTopK:
        try:
            self.view, _, self.units, _, self.drop = self.plane._views(self.plan, self.charged)
        except errors.Error:
            if self.charged is None:  # before the debit: the refusal is free and says why
                raise
            raise changed_after_debit() from None
        return self

    def __exit__(self, *exc) -> None:
        for df in self.held:
            df.unpersist()
        self.plane._drop(self.drop)

    def _analysed(self, sql: str) -> Any:
        """``spark.sql(sql)``: Spark analyses it (names and types), nothing runs. Before the debit a
        statement Spark cannot analyse is refused free (DP230)."""
        refuse_variables(sql)
        try:
            return self.plane.spark.sql(sql)
        except Exception as e:  # pyspark's AnalysisException and friends
            if self.charged is not None:
                raise
            raise errors.ProgrammingError(
                f"Spark cannot bind this query: {_first_line(e)}", code="DP230", hint="fix the SQL; nothing was charged",
            ) from None  # fmt: skip

    def _hold(self, sql: str) -> str:
        """A view of ``sql``'s relation, held in Spark after its first use (not before the debit)."""
        df = self._analysed(sql)
        if self.charged is not None:
            df = df.persist()
            self.held.append(df)
        name = f"__dpgate_topk_{next(_ids)}"
        df.createOrReplaceTempView(name)
        self.drop.append(name)
        return name

    def run(self, sql: str) -> list[tuple]:
        """Run one statement of dpgate's own (after the debit): its aggregated rows."""
        try:
            with self.plane.jobs.group("computing the top-k statistics"):
                return [tuple(r) for r in self._analysed(sql).collect()]
        except BaseException:
            self.plane.forget()  # e.g. an executor lost the checkpointed units: the next statement sends them again
            raise

    def _held_keys(self) -> str:
        if self._keys is None:
            self._keys = self._hold(held_keys_statement(self.plan, self.view, self.units))
        return self._keys

    def key_subjects(self, salt: int) -> list[tuple]:
        """(key text..., subjects) per key tuple, for DP key selection [bound]."""
        return self.run(key_subjects_statement(self.plan, self._held_keys(), salt))

    def pairs(self, labels: list[tuple] | None = None) -> SparkPairs:
        """The plan's pairs relation, held in Spark; ``labels``: the key tuples key selection released
        (their order is the items' order)."""
        if self.plan.key_selection is None:
            sql = pairs_statement(self.plan, self.view, self.units)
        else:
            sql = pairs_statement(self.plan, self.view, self.units, self._held_keys(), self._keys_view(labels or []))
        return SparkPairs(self.run, f"SELECT __unit, __item FROM {self._hold(sql)}")

    def _keys_view(self, labels: list[tuple]) -> str:
        """The released key tuples as a view (``__v0..`` text, ``__i`` their index): public values."""
        from pyspark.sql import types as T

        nk = len(self.plan.keys)
        fields = [T.StructField(f"__v{j}", T.StringType()) for j in range(nk)]
        schema = T.StructType([*fields, T.StructField("__i", T.LongType())])
        rows = [tuple(None if v is None else str(v) for v in lab) + (i,) for i, lab in enumerate(labels)]
        name = f"__dpgate_keys_{next(_ids)}"
        self.plane.spark.createDataFrame(rows, schema=schema).createOrReplaceTempView(name)
        self.drop.append(name)
        return name

    def check(self) -> None:
        """Analyse every statement a run of the plan sends (nothing runs), before the debit."""
        if self.plan.key_selection is not None:
            self._analysed(key_subjects_statement(self.plan, self._held_keys(), 0))
        pairs = self.pairs([]).pairs
        self._analysed(frequencies_statement(pairs, 1, True))
        self._analysed(sampled_statement(pairs, [0, 1], 1, 0))
