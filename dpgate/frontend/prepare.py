"""The last front-end step before planning, after the allowlist: the engine's own hazards and rewrites.

Kept apart from the allowlist's rules because the engine checks need public facts (column
types), which the allowlist, a pure function of the statement, never reads.
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from dpgate.frontend import allowlist


def for_engine(statement: exp.Expr, facts: Any) -> None:
    """Refuse (free) what the engine cannot run safely; rewrite in place what the engine evaluates
    differently from the SQL the allowlist reasoned about."""
    if statement.find(exp.DateDiff) is not None:  # only then are column types needed
        types: dict[str, set[str]] = {}
        for t in {t.name for t in statement.find_all(exp.Table) if t.name}:
            for name, dtype in facts.columns(t):
                types.setdefault(name.lower(), set()).add(dtype.upper())
        allowlist.check_engine_hazards(statement, types)
    allowlist.rewrite_for_engine(statement)
