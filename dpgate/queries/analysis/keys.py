"""The GROUP BY keys and their public domains (declared values, integer or date bounds, a public
lookup column, or the image of an expression over those), and the threshold of DP key selection
for keys without one."""

from __future__ import annotations

import re
from typing import Any

from sqlglot import exp

from dpgate import errors
from dpgate.catalog.tables import TIMESTAMP_TYPES
from dpgate.frontend.dialect import to_duckdb
from dpgate.plans import KeySpec
from dpgate.queries.analysis.common import _try, preempted

#: Largest cross product of input domains evaluated to find an expression's image.
MAX_IMAGE_INPUTS = 200_000


class KeyAnalysis:
    """GROUP BY keys and their domains (part of ``Analysis``)."""

    def _group_keys(self, q: exp.Select, projections: list[exp.Expr]) -> tuple[list[exp.Expr], list[str]]:
        group = q.args.get("group")
        if group is None:
            return [], []
        # The allowlist groups by plain expressions or ALL only (DP252).
        for arg in ("rollup", "cube", "grouping_sets", "totals"):
            if group.args.get(arg):
                raise preempted(f"GROUP BY {arg.upper().replace('_', ' ')}")
        for node in group.expressions:
            if isinstance(node, (exp.Rollup, exp.Cube, exp.GroupingSets)):
                raise preempted(f"GROUP BY {node.key.upper()}")
        exprs: list[exp.Expr] = []
        if group.args.get("all"):
            exprs = [p.unalias() for p in projections if not any(self._is_aggregate(n) for n in p.walk())]
        for node in group.expressions:
            if isinstance(node, exp.Literal) and not node.is_string:
                idx = int(node.this)
                if not 1 <= idx <= len(projections):
                    raise errors.ProgrammingError(
                        f"GROUP BY {idx} is out of range: the SELECT list has {len(projections)} items",
                        code="DP218",
                    )
                exprs.append(projections[idx - 1].unalias().copy())
            elif isinstance(node, exp.Column) and not node.table:
                match = [p for p in projections if isinstance(p, exp.Alias) and p.alias.lower() == node.name.lower()]
                exprs.append(match[0].this.copy())
            else:
                exprs.append(node)
        names = []
        seen = set()
        keys = []
        for e in exprs:
            self._check_row_expr(e, "GROUP BY")
            text = e.sql(dialect="duckdb")
            if text in seen:
                continue
            seen.add(text)
            keys.append(e)
            name = None
            for p in projections:
                if isinstance(p, exp.Alias) and p.this.sql(dialect="duckdb") == text:
                    name = p.alias
                    break
            names.append(name or (e.name if isinstance(e, exp.Column) else text))
        return keys, names

    def _key_specs(self, keys: list[exp.Expr], names: list[str], types: dict[str, str]) -> list[KeySpec]:
        specs = []
        for j, (e, name) in enumerate(zip(keys, names)):
            sql_type = types[f"__k{j}"]
            domain, source = self._domain(e)
            specs.append(KeySpec(name=name, expr=e, sql_type=sql_type, domain=domain, source=source))
        return specs

    def _column_domain(self, col: exp.Column, *, days: bool = False) -> tuple[tuple[Any, ...] | None, str, str]:
        """A column's public domain; with ``days``, a bounded TIMESTAMP's days (midnights) too."""
        item = self.scope.find(col)
        name = col.name.lower()
        if item is None:
            return None, "", ""
        if item.protected:
            c = item.prot.column(name)
            dom = c.key_domain() if c else None
            if dom is None and days and c is not None and c.is_timestamp:
                dom = c.days()
            if dom is None:
                return None, "", c.type if c else ""
            if c.domain is not None:
                source = "declared"
            else:
                source = "date bounds" if (c.is_date or c.is_timestamp) else "integer bounds"
            return dom, source, c.type
        values = list(self.facts.distinct_values(item.table, name))
        if item.nullable and None not in values:
            values.append(None)
        return tuple(values), f"public table {item.table}", item.columns[name]

    def _domain(self, e: exp.Expr) -> tuple[tuple[Any, ...] | None, str]:
        if isinstance(e, exp.Column):
            dom, source, _ = self._column_domain(e)
            return dom, source or "DP key selection"
        cols = {}
        for col in e.find_all(exp.Column):
            cols[col.sql(dialect="duckdb")] = col
        if not cols:
            return None, "DP key selection"
        inputs = []
        total = 1
        timestamps = []
        for text, col in cols.items():
            dom, _, typ = self._column_domain(col, days=len(cols) == 1)
            if dom is None:
                return None, "DP key selection"
            if typ.upper() in TIMESTAMP_TYPES:
                timestamps.append(len(inputs))
            total *= len(dom)
            inputs.append((text, list(dom), typ))
        if total > MAX_IMAGE_INPUTS:
            return None, "DP key selection"
        names = {text: f"__c{i}" for i, (text, _, _) in enumerate(inputs)}

        def renamed(shift: str | None = None) -> exp.Expr:
            def rename(node: exp.Expr) -> exp.Expr:
                if isinstance(node, exp.Column):
                    name = names[node.sql(dialect="duckdb")]
                    if shift is not None:
                        return exp.maybe_parse(f"({name} + INTERVAL '{shift}')", dialect="duckdb")
                    return exp.column(name)
                return node

            return e.copy().transform(rename)

        domains = [(vals, typ) for _, vals, typ in inputs]
        if timestamps:
            # A TIMESTAMP's inputs are its days: only an expression constant within each day
            # (date_trunc to a day or coarser, year(), month(), ts::DATE ...) gets this domain.
            # Structurally first (every use of the column sits inside a day-level function), then
            # by probing three instants of each day; either failing means DP key selection.
            stamp_cols = {inputs[i][0] for i in timestamps}
            if not all(_day_constant(c, e) for c in e.find_all(exp.Column) if c.sql(dialect="duckdb") in stamp_cols):
                return None, "DP key selection"
            base = to_duckdb(_try(renamed()))
            moved = [to_duckdb(_try(renamed(s))) for s in ("12 hours", "86399.999999 seconds")]
            if self.facts.count_where(" OR ".join(f"({base}) IS DISTINCT FROM ({m})" for m in moved), domains):
                return None, "DP key selection"
        image = self.facts.image(to_duckdb(_try(renamed())), domains)
        return tuple(image), "image of " + ", ".join(sorted({c.name for c in cols.values()}))

    def declaration_hint(self, key_specs: list[KeySpec]) -> str:
        """What the owner could declare so that these keys get public domains (no δ, every cell)."""
        wanted = []
        for k in key_specs:
            if k.domain is not None:
                continue
            for col in k.expr.find_all(exp.Column):
                item = self.scope.find(col)
                if item is None or not item.protected:
                    continue
                c = item.prot.column(col.name)
                if c is None or c.domain is not None:
                    continue
                what = "domain = [...]"
                if c.is_timestamp and c.bounded:
                    what += "; or group by a day or coarser: date_trunc('day', ts), year(ts), ts::DATE"
                elif c.bounded and (c.is_integer or c.is_date):
                    what += " or bounds spanning fewer values"
                elif c.is_integer or c.is_date or c.is_timestamp:
                    what += " or bounds = [lo, hi]"
                text = f"{item.table}.{c.name} ({what}, under [tables.{item.table}.columns.{c.name}])"
                if text not in wanted:
                    wanted.append(text)
        if not wanted:
            return "group by plain columns with declared domains, or by a public lookup table's column"
        return "ask the owner to declare " + "; ".join(wanted) + ": every cell is then released, with no δ"


#: Functions of a TIMESTAMP that are constant within each day (their value depends on the day).
_DAY_FUNCTIONS = (exp.Year, exp.Month, exp.Day, exp.DayOfWeek, exp.DayOfYear, exp.Quarter, exp.Week,
                  exp.DayOfWeekIso, exp.WeekOfYear, exp.DayOfMonth, exp.LastDay, exp.Dayname, exp.Monthname)  # fmt: skip
_DAY_UNITS = {"DAY", "WEEK", "MONTH", "QUARTER", "YEAR", "DECADE", "CENTURY", "MILLENNIUM"}
_DAY_ANONYMOUS = {"YEARWEEK", "ISOYEAR"}
_DAY_PARTS = _DAY_UNITS | {"DOW", "DOY", "ISODOW", "ISOYEAR", "DAYOFWEEK", "DAYOFYEAR", "DAYOFMONTH", "YEARWEEK"}
_DAY_FORMAT = re.compile(r"^(?:[^%]|%[-]?[YymdbBaAjUWuwVGe%])*$")


def _day_constant(col: exp.Column, root: exp.Expr) -> bool:
    """Whether this use of a TIMESTAMP column sits inside a function whose value depends only on
    the day (so a day-level domain of the column is the domain of the expression)."""
    node = col
    while node is not root and node.parent is not None:
        node = node.parent
        if isinstance(node, _DAY_FUNCTIONS):
            return True
        if isinstance(node, (exp.TimestampTrunc, exp.DateTrunc, exp.DateDiff)):
            unit = node.args.get("unit")
            return unit is not None and unit.name.upper() in _DAY_UNITS
        if isinstance(node, exp.Cast):
            if node.to.this == exp.DataType.Type.DATE:
                return True
            continue
        if isinstance(node, exp.Extract):
            return node.this.name.upper() in _DAY_PARTS
        if isinstance(node, exp.TimeToStr):
            fmt = node.args.get("format")
            return isinstance(fmt, exp.Literal) and fmt.is_string and bool(_DAY_FORMAT.match(fmt.this))
        if isinstance(node, exp.Anonymous) and node.name.upper() in _DAY_ANONYMOUS:
            return True
        if isinstance(node, exp.Anonymous) and node.name.upper() == "DATE_PART":
            part = node.expressions[0] if node.expressions else None
            return isinstance(part, exp.Literal) and part.is_string and part.this.upper() in _DAY_PARTS
        if isinstance(node, (exp.Paren, exp.Try)):
            continue
        return False  # any other function or operator applied to the instant itself
    return False
