"""The allowlist: what a statement over protected data may contain, and where.

Why an allowlist
----------------
dpgate used to refuse the constructs it knew to be dangerous (a blocklist). DuckDB's
grammar is too large for that: single persons' values could be read out through SQL
that was accepted, e.g.

- ``date_trunc(CASE WHEN person_id = 1 AND age > 38 THEN 'timezone' ELSE 'day' END, ts)``
  raises a NotImplementedException (which ``TRY()`` does not catch) for exactly one row:
  the query fails or answers depending on one person's data, a 1-bit oracle; ``range(n)``
  or ``repeat(s, n)`` with ``n`` read from a row runs out of memory depending on a row;
- ``FROM adult TABLESAMPLE BERNOULLI (50%) REPEATABLE (42)``: the sample depends on the
  storage position of the rows;
- ``FROM adult AS adult(age, person_id)``, ``PIVOT`` / ``UNPIVOT``: the columns are
  relabelled, and the privacy unit with them.

So this module describes positively what may appear where, and ``check`` refuses
everything else (``UnsupportedQueryError``, codes DP250-DP257) before any budget is
charged, naming the construct as the analyst wrote it and saying what would be accepted.
It reads only the statement, never the catalog or the data.

The totality rule
-----------------
dpgate evaluates every row-level expression (WHERE, GROUP BY keys, aggregate inputs and
FILTER conditions) inside DuckDB's ``TRY(...)`` (``_try`` in ``dpgate.queries``). ``TRY`` turns
*conversion*, *out of range* and *invalid input* errors into NULL, and nothing else: a
NotImplementedException, an internal error or running out of memory still fails the
query. An error that fails the query for some values and not for others makes the query's
outcome depend on those values. So a function is on the list only if it is **total** on
every argument type DuckDB accepts for it -- under ``TRY``, it never raises for any value:
NULL, NaN, +-inf, the extreme integers, empty, very long and odd UTF-8 strings, the
smallest and largest dates and timestamps, ``infinity`` -- and that includes errors
DuckDB raises while *planning* from the column statistics (the minimum and maximum of a
protected column are data too: ``date_trunc('week', d)`` fails at plan time when the
smallest date is near DuckDB's minimum). Its output must also be bounded independently
of the data: at most a constant factor (fixed by the query text) times the size of its
inputs, so ``repeat``, ``range``/``generate_series``, list builders and ``lpad``/``rpad``
with a row-valued length are out. Arguments that select a behaviour (date parts,
formats, patterns, units, positions, lengths) must be constants from a verified set,
because a row-valued one is exactly how the first example above chose, row by row,
between a working and a failing behaviour.

``tests/frontend/test_allowlist.py`` checks this rule for every entry of ``FUNCTIONS``,
for the casts of ``CAST_TYPES`` and for the operators, by evaluating them in DuckDB inside
``TRY`` exactly as dpgate does, over a grid of extreme values (in real tables, so that the
statistics are exercised) with every allowed constant, for the argument types it is meant
for and for every other type too; a case DuckDB does not bind (``DESCRIBE`` fails) is
skipped: a binder error depends on the query and the column types only.

What the fuzzing found (DuckDB 1.4-1.5, and 2.0 again): ``TRY`` catches integer overflow of ``+ - * // %``
and unary minus (BIGINT and HUGEINT), ``abs(BIGINT_MIN)``, division by zero and failing
casts, so arithmetic and ``CAST`` / ``::`` of row values to the scalar types of
``CAST_TYPES`` are allowed; ``ln``/``log``/``sqrt``/``pow`` return NaN or +-inf rather
than raise. Not protected, hence not accepted: the date parts ``week``, ``weekofyear``,
``isoyear``, ``yearweek`` (a plan-time error from the statistics of a DATE column whose
smallest value is near DuckDB's minimum date), ``era``, ``julian`` and the ``timezone*``
parts (NotImplementedException); ``dayofweek()``, ``isodow()``, ``dayofyear()`` on
INTERVAL values and ``date_diff`` with calendar parts on TIME values (NotImplementedException
at run time); ``repeat``, ``range``, ``string_split`` (output size). And one hazard that is
not about functions at all: DuckDB's common-subexpression elimination evaluates a
sub-expression that occurs twice (``(x + 1) * (x + 1)``, or the implicit cast DuckDB puts on
each element of ``s IN (1, 2)``) *outside* the ``TRY`` around it, so the connection that
runs DP queries must disable it: ``REQUIRED_SETTINGS``.

How to call it
--------------
``check(statement)`` takes the whole statement as parsed by ``dialect.parse_one`` and
classified as ``dp`` or ``synthetic`` (or ``explain`` of those): the SELECT *with* its
``WITH DIFFERENTIAL_PRIVACY OPTIONS`` clause (the options are not checked here), an
``ExplainPrivacy`` node (its inner statement is checked), or a ``CreateSynthetic`` node
(its source must be a bare table). Run it after the parameters are bound. It is not meant
for public queries, which DuckDB answers unchanged. The guarantees hold for row expressions
evaluated inside ``TRY`` on a connection with ``REQUIRED_SETTINGS``; join conditions run
outside ``TRY`` and are therefore limited to comparisons of two columns (whose types the
planner checks).

The package
-----------
``rules`` holds the lists (functions, casts, operators, clauses) and how to add to them;
``checker`` walks a statement against them (``check``); ``engine`` holds what the connection
and the statement need for DuckDB to evaluate an accepted statement safely
(``REQUIRED_SETTINGS``, ``rewrite_for_engine``, ``check_engine_hazards``); ``reference``
writes the lists as the documentation's page 'What SQL is accepted' (``docs/sql/allowed.md``).
"""

from __future__ import annotations

from dpgate.frontend.allowlist.checker import check
from dpgate.frontend.allowlist.engine import REQUIRED_SETTINGS, check_engine_hazards, for_engine, rewrite_for_engine
from dpgate.frontend.allowlist.reference import reference_markdown
from dpgate.frontend.allowlist.rules import (
    CAST,
    CAST_TYPES,
    CONSTANT,
    FROM_ITEM,
    FUNCTION,
    FUNCTIONS,
    GRAPH_AGGREGATES,
    JOIN,
    NODE,
    OPERATORS,
    RULES,
    SHAPE,
    SIZE,
    SIZE_FACTOR,
    SUPPORTED_AGGREGATES,
    TOPK_COLUMNS_FUNCTION,
    Const,
    Rule,
    constant_samples,
    slot_key,
)

__all__ = [
    "CAST", "CAST_TYPES", "CONSTANT", "FROM_ITEM", "FUNCTION", "FUNCTIONS", "GRAPH_AGGREGATES", "JOIN", "NODE",
    "OPERATORS", "REQUIRED_SETTINGS", "RULES", "SHAPE", "SIZE", "SIZE_FACTOR", "SUPPORTED_AGGREGATES",
    "TOPK_COLUMNS_FUNCTION", "Const", "Rule", "check", "check_engine_hazards", "constant_samples", "for_engine",
    "reference_markdown", "rewrite_for_engine", "slot_key",
]  # fmt: skip
