"""Text rendering of results: aligned tables, noisy values with their intervals, a status line.

Shared by the CLI and the shell. A noisy cell prints as ``value [low, high]`` (its
(1 - alpha) interval); NULL prints as ``NULL``.
"""

from __future__ import annotations

import csv
import io
import json
import math
from decimal import Decimal
from typing import Any

# The table printer lives in fit; the CLI, the shell and the DB-API import it from here.
from dpgate.interfaces.fit import EXPANDED, format_records, format_table, wrap_footer, wrap_lines  # noqa: F401
from dpgate.release import Result, confidence_label


def format_value(v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            return str(v)
        if v == int(v) and abs(v) < 1e15:
            return f"{v:.1f}"
        return f"{v:.6g}" if abs(v) < 1e6 else f"{v:.8g}"
    if isinstance(v, Decimal):
        return format(v.normalize(), "f") if v == v.to_integral() else str(v)
    return str(v)


def cells(result: Result, intervals: bool = True) -> tuple[list[str], list[list[str]], list[bool]]:
    """Header, string cells, and which columns are numeric (for right alignment)."""
    names = list(result.columns)
    numeric = [_is_numeric(t) for t in result.types]
    ivs = result.release.intervals if (result.release and intervals) else None
    rows = []
    for i, row in enumerate(result.rows):
        out = []
        for name, v in zip(names, row):
            text = format_value(v)
            if ivs is not None and i < len(ivs) and name in ivs[i] and ivs[i][name] != (None, None):
                lo, hi = ivs[i][name]
                text = f"{text} [{format_value(lo)}, {format_value(hi)}]"
            out.append(text)
        rows.append(out)
    return names, rows, numeric


def intervals_shown(result: Result, intervals: bool = True) -> bool:
    """Whether the printed answer shows intervals: in its cells (``intervals`` on and some cell has
    one) or as ``_ci_low`` / ``_ci_high`` columns the query asked for. The label says so only then."""
    if any(str(c).endswith("_ci_low") for c in result.columns):
        return True
    ivs = result.release.intervals if (result.release and intervals) else None
    return bool(ivs) and any(iv != (None, None) for row in ivs for iv in row.values())


def _is_numeric(type_name: str) -> bool:
    t = type_name.upper()
    return any(k in t for k in ("INT", "DOUBLE", "FLOAT", "DECIMAL", "REAL", "NUMERIC"))


def status_line(result: Result, *, rows: bool = True, intervals: bool = True) -> str:
    n = len(result.rows)
    text = f"{n} row{'s' if n != 1 else ''}" if rows else ""
    rel = result.release
    if rel is not None:
        text += f"{' · ' if text else ''}ε charged {rel.epsilon:g}"
        if rel.delta:
            text += f", δ {rel.delta:g}"
        text += f" · remaining ε {rel.epsilon_remaining:g}"
        if rel.delta:
            text += f", δ {rel.delta_remaining:g}"
        if result.columns and intervals_shown(result, intervals):  # the label follows what is shown
            text += f" · {confidence_label(rel.alpha)} intervals"
        text += f" · {rel.mechanism}"
        if not rel.private:
            text += " · NOT PRIVATE (test seed)"
    return text


def cost_line(result: Result, intervals: bool = True) -> str | None:
    """What the answer cost and what the analyst has left, in one line (None if it was free)."""
    rel = result.release
    if rel is None:
        return None
    text = (f"cost: ε {rel.epsilon:g}, δ {rel.delta:g} · your quota left: ε {rel.epsilon_remaining:g}, "
            f"δ {rel.delta_remaining:g} · {rel.mechanism}")  # fmt: skip
    if result.columns and intervals_shown(result, intervals):
        text += f" · {confidence_label(rel.alpha)} intervals"
    if not rel.private:
        text += " · NOT PRIVATE (test seed)"
    return text


def population_line(result: Result) -> str | None:
    """Whose data the answer is about, e.g. ``population: 19,537 of 32,561 subjects on the roster (...)``."""
    if result.release is None:
        return None
    return "population: " + result.release.population.describe()


def release_lines(result: Result, intervals: bool = True) -> list[str]:
    """The cost, the population and every note of a DP answer, one line each (none for free statements).

    ``--mode csv`` prints them on stderr after ``# ``; the DB-API's ``cursor.messages`` holds them.
    """
    if result.release is None:
        return []
    lines = [cost_line(result, intervals), population_line(result)]
    return [line for line in lines if line] + [f"note: {n}" for n in result.release.notes]


def interval_columns(result: Result, intervals: bool = True) -> list[str]:
    """The noisy columns that get ``<col>_ci_low`` / ``<col>_ci_high`` in csv and json output.

    Columns whose intervals are already in the result (``OPTIONS (intervals = true)``) are not
    repeated.
    """
    rel = result.release
    if rel is None or not intervals:
        return []
    present = set(result.columns)
    out: list[str] = []
    for row in rel.intervals:
        for name in row:
            if name in present and name not in out and f"{name}_ci_low" not in present:
                out.append(name)
    return out


def format_csv(result: Result, intervals: bool = True) -> str:
    """The rows as CSV, each noisy column followed by ``<col>_ci_low`` and ``<col>_ci_high``."""
    names = list(result.columns)
    noisy = interval_columns(result, intervals)
    header: list[str] = []
    for n in names:
        header.append(n)
        if n in noisy:
            header += [f"{n}_ci_low", f"{n}_ci_high"]
    ivs = result.release.intervals if result.release else []
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    for i, r in enumerate(result.rows):
        out: list[Any] = []
        for n, v in zip(names, r):
            out.append(_csv(v))
            if n in noisy:
                lo, hi = ivs[i].get(n, (None, None)) if i < len(ivs) else (None, None)
                out += [_csv(lo), _csv(hi)]
        w.writerow(out)
    return buf.getvalue().rstrip("\n")


def _csv(v: Any) -> Any:
    return "" if v is None else v


def json_envelope(result: Result, intervals: bool = True) -> dict[str, Any]:
    """One JSON object for a whole answer: rows, intervals, cost, population and notes.

    ``{"columns": [...], "types": [...], "rows": [[...], ...], "intervals": [{"n": [low, high]}, ...],
    "cost": {...}, "population": {...}, "notes": [...]}``; ``intervals`` has one object per row
    (null with --no-intervals), ``cost`` and ``population`` are null for free statements, and
    ``message`` is there for statements that answer with a message.
    """
    rel = result.release
    env: dict[str, Any] = {
        "columns": list(result.columns),
        "types": list(result.types),
        "rows": [[_json(v) for v in r] for r in result.rows],
    }
    if rel is not None and intervals:
        present = set(result.columns)
        env["intervals"] = [
            {n: (None if (lo, hi) == (None, None) else [_json(lo), _json(hi)]) for n, (lo, hi) in row.items()
             if n in present}
            for row in rel.intervals[: len(result.rows)]
        ]  # fmt: skip
    else:
        env["intervals"] = None
    if result.message:
        env["message"] = result.message
    if rel is None:
        env.update(cost=None, population=None, notes=[])
        return env
    env["cost"] = {
        "epsilon": rel.epsilon,
        "delta": rel.delta,
        "epsilon_remaining": rel.epsilon_remaining,
        "delta_remaining": rel.delta_remaining,
        "mechanism": rel.mechanism,
        "query_class": rel.query_class,
        "confidence": 1 - rel.alpha,
        "private": rel.private,
        "ledger_entry": rel.entry_id,
        "remembered": rel.remembered,
    }
    env["population"] = rel.population.as_dict()
    env["notes"] = list(rel.notes)
    return env


def dump_json(envelope: dict[str, Any]) -> str:
    """The envelope as JSON, one row (or interval row, or note) per line: readable and still one document."""

    def one(v: Any) -> str:
        return json.dumps(v, ensure_ascii=False)

    parts = []
    for key, value in envelope.items():
        scalars = isinstance(value, list) and all(not isinstance(v, (list, dict)) for v in value)
        if key != "notes" and scalars:
            parts.append(f"  {one(key)}: {one(value)}")
        elif isinstance(value, list) and value:
            body = ",\n".join(f"    {one(v)}" for v in value)
            parts.append(f"  {one(key)}: [\n{body}\n  ]")
        elif isinstance(value, dict) and value:
            body = ",\n".join(f"    {one(k)}: {one(v)}" for k, v in value.items())
            parts.append(f"  {one(key)}: {{\n{body}\n  }}")
        else:
            parts.append(f"  {one(key)}: {one(value)}")
    return "{\n" + ",\n".join(parts) + "\n}"


def format_result(
    result: Result, *, intervals: bool = True, mode: str = "table", max_width: int | None = None, status: bool = True,
    expanded: str = "auto",
) -> str:
    """A whole result as text.

    ``table``: the table, then the status line (cost), the population and the notes. ``json``:
    one envelope with all of them (``json_envelope``). ``csv``: the rows only, with interval
    columns; the caller prints ``release_lines`` elsewhere (stderr, after ``# ``). ``max_width``
    (a terminal's) fits the table and wraps the lines after it; ``expanded`` is ``fit.EXPANDED``'s.
    """
    if mode == "json":
        return dump_json(json_envelope(result, intervals))
    if mode == "csv":
        if result.message and not result.columns:
            return ""
        return format_csv(result, intervals)
    if result.message and not result.columns:
        if result.release is None or not status:
            return wrap_lines(result.message, max_width)
        footer = [status_line(result, rows=False), *release_lines(result)[1:]]
        return "\n".join([wrap_lines(result.message, max_width), *(p for f in footer for p in wrap_footer(f, max_width))])
    names, rows, numeric = cells(result, intervals)
    parts = [format_table(names, rows, numeric, max_width, expanded)]
    if status:
        footer = [status_line(result, intervals=intervals), *release_lines(result)[1:]]
        if result.release is None and result.message:  # a free answer's own notes (e.g. from a synopsis)
            footer += [f"note: {line}" for line in result.message.splitlines()]
        parts += [p for line in footer for p in wrap_footer(line, max_width)]
    return "\n".join(parts)


def _json(v: Any) -> Any:
    if isinstance(v, Decimal):
        return float(v)
    if isinstance(v, (int, float, str, bool)) or v is None:
        return v
    return str(v)
