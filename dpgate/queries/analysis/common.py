"""SQL helpers every part of the query analysis uses: TRY around row expressions, literals,
SQL for messages, the per-subject placeholder and the statement hash."""

from __future__ import annotations

import hashlib

from sqlglot import exp

from dpgate import errors

#: The placeholder name of the per-subject relation in the outer query (never a real table).
PER_SUBJECT = "__per_subject"


def preempted(what: str) -> errors.InternalError:
    """The error for a shape ``allowlist.check`` refuses before the analysis runs (the gateway checks
    every statement first; tests/frontend/test_preempted.py has one case per shape): reaching it
    is a bug, not the analyst's mistake."""
    return errors.InternalError(f"The query analysis met {what}, which the allowlist refuses first")


def _try(node: exp.Expr) -> exp.Expr:
    """Wrap a row-level expression in TRY(), so a bad value becomes NULL instead of an error.

    A runtime error whose occurrence depends on a row would reveal one bit about it.
    """
    if isinstance(node, (exp.Column, exp.Literal, exp.Boolean, exp.Null)):
        return node
    return exp.Anonymous(this="TRY", expressions=[node])


def _num(v: float) -> exp.Expr:
    return exp.Literal.number(int(v) if float(v).is_integer() else repr(float(v)))


def display_sql(node: exp.Expr) -> str:
    """SQL for messages and EXPLAIN: without the table qualifiers dpgate added."""

    def strip(n: exp.Expr) -> exp.Expr:
        if isinstance(n, exp.Column) and n.table:
            return exp.column(n.name)
        return n

    return node.copy().transform(strip).sql(dialect="duckdb")


def query_hash(sql: str) -> str:
    return hashlib.sha256(sql.encode()).hexdigest()[:16]
