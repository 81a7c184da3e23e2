"""sqlglot expression nodes for dpgate's own SQL: the DP options clause and statements.

They are plain ``exp.Expression`` subclasses so that the rest of sqlglot (walking,
copying, generation) treats them like its own nodes.
"""

from __future__ import annotations

from sqlglot import exp


class DPOption(exp.Expression):
    """One ``name = value`` inside ``OPTIONS (...)``; ``this`` is the name (an Identifier)."""

    arg_types = {"this": True, "expression": True}

    @property
    def option_name(self) -> str:
        return self.this.name.lower()


class DPOptions(exp.Expression):
    """``WITH DIFFERENTIAL_PRIVACY OPTIONS (...)`` attached to a SELECT (in its ``hint`` slot)."""

    arg_types = {"expressions": False}


class ShowBudget(exp.Expression):
    """``SHOW BUDGET``: the analyst's remaining quota and the distribution of subject budgets."""

    arg_types = {}


class ExplainPrivacy(exp.Expression):
    """``EXPLAIN PRIVACY <statement>``: mechanism, cost and noise; spends nothing."""

    arg_types = {"this": True}


class ShowReleases(exp.Expression):
    """``SHOW RELEASES``: the release registry (synthetic tables and their lineage)."""

    arg_types = {}


class CreateSynthetic(exp.Expression):
    """``CREATE SYNTHETIC TABLE name FROM source USING mechanism WITH (option = value, ...)``."""

    arg_types = {"this": True, "source": True, "mechanism": False, "expressions": False}


class DropSynthetic(exp.Expression):
    """``DROP SYNTHETIC TABLE [IF EXISTS] name``: forget a release and drop its table."""

    arg_types = {"this": True, "exists": False}


def dp_options(select: exp.Expression) -> DPOptions | None:
    """The DP options clause of a SELECT, if it has one."""
    hint = select.args.get("hint") if isinstance(select, exp.Select) else None
    return hint if isinstance(hint, DPOptions) else None
