"""The WITH (...) options of ``CREATE SYNTHETIC TABLE``, shared by every release mechanism.

Each mechanism has options of its own; the general DP options (ε, personalization, ...) go to the
session's ``query_settings``. A release is made once from one set of subjects, so the
personalization rules that need several (``partition``, ``t_round``) are refused, and a
``privacy_unit_column`` must name the table's unit.
"""

from __future__ import annotations

from typing import Any

from dpgate import errors
from dpgate.frontend.nodes import DPOptions
from dpgate.frontend.settings import QuerySettings, Session, Spec, coerce, literal_value


def parse(stmt, table, session: Session, own_specs: dict[str, Spec], general: tuple[str, ...],
          mechanism: str) -> tuple[QuerySettings, dict[str, Any]]:  # fmt: skip
    """(the query settings, the mechanism's own options) of a CREATE SYNTHETIC TABLE statement."""
    general_opts, own = [], {}
    for opt in stmt.expressions or []:
        name = opt.option_name
        if name in own or any(o.option_name == name for o in general_opts):
            raise errors.ProgrammingError(f"Option {name} is given twice", code="DP205", hint="give each option once")
        if name in own_specs:
            own[name] = coerce(name, literal_value(opt.expression, name), own_specs)
        elif name in general:
            general_opts.append(opt)
        else:
            raise errors.ProgrammingError(
                f"{name} is not an option of CREATE SYNTHETIC TABLE ... USING {mechanism}", code="DP204",
                hint="options: " + ", ".join(sorted([*general, *own_specs])),
            )  # fmt: skip
    settings = session.query_settings(DPOptions(expressions=general_opts))
    if settings.privacy_unit is not None and settings.privacy_unit != table.unit:
        raise errors.PolicyError(
            f"privacy_unit_column = {settings.privacy_unit} does not match {table.name}'s unit {table.unit}",
            code="DP301", hint=f"drop the option or write privacy_unit_column = {table.unit}",
        )  # fmt: skip
    if settings.personalization in ("partition", "t_round"):
        raise errors.UnsupportedQueryError(
            f"A release is made once, from one set of subjects; personalization = '{settings.personalization}' "
            "would need several", code="DP274",
            hint="use personalization 'sample' (the default), 'threshold' or 'minimum'",
        )  # fmt: skip
    return settings, own
