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

from dpgate.release import Result


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


def _is_numeric(type_name: str) -> bool:
    t = type_name.upper()
    return any(k in t for k in ("INT", "DOUBLE", "FLOAT", "DECIMAL", "REAL", "NUMERIC"))


def format_table(names: list[str], rows: list[list[str]], numeric: list[bool] | None = None, max_width: int | None = None) -> str:
    """An aligned ASCII table in the style of the DuckDB / psql shells."""
    numeric = numeric or [False] * len(names)
    widths = [len(n) for n in names]
    for r in rows:
        for j, c in enumerate(r):
            widths[j] = max(widths[j], len(c))
    if max_width is not None:
        widths = _fit(widths, max_width)
    sep = "+" + "+".join("-" * (w + 2) for w in widths) + "+"

    def line(values: list[str], right: list[bool]) -> str:
        parts = []
        for v, w, r in zip(values, widths, right):
            v = v if len(v) <= w else v[: max(w - 1, 0)] + "…"
            parts.append(" " + (v.rjust(w) if r else v.ljust(w)) + " ")
        return "|" + "|".join(parts) + "|"

    out = [sep, line(names, [False] * len(names)), sep]
    out += [line(r, numeric) for r in rows]
    out.append(sep)
    return "\n".join(out)


def _fit(widths: list[int], max_width: int) -> list[int]:
    total = sum(w + 3 for w in widths) + 1
    widths = list(widths)
    while total > max_width and max(widths) > 8:
        j = widths.index(max(widths))
        widths[j] -= 1
        total -= 1
    return widths


def status_line(result: Result, *, rows: bool = True) -> str:
    n = len(result.rows)
    text = f"{n} row{'s' if n != 1 else ''}" if rows else ""
    rel = result.release
    if rel is not None:
        text += f"{' · ' if text else ''}ε charged {rel.epsilon:g}"
        if rel.delta:
            text += f", δ {rel.delta:g}"
        text += f" · remaining ε {rel.epsilon_remaining:g}"
        if result.columns:
            text += f" · {100 * (1 - rel.alpha):g}% intervals"
        text += f" · {rel.mechanism}"
        if rel.subjects_excluded:
            text += f" · {rel.subjects_excluded} subject(s) excluded (budget exhausted)"
        if not rel.private:
            text += " · NOT PRIVATE (test seed)"
    return text


def format_result(
    result: Result, *, intervals: bool = True, mode: str = "table", max_width: int | None = None, status: bool = True
) -> str:
    """A whole result as text: table (or csv / json), then the status line and notes."""
    if result.message and not result.columns:
        if result.release is None or not status:
            return result.message
        lines = [result.message, status_line(result, rows=False)]
        return "\n".join(lines + [f"note: {n}" for n in result.release.notes])
    names, rows, numeric = cells(result, intervals)
    if mode == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(names)
        for r in result.rows:
            w.writerow(["" if v is None else v for v in r])
        return buf.getvalue().rstrip("\n")
    if mode == "json":
        ivs = result.release.intervals if result.release else []
        out = []
        for i, r in enumerate(result.rows):
            obj = {n: _json(v) for n, v in zip(names, r)}
            if intervals and i < len(ivs):
                for name, (lo, hi) in ivs[i].items():
                    if (lo, hi) != (None, None):
                        obj[f"{name}_ci_low"], obj[f"{name}_ci_high"] = _json(lo), _json(hi)
            out.append(obj)
        return json.dumps(out, indent=2)
    parts = [format_table(names, rows, numeric, max_width)]
    if status:
        parts.append(status_line(result))
        if result.release is not None:
            parts += [f"note: {n}" for n in result.release.notes]
    return "\n".join(parts)


def _json(v: Any) -> Any:
    if isinstance(v, Decimal):
        return float(v)
    if isinstance(v, (int, float, str, bool)) or v is None:
        return v
    return str(v)
