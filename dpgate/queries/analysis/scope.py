"""The statement's sources: which tables it reads and how they are joined (every joined table a
lookup), the shape checks, and columns qualified with their table so that equal expressions
compare equal."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

from sqlglot import exp

from dpgate import errors
from dpgate.catalog.tables import ProtectedTable, join_exact, join_safe
from dpgate.frontend.classify import function_name
from dpgate.queries.analysis.common import PER_SUBJECT, preempted


@dataclass
class _Item:
    alias: str
    table: str
    columns: dict[str, str]  # name -> type
    protected: bool
    nullable: bool = False  # its columns can be NULL because of an outer join
    prot: ProtectedTable | None = None  # the catalog entry of a protected table


@dataclass
class _Scope:
    items: list[_Item]
    using: set[str] = field(default_factory=set)

    def find(self, column: exp.Column) -> _Item | None:
        name = column.name.lower()
        if column.table:
            alias = column.table.lower()
            for item in self.items:
                if item.alias == alias:
                    if name not in item.columns:
                        raise errors.ProgrammingError(
                            f"Column {column.sql(dialect='duckdb')} does not exist", code="DP218",
                            hint=_suggest(name, item.columns),
                        )  # fmt: skip
                    return item
            raise errors.ProgrammingError(
                f"Unknown table alias {column.table!r} in {column.sql(dialect='duckdb')}", code="DP218",
                hint="aliases in this query: " + ", ".join(i.alias for i in self.items),
            )  # fmt: skip
        owners = [i for i in self.items if name in i.columns]
        if len(owners) > 1:
            protected = [i for i in owners if i.protected]
            if name in self.using and protected:
                return protected[0]
            if name in self.using and len({i.table for i in owners}) == 1:
                return owners[0]
            raise errors.ProgrammingError(
                f"Column {name} is ambiguous: it is in {', '.join(i.alias for i in owners)}", code="DP218",
                hint=f"qualify it, e.g. {owners[0].alias}.{name}",
            )  # fmt: skip
        return owners[0] if owners else None

    def all_columns(self) -> list[str]:
        return [c for i in self.items for c in i.columns]


def _suggest(name: str, candidates) -> str:
    close = difflib.get_close_matches(name, list(candidates), n=1)
    return f"did you mean {close[0]}?" if close else "check the column name"


class ScopeAnalysis:
    """Sources, joins and shape of the statement (part of ``Analysis``)."""

    def _check_shape(self, q: exp.Select) -> None:
        name = self.table.name
        if q.args.get("distinct"):
            raise preempted("SELECT DISTINCT")  # allowlist: a clause not on its list (DP252)
        if q.args.get("with_"):
            raise errors.UnsupportedQueryError(
                "CTEs (WITH ...) are not supported in queries over protected tables yet", code="DP216",
                hint=f"write the query directly over {name}",
            )  # fmt: skip
        # The allowlist refuses every clause outside its list (DP250 / DP252), window functions and
        # subqueries in any expression (DP252) and in FROM and JOIN (DP250; the per-subject
        # subquery is a placeholder table by now), and takes no CTE but the one refused above.
        for arg in ("qualify", "windows", "into", "laterals", "pivots", "connect", "match", "prewhere", "sample"):
            if q.args.get(arg):
                raise preempted(arg.upper())
        if q.find(exp.Window):
            raise preempted("a window function")
        if any(node is not q for node in q.find_all(exp.Subquery, exp.Select, exp.Lateral)):
            raise preempted("a subquery")
        for node in q.find_all(exp.Star):
            if not isinstance(node.parent, exp.Count):
                raise errors.UnsupportedQueryError(
                    f"SELECT * would return rows of protected table {name}", code="DP211",
                    hint=f"aggregate instead, e.g. SELECT COUNT(*) FROM {name}",
                )  # fmt: skip
        if q.find(exp.Columns, exp.PositionalColumn):
            raise preempted("COLUMNS(...) or a positional column")  # allowlist: DP252
        if q.find(exp.Placeholder):
            raise errors.ProgrammingError(
                "The query has a parameter placeholder with no value", code="DP603",
                hint="pass the parameters to execute(sql, params)",
            )  # fmt: skip

    def _scope(self, q: exp.Select) -> _Scope:
        items: list[_Item] = []
        from_ = q.args.get("from_")
        sources = [(from_.this if from_ else None, None)]
        for join in q.args.get("joins") or []:
            sources.append((join.this, join))
        using: set[str] = set()
        conditions: list[exp.Expr] = []
        for node, join in sources:
            if not isinstance(node, exp.Table) or not isinstance(node.this, exp.Identifier):
                raise errors.UnsupportedQueryError(
                    "Only tables may appear in FROM and JOIN of a query over a protected table",
                    code="DP216",
                    hint="join public lookup tables by name",
                )
            name = node.name.lower()
            alias = node.alias_or_name.lower()
            if any(i.alias == alias for i in items):
                raise errors.ProgrammingError(
                    f"Table alias {alias!r} is used twice", code="DP218", hint="give each table its own alias"
                )
            prot = self.rows_table if name == PER_SUBJECT and self.inner is not None else self.catalog.protected(name)
            if prot is not None:
                cols = {c.name: c.type for c in prot.columns.values()}
            else:
                cols = dict(self.facts.columns(name))
            item = _Item(alias, name, cols, prot is not None, prot=prot)
            if join is not None:
                method = (join.args.get("method") or "").upper()
                if join.args.get("kind", "").upper() == "NATURAL" or method in ("NATURAL", "POSITIONAL"):
                    # Pairing rows by name or storage order; the allowlist takes no join method (DP251).
                    raise preempted(f"a {method or 'NATURAL'} JOIN")
                side = (join.args.get("side") or "").upper()
                if side in ("LEFT", "FULL") and prot is None:
                    item.nullable = True
                for ident in join.args.get("using") or []:
                    col = ident.name.lower()
                    earlier = [i for i in items if col in i.columns]
                    if col not in item.columns or not earlier:
                        raise errors.ProgrammingError(
                            f"USING ({col}): both sides of the join need a column {col}", code="DP218",
                            hint="check the column names",
                        )  # fmt: skip
                    _check_comparable(col, earlier[0].columns[col], col, item.columns[col])
                    using.add(col)
                on = join.args.get("on")
                if on is not None:
                    conditions.append(on)
            items.append(item)
        scope = _Scope(items, using)
        for on in conditions:
            _check_join_condition(on, scope)
        if len(items) > 1:
            self._check_lookups(q, scope, conditions)
        return scope

    def _check_lookups(self, q: exp.Select, scope: _Scope, conditions: list[exp.Expr]) -> None:
        """Every joined table is a lookup: the join can never multiply a subject's rows [lookup].

        Starting from the protected table in FROM, a table is *attached* when equalities in the
        join conditions tie it to attached tables: another protected table (of the same subject
        space) by its privacy unit, a public table by columns whose values are unique in it (a
        public fact, checked here). By induction, each row of the protected table meets at most
        one row of every attached public table, and only rows of its own subject in the other
        protected tables; tables left unattached (CROSS JOIN, ``ON a.x < b.y``, a non-unique
        key) are refused. Without this rule a join with a large public table could make one
        subject's rows grow without bound, and the query's memory or running out of it would
        depend on that subject.
        """
        pairs: list[tuple[_Item, str, _Item, str, bool]] = []  # (item, column, other item, column, null-safe)
        for on in conditions:
            parts = list(on.flatten()) if isinstance(on, exp.And) else [on]
            for part in parts:
                while isinstance(part, exp.Paren):
                    part = part.this
                if isinstance(part, (exp.EQ, exp.NullSafeEQ)):
                    a, b = scope.find(part.this), scope.find(part.expression)
                    if a is not None and b is not None and a is not b:
                        ns = isinstance(part, exp.NullSafeEQ)
                        pairs.append((a, part.this.name.lower(), b, part.expression.name.lower(), ns))
                        pairs.append((b, part.expression.name.lower(), a, part.this.name.lower(), ns))
        for join in q.args.get("joins") or []:
            using = [i.name.lower() for i in join.args.get("using") or []]
            if not using:
                continue
            alias = join.this.alias_or_name.lower()
            item = next(i for i in scope.items if i.alias == alias)
            before = scope.items[: scope.items.index(item)]
            for col in using:
                for other in before:
                    if col in other.columns:
                        pairs.append((item, col, other, col, False))
                        pairs.append((other, col, item, col, False))
        root = next(i for i in scope.items if i.protected and i.table == self.rows_table.name)
        attached = [root]
        pending = [i for i in scope.items if i is not root]
        unique_cache: dict[tuple[str, frozenset[str], bool], bool] = {}
        changed = True
        while pending and changed:
            changed = False
            for item in list(pending):
                ties = [(c, o, oc, ns) for (it, c, o, oc, ns) in pairs if it is item and any(o is a for a in attached)]
                if item.protected:
                    ok = any(
                        c == item.prot.unit and o.protected and oc == o.prot.unit and not ns for c, o, oc, ns in ties
                    )
                else:
                    # A tie from a column that compares with a collation matches 'x' and 'X' of a key unique
                    # as bytes: the lookup would repeat rows. (The key's own collation
                    # makes its GROUP BY find the duplicate.)
                    ties = [(c, o, oc, ns) for c, o, oc, ns in ties
                            if not self.facts.collated(o.table, oc, o.columns.get(oc, ""))]  # fmt: skip
                    cols = frozenset(c for c, _, _, _ in ties)
                    null_safe = any(ns for *_, ns in ties)
                    key = (item.table, cols, null_safe)
                    if cols and key not in unique_cache:
                        unique_cache[key] = self.facts.unique(item.table, sorted(cols), null_safe)
                    ok = bool(cols) and unique_cache[key]
                if ok:
                    attached.append(item)
                    pending.remove(item)
                    changed = True
        if pending:
            item = pending[0]
            if item.protected:
                raise errors.UnsupportedQueryError(
                    f"Protected table {item.table} is not joined on the privacy unit: rows of different "
                    "people would be paired",
                    code="DP215",
                    hint=f"join on the unit, e.g. JOIN {item.table} USING ({item.prot.unit})",
                )
            raise errors.UnsupportedQueryError(
                f"The join with {item.table}{'' if item.alias == item.table else ' ' + item.alias} is not a lookup: no equality ties it, on columns whose values are "
                f"unique in {item.table}, to the protected table, so it could repeat a person's rows without limit",
                code="DP215",
                hint=f"join {item.table} with ON t.col = {item.alias}.key (or USING (key)) where key has no "
                "duplicate values; CROSS JOIN and joins on <, > or non-unique columns are refused",
            )

    def _qualify(self, q: exp.Select, scope: _Scope) -> None:
        """Qualify every source column with its table alias, so that equal expressions compare equal."""
        aliases = {p.alias.lower() for p in q.expressions if isinstance(p, exp.Alias)}
        for col in list(q.find_all(exp.Column)):
            if isinstance(col.this, exp.Star):
                continue
            item = scope.find(col)
            if item is None:
                if col.table or col.name.lower() not in aliases:
                    raise errors.ProgrammingError(
                        f"Column {col.sql(dialect='duckdb')} does not exist", code="DP218",
                        hint=_suggest(col.name.lower(), scope.all_columns()),
                    )  # fmt: skip
                continue  # a reference to a SELECT alias (GROUP BY / HAVING / ORDER BY)
            col.set("table", exp.to_identifier(item.alias, quoted=True))
            col.set("this", exp.to_identifier(col.name.lower(), quoted=True))

    def _is_aggregate(self, node: exp.Expr) -> bool:
        if isinstance(node, exp.AggFunc):
            return True
        if isinstance(node, exp.Filter) and isinstance(node.this, exp.AggFunc):
            return True
        return isinstance(node, exp.Anonymous) and function_name(node) in self.agg_names

    def _check_row_expr(self, node: exp.Expr, where: str) -> None:
        for sub in node.walk():
            if self._is_aggregate(sub):
                raise errors.UnsupportedQueryError(
                    f"Aggregate {sub.sql(dialect='duckdb')} is not allowed in {where}", code="DP279",
                    hint="aggregates go in SELECT, HAVING or ORDER BY",
                )  # fmt: skip
            if isinstance(sub, exp.Column) and not sub.table:
                raise errors.ProgrammingError(
                    f"{sub.name} in {where} is a SELECT alias, not a column of the tables", code="DP218",
                    hint="repeat the expression instead of its alias",
                )  # fmt: skip


def _check_join_condition(on: exp.Expr, scope: _Scope) -> None:
    """Joins compare columns of the same kind of type only.

    Join conditions are not wrapped in TRY (that would defeat hash joins), so they must be
    unable to fail at run time: a VARCHAR compared with a number is cast row by row, and a
    row that does not convert would raise an error that depends on the data.
    """
    parts = list(on.flatten()) if isinstance(on, exp.And) else [on]
    for part in parts:
        if isinstance(part, exp.Paren):
            part = part.this
        ok = isinstance(part, (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ)) and all(
            isinstance(side, exp.Column) for side in (part.this, part.expression)
        )
        if not ok:
            raise errors.UnsupportedQueryError(
                f"Join condition {part.sql(dialect='duckdb')} is not a comparison of two columns", code="DP215",
                hint="join public lookup tables on key columns, e.g. ON t.code = lookup.code; "
                "put conditions on constants in WHERE",
            )  # fmt: skip
        types = []
        for side in (part.this, part.expression):
            item = scope.find(side)
            if item is None:
                raise errors.ProgrammingError(
                    f"Column {side.sql(dialect='duckdb')} does not exist", code="DP218",
                    hint=_suggest(side.name.lower(), scope.all_columns()),
                )  # fmt: skip
            types.append(item.columns[side.name.lower()])
        _check_comparable(part.this.sql(dialect="duckdb"), types[0], part.expression.sql(dialect="duckdb"), types[1])


def _check_comparable(left: str, left_type: str, right: str, right_type: str) -> None:
    if not join_exact(left_type, right_type):
        why = ("compared as doubles (distinct integer keys equal one double: a lookup would repeat rows)"
               if join_safe(left_type, right_type)
               else "converted row by row (a failing conversion would depend on the data)")  # fmt: skip
        raise errors.UnsupportedQueryError(
            f"Join compares {left} ({left_type}) with {right} ({right_type}): values would be {why}",
            code="DP215",
            hint="join columns of the same type (cast the public side in a view if needed)",
        )
