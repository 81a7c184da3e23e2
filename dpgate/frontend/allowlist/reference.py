"""The allowlist as Markdown: the documentation's page 'What SQL is accepted' (``docs/sql/allowed.md``),
written from the lists of ``rules`` (``tests/frontend/test_docs_allowlist.py`` keeps the page equal to it)."""

from __future__ import annotations

from dpgate.frontend import cost
from dpgate.frontend.allowlist.rules import (
    CAST_TYPES,
    GRAPH_AGGREGATES,
    OPERATORS,
    RULES,
    SUPPORTED_AGGREGATES,
    TOPK_COLUMNS_FUNCTION,
    Rule,
)


# -- reference --------------------------------------------------------------------------------------
def reference_markdown() -> str:
    """The allowlist as Markdown, for ``docs/sql/allowed.md`` (between its markers)."""
    lines = [
        "Queries over protected tables may use only what is listed here; anything else is refused "
        "(DP250-DP257) before any budget is charged.",
        "",
        "- **FROM / JOIN**: table names (optionally `main.`-qualified) with an optional plain alias; no "
        "TABLESAMPLE / USING SAMPLE, PIVOT / UNPIVOT, column alias lists, time travel, WITH ORDINALITY, hints, "
        "LATERAL or table functions (except "
        f"`{TOPK_COLUMNS_FUNCTION}('table', k => n [, counts => true])`). One subquery shape: the per-subject "
        "subquery `FROM (SELECT unit, COUNT(*) AS n, SUM(x) AS s, ... FROM t [WHERE ...] GROUP BY unit) s`, "
        "checked by these same rules, with COUNT, SUM, AVG, MIN and MAX (and no JOIN, HAVING, ORDER BY or LIMIT) "
        "inside; it must group by the privacy unit alone.",
        "- **Joins** (lookups, and the graph triangle self-join): `[INNER] JOIN`, `LEFT | RIGHT | FULL "
        "[OUTER] JOIN` with `ON` comparisons of two columns joined by AND, or `USING (col, ...)`. A public table "
        "must be tied by equalities to columns whose values are unique in it (a lookup: it never repeats a row), "
        "and another protected table of the same subject space by its privacy unit; `CROSS JOIN`, `FROM a, b`, "
        "joins on `<` / `>` or on non-unique columns pass this list and are then refused (DP215). "
        "Not NATURAL, POSITIONAL, ASOF, SEMI, ANTI or LATERAL.",
        "- **WITH**: only the degree table of a graph's k-star sum.",
        "- **Clauses**: SELECT (with aliases), WHERE, GROUP BY (plain expressions or ALL), HAVING, ORDER BY, "
        "LIMIT / OFFSET with constants. Not DISTINCT, QUALIFY, WINDOW, ROLLUP / CUBE / GROUPING SETS.",
        f"- **Aggregates**: {SUPPORTED_AGGREGATES}; the graph counts "
        + ", ".join(f"`{g.upper()}`" for g in GRAPH_AGGREGATES) + ".",
        "- **Expressions**: columns, constants (numbers, strings, NULL, TRUE / FALSE, parameters, intervals), "
        + "; ".join(name for name, _ in OPERATORS)
        + "; `IS [NOT] NULL`, `IS [NOT] TRUE / FALSE`; `IN (constant, ...)`; "
        "`CAST` / `TRY_CAST` / `::` to " + ", ".join(sorted(set(CAST_TYPES.values()))) + ".",
        "- **Not allowed**: window functions, subqueries (also in IN and EXISTS), lambdas, list / struct / map "
        "constructors and element access, `*` outside `COUNT(*)`, and every function not in the table below.",
        f"- **Output size**: a whole row expression may make text of at most {cost.MAX_TEXT_FACTOR} times its "
        f"longest input value plus {cost.MAX_TEXT_CONSTANT:,} characters (nested `replace`, `lpad`, `concat` "
        "multiply; DP255).",
        f"- **Work per row**: a regular expression compiles to at most {cost.MAX_REGEX_PROGRAM} instructions "
        "(counted repetitions are copied: `(a|b){1,100}` is about 500; `.` or a class counts 16, a Unicode class 96, "
        f"case folding doubles) and is charged RE2's worst case, {cost.REGEX_UNITS} steps per character and "
        "instruction (so a pattern runs over stored values, not over long built text); a LIKE pattern with `_` or "
        "ESCAPE, and every "
        "ILIKE pattern, has at most one `%` before its end (LIKE without `_` takes any number of `%`); a row's "
        f"work is at most {cost.MAX_WORK_FACTOR:,} steps per character of its longest input plus "
        f"{cost.MAX_WORK_CONSTANT:,} steps (DP258). The time one chosen row takes is not the analyst's to choose.",
        "",
        "Functions: each is total (under `TRY`, no input makes it fail) and its output is bounded by its inputs; "
        "the arguments named in the second column must be constants.",
        "",
        "| function | constant arguments | note |",
        "|---|---|---|",
    ]
    for rule in sorted(RULES, key=lambda r: r.name):
        names = ", ".join(f"`{n}`" for n in rule.names)
        consts = "; ".join([f"{_slot_name(rule, k)}: {c.description}" for k, c in rule.consts.items()]
                           + ([rule.constants_note] if rule.constants_note else [])) or "-"
        lines.append(f"| {names} | {consts.replace('|', '&#124;')} | {rule.reason} |")
    return "\n".join(lines) + "\n"


def _slot_name(rule: Rule, key: str | int) -> str:
    if isinstance(key, int):
        return f"argument {key + 1}"
    return {"this": "part", "expression": "argument 2", "unit": "part", "decimals": "decimals",
            "fill_pattern": "fill", "flag": "options", "modifiers": "options"}.get(key, key)  # fmt: skip
