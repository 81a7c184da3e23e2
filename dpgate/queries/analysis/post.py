"""The row-level base relation (unit, keys and aggregate inputs under TRY) and the
post-processing: the analyst's projections, HAVING, ORDER BY and LIMIT, run on the noisy values."""

from __future__ import annotations

from sqlglot import exp

from dpgate import errors
from dpgate.plans import KeySpec, OutputColumn
from dpgate.queries.analysis.common import _try

_MONOTONE_WRAPPERS = (exp.Round, exp.Floor, exp.Ceil, exp.Cast, exp.Paren)


class PostProcessing:
    """The base relation and the post-processing (part of ``Analysis``)."""

    def _base(self, q: exp.Select, unit: exp.Column, keys: list[exp.Expr], inputs: list[exp.Expr | None]) -> exp.Select:
        base = q.copy()
        for arg in ("group", "having", "order", "limit", "offset"):
            base.set(arg, None)
        cols: list[exp.Expr] = [exp.alias_(unit.copy(), "__unit")]
        for j, k in enumerate(keys):
            cols.append(exp.alias_(_try(k.copy()), f"__k{j}"))
        for i, v in enumerate(inputs):
            if v is not None:
                cols.append(exp.alias_(_try(v.copy()), f"__v{i}"))
        base.set("expressions", cols)
        conds: list[exp.Expr] = [exp.Not(this=exp.Is(this=unit.copy(), expression=exp.Null()))]
        where = q.args.get("where")
        if where is not None:
            conds.append(_try(where.this.copy()))
        base.set("where", exp.Where(this=exp.and_(*conds)))
        return base

    def _post(
        self, q: exp.Select, projections: list[exp.Expr], keys: list[exp.Expr], aggs: list[exp.Expr],
        key_specs: list[KeySpec], original_sql: str,
    ) -> tuple[exp.Select, list[OutputColumn]]:  # fmt: skip
        agg_index = {a.sql(dialect="duckdb"): i for i, a in enumerate(aggs)}
        key_index = {k.sql(dialect="duckdb"): j for j, k in enumerate(keys)}

        def rewrite(node: exp.Expr) -> exp.Expr:
            text = node.sql(dialect="duckdb")
            if text in agg_index and self._is_aggregate(node):
                return exp.column(f"__a{agg_index[text]}")
            if text in key_index:
                return exp.column(f"__k{key_index[text]}")
            return node

        rewritten = []
        for p in projections:
            inner = p.unalias() if isinstance(p, exp.Alias) else p
            new = inner.copy().transform(rewrite)
            self._check_post(new, "SELECT")
            rewritten.append(new)
        names = [n for n, _ in self.facts.describe(original_sql)]
        post_exprs = []
        outputs = []
        for new, name in zip(rewritten, names):
            post_exprs.append(exp.alias_(new, name, quoted=True))
            outputs.append(output_column(name, new))
        post = exp.select(*post_exprs).from_("__noisy")
        having = q.args.get("having")
        if having is not None:
            cond = having.this.copy().transform(rewrite)
            self._check_post(cond, "HAVING")
            post = post.where(cond)
        order = q.args.get("order")
        if order is not None:
            new_order = order.copy().transform(rewrite)
            self._check_post(new_order, "ORDER BY")
            post.set("order", new_order)
        elif key_specs:
            post = post.order_by(*[exp.Ordered(this=exp.column(f"__k{j}"), nulls_first=False) for j in range(len(key_specs))])
        for arg in ("limit", "offset"):
            if q.args.get(arg) is not None:
                post.set(arg, q.args[arg].copy())
        return post, outputs

    def _check_post(self, node: exp.Expr, where: str) -> None:
        for col in node.find_all(exp.Column):
            if col.name.startswith("__"):
                continue
            if col.table:
                raise errors.UnsupportedQueryError(
                    f"{col.sql(dialect='duckdb')} in {where} is neither aggregated nor in GROUP BY; "
                    "it would return row-level values",
                    code="DP211",
                    hint="add it to GROUP BY (over a declared domain) or aggregate it",
                )


def output_column(name: str, expr: exp.Expr) -> OutputColumn:
    """Which aggregate's error bar an output column carries (bare or monotone-wrapped)."""
    node = expr
    wrapper = None
    while isinstance(node, _MONOTONE_WRAPPERS):
        if wrapper is None:
            wrapper = expr
        node = node.this
    if isinstance(node, exp.Column) and node.name.startswith("__a"):
        if isinstance(expr, exp.Cast) and not expr.to.is_type(*exp.DataType.NUMERIC_TYPES):
            return OutputColumn(name, None)
        return OutputColumn(name, int(node.name[3:]), wrapper)
    return OutputColumn(name, None)
