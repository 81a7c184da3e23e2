"""Results as Arrow tables, pandas / polars DataFrames and numpy arrays, and as HTML for notebooks.

The values are the released ones (noisy answers, public query results); nothing here reads the
database. The columns keep the types DuckDB gave the answer (DECIMAL, DATE, HUGEINT ...): the
rows go back through an in-memory DuckDB, which casts each column to its declared type and hands
out Arrow, as DuckDB's own Python API does. With ``intervals=True`` each column that carries an
error bar is followed by ``<column>_ci_low`` and ``<column>_ci_high``.

pyarrow, pandas and polars are optional: ``pip install 'dpgate[arrow]'``, ``'dpgate[pandas]'``,
``'dpgate[polars]'``. Without them these methods raise ``NotSupportedError`` (DP105) naming the extra.
"""

from __future__ import annotations

import html
from typing import Any

import duckdb

from dpgate import database, errors
from dpgate.release import Result
from dpgate.catalog.tables import quote_ident

_EXTRA = {"pyarrow": "arrow", "pandas": "pandas", "polars": "polars"}


def need(module: str):
    """Import an optional library, or say which extra installs it."""
    try:
        return __import__(module)
    except ImportError as e:
        extra = _EXTRA.get(module, module)
        raise errors.NotSupportedError(
            f"This needs {module}, which is not installed", code="DP105",
            hint=f"pip install 'dpgate[{extra}]'",
        ) from e  # fmt: skip


def _columns(result: Result, rows: list[tuple], intervals: bool) -> tuple[list[str], list[str], list[list]]:
    names, types = list(result.columns), list(result.types)
    values = [[r[i] for r in rows] for i in range(len(names))]
    if not intervals or result.release is None:
        return names, types, values
    offset = len(result.rows) - len(rows)
    bars = result.release.intervals[offset:]
    out_names, out_types, out_values = [], [], []
    for name, typ, col in zip(names, types, values):
        out_names.append(name)
        out_types.append(typ)
        out_values.append(col)
        # A released (noisy) column carries an error bar, unless the answer has its interval columns
        # already (OPTIONS (intervals = true), SET dp_intervals = true).
        if name in result.release.columns and not {f"{name}_ci_low", f"{name}_ci_high"} & set(names):
            for k, tag in ((0, "ci_low"), (1, "ci_high")):
                out_names.append(f"{name}_{tag}")
                out_types.append(typ)
                out_values.append([iv.get(name, (None, None))[k] for iv in bars])
    return out_names, out_types, out_values


def _relation(result: Result, rows: list[tuple], intervals: bool):
    names, types, values = _columns(result, rows, intervals)
    con = duckdb.connect()
    if not names:
        return con.sql("SELECT 1 AS no_columns WHERE false")
    lists = [database.typed_list(f"c{i}", list(col), typ) for i, (col, typ) in enumerate(zip(values, types))]
    params = {f"c{i}": v for i, (_, v) in enumerate(lists)}
    select = ", ".join(f"unnest({sql}) AS {_quote(name)}" for (sql, _), name in zip(lists, names))
    # A relation (not a cursor): DuckDB hands it to Arrow, pandas and polars without an extra copy.
    return con.sql(f"SELECT {select}", params=params)


_quote = quote_ident


def arrow(result: Result, rows: list[tuple], *, intervals: bool = False):
    pa = need("pyarrow")
    if not result.columns:  # a statement without a result set (SET): no columns, no rows
        return pa.table({})
    rel = _relation(result, rows, intervals)
    return rel.to_arrow_table() if hasattr(rel, "to_arrow_table") else rel.arrow()


def pandas(result: Result, rows: list[tuple], *, intervals: bool = False):
    pd = need("pandas")
    if not result.columns:
        return pd.DataFrame()
    return _relation(result, rows, intervals).df()


def polars(result: Result, rows: list[tuple], *, intervals: bool = False):
    pl = need("polars")
    need("pyarrow")
    if not result.columns:
        return pl.DataFrame()
    return _relation(result, rows, intervals).pl()


def numpy(result: Result, rows: list[tuple], *, intervals: bool = False) -> dict[str, Any]:
    if not result.columns:
        return {}
    return _relation(result, rows, intervals).fetchnumpy()


def to_html(result: Result | None, messages: list[str], max_rows: int = 60) -> str:
    """A table with each noisy value's interval under it, and the cost, population and notes."""
    if result is None:
        return "<p><em>dpgate cursor: no result yet</em></p>"
    esc = html.escape
    parts = ['<div class="dpgate-result">']
    if result.columns:
        bars = result.release.intervals if result.release is not None else []
        parts.append("<table><thead><tr>" + "".join(f"<th>{esc(str(c))}</th>" for c in result.columns) + "</tr></thead><tbody>")
        for i, row in enumerate(result.rows[:max_rows]):
            cells = []
            for name, value in zip(result.columns, row):
                shown = esc(_fmt(value))
                iv = bars[i].get(name) if i < len(bars) else None
                if iv is not None and iv[0] is not None:
                    shown += f'<br><small style="color:#777">[{esc(_fmt(iv[0]))}, {esc(_fmt(iv[1]))}]</small>'
                cells.append(f"<td>{shown}</td>")
            parts.append("<tr>" + "".join(cells) + "</tr>")
        parts.append("</tbody></table>")
        if len(result.rows) > max_rows:
            parts.append(f"<p><small>{len(result.rows) - max_rows:,} more rows</small></p>")
    footer = [m for m in messages]
    if footer:
        parts.append("<p><small>" + "<br>".join(esc(m) for m in footer) + "</small></p>")
    parts.append("</div>")
    return "".join(parts)


def _fmt(v: Any) -> str:
    from dpgate.interfaces.render import format_value  # as the CLI and the shell print values

    return format_value(v)
