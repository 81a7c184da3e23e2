"""The allowlist's check: one walk over a statement, refusing the first construct that is not
on the lists of ``rules`` (DP250-DP257), then the text and work bound of ``cost``."""

from __future__ import annotations

from sqlglot import exp

from dpgate.frontend import cost
from dpgate.frontend.allowlist.rules import (
    _AGGREGATES,
    _CLAUSE_NAMES,
    _LEAF_TYPES,
    _OPERATOR_CLASSES,
    _SELECT_CLAUSES,
    _TABLE_DECORATIONS,
    CAST,
    CAST_TYPES,
    CONSTANT,
    FROM_ITEM,
    FUNCTION,
    FUNCTIONS,
    GRAPH_AGGREGATES,
    ILIKE,
    JOIN,
    LIKE,
    NODE,
    REGEX,
    RULES,
    SHAPE,
    SIZE,
    SUPPORTED_AGGREGATES,
    TOPK_COLUMNS_FUNCTION,
    D,
    Rule,
    Text,
    _children,
    _form_example,
    _function_name,
    _integer,
    _is_constant,
    _number,
    _present,
    _sized_by_data,
    _string,
)
from dpgate.frontend.cost import refuse as _refuse
from dpgate.frontend.cost import sql_text as _sql
from dpgate.frontend.dialect import received
from dpgate.frontend.nodes import CreateSynthetic, DPOptions, ExplainPrivacy

_FROM_HINT = (
    "FROM and JOIN take table names, optionally main.-qualified, with a plain alias "
    "(FROM adult a); sample, pivot, relabel or time-travel nothing"
)
_JOIN_HINT = (
    "join public tables with [INNER | LEFT | RIGHT | FULL] JOIN t ON a.col = t.col [AND ...] "
    "(comparisons of two columns) or JOIN t USING (col); CROSS JOIN and FROM a, b work without a condition"
)
# Where a refusal's hint sends the analyst for the whole list.
_DOCS_PAGE = "the documentation's page 'What SQL is accepted', docs/sql/allowed.md"
_NODE_HINT = (
    "row expressions may use columns, constants, arithmetic, comparisons, AND/OR/NOT, IS [NOT] NULL, "
    "BETWEEN, IN (constant list), LIKE, CASE, casts and the functions of dpgate's list "
    f"({_DOCS_PAGE})"
)


# -- the checker ----------------------------------------------------------------------------------
def check(statement: exp.Expr) -> None:
    """Refuse the first construct of ``statement`` that is not on the allowlist.

    ``statement``: a DP SELECT as parsed (with its ``WITH DIFFERENTIAL_PRIVACY OPTIONS``
    node, which is skipped), an ``ExplainPrivacy`` of one, or a ``CreateSynthetic``.
    Raises ``errors.UnsupportedQueryError`` (DP250-DP257); returns None if all is allowed.
    Where the text received parsed differently from what runs (``dialect.received``), both must pass.
    """
    written = received(statement)
    if written is not None:
        check(written)
    if isinstance(statement, ExplainPrivacy):
        check(statement.this)
        return
    if isinstance(statement, CreateSynthetic):
        _Checker().table(statement.args["source"], allow_function=False)
        return
    if not isinstance(statement, exp.Select):
        raise _refuse(
            SHAPE,
            f"{statement.key.upper()} over protected data is not supported: a DP query is one SELECT",
            "write one SELECT ... FROM <protected table> with aggregates; combine answers afterwards",
        )
    for options in statement.find_all(DPOptions):
        if options is not statement.args.get("hint"):  # a subquery's OPTIONS (...) would be ignored
            raise _refuse(NODE, "OPTIONS (...) belongs to the outer SELECT only",
                          "move WITH DIFFERENTIAL_PRIVACY OPTIONS (...) to the outermost SELECT")  # fmt: skip
    _Checker().select(statement)
    cost.check(statement)  # the text and work of each row expression [cost]


class _Checker:
    """One walk over a statement; each method checks one kind of node and its children."""

    # -- statement -----------------------------------------------------------------------------
    def select(self, q: exp.Select) -> None:
        for key, value in q.args.items():
            if key in _SELECT_CLAUSES or not _present(value):
                continue
            name = _CLAUSE_NAMES.get(key, key.upper())
            code = FROM_ITEM if key in ("sample", "pivots", "laterals") else NODE
            raise _refuse(
                code, f"{name} is not supported in a query over protected data",
                "a DP query has SELECT, FROM, JOIN, WHERE, GROUP BY, HAVING, ORDER BY and LIMIT / OFFSET",
            )  # fmt: skip
        hint = q.args.get("hint")
        if hint is not None and not isinstance(hint, DPOptions):
            raise _refuse(NODE, f"Optimizer hint {_sql(hint)} is not supported", "drop the hint")
        if q.args.get("with_") is not None:
            self.degree_cte(q.args["with_"])
        from_ = q.args.get("from_")
        function_source = False
        if from_ is not None and isinstance(from_.this, exp.Subquery) and not q.args.get("joins"):
            self.per_subject(from_.this)
        elif from_ is not None:
            function_source = self.table(from_.this, allow_function=True)
        for join in q.args.get("joins") or []:
            self.join(join)
        for projection in q.expressions:
            self.projection(projection, function_source)
        where = q.args.get("where")
        if where is not None:
            self.expr(where.this)
        group = q.args.get("group")
        if group is not None:
            self.group(group)
        having = q.args.get("having")
        if having is not None:
            self.expr(having.this)
        order = q.args.get("order")
        if order is not None:
            self.order(order)
        for key in ("limit", "offset"):
            node = q.args.get(key)
            if node is not None:
                self.limit(node, key.upper())

    def projection(self, node: exp.Expr, function_source: bool) -> None:
        if isinstance(node, exp.Alias):
            self.expr(node.this)
            return
        if isinstance(node, exp.Star) and function_source and not any(_present(v) for v in node.args.values()):
            return  # SELECT * FROM dp_top_k_columns(...): the noisy ranking, not rows
        self.expr(node)

    def group(self, group: exp.Group) -> None:
        for key, value in group.args.items():
            if key in ("expressions", "all") or not _present(value):
                continue
            raise _refuse(
                NODE, f"GROUP BY {key.upper().replace('_', ' ')} is not supported over protected data",
                "group by plain expressions (or GROUP BY ALL); run one query per grouping",
            )  # fmt: skip
        for node in group.expressions:
            if isinstance(node, (exp.Rollup, exp.Cube, exp.GroupingSets)):
                raise _refuse(
                    NODE, f"GROUP BY {_sql(node)} is not supported over protected data",
                    "group by plain expressions; run one query per grouping",
                )  # fmt: skip
            self.expr(node)

    def order(self, order: exp.Order) -> None:
        if _present(order.args.get("siblings")) or order.this is not None:
            raise _refuse(NODE, f"{_sql(order)} is not supported", "ORDER BY expressions [ASC | DESC]")
        for item in order.expressions:
            if not isinstance(item, exp.Ordered) or _present(item.args.get("with_fill")):
                raise _refuse(NODE, f"ORDER BY {_sql(item)} is not supported", "ORDER BY expressions [ASC | DESC]")
            self.expr(item.this)

    def limit(self, node: exp.Expr, what: str) -> None:
        extra = [k for k, v in node.args.items() if k != "expression" and _present(v)]
        value = node.args.get("expression")
        if extra or not _is_constant(value):
            raise _refuse(
                NODE, f"{_sql(node)} is not supported: {what} takes a constant number of rows",
                f"write {what} 10 (parameters are fine)",
            )  # fmt: skip

    # -- FROM and JOIN ---------------------------------------------------------------------------
    def per_subject(self, sub: exp.Subquery) -> None:
        """The per-subject subquery: ``FROM (SELECT unit, agg AS v, ... FROM t [WHERE ...] GROUP BY unit) s``.

        Its SELECT is checked by the same rules as any DP SELECT (tables, functions, nodes);
        it has no JOIN, HAVING, ORDER BY, LIMIT or nested subquery. That it groups by the privacy
        unit alone, so that every subject yields at most one row, is checked by the analysis,
        which knows the unit [per-subject].
        """
        shape = "FROM (SELECT unit, COUNT(*) AS n, SUM(x) AS s FROM t [WHERE ...] GROUP BY unit) AS per_subject"
        extra = [k for k, v in sub.args.items() if k not in ("this", "alias") and _present(v)]
        inner = sub.this
        alias = sub.args.get("alias")
        if extra or not isinstance(inner, exp.Select) or (alias is not None and alias.args.get("columns")):
            raise _refuse(FROM_ITEM, f"A subquery in FROM is supported in one shape only: {shape}", _FROM_HINT)
        for key in ("joins", "having", "order", "limit", "offset", "with_", "distinct", "qualify"):
            if _present(inner.args.get(key)):
                raise _refuse(
                    FROM_ITEM, f"The per-subject subquery may not have {_CLAUSE_NAMES.get(key, key.upper())}",
                    f"write {shape}",
                )  # fmt: skip
        if not isinstance(inner.args.get("from_") and inner.args["from_"].this, exp.Table) or inner.args.get("group") is None:
            raise _refuse(FROM_ITEM, f"The per-subject subquery reads one table and groups by its unit: {shape}",
                          _FROM_HINT)  # fmt: skip
        self.in_per_subject = True
        try:
            self.select(inner)
        finally:
            self.in_per_subject = False

    def table(self, node: exp.Expr, *, allow_function: bool) -> bool:
        """A bare table (True if it is dpgate's table function)."""
        if not isinstance(node, exp.Table):
            kind = {
                exp.Subquery: "A subquery", exp.Lateral: "LATERAL", exp.Unnest: "UNNEST", exp.Values: "VALUES",
                exp.Pivot: "PIVOT / UNPIVOT",
            }.get(type(node), "This FROM item")  # fmt: skip
            raise _refuse(FROM_ITEM, f"{kind} in FROM is not supported over protected data: {_sql(node)}", _FROM_HINT)
        for key, value in node.args.items():
            if key in ("this", "alias", "db", "catalog") or not _present(value):
                continue
            name = _TABLE_DECORATIONS.get(key, key.upper())
            raise _refuse(
                FROM_ITEM, f"{name} on {node.name or _sql(node.this)} is not supported ({_sql(node)})", _FROM_HINT
            )
        alias = node.args.get("alias")
        if alias is not None:
            if not isinstance(alias, exp.TableAlias) or alias.args.get("columns"):
                raise _refuse(
                    FROM_ITEM, f"A column alias list relabels the columns of {node.name}: {_sql(node)}",
                    f"give the table a plain alias (FROM {node.name} AS t) and name columns in SELECT",
                )  # fmt: skip
            extra = [k for k, v in alias.args.items() if k != "this" and _present(v)]
            if extra or not isinstance(alias.this, exp.Identifier):
                raise _refuse(FROM_ITEM, f"Table alias {_sql(alias)} is not supported", _FROM_HINT)
        db, catalog = node.args.get("db"), node.args.get("catalog")
        if db is not None and not (isinstance(db, exp.Identifier) and db.name.lower() == "main"):
            raise _refuse(FROM_ITEM, f"{_sql(node)} is not a table of the main schema", _FROM_HINT)
        if catalog is not None and (db is None or not isinstance(catalog, exp.Identifier)):
            raise _refuse(FROM_ITEM, f"{_sql(node)} is not supported", _FROM_HINT)
        source = node.this
        if isinstance(source, exp.Identifier):
            return False
        if allow_function and isinstance(source, exp.Anonymous) and _function_name(source) == TOPK_COLUMNS_FUNCTION:
            for arg in source.expressions:
                value = arg.expression if isinstance(arg, (exp.Kwarg, exp.PropertyEQ, exp.EQ)) else arg
                if not _is_constant(value):
                    raise _refuse(
                        CONSTANT, f"{TOPK_COLUMNS_FUNCTION}() takes constants: {_sql(arg)}",
                        f"write {TOPK_COLUMNS_FUNCTION}('table', k => 10 [, counts => true])",
                    )  # fmt: skip
            return True
        name = _function_name(source) if isinstance(source, exp.Func) else _sql(source)
        raise _refuse(
            FROM_ITEM, f"Table function {name}() is not supported in a query over protected data",
            f"read protected tables by name; the only table function here is {TOPK_COLUMNS_FUNCTION}('table', k => n)",
        )  # fmt: skip

    def join(self, join: exp.Join) -> None:
        for key, value in join.args.items():
            if key in ("this", "on", "side", "kind", "using") or not _present(value):
                continue
            what = {"method": f"{str(value).upper()} JOIN", "match_condition": "ASOF JOIN", "pivots": "PIVOT"}.get(
                key, key.upper()
            )
            raise _refuse(JOIN, f"{what} is not supported over protected data ({_sql(join)})", _JOIN_HINT)
        side = str(join.args.get("side") or "").upper()
        kind = str(join.args.get("kind") or "").upper()
        if side not in ("", "LEFT", "RIGHT", "FULL") or kind not in ("", "INNER", "OUTER", "CROSS"):
            what = " ".join(p for p in (side, kind) if p)
            raise _refuse(JOIN, f"{what} JOIN is not supported ({_sql(join)})", _JOIN_HINT)
        if kind == "OUTER" and not side:
            raise _refuse(JOIN, f"{_sql(join)} is not supported", _JOIN_HINT)
        on, using = join.args.get("on"), join.args.get("using")
        if kind == "CROSS" and (on is not None or using):
            raise _refuse(JOIN, f"CROSS JOIN takes no condition ({_sql(join)})", _JOIN_HINT)
        if side and on is None and not using:
            raise _refuse(JOIN, f"{side} JOIN needs ON or USING ({_sql(join)})", _JOIN_HINT)
        self.table(join.this, allow_function=False)
        for ident in using or []:
            if not isinstance(ident, (exp.Identifier, exp.Column)) or (
                isinstance(ident, exp.Column) and (ident.table or not isinstance(ident.this, exp.Identifier))
            ):
                raise _refuse(JOIN, f"USING ({_sql(ident)}) takes column names", _JOIN_HINT)
        if on is not None:
            self.join_condition(on)

    def join_condition(self, on: exp.Expr) -> None:
        """A conjunction of comparisons of two columns (join conditions run outside TRY)."""
        while isinstance(on, exp.Paren):
            on = on.this
        if isinstance(on, exp.And):
            self.join_condition(on.this)
            self.join_condition(on.expression)
            return
        comparisons = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ)
        ok = isinstance(on, comparisons) and all(
            isinstance(side, exp.Column) and isinstance(side.this, exp.Identifier) for side in (on.this, on.expression)
        )
        if not ok:
            raise _refuse(
                JOIN, f"Join condition {_sql(on)} is not a comparison of two columns",
                "join on key columns, e.g. ON t.code = lookup.code; put conditions on constants in WHERE",
            )  # fmt: skip
        for side in (on.this, on.expression):
            self.column(side)

    def degree_cte(self, with_: exp.With) -> None:
        """The one CTE dpgate plans: the degree table of a graph's k-star sum."""
        shape = (
            "WITH d AS (SELECT x, COUNT(*) AS deg FROM (SELECT src AS x FROM g UNION ALL SELECT dst FROM g) "
            "GROUP BY x) SELECT SUM(deg * (deg - 1) / 2) FROM d"
        )
        bad = _refuse(SHAPE, f"This WITH clause is not supported over protected data: {_sql(with_)}",
                      f"the only CTE accepted is the degree table of a graph's k-star sum: {shape}")  # fmt: skip
        extra = [k for k, v in with_.args.items() if k != "expressions" and _present(v)]
        if extra or len(with_.expressions) != 1:
            raise bad
        cte = with_.expressions[0]
        alias = cte.args.get("alias")
        if (
            not isinstance(cte, exp.CTE)
            or [k for k, v in cte.args.items() if k not in ("this", "alias") and _present(v)]
            or not isinstance(alias, exp.TableAlias)
            or alias.args.get("columns")
        ):
            raise bad
        body = cte.this
        if not isinstance(body, exp.Select) or self._extra_clauses(body, "group") or len(body.expressions) != 2:
            raise bad
        key, deg = body.expressions
        count = deg.unalias()
        if not (isinstance(deg, exp.Alias) and isinstance(count, exp.Count) and isinstance(count.this, exp.Star)):
            raise bad
        if not isinstance(key.unalias(), exp.Column):
            raise bad
        group = body.args.get("group")
        if group is None or len(group.expressions) != 1 or not isinstance(group.expressions[0], exp.Column):
            raise bad
        if [k for k, v in group.args.items() if k != "expressions" and _present(v)]:
            raise bad
        sub = body.args["from_"].this
        if not isinstance(sub, exp.Subquery) or [
            k for k, v in sub.args.items() if k not in ("this", "alias") and _present(v)
        ]:
            raise bad
        sub_alias = sub.args.get("alias")
        if sub_alias is not None and (sub_alias.args.get("columns") or not isinstance(sub_alias, exp.TableAlias)):
            raise bad
        union = sub.this
        if not isinstance(union, exp.Union) or union.args.get("distinct"):
            raise bad
        if [k for k, v in union.args.items() if k not in ("this", "expression", "distinct") and _present(v)]:
            raise bad
        for part in (union.this, union.expression):
            if not isinstance(part, exp.Select) or self._extra_clauses(part) or len(part.expressions) != 1:
                raise bad
            column = part.expressions[0]
            if isinstance(column, exp.Alias):
                column = column.this
            if not isinstance(column, exp.Column):
                raise bad
            self.column(column)
            self.table(part.args["from_"].this, allow_function=False)
        self.column(key.unalias())

    @staticmethod
    def _extra_clauses(select: exp.Select, *allowed: str) -> bool:
        if select.args.get("from_") is None:
            return True
        return any(
            _present(v) for k, v in select.args.items() if k not in ("expressions", "from_", *allowed)
        )

    # -- expressions -----------------------------------------------------------------------------
    def column(self, node: exp.Column) -> None:
        extra = [k for k, v in node.args.items() if k not in ("this", "table") and _present(v)]
        if extra or not isinstance(node.this, exp.Identifier):
            what = "A star" if isinstance(node.this, exp.Star) else "This column reference"
            raise _refuse(NODE, f"{what} ({_sql(node)}) is not supported here", "name a column (or table.column)")
        table = node.args.get("table")
        if table is not None and not isinstance(table, exp.Identifier):
            raise _refuse(NODE, f"Column reference {_sql(node)} is not supported", "write column or table.column")

    def expr(self, node: exp.Expr) -> None:
        """A row-level (or post-processing) expression."""
        if isinstance(node, exp.Column):
            self.column(node)
            return
        if isinstance(node, (exp.Literal, exp.Null, exp.Boolean, exp.Placeholder)):
            return
        if isinstance(node, exp.Interval):
            unit = node.args.get("unit")
            if not _is_constant(node.this) or (unit is not None and not isinstance(unit, exp.Var)):
                raise _refuse(CONSTANT, f"Interval {_sql(node)} must be a constant", "write INTERVAL 3 DAY")
            return
        if isinstance(node, (exp.Cast, exp.TryCast)):
            self.cast(node)
            return
        if isinstance(node, _AGGREGATES) or isinstance(node, exp.Filter):
            self.aggregate(node)
            return
        if isinstance(node, exp.Anonymous) and _function_name(node) in GRAPH_AGGREGATES:
            self.graph_aggregate(node)
            return
        if isinstance(node, exp.In):
            self.in_list(node)
            return
        if isinstance(node, exp.Is):
            if not isinstance(node.expression, (exp.Null, exp.Boolean)):
                raise _refuse(NODE, f"{_sql(node)} is not supported", "write x IS [NOT] NULL, IS [NOT] TRUE / FALSE")
            self.expr(node.this)
            return
        if isinstance(node, exp.Escape):
            if not isinstance(node.this, (exp.Like, exp.ILike)) or not Text(()).ok(node.expression):
                raise _refuse(CONSTANT, f"{_sql(node)}: ESCAPE takes a constant", "write LIKE 'a!%' ESCAPE '!'")
            # DuckDB raises per row (and TRY does not catch it) for an escape that is not one ASCII
            # character, and for a pattern ending in an unescaped escape character [escape].
            escape, pattern = _string(node.expression) or "", _string(node.this.expression)
            if len(escape.encode()) > 1 or pattern is None or (escape and _dangling_escape(pattern, escape)):
                raise _refuse(
                    CONSTANT, f"{_sql(node)}: ESCAPE takes one ASCII character, and the pattern may not end in it",
                    "write LIKE 'a!%' ESCAPE '!' (a constant pattern; the escape character before another character)",
                )
            self.expr(node.this)
            return
        rule = self.rule(node)
        if rule is not None:
            self.call(node, rule)
            return
        if isinstance(node, _OPERATOR_CLASSES):
            self.operator(node)
            return
        self.not_allowed(node)

    def operator(self, node: exp.Expr) -> None:
        for key, value in node.args.items():
            if isinstance(value, _LEAF_TYPES):
                continue
            for child in _children(value):
                self.expr(child)

    def rule(self, node: exp.Expr) -> Rule | None:
        if isinstance(node, exp.Anonymous):
            found = FUNCTIONS.get(_function_name(node))
        else:
            found = FUNCTIONS.get(type(node))
        return found

    def call(self, node: exp.Expr, rule: Rule) -> None:
        name = _function_name(node)
        if isinstance(node, exp.Anonymous):
            args = list(node.expressions)
            lo, hi = rule.arity or (0, 1 << 30)
            if not lo <= len(args) <= hi:
                raise _refuse(
                    FUNCTION, f"{_sql(node)}: {name}() takes {lo if lo == hi else f'{lo} to {hi}'} argument(s) here",
                    f"write it as {_form_example(rule)}",
                )  # fmt: skip
            slots: list[tuple[str | int, exp.Expr]] = list(enumerate(args))
        else:
            slots = []
            for key, value in node.args.items():
                if isinstance(value, _LEAF_TYPES):
                    continue
                for child in _children(value):
                    if key not in rule.args and key not in rule.consts:
                        raise _refuse(
                            FUNCTION, f"{_sql(node)}: this form of {rule.name}() is not on dpgate's list",
                            f"write it as {_form_example(rule)}",
                        )  # fmt: skip
                    slots.append((key, child))
        if rule.extra is not None:
            rule.extra(node)
        for key, child in slots:
            const = rule.consts.get(key)
            if const is None:
                self.expr(child)
                continue
            if not const.ok(child):
                constant = _is_constant(child) or isinstance(child, exp.Var)
                if const is REGEX and _string(child) is not None:
                    cost.check_regex(node, _string(child))  # says how large the program is
                elif const in (LIKE, ILIKE) and _string(child) is not None:
                    cost.check_like(node, backtracking=True)  # says why '%' inside backtracks
                problem = "is not an accepted value" if constant else "must be a constant"
                raise _refuse(
                    CONSTANT if const.code == cost.WORK and not constant else const.code,
                    f"In {_sql(node)}, the argument {_sql(child, 40)} {problem}: it selects how {rule.name}() behaves"
                    + (" and how large its result is" if const.code == SIZE else ""),
                    f"write {const.description} there",
                )

    def cast(self, node: exp.Expr) -> None:
        extra = [k for k, v in node.args.items() if k not in ("this", "to") and not isinstance(v, _LEAF_TYPES)]
        to = node.args.get("to")
        if extra or not isinstance(to, exp.DataType) or to.this not in CAST_TYPES or (
            to.expressions
            and to.this != D.DECIMAL
            and not (to.this in (D.VARCHAR, D.TEXT) and len(to.expressions) == 1)
        ):
            raise _refuse(
                CAST, f"Cast {_sql(node)} is not supported: its target type is not on dpgate's list",
                "cast to one of " + ", ".join(sorted(set(CAST_TYPES.values()))),
            )  # fmt: skip
        for param in to.expressions:
            if not isinstance(param, exp.DataTypeParam) or not _is_constant(param.this):
                raise _refuse(CAST, f"Cast {_sql(node)}: type parameters are constants", "write DECIMAL(10, 2)")
        self.expr(node.this)

    def in_list(self, node: exp.In) -> None:
        for key in ("query", "unnest", "field"):
            if _present(node.args.get(key)):
                what = "a subquery" if key == "query" else _sql(node.args[key], 40)
                raise _refuse(
                    NODE, f"IN over {what} is not supported over protected data ({_sql(node)})",
                    "write IN with a list of constants, e.g. x IN ('a', 'b'), or join a public table",
                )  # fmt: skip
        for item in node.expressions:
            if not _is_constant(item):
                raise _refuse(
                    NODE, f"IN ({_sql(item, 40)}, ...): the list of IN holds constants only ({_sql(node)})",
                    "write x IN (1, 2, 3); compare with other columns with = and OR",
                )  # fmt: skip
        self.expr(node.this)

    in_per_subject = False

    def aggregate(self, node: exp.Expr) -> None:
        if isinstance(node, (exp.Min, exp.Max)) and not self.in_per_subject:
            raise _refuse(FUNCTION, f"Aggregate {_sql(node)} is not on dpgate's list (MIN / MAX only per subject)",
                          f"use {SUPPORTED_AGGREGATES}")  # fmt: skip
        if isinstance(node, exp.Filter):
            inner = node.this
            where = node.expression
            if not isinstance(inner, _AGGREGATES) or not isinstance(where, exp.Where):
                raise _refuse(NODE, f"{_sql(node)}: FILTER applies to aggregates", f"use {SUPPORTED_AGGREGATES}")
            self.aggregate(inner)
            self.expr(where.this)
            return
        text = _sql(node)
        extra = [k for k, v in node.args.items() if k != "this" and not isinstance(v, _LEAF_TYPES) and _present(v)]
        if isinstance(node, exp.PercentileCont) and extra == ["expression"]:
            # The level q is a plain number in [0, 1]: it only picks which rank the mechanism aims at.
            level = _number(node.args["expression"])
            if level is None or not 0 <= level <= 1:
                raise _refuse(CONSTANT, f"{text}: the quantile level must be one number between 0 and 1",
                              "write QUANTILE_CONT(x, 0.9); for several quantiles write several aggregates")  # fmt: skip
            extra = []
        arg = node.this
        if extra or arg is None:
            raise _refuse(NODE, f"{text}: this form of the aggregate is not supported", f"use {SUPPORTED_AGGREGATES}")
        if isinstance(arg, exp.Star):
            if not isinstance(node, exp.Count) or any(_present(v) for v in arg.args.values()):
                raise _refuse(NODE, f"{text} is not supported", f"use {SUPPORTED_AGGREGATES}")
            return
        if isinstance(arg, exp.Distinct):
            if not isinstance(node, exp.Count) or len(arg.expressions) != 1 or _present(arg.args.get("on")):
                raise _refuse(
                    NODE, f"{text}: DISTINCT is supported in COUNT(DISTINCT expr) only", f"use {SUPPORTED_AGGREGATES}"
                )
            self.expr(arg.expressions[0])
            return
        self.expr(arg)

    def graph_aggregate(self, node: exp.Anonymous) -> None:
        for arg in node.expressions:
            if isinstance(arg, exp.Column):
                self.column(arg)
            elif _integer(arg) is None:
                raise _refuse(
                    CONSTANT, f"{_sql(node)}: subgraph counts take the endpoint columns and a whole number k",
                    "write TRIANGLE_COUNT(src, dst) or KSTAR_COUNT(src, dst, 2)",
                )  # fmt: skip

    def not_allowed(self, node: exp.Expr) -> None:
        text = _sql(node)
        if isinstance(node, exp.Window):
            raise _refuse(NODE, f"Window function {text} is not supported over protected data",
                          "aggregate with GROUP BY; ORDER BY / LIMIT on the result are free")  # fmt: skip
        if isinstance(node, (exp.Subquery, exp.Query, exp.Exists, exp.Any, exp.All)):
            raise _refuse(NODE, f"Subquery {text} is not supported in a query over protected data",
                          "join public lookup tables in FROM; filter with WHERE on this table's columns")  # fmt: skip
        if isinstance(node, exp.Lambda):
            raise _refuse(NODE, f"Lambda {text} is not supported over protected data", _NODE_HINT)
        if isinstance(node, exp.WithinGroup):
            raise _refuse(NODE, f"The WITHIN GROUP form ({text}) is not supported",
                          "write PERCENTILE_CONT(x, 0.5), QUANTILE_CONT(x, 0.5) or MEDIAN(x)")  # fmt: skip
        if isinstance(node, (exp.Array, exp.Struct, exp.Map, exp.Tuple, exp.Bracket, exp.Dot, exp.VarMap)):
            raise _refuse(NODE, f"{text}: lists, structs, maps and element access are not allowed over protected data",
                          _NODE_HINT)  # fmt: skip
        if isinstance(node, exp.Star):
            raise _refuse(NODE, f"{text} would return rows of protected data",
                          "aggregate instead, e.g. SELECT COUNT(*) FROM t")  # fmt: skip
        if isinstance(node, exp.Collate):
            raise _refuse(NODE, f"COLLATE ({text}) is not supported over protected data", "use lower() or ILIKE")
        if isinstance(node, (exp.Columns, exp.PositionalColumn)):
            raise _refuse(NODE, f"{text} is not supported over protected data", "name the columns")
        if isinstance(node, exp.AggFunc):
            raise _refuse(FUNCTION, f"Aggregate {text} is not on dpgate's list", f"use {SUPPORTED_AGGREGATES}")
        if isinstance(node, exp.Func):
            name = _function_name(node)
            if _sized_by_data(node):
                raise _refuse(
                    SIZE, f"{text}: the size of the result of {name}() is set by a value from the data",
                    "functions whose output size depends on a row value are refused (one large value could exhaust "
                    "memory); lpad / rpad with a constant length are allowed",
                )  # fmt: skip
            raise _refuse(
                FUNCTION, f"Function {name}() is not on dpgate's list of functions for protected data ({text})",
                "allowed: " + ", ".join(sorted({r.name for r in RULES})) + f" ({_DOCS_PAGE})",
            )  # fmt: skip
        raise _refuse(NODE, f"{type(node).__name__} ({text}) is not on dpgate's list of SQL constructs", _NODE_HINT)


def _dangling_escape(pattern: str, escape: str) -> bool:
    """Whether ``pattern`` ends in an escape character that escapes nothing."""
    i = 0
    while i < len(pattern):
        if pattern[i] == escape:
            if i + 1 == len(pattern):
                return True
            i += 2
        else:
            i += 1
    return False
