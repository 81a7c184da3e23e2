"""Tab completion: SQL keywords, dpgate's words, and the tables and columns the analyst may query.

``suggest`` is a pure function of the text before the cursor and a catalog snapshot, so it is
tested without a terminal; ``SQLCompleter`` wraps it for prompt-toolkit.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from prompt_toolkit.completion import Completer, Completion

from dpgate.frontend.settings import SPECS

SQL_KEYWORDS = [
    "SELECT", "FROM", "WHERE", "GROUP BY", "HAVING", "ORDER BY", "LIMIT", "OFFSET", "JOIN", "LEFT JOIN",
    "INNER JOIN", "ON", "USING", "AS", "AND", "OR", "NOT", "IN", "IS NULL", "IS NOT NULL", "BETWEEN",
    "LIKE", "CASE", "WHEN", "THEN", "ELSE", "END", "DISTINCT", "ASC", "DESC", "NULLS LAST", "WITH",
    "COUNT(*)", "COUNT", "SUM", "AVG", "ROUND", "LEAST", "GREATEST", "COALESCE", "CAST", "FILTER",
    "DESCRIBE", "SHOW TABLES", "SET", "TRIANGLE_COUNT(", "KSTAR_COUNT(", "KTRIANGLE_COUNT(", "KCLIQUE_COUNT(",
]  # fmt: skip
DP_KEYWORDS = [
    "WITH DIFFERENTIAL_PRIVACY OPTIONS (", "EXPLAIN PRIVACY", "SHOW BUDGET",
    *[f"SET dp_{name} = " for name, spec in SPECS.items() if spec.session],
]  # fmt: skip
OPTION_NAMES = sorted(SPECS)
#: dpgate's table functions, offered where a table name goes.
DP_TABLE_FUNCTIONS = ["dp_top_k_columns("]

#: table name -> (kind, [(column, type)])
CatalogSnapshot = dict[str, tuple[str, list[tuple[str, str]]]]

_TABLE_CONTEXT = re.compile(r"\b(FROM|JOIN|DESCRIBE|TABLE)\s+(\w*)$", re.I)
_OPTIONS_CONTEXT = re.compile(r"OPTIONS\s*\(([^)]*)$", re.I)
_QUALIFIED = re.compile(r"(\w+)\.(\w*)$")
_TABLE_REFS = re.compile(r"\b(?:FROM|JOIN)\s+(\w+)(?:\s+(?:AS\s+)?(?!ON\b|USING\b|WHERE\b|GROUP\b|JOIN\b|LEFT\b|INNER\b)(\w+))?", re.I)


def suggest(
    text: str, catalog: CatalogSnapshot, commands: Iterable[str] = (), full_text: str | None = None
) -> list[tuple[str, str]]:
    """Completions for the text before the cursor: (completion text, kind), best first.

    ``full_text`` (the whole input) lets columns be offered in the SELECT list before the
    FROM clause is reached.
    """
    word = re.search(r"[\w.]*$", text).group(0)
    stripped = text.lstrip()
    if stripped.startswith(".") and "\n" not in stripped:
        parts = stripped.split()
        if len(parts) <= 1 and not text.endswith(" "):
            return [(c, "command") for c in sorted(commands) if c.startswith(stripped)]
        if parts[0] in (".schema",):
            prefix = "" if text.endswith(" ") else parts[-1]
            return [(t, "table") for t in sorted(catalog) if t.startswith(prefix.lower())]
        return []
    opt = _OPTIONS_CONTEXT.search(text)
    if opt:
        current = re.search(r"(\w*)$", opt.group(1)).group(1)
        if "=" not in opt.group(1).split(",")[-1]:
            return [(o, "option") for o in OPTION_NAMES if o.startswith(current.lower())]
        return []
    setting = re.search(r"\bSET\s+(\w*)$", text, re.I)
    if setting:
        prefix = setting.group(1).lower()
        return [(f"dp_{n}", "setting") for n, spec in SPECS.items() if spec.session and f"dp_{n}".startswith(prefix)]
    m = _TABLE_CONTEXT.search(text)
    if m:
        prefix = m.group(2).lower()
        out = [(t, catalog[t][0]) for t in sorted(catalog) if t.startswith(prefix)]
        if m.group(1).upper() == "FROM":
            out += [(f, "dp function") for f in DP_TABLE_FUNCTIONS if f.startswith(prefix)]
        return out
    q = _QUALIFIED.search(text)
    aliases = _aliases(full_text if full_text is not None else text, catalog)
    if q:
        table = aliases.get(q.group(1).lower())
        if table:
            return [(c, "column") for c, _ in catalog[table][1] if c.startswith(q.group(2).lower())]
        return []
    prefix = word.lower()
    out: list[tuple[str, str]] = []
    seen = set()
    for table in dict.fromkeys(aliases.values()):
        for c, _ in catalog[table][1]:
            if c.startswith(prefix) and c not in seen:
                out.append((c, "column"))
                seen.add(c)
    if not text.strip() or re.search(r"^\s*\w*$", text):
        out += [(k, "dp keyword") for k in DP_KEYWORDS if k.lower().startswith(prefix)]
    elif re.search(r"\bSELECT\s+\w*$", text, re.I):
        out += [(k, "dp keyword") for k in DP_KEYWORDS[:1] if k.lower().startswith(prefix)]
    out += [(k, "keyword") for k in SQL_KEYWORDS + DP_KEYWORDS if k.lower().startswith(prefix) and (k, "dp keyword") not in out]
    if prefix:
        out += [(t, catalog[t][0]) for t in sorted(catalog) if t.startswith(prefix) and t not in seen]
    return out


def _aliases(text: str, catalog: CatalogSnapshot) -> dict[str, str]:
    """alias -> table, for the tables named in FROM / JOIN so far (tables are their own alias)."""
    out = {}
    for table, alias in _TABLE_REFS.findall(text):
        t = table.lower()
        if t in catalog:
            out[t] = t
            if alias:
                out[alias.lower()] = t
    return out


class SQLCompleter(Completer):
    def __init__(self, catalog: Callable[[], CatalogSnapshot], commands: Callable[[], Iterable[str]]):
        self._catalog = catalog
        self._commands = commands

    def get_completions(self, document, complete_event):
        text = document.text_before_cursor
        word = re.search(r"[\w]*$", text).group(0)
        if text.lstrip().startswith(".") and " " not in text.strip():
            word = text.lstrip()
        for value, kind in suggest(text, self._catalog(), self._commands(), document.text):
            start = -len(word)
            if kind in ("keyword", "dp keyword") and word.isupper() is False and word:
                # keep the analyst's case for keywords typed in lower case
                value_out = value.lower() if word.islower() else value
            else:
                value_out = value
            yield Completion(value_out, start_position=start, display_meta=kind)
