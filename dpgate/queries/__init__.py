"""Query classes: one module (or small package) per class, and the registry the gateway uses.

Each class implements ``dpgate.queries.base.QueryClass`` (recognise, plan, bind_check,
explain_rows, answer). ``base`` holds what every class shares, ``analysis`` the SQL analysis
of a SELECT over one protected table (used by counting and top-k), ``plans`` the plan types,
``bounds`` interval arithmetic. No class imports another class.

To add a class: write its module and add it to ``REGISTERED`` below, before any class that
would also recognise its statements (the counting class, last, takes every other query).
"""

from __future__ import annotations

import importlib

from dpgate import errors

#: Modules whose ``QUERY_CLASS`` answers statements, asked in this order.
REGISTERED = (
    "dpgate.queries.synthetic",
    "dpgate.queries.subgraph",
    "dpgate.queries.topk",
    "dpgate.queries.counting",
)

_classes: tuple | None = None


def classes() -> tuple:
    """The registered query classes (imported on first use, so importing a class never cycles)."""
    global _classes
    if _classes is None:
        _classes = tuple(importlib.import_module(m).QUERY_CLASS for m in REGISTERED)
    return _classes


def for_statement(classified, ctx):
    """The class that answers a classified DP statement."""
    for qc in classes():
        if qc.recognises(classified, ctx):
            return qc
    raise errors.UnsupportedQueryError(
        "dpgate has no query class for this statement", code="DP219",
        hint="COUNT/SUM/AVG with GROUP BY, top-k (ORDER BY COUNT(*) DESC LIMIT k), subgraph counts on a graph, "
        "or CREATE SYNTHETIC TABLE",
    )  # fmt: skip


def free_answer(classified, ctx, con):
    """A DP statement answered from a public release for free (e.g. a range count from a PrivTree
    synopsis), or None, from the first class whose ``answer_from_release`` has one; nothing protected is read."""
    for qc in classes():
        out = qc.answer_from_release(classified, ctx, con)
        if out is not None:
            return out
    return None
