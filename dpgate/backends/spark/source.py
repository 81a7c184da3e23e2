"""Spark sources on the owner's side: reading and parsing a declared source, its schema as the
DuckDB stub's columns, its units for the roster, and dpgate's own Spark session."""

from __future__ import annotations

import contextlib
import re
from typing import Any

from dpgate import errors

#: Spark's simple type names and the DuckDB type of the stub column.
_SIMPLE_TYPES = {
    "boolean": "BOOLEAN",
    "tinyint": "TINYINT",
    "smallint": "SMALLINT",
    "int": "INTEGER",
    "bigint": "BIGINT",
    "float": "FLOAT",
    "double": "DOUBLE",
    "string": "VARCHAR",
    "date": "DATE",
}


def parse_source(source: Any) -> tuple[str, str]:
    """('table', name) or ('parquet', path) from a declaration (``"db.t"`` or ``"parquet:/p"``)."""
    if not isinstance(source, str) or not source.strip():
        raise errors.PolicyError(
            f"spark = {source!r} is not a Spark source", code="DP340",
            hint="give a table name of the Spark session catalog (spark = \"db.table\") or a Parquet path "
            "(spark = \"parquet:/data/t\")",
        )  # fmt: skip
    if source.startswith("parquet:"):
        return "parquet", source.removeprefix("parquet:")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*){0,2}", source):
        raise errors.PolicyError(
            f"spark = {source!r} is not a table name", code="DP340",
            hint="a Spark table name is [catalog.][database.]table of letters, digits and _; "
            "a Parquet source is written parquet:/path",
        )  # fmt: skip
    return "table", source


def session_from_settings(settings: dict[str, str], progress: Any = None) -> Any:
    """The process's Spark session from the policy's ``[backends.spark]`` (master URL and settings),
    started once (``runtime.started``; ``progress`` is told while Spark starts)."""
    from dpgate.backends.spark.runtime import started

    return started(settings, progress)


def session_for(spark: Any) -> Any:
    """dpgate's own session on the caller's Spark: same catalog and cluster, its own settings."""
    own = spark.newSession()
    # How Spark parses and types dpgate's text is part of what the tests compare with DuckDB, value by
    # value: a cluster's setting would change it under the analyst's expressions (1e2 read as a
    # DECIMAL, 'O\'Brien' kept with its backslash, names compared by case). Every parser and ANSI
    # setting Spark registers, and the legacy ones of ``PINNED``, are put back to their defaults
    # first; dpgate's own settings follow.
    for key, value in {**sql_defaults(own), **PINNED}.items():
        with contextlib.suppress(Exception):  # a static or unknown key keeps what it has
            own.conf.set(key, value)
    own.conf.set("spark.sql.ansi.enabled", "false")  # a failed implicit cast gives NULL, never an error
    own.conf.set("spark.sql.session.timeZone", "UTC")
    # Spark substitutes ${env:X}, ${spark.x} in a statement's whole text, string literals included: a
    # declared value '${env:HOME}' compared as '/root' (runtime.py turns it off only in a session it starts)
    own.conf.set("spark.sql.variable.substitute", "false")
    # DECIMAL arithmetic keeps its scale and overflows to NULL, as DuckDB's does; with precision loss
    # allowed Spark rounds a product of two wide DECIMALs to 6 decimals
    own.conf.set("spark.sql.decimalOperations.allowPrecisionLoss", "false")
    # The type of a partition column (a directory name like zip=12345) would otherwise be inferred
    # from the values: one subject's value could turn the declared schema into another, and every
    # query into a refusal (DP262). Partition columns are strings.
    own.conf.set("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
    # Dates as the file stores them (proleptic Gregorian days, as DuckDB reads them), whatever the
    # caller's cluster says: LEGACY (a migrated cluster's setting) moved a date before 1582-10-15 in a
    # Parquet file not written by Spark by days, EXCEPTION (Spark 3's default) failed the statement,
    # after the debit, on one row's date
    # No filter inside the file reader: Parquet's and ORC's row-group statistics and dictionaries compare
    # DOUBLEs as Java does (-0.0 <> 0.0, NaN left out of min / max), and skip a whole row group on that.
    # A filter Spark can push there (a graph's WHERE: it has no charged set to guard it) then dropped a
    # row holding -0.0 from w = 0 unless another row of its group held 0.0: one edge row decided others
    for key in ("spark.sql.parquet.filterPushdown", "spark.sql.orc.filterPushdown", "spark.sql.avro.filterPushdown.enabled"):
        own.conf.set(key, "false")
    for key in ("spark.sql.parquet.datetimeRebaseModeInRead", "spark.sql.parquet.int96RebaseModeInRead",
                "spark.sql.avro.datetimeRebaseModeInRead"):
        own.conf.set(key, "CORRECTED")
    return own


#: The settings whose defaults ``session_for`` restores (besides those it sets itself): how text
#: parses. Not every legacy setting: some make Spark more lenient than its default (a cluster's
#: ``codingErrorAction``), and put back they would make a source fail where the owner's session reads it.
RESET_PREFIXES = ("spark.sql.parser.", "spark.sql.ansi.")


def sql_defaults(spark: Any) -> dict[str, str]:
    """Spark's own default of each parser and ANSI setting it registers (none without a JVM, e.g.
    Spark Connect: then ``PINNED`` only)."""
    try:
        conf_object = getattr(getattr(spark.sparkContext._jvm.org.apache.spark.sql.internal, "SQLConf$"), "MODULE$")
        entries = conf_object.getConfigEntries().iterator()
        out = {}
        while entries.hasNext():
            entry = entries.next()
            key, default = entry.key(), entry.defaultValueString()
            if key.startswith(RESET_PREFIXES) and default not in (None, "<undefined>") and key != "spark.sql.ansi.enabled":
                out[key] = default
        return out
    except Exception:  # noqa: BLE001 - no JVM, or a Spark whose internals differ
        return {}


#: Parser and type-coercion settings dpgate's session keeps at Spark's defaults whatever the cluster
#: says (also when Spark does not list its defaults: ``sql_defaults``). Views keep the settings they
#: were made with, as Spark reads them (read under dpgate's, a view's text could mean something else:
#: "region" a string, not a column); a view whose settings let one value fail it is refused
#: (``source_problem``).
PINNED = {
    "spark.sql.parser.escapedStringLiterals": "false",
    "spark.sql.caseSensitive": "false",
    "spark.sql.legacy.exponentLiteralAsDecimal.enabled": "false",
    "spark.sql.legacy.allowNegativeScaleOfDecimal": "false",
    "spark.sql.legacy.interval.enabled": "false",
    "spark.sql.legacy.typeCoercion.datetimeToString.enabled": "false",
    "spark.sql.legacy.parser.havingWithoutGroupByAsWhere": "false",
    "spark.sql.legacy.castComplexTypesToString.enabled": "false",
    "spark.sql.legacy.doLooseUpcast": "false",
    "spark.sql.legacy.timeParserPolicy": "CORRECTED",
    "spark.sql.legacy.followThreeValuedLogicInArrayExists": "true",
    "spark.sql.legacy.decimal.retainFractionDigitsOnTruncate": "false",
    "spark.sql.ansi.enforceReservedKeywords": "false",
    "spark.sql.ansi.doubleQuotedIdentifiers": "false",
}


#: Catalog table providers whose columns are read as stored (a value cannot fail to be read).
STORED_FORMATS = ("parquet", "orc", "delta", "iceberg")


def source_problem(spark: Any, source: str, df: Any) -> str | None:
    """Why Spark could fail to read a value of ``source`` (its DataFrame ``df``; None: it cannot).
    A view's expressions and a text format's parser run below the join with the charged subjects, on
    every row: a failure there would fail a statement after its debit on one row's say, even an
    uncharged subject's. So the source's analyzed plan, views and temporary views expanded, may hold
    no cast that is not a widening and no arithmetic in ANSI mode (Spark 4's default for the views it
    keeps: a cast or an overflow fails on one value), no ``raise_error`` / ``assert_true`` and nothing
    else Spark marks as failing on error, and read no CSV, JSON or XML file in FAILFAST mode. Other
    functions that fail on a value (``encode`` of a character the charset lacks...) are the owner's
    to leave out (docs/spark.md)."""
    kind, where = parse_source(source)
    if kind == "parquet":
        return None
    try:
        root = df._jdf.queryExecution().analyzed()
        can_up_cast = spark.sparkContext._jvm.org.apache.spark.sql.catalyst.expressions.Cast.canUpCast
    except Exception:  # noqa: BLE001 - Spark Connect: no plan to read here
        return None
    todo, seen = [root], 0
    while todo:
        node = todo.pop()
        seen += 1
        if seen > _MAX_PLAN_NODES:
            return f"{source} is a view too large to check ({_MAX_PLAN_NODES:,} plan nodes)"
        why = _failing(node, can_up_cast)
        if why is not None:
            return f"{source} reads through {why}, which fails on one value"
        for children in ("children", "expressions"):
            try:
                it = getattr(node, children)().iterator()
            except Exception:  # noqa: BLE001 - an expression has no expressions()
                continue
            while it.hasNext():
                todo.append(it.next())
    return None


#: Plan and expression nodes ``source_problem`` reads at most (a view of a few hundred columns is ~2,000).
_MAX_PLAN_NODES = 50_000
#: Expressions that fail on a value whatever the mode.
_FAILING = ("RaiseError", "AssertTrue")
#: File formats whose parser a FAILFAST mode makes fail on one malformed value.
_TEXT_FORMATS = ("CSV", "JSON", "XML")


def _failing(node: Any, can_up_cast: Any) -> str | None:
    """What in one plan or expression node of ``source_problem``'s walk can fail on a value, or None."""
    name = node.getClass().getSimpleName()
    if name in _FAILING:
        return f"{name}"
    if name == "LogicalRelation":
        try:
            relation = node.relation()
            fmt = str(relation.fileFormat().toString()).upper()
            options = {str(k).lower(): str(v) for k, v in _scala_map(relation.options()).items()}
        except Exception:  # noqa: BLE001 - not a file relation
            return None
        if any(f in fmt for f in _TEXT_FORMATS) and options.get("mode", "").strip().upper() == "FAILFAST":
            return f"a {fmt} file read in FAILFAST mode"
        return None
    try:
        mode = str(node.evalMode().toString())
    except Exception:  # noqa: BLE001 - no eval mode
        mode = ""
    if mode:  # the eval mode decides (its failOnError follows from it)
        if mode == "ANSI" and not _ansi_safe(node, name, can_up_cast):
            return f"an ANSI-mode {name} ({node.dataType().simpleString()})" if name != "Cast" else (
                f"an ANSI-mode cast from {node.child().dataType().simpleString()} to {node.dataType().simpleString()}")
        return None
    for flag, bad in (("failOnError", True), ("nullOnOverflow", False)):
        try:
            if bool(getattr(node, flag)()) is bad:
                return f"{name} ({flag} = {str(bad).lower()})"
        except Exception:  # noqa: BLE001 - no such flag
            continue
    return None


def _ansi_safe(node: Any, name: str, can_up_cast: Any) -> bool:
    """Whether an ANSI-mode expression cannot fail: a widening cast; +, -, * of floating point (which
    overflow to ±Infinity); a division, DIV, % or pmod by a literal that is not 0 (nor -1 for DIV,
    whose smallest integer over -1 overflows)."""
    if name == "Cast":
        return bool(can_up_cast(node.child().dataType(), node.dataType()))
    if name in ("Add", "Subtract", "Multiply", "UnaryMinus", "Abs"):
        return node.dataType().typeName() in ("double", "float")
    if name in ("Divide", "IntegralDivide", "Remainder", "Pmod"):
        try:
            right = node.right()  # a constant, possibly cast by type coercion (2 as a BIGINT)
            value = right.eval(None) if right.foldable() else None
            if value is None:
                return False
            value = float(str(value))
        except Exception:  # noqa: BLE001
            return False
        return value != 0 and not (name == "IntegralDivide" and value == -1)
    return False


def _scala_map(m: Any) -> dict:
    out, it = {}, m.iterator()
    while it.hasNext():
        pair = it.next()
        out[pair._1()] = pair._2()
    return out


def _described(spark: Any, where: str) -> dict[str, str]:
    try:
        return {str(r[0]).strip(): str(r[1]) for r in spark.sql(f"DESCRIBE TABLE EXTENDED {where}").collect()}
    except Exception:  # noqa: BLE001
        return {}


def reads_every_column_safely(spark: Any, source: str) -> bool:
    """Whether reading any column of ``source`` cannot fail on a value: a Parquet path, or a catalog
    table (not a view) stored as Parquet, ORC, Delta or Iceberg. A view computes its columns, and a
    text format parses them; a kept sample key hashes every column of each row (``plane.row_hash``),
    so such a source samples per query, reading only the columns a statement names."""
    kind, where = parse_source(source)
    if kind == "parquet":
        return True
    try:
        table = spark.catalog.getTable(where)
        if table.isTemporary or str(table.tableType).upper() in ("VIEW", "TEMPORARY", "MATERIALIZED_VIEW"):
            return False
    except Exception:  # noqa: BLE001 - a source Spark cannot describe: the cautious answer
        return False
    return _described(spark, where).get("Provider", "").strip().lower() in STORED_FORMATS


def read_source(spark: Any, source: str, *, owner: bool = True) -> Any:
    """The source's DataFrame (a lazy plan; reads no row).

    Spark's reason is shown to the owner only: for an analyst it could name a file under a
    partition directory, i.e. a value.
    """
    kind, where = parse_source(source)
    try:
        df = spark.read.parquet(where) if kind == "parquet" else spark.table(where)
    except Exception as e:  # noqa: BLE001 - Spark's analysis errors have no common public base class
        raise errors.PolicyError(
            f"Spark cannot read {source!r}" + (f": {_first_line(e)}" if owner else ""), code="DP341",
            hint="check the table name or path from the same Spark session; nothing was charged" if owner
            else "the data owner checks the source and declares it again; nothing was charged",
        ) from None
    problem = source_problem(spark, source, df)
    if problem is not None:
        raise errors.PolicyError(problem, code="DP342", hint="the data owner fixes the source; nothing was charged"
                                 if not owner else "re-create the view with spark.sql.ansi.enabled = false (or "
                                 "try_cast), or read the file in PERMISSIVE mode; then declare the table again")  # fmt: skip
    return df


def stub_columns(df: Any, source: str) -> list[tuple[str, str]]:
    """(column, DuckDB type) of a Spark source, or a refusal naming the columns it cannot serve."""
    out, bad = [], []
    for field in df.schema.fields:
        name = field.name.lower()
        t = field.dataType.simpleString()
        # A catalog table's CHAR(n) reads as a string whose type Spark keeps in the field's metadata,
        # and compares it padded with spaces (c = 'ab' holds for the stored 'ab   '): refused
        declared = str((field.metadata or {}).get("__CHAR_VARCHAR_TYPE_STRING", "")).lower()
        if declared.startswith("char("):
            t = declared
        m = re.fullmatch(r"decimal\((\d+),(\d+)\)", t)
        if t in _SIMPLE_TYPES:
            out.append((name, _SIMPLE_TYPES[t]))
        elif m:
            out.append((name, f"DECIMAL({m.group(1)},{m.group(2)})"))
        elif re.fullmatch(r"varchar\(\d+\)", t):
            out.append((name, "VARCHAR"))
        else:
            bad.append(f"{field.name} ({t})")
    if bad:
        raise errors.PolicyError(
            f"The Spark source {source!r} has columns the Spark backend cannot serve: {', '.join(bad)}",
            code="DP342",
            hint="protect a Spark view without them (or with them cast); served types are booleans, integers, "
            "floating point, decimals, strings and dates (not CHAR(n): Spark compares it padded with spaces, "
            "cast it to STRING in the view)",
        )
    if len({n for n, _ in out}) != len(out):
        raise errors.PolicyError(
            f"The Spark source {source!r} has column names that differ only in case", code="DP342",
            hint="rename them in a Spark view",
        )  # fmt: skip
    return out


def unit_rows(spark: Any, source: str, unit: str, budget_column: str | None):
    """The source's units (and their smallest budget-column value) as an Arrow table, for the roster."""
    from pyspark.sql import functions as F

    df = read_source(spark, source)
    cols = {f.name.lower(): f.name for f in df.schema.fields}
    u = F.col(f"`{cols[unit]}`")
    df = df.where(u.isNotNull())
    if budget_column is None:
        return df.select(u.alias(unit)).distinct().toArrow()
    b = F.col(f"`{cols[budget_column]}`").cast("double")
    return df.groupBy(u.alias(unit)).agg(F.min(b).alias(budget_column)).toArrow()


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0][:300] if text else type(e).__name__
