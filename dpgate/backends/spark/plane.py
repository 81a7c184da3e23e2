"""Apache Spark as the data plane of a protected table (counting queries; top-k in ``topk``; a
release's input and a graph's edges at the end).

A table declared with a Spark source (``Owner.protect(t, unit=..., spark="db.table")`` or
``spark="parquet:/path"``) keeps its rows in Spark. The DuckDB file holds an empty table of the
same columns (its *stub*), the roster, the ledger and the declarations, so that planning,
charging and noise are exactly as for a DuckDB table; only the exact, bounded aggregation of a
counting query runs in Spark, and only its per-cell integer statistics come back.

A synthetic release (``release_rows``) runs a statement the synthetic class writes from public
facts over the charged subjects' rows, cut to their bound as below: a tabular release gets each
distinct coded row and its count, the others their bounded records, points or sequences. A
graph's edge table (``graph_edges``) has no charged set (its roster is the one budget every
potential edge shares): the analyst's WHERE, translated as for counting, selects edges, and the
distinct edges come back.

What holds on Spark exactly as on DuckDB (docs/privacy-model.md, docs/spark.md):

only charged subjects' rows
    The charged units travel from the ledger's transaction to Spark as a temporary view (one row
    per unit with ``__seen``, a nullable column computed from the charged rows), and the source
    rows are inner-joined with it. Every analyst expression (WHERE, keys, aggregate inputs) is
    guarded by ``CASE WHEN __c.__seen IS NOT NULL THEN ... END``: it references a column of the
    join's other side that no join condition equates with a source column, so Spark's optimizer
    can neither evaluate it below the join nor rewrite it into one that it can [charged-only].
    (Guarding with ``__c.unit`` does not work: constraint propagation substitutes the source's unit
    for it, through the join's equality, and pushes the analyst's filter down to the scan; a
    literal or non-nullable column is folded away.) ``tests/backends/test_spark_backend.py``
    checks this on the installed Spark with deterministic expressions that fail on one subject's
    rows under ANSI mode.
contribution bounding
    A subject keeps at most ``max_rows`` rows (and ``max_groups`` groups when the plan bounds
    groups): a uniformly random choice, ranked by ``xxhash64(xxhash64(row, dup) ^ salt)``, with the
    62-bit ``salt`` drawn from the OS for each query and equal rows numbered apart (``dup``) so that
    each row, not each distinct value, has its own rank. A table declared with a stored sample order
    ranks a single-table plan's rows with its kept key instead of the salt (``row_hash``; the key is
    drawn from the OS by the owner: ``catalog.sample_order``), so every query keeps the same rows.
    The ranking of a subject's rows depends on that subject's rows only; no ``rand()``, no partition
    order. The salt is the same value
    DuckDB's plan would use, but the hash differs, so a sampled answer on Spark is not the DuckDB
    answer for the same salt; without sampling (no subject over its bound) the statistics are the
    same (tested).
clamping and the grid
    Aggregate inputs are clamped to the declared bounds with the same CASE as on DuckDB and put on
    the plan's grid as exact integers; sums are DECIMAL(38, 0), which cannot overflow for
    |bound / grid| < 2^53 and fewer than 10^22 rows.
no error that a row decides
    dpgate runs its statements in its own Spark session (``newSession()``, sharing the
    caller's catalog) with ANSI mode off, and every analyst operator that can fail on a value is
    its ``try_*`` form (``try_add``, ``try_subtract``, ``try_multiply``, ``try_divide``, ``TRY_CAST``):
    an overflow, a failed cast or a division by zero gives NULL, as ``TRY()`` does on DuckDB. Only
    the expressions on ``_SAFE`` reach Spark; anything else is refused for Spark tables before the
    debit (DP261), with the list of what is accepted.

Every statement is analysed by Spark (``spark.sql`` resolves names and types without running)
before the debit, so a statement Spark cannot run is refused free. The source's schema is
compared with the stub's on every statement; a drifted source is refused (DP262) until the owner
declares it again.
"""

from __future__ import annotations

import functools
import itertools
import os
import re
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import sqlglot
from sqlglot import exp

from dpgate import database, errors
from dpgate.backends import Charged, bounded
from dpgate.backends import statement as statement_mod
from dpgate.backends.spark import rows as joined_rows
from dpgate.backends.spark.literals import spark_values
from dpgate.backends.spark.runtime import Jobs, cannot_run
from dpgate.backends.spark.source import _first_line, read_source, reads_every_column_safely, session_for, stub_columns
from dpgate.backends.spark.translate import (
    EXACT_DOUBLE_DIGITS,
    MAX_SPARK_SQL,
    _decimal_type,
    _kind,
    _sql,
    _unsupported,
    to_spark,
)
from dpgate.catalog import sample_order
from dpgate.catalog.tables import ProtectedTable
from dpgate.mechanisms.base import AVG, QUANTILE, SUM, VARIANCE_KINDS, ExactAnswer
from dpgate.plans import CountPlan, TopKPlan

_ids = itertools.count(1)


def _position(j: int, key) -> str | None:
    """SQL for key j's 1-based position in its public domain (NULL outside it), as on DuckDB."""
    if key.domain is None:
        return None
    k = f"__k{j}"
    if key.sql_type.upper().startswith("DECIMAL"):
        # Spark types a DECIMAL expression wider than DuckDB (DECIMAL(21, 2) for DuckDB's (18, 2)) and
        # array_position wants one type; the value fits DuckDB's type (its exact digits are at most 18:
        # _decimal_type), so the cast keeps it
        k = f"TRY_CAST({k} AS {key.sql_type})"
    null_pos = key.domain.index(None) + 1 if None in key.domain else "NULL"
    values = [v for v in key.domain]
    ints = key.source == "integer bounds" and all(isinstance(v, int) and not isinstance(v, bool) for v in values)
    if ints and values == list(range(values[0], values[0] + len(values))):
        inside = f"CASE WHEN {k} BETWEEN {values[0]} AND {values[-1]} THEN CAST({k} AS BIGINT) - {values[0] - 1} END"
    else:
        # array_position is 1-based and 0 when absent; a NULL domain entry never matches a value.
        # the values DuckDB's plan compares with (``database.typed_list``), written exactly
        domain_sql, params = database.typed_list("d", [v for v in values if v is not None], key.sql_type)
        arr = ", ".join(spark_values(domain_sql, {"d": params}, key.sql_type))
        pos = [i + 1 for i, v in enumerate(values) if v is not None]
        if pos != list(range(1, len(pos) + 1)):  # a NULL entry in the middle: map array indexes back
            arr_pos = f"element_at(array({', '.join(map(str, pos))}), array_position(array({arr}), {k}))"
            inside = f"CASE WHEN array_position(array({arr}), {k}) > 0 THEN {arr_pos} END"
        else:
            inside = f"nullif(array_position(array({arr}), {k}), 0)"
    return f"CASE WHEN {k} IS NULL THEN {null_pos} ELSE {inside} END"


def check_plan(plan: CountPlan) -> None:
    """Refuse, before the debit, a counting plan the Spark backend does not run."""
    table = plan.source.args.get("from_")
    if table is not None and table.this.alias_or_name.startswith("__"):
        raise _unsupported(f"The table alias {table.this.alias_or_name} (names starting with __ are dpgate's)")
    if plan.joined or plan.prebound or plan.source.args.get("joins"):
        joined_rows.check(plan)  # joins on the unit of tables in Spark, the per-subject subquery
    if plan.key_selection is not None:
        for key in plan.keys:
            if key.domain is None and not key.sql_type.upper().startswith(("VARCHAR", "TINYINT", "SMALLINT", "INTEGER", "BIGINT")):
                raise _unsupported(f"A GROUP BY key of type {key.sql_type} without a declared domain")
    if one_table(plan):
        _source_parts(plan)
    types = _column_types(plan)
    for agg in plan.aggs:
        if agg.expr is None or agg.kind not in (SUM, AVG, QUANTILE, *VARIANCE_KINDS) or _kind(agg.expr, types) != "decimal":
            continue
        t = _decimal_type(agg.expr, types)
        if t is None or (t[0] > EXACT_DOUBLE_DIGITS and max(abs(agg.lower), abs(agg.upper)) * 10 ** t[1] > 2**52):
            # The input is made a DOUBLE for the clamp and the grid. A value whose two conversions differ
            # has at least 2^53 units of its last digit; within bounds below 2^52 such units it is
            # clamped to the same bound on both engines.
            raise _unsupported(
                f"{agg.kind.upper()} of a DECIMAL of more than {EXACT_DOUBLE_DIGITS} digits with bounds this wide "
                "(the engines make different DOUBLEs of it)"
            )


def _column_types(plan: CountPlan | TopKPlan) -> dict[str, str]:
    return {c.name: c.type for c in plan.table.columns.values()}


def _source_parts(plan: CountPlan | TopKPlan) -> tuple[list[tuple[str, str]], str | None]:
    """(alias, Spark SQL) of each column of ``plan.source`` and its WHERE, analyst parts rewritten."""
    types = _column_types(plan)
    dates = frozenset(name for name, t in types.items() if t.upper() == "DATE")
    cols = []
    for e in plan.source.expressions:
        cols.append((e.alias_or_name, _sql(to_spark(e.unalias(), dates, types))))
    where = plan.source.args.get("where")
    where_sql = _sql(to_spark(where.this, dates, types, predicate=True)) if where is not None else None
    size = sum(len(c) for _, c in cols) + len(where_sql or "")
    if size > MAX_SPARK_SQL:  # before the debit (the bind check writes the same text)
        raise errors.UnsupportedQueryError(
            f"The statement's expressions make {size:,} characters of Spark SQL (at most {MAX_SPARK_SQL:,})",
            code="DP261", hint="simplify the expressions (nested divisions and casts are written out several "
            "times for Spark); nothing was charged",
        )  # fmt: skip
    return cols, where_sql


#: Every analyst expression is evaluated under this guard: a data column of the join's other side [charged-only].
GUARD = "__c.__seen IS NOT NULL"
#: The column of the one-row view that guards a graph's WHERE (``graph_statement``).
GRAPH_GUARD = "__dpgate_seen"


def charged_rows(plan: CountPlan | TopKPlan, view: str, units: str, extra: str = "") -> str:
    """The Spark SQL of ``plan.source``'s rows (``__unit`` and the source's other columns) of the charged
    subjects only: ``view`` (the source rows) joined with ``units`` (the charged units, ``__c``), every
    analyst expression guarded [charged-only]. ``extra``: more columns of dpgate's own, which may use
    the guard and the source's columns."""
    cols, where = _source_parts(plan)
    table = plan.source.args["from_"].this
    alias = exp.to_identifier(table.alias_or_name, quoted=True).sql("spark")  # the analyst's alias, if any
    select = ", ".join(
        f"{sql} AS {name}" if name == "__unit" else f"CASE WHEN {GUARD} THEN {sql} END AS {name}" for name, sql in cols
    )
    unit_sql = dict(cols)["__unit"]
    src = f"SELECT {select}{extra} FROM {view} AS {alias} JOIN {units} AS __c ON {unit_sql} = __c.unit"
    return src + (f" WHERE CASE WHEN {GUARD} THEN ({where}) ELSE false END" if where else "")


def refuse_variables(sql: str) -> None:
    """Refuse a statement with ``${`` in it, before the debit (the bind check builds the same text).

    Spark substitutes ${env:X}, ${system:X}, ${spark.x} in the whole text, string literals
    included: '${env:HOME}' = '/root' held on Spark, and its analysis errors printed the values.
    """
    if "${" in sql:
        raise _unsupported("A '${' in the statement (Spark would substitute a variable of its configuration there)")
    sqlglot.parse_one(sql, read="spark")  # dpgate's own SQL must parse as Spark SQL (a bug check)


def statement(plan: CountPlan, view: str, units: str, charged: str, salt: int, n_parts: int,
              others: dict[str, tuple[str, str]] | None = None, key: int | None = None) -> str:  # fmt: skip
    """The Spark SQL of the exact bounded statistics of ``plan``.

    ``view`` holds the source rows, ``units`` the charged units (column ``unit``), ``charged`` the
    charged (unit, part) rows; ``others``: (view, units) of each protected table joined on the unit;
    ``key``: the table's kept sample key (a single-table plan: ``one_table``), else rows are
    ranked with the statement's ``salt``. Returns one row per non-empty cell: [part,] each key's
    position (or value as text, with key selection), the statistics in ``bounded.labels``' order,
    and the per-key subject count with key selection.
    """
    if not one_table(plan):
        src = joined_rows.source(plan, {plan.table.name: (view, units), **(others or {})}, salt)
        # Measured on the text with salt 0 and fixed view names, the same before and after the debit:
        # the real salt (up to 19 digits) and the views' numbers made a statement the check before the
        # debit passed exceed the cap after it, a refusal once its ε was spent.
        fixed = {t.name: ("__dpgate_src", "__dpgate_units") for t in (plan.table, *plan.joined)}
        size = len(joined_rows.source(plan, fixed, 0))
        if size > MAX_SPARK_SQL:  # before the debit (the bind check measures the same text)
            raise errors.UnsupportedQueryError(
                f"The statement's expressions make {size:,} characters of Spark SQL (at most {MAX_SPARK_SQL:,})",
                code="DP261", hint="simplify the expressions; nothing was charged",
            )  # fmt: skip
    else:
        src = charged_rows(plan, view, units, row_hash(plan) if key is not None else "")
    return _bounded(plan, src, charged, salt, n_parts, key if one_table(plan) else None)


def one_table(plan: CountPlan) -> bool:
    """A plan over one table, without joins or the per-subject subquery: its rows are cut after the
    WHERE, and ranked with the table's kept sample key when it has one, as a stored order serves on
    DuckDB (a join or the per-subject subquery cuts each table's rows first, with the statement's
    salt: ``rows.cut_rows``)."""
    return not (plan.joined or plan.prebound)


def row_hash(plan: CountPlan) -> str:
    """The column ``__pk0`` of ``charged_rows``: a hash of every declared column of the source row,
    computed before the analyst's WHERE selects it. With the duplicate number ``__pk1`` it tells a
    subject's rows apart, as a stored order's rank does on DuckDB [key]."""
    table = plan.source.args["from_"].this
    alias = exp.to_identifier(table.alias_or_name, quoted=True).sql("spark")
    # each column hashed alone first: Spark's multi-argument hash skips NULLs without marking where they
    # were, so (NULL, 5) and (5, NULL) would share a hash, and their numbers would depend on the WHERE.
    # A floating-point column by its text: xxhash64 and Spark's sort take -0.0 for 0.0, which a WHERE
    # tells apart (1 / x < 0)
    def one(name: str, sql_type: str) -> str:
        col = f"{alias}.{exp.to_identifier(name, quoted=True).sql('spark')}"
        return f"xxhash64(CAST({col} AS STRING))" if sql_type.upper() in ("DOUBLE", "FLOAT", "REAL") else f"xxhash64({col})"

    cols = ", ".join(one(c.name, c.type) for c in plan.table.columns.values())
    return f", CASE WHEN {GUARD} THEN xxhash64({cols}) END AS __pk0"


def _bounded(plan: CountPlan, src: str, charged: str, salt: int, n_parts: int, key: int | None = None) -> str:
    """The source rows bounded per subject and aggregated per cell (``statement.Skeleton``)."""
    # One shuffle by subject: every window of the sampling partitions by __unit (first), so Spark
    # reuses it instead of shuffling again for each (measured: 4.2 -> 2.7 s at 1M rows without sampling).
    rows = f"SELECT * FROM ({src}) __s DISTRIBUTE BY __unit"
    salted = exp.Cast(this=exp.Literal.number(int(salt)), to=exp.DataType.build("BIGINT"))
    positions = [_position(j, k) for j, k in enumerate(plan.keys)]
    skeleton = statement_mod.Skeleton(plan, "spark", salted, positions, statement_mod.stats(plan), charged, n_parts)
    if key is not None:
        # [key] A subject's rows are told apart by the hash of the whole row (``row_hash``) and a number
        # among its rows of that hash; rows of one hash are ordered by the statement's columns, so two
        # rows that could swap numbers are equal in everything the statement reads. The WHERE and the
        # domains select rows with all their equal copies (they read the row only), so the numbers
        # are those of all the subject's rows. Ranked with the kept key: the same rows every query.
        skeleton.row_key = ("__pk0", "__pk1")
        skeleton.row_salt = exp.Cast(this=exp.Literal.number(int(key)), to=exp.DataType.build("BIGINT"))
        order = ", ".join(f"{c} NULLS LAST" for c in ("__pk0", *skeleton.cols))
        rows = f"SELECT *, row_number() OVER (PARTITION BY __unit, __pk0 ORDER BY {order}) AS __pk1 FROM ({rows}) __h"
    # Every row is ranked (no split into subjects within and over their bounds, which on DuckDB
    # saves work the table's facts show unneeded); the ranking drops rows outside the domains first.
    out = skeleton.aggregate(skeleton.sampled(rows), filtered=True, key_text=plan.key_selection is not None)
    refuse_variables(out)
    return out


def _before_debit(check: Callable[..., Any]) -> Callable[..., Any]:
    """A check that runs before the debit: an error of Spark's own runtime (a stopped session, a
    driver that is gone: py4j's errors) refuses the statement free, as DP263, not as a traceback."""

    @functools.wraps(check)
    def checked(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return check(self, *args, **kwargs)
        except errors.Error:
            raise
        except Exception as e:  # noqa: BLE001
            # py4j's own errors and a lost connection to the driver; another OSError (dpgate's own I/O)
            # is not Spark's state and keeps its traceback
            if isinstance(e, (ConnectionError, EOFError)) or type(e).__module__.startswith("py4j"):
                raise cannot_run(e) from None
            raise

    return checked


#: Charged sets kept materialized in Spark per plane (a few rosters / generations).
_UNITS_KEPT = 4


class SparkPlane:
    """The Spark data plane of one gateway: a session, and the plans it runs."""

    name = "spark"

    def __init__(self, spark: Any, progress: Any = None):
        self.spark = session_for(spark)
        self._units: dict[tuple, str] = {}  # charged-set fingerprint -> materialized units view, oldest first
        self._pinned: set[str] = set()  # the units views the current statement reads (never evicted)
        self._guard: str | None = None  # the one-row view that guards a graph's WHERE (``_graph_guard``)
        # Each piece of a statement's Spark work runs in a job group that an interrupt before the
        # debit cancels (runtime's docstring); ``progress()`` is the statement's progress callback.
        self.jobs = Jobs(self.spark)
        if progress is not None:
            self.jobs.progress = progress

    def interrupt(self) -> bool:
        """Cancel the Spark work running now (the gateway calls this before the debit only)."""
        return self.jobs.cancel()

    def end(self) -> None:
        """The statement is over: its progress line, if one was shown, ends."""
        self.jobs.end()

    def _register(self, table: ProtectedTable) -> tuple[str, Any]:
        """The table's source as a temporary view of dpgate's session; refuses a drifted schema."""
        source = table.options["spark"]
        with self.jobs.group("reading the source's schema"):  # listing a large Parquet source runs jobs
            df = read_source(self.spark, source, owner=False)
        try:
            now = stub_columns(df, source)
        except errors.PolicyError as e:
            raise errors.PolicyError(
                f"The Spark source of {table.name} changed: {e.message}", code="DP262",
                hint="the data owner declares it again (dpgate policy apply); nothing was charged",
            ) from None  # fmt: skip
        declared = [(c.name, c.type.upper()) for c in table.columns.values()]
        if [(n, t.upper()) for n, t in now] != declared:
            raise errors.PolicyError(
                f"The Spark source of {table.name} no longer has the columns it was declared with", code="DP262",
                hint="the data owner declares it again (dpgate policy apply); nothing was charged",
            )  # fmt: skip
        view = f"__dpgate_src_{next(_ids)}"
        df.createOrReplaceTempView(view)
        return view, df

    def _charged_views(self, table: ProtectedTable, df: Any, charged: Charged | None) -> tuple[str, str, list[str]]:
        """Views of the charged (unit, part) pairs and of the charged units, and the views to drop after.

        The units (with ``__seen``) are materialized once in Spark (``localCheckpoint``) and kept for
        later statements with the same charged set, recognised by its fingerprint (``Charged.key``):
        a uniform debit charges the same roster query after query, and sending a million units to
        Spark and building them again for every query cost seconds. The pairs are sent only when
        the plan needs the parts (personalization with several partitions).
        """
        from pyspark.sql import functions as F
        from pyspark.sql import types as T

        unit_type = next(f.dataType for f in df.schema.fields if f.name.lower() == table.unit)
        n = next(_ids)
        drop = []
        key = (table.unit, unit_type.simpleString(), charged.key) if charged is not None else None
        units = self._units.pop(key, None) if key is not None else None
        if units is not None:
            self._units[key] = units  # the newest again: this statement uses it
            self._pinned.add(units)
        else:
            units = f"__dpgate_units_{n}"
            if charged is None or charged.count == 0:
                schema = T.StructType([T.StructField("unit", unit_type), T.StructField("__seen", T.IntegerType())])
                rel = self.spark.createDataFrame([], schema=schema)
                drop.append(units)
            else:
                rel = self.spark.createDataFrame(charged.units()).select(
                    F.col("unit").cast(unit_type).alias("unit"), F.col("__seen").cast("int").alias("__seen")
                )
                with self.jobs.group("receiving the charged subjects"):
                    rel = rel.localCheckpoint()  # computed once; every later read comes from the executors' blocks
            # __seen: nullable and sent as data, so the optimizer cannot fold the guard [charged-only]
            rel.createOrReplaceTempView(units)
            if units not in drop:  # kept only once its view exists
                self._units[key] = units
                self._pinned.add(units)
                # Never the units of a table this statement reads: a join of tables with different unit
                # columns keeps a set per table, and dropping the first table's view while the second's was
                # kept failed the charged statement after the debit (DP404)
                for old in [k for k, v in self._units.items() if v not in self._pinned]:
                    if len(self._units) <= _UNITS_KEPT:
                        break
                    self.spark.catalog.dropTempView(self._units.pop(old))
        pairs = f"__dpgate_charged_{n}"
        schema = T.StructType([T.StructField("unit", unit_type), T.StructField("part", T.IntegerType())])
        if charged is None or charged.pairs is None or charged.pairs.num_rows == 0:
            rel = self.spark.createDataFrame([], schema=schema)
        else:
            rel = self.spark.createDataFrame(charged.pairs).select(
                F.col("unit").cast(unit_type).alias("unit"), F.col("part").cast("int").alias("part")
            )
        rel.createOrReplaceTempView(pairs)
        drop.append(pairs)
        return pairs, units, drop

    def _views(self, plan: CountPlan | TopKPlan, charged: Charged | None
               ) -> tuple[str, str, str, dict[str, tuple[str, str]], list[str]]:  # fmt: skip
        """(source, pairs, units) views of the plan's table, (source, units) of each protected table
        joined with it on the unit, and the views to drop after the statement."""
        self._pinned = set()  # a new statement: the charged sets it uses are kept while it runs
        drop: list[str] = []
        found: dict[str, tuple[str, str, str]] = {}
        try:
            for t in (plan.table, *getattr(plan, "joined", ())):
                view, df = self._register(t)
                drop.append(view)
                pairs, units, dropped = self._charged_views(t, df, charged)
                drop += dropped
                found[t.name] = (view, pairs, units)
        except BaseException:
            self._drop(drop)
            raise
        view, pairs, units = found.pop(plan.table.name)
        return view, pairs, units, {name: (v, u) for name, (v, _, u) in found.items()}, drop

    def forget(self) -> None:
        """Drop every charged set (and the graph guard) kept in Spark."""
        while self._units:
            self.spark.catalog.dropTempView(self._units.popitem()[1])
        if self._guard is not None:
            self.spark.catalog.dropTempView(self._guard)
            self._guard = None

    def _drop(self, views) -> None:
        for v in views:
            self.spark.catalog.dropTempView(v)

    @_before_debit
    def bind_check(self, con: Any, plan: CountPlan, probe: str) -> None:
        """Analyse the statement against an empty charged set (Spark reads no row). The database
        file's connection and probe are not needed: the plan carries everything Spark binds."""
        check_plan(plan)
        key = None if self.sample_key(con, plan) is None else 0
        view, pairs, units, others, drop = self._views(plan, None)
        try:
            parts = 2 if plan.charge.rule in ("partition", "t_round") else 1
            sql = statement(plan, view, units, pairs, 0, parts, others, key)
            self._analyse(sql, "this query", "fix the SQL; nothing was charged")
        finally:
            self._drop(drop)

    def _analyse(self, sql: str, what: str, hint: str) -> None:
        """Have Spark analyse ``sql`` (names and types resolved, nothing runs), before the debit: what
        it cannot bind is refused free (DP230)."""
        try:
            with self.jobs.group("checking the statement"):
                self.spark.sql(sql)
        except errors.Error:
            raise
        except Exception as e:  # noqa: BLE001 - pyspark's AnalysisException and friends
            raise errors.ProgrammingError(f"Spark cannot bind {what}: {_first_line(e)}", code="DP230",
                                          hint=hint) from None  # fmt: skip

    def exact(self, con: Any, plan: CountPlan, charged: str, salt: int, n_parts: int = 1, *,
              generation: int | None = None) -> ExactAnswer:
        """The plan's exact statistics over the subjects in ``charged`` (the ledger's relation in the
        database file, read here and sent to Spark). Nothing is counted about heavy or unused
        subjects (0 and None)."""
        key = self.sample_key(con, plan)
        rows = self.bounded_rows(plan, bounded.read_charged(con, charged, n_parts), salt, n_parts, key)
        positioned = [k.domain is not None for k in plan.keys]
        return bounded.answer(plan, rows, positioned, bounded.labels(plan), 0, None, n_parts)

    @_before_debit
    def check_top_k(self, plan: TopKPlan) -> None:
        """Refuse (free) a top-k plan Spark could not run: analyse each of its statements against an
        empty charged set, before the debit (``dpgate.backends.spark.topk``)."""
        from dpgate.backends.spark import topk

        topk.check_plan(plan)
        with topk.SparkTopK(self, plan, None) as statements:
            statements.check()

    def top_k(self, con: Any, plan: TopKPlan, charged: str) -> Any:
        """The exact statistics of a top-k plan over the subjects in ``charged`` (the ledger's relation
        in the database file, read here and sent to Spark): a context manager, a ``SparkTopK``."""
        from dpgate.backends.spark import topk

        return topk.SparkTopK(self, plan, bounded.read_charged(con, charged, 1))

    @_before_debit
    def check_release(self, plan: Any, write: Callable[[str, str], str]) -> None:
        """Analyse a release's statement against an empty charged set, before the debit (see
        ``release_rows``)."""
        view, _, units, _, drop = self._views(plan, None)
        try:
            sql = write(view, units)
            refuse_variables(sql)
            self._analyse(sql, "the release's statement",
                          "the data owner checks the table's declarations (dpgate policy apply); nothing was charged")
        finally:
            self._drop(drop)

    def release_rows(self, con: Any, plan: Any, write: Callable[[str, str], str], charged: str) -> Any:
        """A synthetic release's exact input, read where the rows are, as an Arrow table.

        ``write(source, units)`` is the release's statement over the views of the source rows and of
        the charged units (``unit``, ``__seen``); the synthetic class writes it from the plan's public
        facts (codings, declared items or symbols, column names), never from analyst text, and joins
        the rows with the units first [charged-only], cutting each subject's rows to its bound
        [bound] (``cut_rows``, or a keyed hash of its own). Fails closed after the debit as
        ``bounded_rows`` does."""
        try:
            view, _, units, _, drop = self._views(plan, bounded.read_charged(con, charged, 1))
        except errors.Error:
            raise changed_after_debit() from None
        try:
            with self.jobs.group("reading the charged rows"):
                return self.spark.sql(write(view, units)).toArrow()
        except BaseException:
            self.forget()
            raise
        finally:
            self._drop(drop)

    def _graph_guard(self) -> str:
        """A view of one row whose nullable ``GRAPH_GUARD`` column, sent as data and checkpointed, guards
        a graph's WHERE (``graph_statement``); made once per plane."""
        if self._guard is None:
            from pyspark.sql import types as T

            schema = T.StructType([T.StructField(GRAPH_GUARD, T.IntegerType(), nullable=True)])
            with self.jobs.group("preparing the statement"):
                rel = self.spark.createDataFrame([(1,)], schema=schema).localCheckpoint()
            name = f"__dpgate_guard_{next(_ids)}"
            rel.createOrReplaceTempView(name)
            self._guard = name
        return self._guard

    @_before_debit
    def check_graph(self, plan: Any) -> None:
        """Refuse (free) an edge statement Spark could not run: translate the WHERE and analyse the
        statement, before the debit."""
        view, _ = self._register(plan.table)
        try:
            self._analyse(graph_statement(plan, view, self._graph_guard()), "this query",
                          "fix the SQL; nothing was charged")
        finally:
            self._drop([view])

    def graph_edges(self, plan: Any) -> Any:
        """The edges of a subgraph plan as an Arrow table (``graph_statement``). A graph's roster is
        one row (every potential edge shares one budget), so every edge row is read; fails closed
        after the debit as ``bounded_rows`` does."""
        try:
            view, _ = self._register(plan.table)
        except errors.Error:
            raise changed_after_debit() from None
        try:
            with self.jobs.group("reading the edges"):
                return self.spark.sql(graph_statement(plan, view, self._graph_guard())).toArrow()
        except BaseException:
            self.forget()  # e.g. an executor lost the checkpointed guard: the next statement makes it again
            raise
        finally:
            self._drop([view])

    def sample_key(self, con: Any, plan: CountPlan) -> int | None:
        """The kept sample key the plan's rows are ranked with (``catalog.sample_order``), or None.

        Asked of the source as it is now, in this session, at each statement: a table declared as
        Parquet can have become a view since, and a kept key reads every column of every row
        (``row_hash``), which a view's expressions could fail on. Such a source samples per query."""
        if not one_table(plan):
            return None
        key = sample_order.kept_key(con, plan.table)
        if key is None or not reads_every_column_safely(self.spark, plan.table.options["spark"]):
            return None
        return key

    def bounded_rows(self, plan: CountPlan, charged: Charged, salt: int, n_parts: int,
                     key: int | None = None) -> list[tuple]:  # fmt: skip
        """Run the statement on the charged subjects (an Arrow table of unit, part).

        This runs after the debit: a source that became unreadable or changed its columns since the
        bind check (the owner's doing, not a subject's) fails closed, with Spark's text withheld (it
        can name a partition directory, i.e. a value).
        """
        try:
            view, pairs, units, others, drop = self._views(plan, charged)
        except errors.Error:
            raise changed_after_debit() from None
        try:
            with self.jobs.group("computing the exact statistics"):
                rows = self.spark.sql(statement(plan, view, units, pairs, salt, n_parts, others, key)).collect()
        except BaseException:
            self.forget()  # e.g. an executor lost the checkpointed units: the next statement sends them again
            raise
        finally:
            self._drop(drop)
        return [tuple(_plain(x) for x in r) for r in rows]


#: The session setting in which an owner declares the cores a statement may count on (a cluster).
CORES_SETTING = "spark.dpgate.statementCores"


def statement_cores(spark: Any) -> int:
    """The cores a statement's Spark work may count on in a running session (the work bound:
    ``cost.check_rows``): a local master's threads, else the owner's ``CORES_SETTING``, else 1.
    ``spark.default.parallelism`` is not asked: it is a partitioning hint, often a few times the
    real cores."""
    try:
        master = str(spark.sparkContext.master)
    except Exception:  # noqa: BLE001 - e.g. Spark Connect, which has no SparkContext
        master = ""
    try:
        declared = spark.conf.get(CORES_SETTING, None)
    except Exception:  # noqa: BLE001
        declared = None
    return cores_of(master, declared)


def cores_of(master: str, declared: Any) -> int:
    """The cores of a master URL's local threads (``local[N]``, ``local[*]``: at most this machine's), else ``declared``
    (the owner's ``CORES_SETTING``), else 1 (also for anything that is not a whole number)."""
    m = re.fullmatch(r"local(?:\[(\d+|\*)(?:,\s*\d+)?\])?", str(master or "").strip())
    if m:
        n = m.group(1) or "1"
        machine = os.cpu_count() or 1  # local[64] on 2 cores runs 64 threads on 2 cores
        return machine if n == "*" else max(1, min(int(n), machine))
    try:
        return max(1, int(str(declared))) if declared is not None else 1
    except ValueError:
        return 1


def graph_statement(plan: Any, view: str, guard: str) -> str:
    """The Spark SQL of a subgraph plan's edges, as few rows as give the simple graph.

    With ``nodes = N``: the node indices ``(__s, __d)`` of each distinct edge (smaller first) whose
    endpoints lie in ``0 .. N-1``, self-loops dropped (integer endpoints, declared so: the cast is
    exact). With a public node table: each distinct pair of raw endpoint values ``(__a, __b)``, which
    the subgraph class maps to node indices in the database file, where the node table is. The WHERE
    is the analyst's, translated (``to_spark``) with the counting class's rules: every operator
    that could fail on a value is its ``try_*`` form, and what the engines compute differently is
    refused, before the debit (the bind check writes the same text). A graph has no charged set, yet
    the WHERE is guarded as a counting query's is, by a data column of ``guard`` (one row, opaque to
    the optimizer): a filter pushed into a source's reader is decided there by the file's statistics
    and dictionaries, which compare -0.0 and NaN otherwise, so one edge row could decide whether
    others in its row group are read; guarded, Spark's own filter decides every row, whatever the
    source's format."""
    graph = plan.table.graph
    types = {c.name: c.type for c in plan.table.columns.values()}
    dates = frozenset(name for name, t in types.items() if t.upper() == "DATE")
    where = plan.edges_where
    if isinstance(where, exp.Anonymous) and where.name.upper() == "TRY":  # DuckDB's wrapper: Spark's try_* instead
        where = where.expressions[0]
    cond = ""
    if where is not None:
        analyst = _sql(to_spark(where, dates, types, predicate=True))
        cond = f" WHERE CASE WHEN __g.{GRAPH_GUARD} IS NOT NULL THEN ({analyst}) ELSE false END"
    source = f"{view} CROSS JOIN {guard} AS __g" if where is not None else view
    s, d = (exp.to_identifier(graph[c], quoted=True).sql("spark") for c in ("src", "dst"))
    if graph.get("nodes") is not None:
        n = int(graph["nodes"])
        inner = f"SELECT CAST({s} AS BIGINT) AS __x, CAST({d} AS BIGINT) AS __y FROM {source}{cond}"
        sql = (
            f"SELECT DISTINCT least(__x, __y) AS __s, greatest(__x, __y) AS __d FROM ({inner}) __e "
            f"WHERE __x BETWEEN 0 AND {n - 1} AND __y BETWEEN 0 AND {n - 1} AND __x <> __y"
        )
    else:
        sql = f"SELECT DISTINCT {s} AS __a, {d} AS __b FROM {source}{cond}"
    if len(cond) > MAX_SPARK_SQL:  # the analyst's part only: the view's name differs after the debit
        raise errors.UnsupportedQueryError(
            f"The statement's expressions make {len(cond):,} characters of Spark SQL (at most {MAX_SPARK_SQL:,})",
            code="DP261", hint="simplify the WHERE; nothing was charged",
        )  # fmt: skip
    refuse_variables(sql)
    return sql


def changed_after_debit() -> errors.OperationalError:
    """A source that became unreadable or changed its columns since the check before the debit (the
    owner's doing, not a subject's): the statement fails closed, with Spark's text withheld (it can
    name a partition directory, i.e. a value)."""
    return errors.OperationalError(
        "The Spark source changed or could not be read after the statement was charged", code="DP404",
        hint="the debit stands (fail closed); the data owner checks the source (dpgate policy apply)",
    )  # fmt: skip


def counted_rows(table: Any, d: int) -> tuple[Any, Any]:
    """An Arrow table of ``d`` code columns ``__c0 ..`` and a count ``__n``: the codes and the counts
    (int64), in Spark's group order (which varies between runs)."""
    import numpy as np

    codes = np.empty((table.num_rows, d), dtype=np.int64)
    for j in range(d):
        codes[:, j] = table.column(f"__c{j}").to_numpy()
    return codes, table.column("__n").to_numpy().astype(np.int64)


def _plain(x: Any) -> Any:
    """Spark's DECIMAL sums as exact Python ints; lists (a quantile's values) as lists."""
    if isinstance(x, Decimal):
        return int(x)
    return x
