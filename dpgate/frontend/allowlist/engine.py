"""What DuckDB needs to evaluate an accepted statement safely: the connection's settings
(``REQUIRED_SETTINGS``), the rewrite of what it evaluates unsafely into what it evaluates safely
(``rewrite_for_engine``) and the refusals that need the columns' types (``check_engine_hazards``);
``for_engine`` runs both for a statement the allowlist accepted, reading the types from public facts."""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from dpgate.frontend.allowlist.rules import CAST, FUNCTIONS, _string
from dpgate.frontend.cost import refuse as _refuse
from dpgate.frontend.cost import sql_text as _sql

#: DuckDB settings the connection that runs DP queries must have for the totality rule to hold.
#: DuckDB's common-subexpression elimination moves a sub-expression that occurs twice out of
#: the TRY(...) around it (``TRY((x + 1) * (x + 1))``, but also the implicit cast DuckDB adds
#: to each element of ``s IN (1, 2)`` or to both bounds of BETWEEN), so its errors escape TRY.
#: Statistics propagation folds conditions with every row's min/max (uncharged subjects' too),
#: which decides whether other sub-expressions run at all: it is off as well.
#: Both hazards are DuckDB 1.x's (1.5: the fuzz of ``tests/frontend/test_allowlist.py`` fails with
#: either optimizer on). DuckDB 2.0 keeps a shared sub-expression inside its TRY and passes that fuzz
#: with every optimizer on (``test_common_subexpressions_escape_try`` checks it keeps doing so); the
#: settings stay on 2.x as defence in depth, and its new optimizers (projection pull-up, scalar
#: function push-down, ...) run: the same fuzz and the OFFSET 0 fence's tests pass with them.
REQUIRED_SETTINGS = {"disabled_optimizers": "common_subexpressions,statistics_propagation"}


_WEEKDAY_PARTS = {"dow", "dayofweek", "isodow", "doy", "dayofyear"}


def rewrite_for_engine(statement: exp.Expr) -> exp.Expr:
    """Rewrite, in place, what DuckDB evaluates unsafely into an equivalent it evaluates safely.

    Aliases take their rule's own name, day-of-week and day-of-year parts are read from
    ``CAST(x AS TIMESTAMP)`` (comments below), and ``COALESCE(a, b, ...)`` becomes ``CASE WHEN a
    IS NOT NULL THEN a WHEN b IS NOT NULL THEN b ... ELSE z END``: DuckDB 1.4-1.5 crashes the whole process (a segmentation fault, not an
    error TRY can catch) when an implicit cast between COALESCE's arguments fails under TRY —
    ``COALESCE(timestamptz, timestamp)`` over the extreme timestamps, for one — so the crash
    would depend on the data. CASE casts its branches the same way and fails cleanly. Same
    result, same type; the statement passed ``check`` before."""
    # Aliases first become the rule's own name: DuckDB's optimizer rewrites some spellings and
    # not others (date_part('year', TIME) becomes year(TIME), a bind error EXPLAIN catches for
    # free; datepart(...) stays and fails at run time on every non-NULL value).
    for node in list(statement.find_all(exp.Anonymous)):
        rule = FUNCTIONS.get(node.name.lower())
        if rule is not None and isinstance(rule.node, str) and node.name.lower() != rule.node:
            node.set("this", rule.node)
    # date_part / EXTRACT of a day-of-week or day-of-year part: on an INTERVAL DuckDB 1.5 fails on
    # every non-NULL value (so whether it fails depends on the data). Of CAST(x AS TIMESTAMP) the
    # part is the same for dates and timestamps (TIMESTAMPTZ: in the session's time zone, as
    # before) and NULL for what has no day (intervals, times) or lies beyond the TIMESTAMP range.
    for node in list(statement.find_all(exp.Extract, exp.Anonymous)):
        if isinstance(node, exp.Extract):
            part, arg = node.this, node.expression
        elif node.name.lower() == "date_part" and len(node.expressions) == 2:  # aliases renamed above
            part, arg = node.expressions
        else:
            continue
        name = (_string(part) or (part.name if isinstance(part, (exp.Var, exp.Column)) else "")).lower()
        if name in _WEEKDAY_PARTS and arg is not None:
            cast = exp.Cast(this=arg.copy(), to=exp.DataType.build("TIMESTAMP"))
            node.replace(exp.Anonymous(this="date_part", expressions=[exp.Literal.string(name), cast]))
    for node in reversed(list(statement.find_all(exp.Coalesce))):  # innermost first
        args = [node.this, *node.expressions]
        # Parenthesized: sqlglot writes the tree as it is, and `NOT a OR b IS NULL` would read as
        # `(NOT a) OR (b IS NULL)` (the answer to another predicate).
        ifs = [exp.If(this=exp.Not(this=exp.paren(exp.Is(this=exp.paren(a.copy()), expression=exp.Null()))),
                      true=a.copy()) for a in args[:-1]]  # fmt: skip
        node.replace(exp.Case(ifs=ifs, default=args[-1].copy()) if ifs else args[-1].copy())
    return statement


def check_engine_hazards(statement: exp.Expr, column_types: dict[str, set[str]]) -> None:
    """Refuse what DuckDB cannot evaluate without invalidating the database, given the types of
    the columns the statement can name (lower-case name -> types; a name in several tables has
    all of them, so this errs towards refusing).

    ``date_diff`` of TIMESTAMP WITH TIME ZONE values runs through ICU, which raises an internal
    error (TRY does not catch it, and DuckDB then refuses every later statement until restarted)
    for the extreme timestamps, so whether it happens would depend on the data. The same
    difference of ``CAST(... AS TIMESTAMP)`` values is total under TRY."""
    zoned_types = (exp.DataType.Type.TIMESTAMPTZ, exp.DataType.Type.TIMESTAMPLTZ)
    for node in statement.find_all(exp.DateDiff):
        for arg in (node.this, node.expression):
            if arg is None:
                continue
            zoned = [c for c in arg.find_all(exp.Column) if "TIMESTAMP WITH TIME ZONE" in column_types.get(c.name.lower(), ())]
            zoned += [c for c in arg.find_all(exp.Cast) if c.to.this in zoned_types]
            if not all(_inside_cast_to_timestamp(z, arg) for z in zoned):
                raise _refuse(
                    CAST, f"{_sql(node)}: date_diff of TIMESTAMP WITH TIME ZONE values is not supported",
                    "cast them first: date_diff('hour', CAST(a AS TIMESTAMP), CAST(b AS TIMESTAMP)) (wall times in "
                    "the session's time zone)",
                )  # fmt: skip


_WALL_TIME_TYPES = {exp.DataType.Type.TIMESTAMP, exp.DataType.Type.TIMESTAMPNTZ, exp.DataType.Type.DATE,
                    exp.DataType.Type.TIMESTAMP_S, exp.DataType.Type.TIMESTAMP_MS, exp.DataType.Type.TIMESTAMP_NS}


def _inside_cast_to_timestamp(node: exp.Expr, root: exp.Expr) -> bool:
    while node is not root and node.parent is not None:
        node = node.parent
        if isinstance(node, exp.Cast):
            return node.to.this in _WALL_TIME_TYPES
    return False


def for_engine(statement: exp.Expr, facts: Any) -> None:
    """Refuse (free) what DuckDB cannot run safely and rewrite, in place, what it evaluates differently
    from the SQL the allowlist reasoned about. Column types are read only when a hazard needs them."""
    if statement.find(exp.DateDiff) is not None:
        types: dict[str, set[str]] = {}
        for t in {t.name for t in statement.find_all(exp.Table) if t.name}:
            for name, dtype in facts.columns(t):
                types.setdefault(name.lower(), set()).add(dtype.upper())
        check_engine_hazards(statement, types)
    rewrite_for_engine(statement)
