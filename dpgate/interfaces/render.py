"""Text rendering of results: aligned tables, noisy values with their intervals, a status line.

Shared by the CLI and the shell. A noisy cell prints as ``value [low, high]`` (its
(1 - alpha) interval); NULL prints as ``NULL``.
"""

from __future__ import annotations

import csv
import io
import json
import math
import textwrap
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


def format_table(names: list[str], rows: list[list[str]], numeric: list[bool] | None = None, max_width: int | None = None) -> str:
    """An aligned ASCII table in the style of the DuckDB / psql shells.

    ``max_width``: narrow the text columns until the table fits, wrapping their cells over several
    lines (words kept whole where they fit) — nothing is cut, and numbers keep their whole width.
    A line then separates the rows, so that a wrapped row reads as one. When that would stack a
    cell more than ``_MAX_WRAP`` lines high (many columns on a narrow terminal, as EXPLAIN's), the
    rows print one field per line instead (``format_records``, psql's expanded display).
    """
    numeric = numeric or [False] * len(names)
    body = [0] * len(names)
    for r in rows:
        for j, c in enumerate(r):
            body[j] = max(body[j], len(c))
    widths = [max(len(n), b) for n, b in zip(names, body)]
    if max_width is not None:
        widths = _fit(widths, max_width, numeric, body)
    sep = "+" + "+".join("-" * (w + 2) for w in widths) + "+"

    def wrapped(values: list[str]) -> list[list[str]]:
        return [_wrap(v, w) for v, w in zip(values, widths)]

    def lines(cells_: list[list[str]], right: list[bool]) -> list[str]:
        out = []
        for k in range(max((len(c) for c in cells_), default=1)):
            parts = []
            for c, w, r in zip(cells_, widths, right):
                v = c[k] if k < len(c) else ""
                parts.append(" " + (v.rjust(w) if r else v.ljust(w)) + " ")
            out.append("|" + "|".join(parts) + "|")
        return out

    cells_ = [wrapped(r) for r in rows]
    if max_width is not None and any(len(c) > _MAX_WRAP for r in cells_ for c in r):
        return format_records(names, rows, max_width)
    body_lines = [lines(c, numeric) for c in cells_]
    out = [sep, *lines(wrapped(names), [False] * len(names)), sep]
    split = any(len(b) > 1 for b in body_lines)
    for i, b in enumerate(body_lines):
        if split and i:
            out.append(sep)
        out += b
    out.append(sep)
    return "\n".join(out)


#: The most lines a wrapped table cell may take before rows print as records.
_MAX_WRAP = 3


def format_records(names: list[str], rows: list[list[str]], max_width: int | None = None) -> str:
    """One field per line, each row under a ``-[ n ]-`` rule; values wrap within ``max_width``."""
    label = max((len(n) for n in names), default=0)
    room = max((max_width or 0) - label - 3, 20) if max_width is not None else None
    rule_width = (max_width or label + 3 + max((len(c) for r in rows for c in r), default=0))
    out = []
    for i, r in enumerate(rows, 1):
        head = f"-[ {i} ]"
        out.append(head + "-" * max(rule_width - len(head), 0))
        for n, v in zip(names, r):
            parts = _wrap(v, room) if room is not None else [v]
            out.append(f"{n.ljust(label)} | {parts[0]}")
            out += [f"{''.ljust(label)} | {p}" for p in parts[1:]]
    return "\n".join(out)


def _wrap(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` characters: at spaces where a word fits, else inside it
    (and at its own line breaks)."""
    if "\n" in text:
        return [line for part in text.split("\n") for line in _wrap(part, width)]
    if len(text) <= width:
        return [text]
    out = textwrap.wrap(text, width=max(width, 1), break_long_words=True, break_on_hyphens=False,
                        drop_whitespace=True, replace_whitespace=False)  # fmt: skip
    return out or [""]


def _fit(widths: list[int], max_width: int, numeric: list[bool], body: list[int]) -> list[int]:
    """Narrow text columns (never a number, never below 8) until the table fits: first those whose
    header is wider than their cells (``body``: the widest cell; only the header wraps), then always
    the widest."""
    widths = list(widths)
    total = sum(w + 3 for w in widths) + 1
    for j, w in enumerate(widths):
        if total <= max_width:
            break
        if not numeric[j] and body[j] < w:
            cut = min(w - max(body[j], 8), total - max_width)
            if cut > 0:
                widths[j] -= cut
                total -= cut
    while total > max_width:
        text = [j for j, w in enumerate(widths) if not numeric[j] and w > 8]
        if not text:
            break
        j = max(text, key=lambda k: widths[k])
        widths[j] -= 1
        total -= 1
    return widths


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
            text += f" · {100 * (1 - rel.alpha):g}% intervals"
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
        text += f" · {100 * (1 - rel.alpha):g}% intervals"
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
    result: Result, *, intervals: bool = True, mode: str = "table", max_width: int | None = None, status: bool = True
) -> str:
    """A whole result as text.

    ``table``: the table, then the status line (cost), the population and the notes. ``json``:
    one envelope with all of them (``json_envelope``). ``csv``: the rows only, with interval
    columns; the caller prints ``release_lines`` elsewhere (stderr, after ``# ``).
    """
    if mode == "json":
        return dump_json(json_envelope(result, intervals))
    if mode == "csv":
        if result.message and not result.columns:
            return ""
        return format_csv(result, intervals)
    if result.message and not result.columns:
        if result.release is None or not status:
            return result.message
        lines = [result.message, status_line(result, rows=False)]
        return "\n".join(lines + release_lines(result)[1:])
    names, rows, numeric = cells(result, intervals)
    parts = [format_table(names, rows, numeric, max_width)]
    if status:
        parts.append(status_line(result, intervals=intervals))
        parts += release_lines(result)[1:]
        if result.release is None and result.message:  # a free answer's own notes (e.g. from a synopsis)
            parts += [f"note: {line}" for line in result.message.splitlines()]
    return "\n".join(parts)


def _json(v: Any) -> Any:
    if isinstance(v, Decimal):
        return float(v)
    if isinstance(v, (int, float, str, bool)) or v is None:
        return v
    return str(v)
