"""The per-subject subquery ``FROM (SELECT unit, agg AS v, ... FROM t GROUP BY unit) s``:
one row per subject, with public bounds on each value."""

from __future__ import annotations

import math
from dataclasses import replace

from sqlglot import exp

from dpgate import errors
from dpgate.catalog.tables import INTEGER_TYPES, Column
from dpgate.frontend.dialect import to_duckdb
from dpgate.queries.analysis.common import PER_SUBJECT, _num, _try, display_sql, preempted


class PerSubjectAnalysis:
    """The per-subject subquery (part of ``Analysis``)."""

    def _per_subject(self, q: exp.Select) -> exp.Select:
        """``FROM (SELECT unit, agg AS v, ... FROM t [WHERE ...] GROUP BY unit) s``: one row per subject.

        Wilson et al.'s user-level pattern [per-subject]. The inner rows are the charged subjects'
        rows, cut to the table's ``max_rows`` per subject by a keyed hash before anything else
        (``restrict_to_charged``), with every aggregate's input clamped to its bounds; so each
        inner value has public bounds: COUNT in ``[0, R]``, SUM in ``[R min(L, 0), R max(U, 0)]``,
        AVG / MIN / MAX in ``[L, U]``. The outer query then reads one row per subject (max_rows
        = 1) of a relation whose columns have those bounds: its sensitivities follow as for any
        table. Returns the outer statement over a placeholder table; ``self.inner`` is the
        rewritten subquery, which replaces the placeholder in the row-level source.
        """
        sub = q.args["from_"].this
        inner: exp.Select = sub.this.copy()
        alias = sub.alias_or_name or "per_subject"
        table = self.table
        for key in ("having", "order", "limit", "offset", "joins", "with_", "distinct"):
            if inner.args.get(key):  # allowlist: _Checker.per_subject (DP250)
                raise preempted(f"{key.upper()} in the per-subject subquery")
        scope = self._scope(inner)
        self._qualify(inner, scope)
        self.scope = scope
        group = inner.args.get("group")
        keys = list(group.expressions) if group is not None else []
        item = scope.items[0]
        if len(keys) != 1 or not (isinstance(keys[0], exp.Column) and keys[0].name.lower() == table.unit
                                  and scope.find(keys[0]) is item):  # fmt: skip
            raise errors.UnsupportedQueryError(
                f"The subquery over {table.name} must group by its privacy unit {table.unit} alone, so that each "
                "subject yields one row",
                code="DP216",
                hint=f"write FROM (SELECT {table.unit}, COUNT(*) AS n FROM {table.name} GROUP BY {table.unit}) s",
            )
        where = inner.args.get("where")
        if where is not None:
            self._check_row_expr(where.this, "WHERE")
            inner.set("where", exp.Where(this=_try(where.this.copy())))
        rows = table.max_rows
        columns: dict[str, Column] = {}
        unit_name = None
        out = []
        for p in inner.expressions:
            node = p.unalias() if isinstance(p, exp.Alias) else p
            name = (p.alias if isinstance(p, exp.Alias) else node.name if isinstance(node, exp.Column) else "").lower()
            if isinstance(node, exp.Column) and node.name.lower() == table.unit:
                unit_name = name
                columns[name] = Column(name, table.columns[table.unit].type)
                out.append(exp.alias_(node.copy(), name, quoted=True))
                continue
            if not name:
                raise errors.ProgrammingError(
                    f"Name the per-subject value {display_sql(node)}", code="DP218",
                    hint=f"e.g. {display_sql(node)} AS v",
                )  # fmt: skip
            expr, lo, hi = self._per_subject_value(node, rows)
            columns[name] = Column(name, "DOUBLE", lo, hi)
            out.append(exp.alias_(expr, name, quoted=True))
        if unit_name is None:
            raise errors.UnsupportedQueryError(
                f"The per-subject subquery must select the privacy unit {table.unit}", code="DP216",
                hint=f"write SELECT {table.unit}, ... GROUP BY {table.unit}",
            )  # fmt: skip
        inner.set("expressions", out)
        types = dict(self.facts.describe(to_duckdb(inner)))
        for name, c in columns.items():
            typ = types.get(name, c.type)
            integer = typ.upper() in INTEGER_TYPES
            if c.lower is not None and integer:
                c = replace(c, type=typ, lower=float(math.floor(c.lower)), upper=float(math.ceil(c.upper)))
            else:
                c = replace(c, type=typ)
            columns[name] = c
        self.inner = inner
        self.rows_table = replace(
            table, name=PER_SUBJECT, unit=unit_name, max_rows=1, max_groups=1, columns=columns,
            unique_unit=True, unique_keys=(frozenset({unit_name}),),
        )  # fmt: skip
        outer = q.copy()
        outer.set("from_", exp.From(this=exp.Table(this=exp.to_identifier(PER_SUBJECT),
                                                    alias=exp.TableAlias(this=exp.to_identifier(alias)))))  # fmt: skip
        return outer

    def _per_subject_value(self, node: exp.Expr, rows: int) -> tuple[exp.Expr, float, float]:
        """One per-subject aggregate: SQL over clamped inputs, and its bounds with ``rows`` rows."""
        text = display_sql(node)
        if isinstance(node, exp.Count):
            arg = node.this
            if isinstance(arg, exp.Star):
                return exp.Count(this=exp.Star()), 0.0, float(rows)
            if isinstance(arg, exp.Distinct) and len(arg.expressions) == 1:
                self._check_row_expr(arg.expressions[0], text)
                return exp.Count(this=exp.Distinct(expressions=[_try(arg.expressions[0].copy())])), 0.0, float(rows)
            if arg is not None and not isinstance(arg, exp.Distinct):
                self._check_row_expr(arg, text)
                return exp.Count(this=_try(arg.copy())), 0.0, float(rows)
        if isinstance(node, (exp.Sum, exp.Avg, exp.Min, exp.Max)) and node.this is not None and not isinstance(
            node.this, exp.Distinct
        ):
            arg = node.this
            self._check_row_expr(arg, text)
            lo, hi = self._input_bounds(arg, text, "LEAST(GREATEST(expr, lo), hi)")
            clamped = exp.Least(this=exp.Greatest(this=_try(arg.copy()), expressions=[_num(lo)]),
                                expressions=[_num(hi)])  # fmt: skip
            agg = type(node)(this=clamped)
            if isinstance(node, exp.Sum):
                return agg, rows * min(lo, 0.0), rows * max(hi, 0.0)
            return agg, lo, hi
        raise errors.UnsupportedQueryError(
            f"{text} is not supported in the per-subject subquery", code="DP212",
            hint="per subject: COUNT(*), COUNT(expr), COUNT(DISTINCT expr), SUM, AVG, MIN or MAX of bounded inputs",
        )  # fmt: skip
