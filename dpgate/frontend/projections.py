"""Which projections a column of a public statement may name, so that ``built`` carries sizes through them.

A column of a subquery, a CTE, a ``VALUES`` list, an ``UNNEST`` or an alias of the same ``SELECT`` holds
what those compute; a column dpgate cannot place by name (a star's ``REPLACE``, ``UNPIVOT``, a partial
alias list) may hold any projection of its source, and a stored value. Read from sqlglot's scopes, with a
fallback when sqlglot cannot scope a statement (every projection of that name, and a stored value).
"""

from __future__ import annotations

from sqlglot import exp

from dpgate import errors

#: Columns a statement's stars may expand to (a star over a CTE joined with itself doubles per level,
#: and DuckDB's binder took 43 s past an interrupt at 2^20).
MAX_STAR_COLUMNS = 4096


def _refuse(code: str, message: str, hint: str) -> errors.Error:
    return errors.UnsupportedQueryError(message, code=code, hint=hint)


def _branches(node: exp.Expr) -> list[exp.Expr]:
    """The SELECTs (or VALUES) a query's rows come from: both sides of a UNION, iteratively."""
    out, todo = [], [node]
    while todo:
        n = todo.pop()
        if isinstance(n, exp.SetOperation):
            todo.extend((n.expression, n.this))
        elif isinstance(n, exp.Subquery):
            todo.append(n.this)
        else:
            out.append(n)
    return out


def _alias_columns(node: exp.Expr) -> list[str]:
    """A derived table's column names as its alias renames them (``t(a, b)``, ``WITH r(n) AS``)."""
    for holder in (node, node.parent):
        alias = holder.args.get("alias") if isinstance(holder, (exp.Subquery, exp.CTE, exp.Values, exp.Unnest)) else None
        if isinstance(alias, exp.TableAlias) and alias.columns:
            return [c.name.lower() for c in alias.columns]
    return []


def _named(source: exp.Expr, name: str, scopes: dict[int, object], memo: dict) -> list[exp.Expr]:
    """The expressions a column ``name`` of the derived table ``source`` may hold (memoized: a star
    over a CTE joined with itself reaches it by many paths)."""
    key = (id(source), name)
    if key in memo:
        return memo[key]
    memo[key] = []  # a cycle (a recursive CTE read through a star) adds nothing more
    memo[key] = found = _named_once(source, name, scopes, memo)
    return found


def _named_once(source: exp.Expr, name: str, scopes: dict[int, object], memo: dict) -> list[exp.Expr]:
    renamed = _alias_columns(source)
    position = renamed.index(name) if name in renamed else None
    if isinstance(source, exp.Unnest):
        return list(source.expressions)  # an element of the list: at most the list
    out: list[exp.Expr] = []
    for branch in _branches(source):
        if isinstance(branch, exp.Values):
            for row in branch.expressions:
                values = row.expressions if isinstance(row, exp.Tuple) else [row]
                out.extend(values if position is None else values[position: position + 1])
            continue
        if not isinstance(branch, exp.Select):
            continue
        selects = branch.selects
        if position is not None:
            out.extend(selects[position: position + 1])
            continue
        for i, p in enumerate(selects):
            star = p if isinstance(p, exp.Star) else p.this if isinstance(p, exp.Column) else None
            if isinstance(star, exp.Star) or p.find(exp.Star, exp.Columns) is not None:
                # SELECT *, * REPLACE (e AS x), * RENAME, COLUMNS(...): any column the star's sources have,
                # and any expression it puts in their place
                scope = scopes.get(id(branch))
                for _, inner in (scope.selected_sources.values() if scope is not None else []):
                    if hasattr(inner, "expression"):
                        out.extend(_named(inner.expression, name, scopes, memo))
                out.extend(e for e in p.find_all(exp.Alias) if e is not p)
                out.append(p)
            elif renamed and i < len(renamed):
                continue  # renamed by the alias list: reached by position above
            elif p.alias_or_name.lower() == name or not renamed and name not in {q.alias_or_name.lower() for q in selects}:
                out.append(p)  # its own name, or a name dpgate cannot place (UNPIVOT's, a row's): any of them
    return out


def columns(statement: exp.Expr) -> dict[int, tuple[bool, list[exp.Expr]]]:
    """For each column: whether it may be a stored value, and the projections it may name (a
    subquery's, a CTE's, a VALUES list's, an earlier alias of its own SELECT)."""
    from sqlglot.optimizer.scope import traverse_scope

    try:
        return _scoped(statement, list(traverse_scope(statement)))
    except errors.Error:
        raise
    except Exception:  # sqlglot cannot scope it: every projection of that name, and a stored value
        out: dict[int, tuple[bool, list[exp.Expr]]] = {}
        every: dict[str, list[exp.Expr]] = {}
        for select in statement.find_all(exp.Select):
            for p in select.selects:
                every.setdefault(p.alias_or_name.lower(), []).append(p)
        for values in statement.find_all(exp.Values):
            for row in values.expressions:
                for v in row.expressions if isinstance(row, exp.Tuple) else [row]:
                    every.setdefault("", []).append(v)
        anything = [p for ps in every.values() for p in ps]
        for col in statement.find_all(exp.Column):
            mine = every.get(col.name.lower()) or anything  # a name it cannot place: any projection
            out[id(col)] = (True, [p for p in mine if not inside(col, p)])
        return out


def _scoped(statement: exp.Expr, scopes: list) -> dict[int, tuple[bool, list[exp.Expr]]]:
    out: dict[int, tuple[bool, list[exp.Expr]]] = {}
    by_query = {id(sc.expression): sc for sc in scopes}
    ctes = {cte.alias_or_name.lower(): cte.this for cte in statement.find_all(exp.CTE)}
    memo: dict = {}
    widths: dict[int, int] = {}
    for sc in scopes:
        if _star_width(sc.expression, by_query, widths) > MAX_STAR_COLUMNS:
            raise _refuse(
                "DP255", f"The statement's stars expand to more than {MAX_STAR_COLUMNS:,} columns (a table joined with "
                "itself, level after level): DuckDB's binder would take minutes that no interrupt reaches",
                "name the columns you need instead of *",
            )
    for sc in scopes:
        select = sc.expression
        for col in sc.columns:
            name = col.name.lower()
            sources = sc.selected_sources
            picked = [sources[col.table]] if col.table and col.table in sources else list(sources.values())
            stored, named = False, []
            for node, src in picked:
                inner = getattr(src, "expression", None)
                if inner is None and isinstance(node, exp.Table) and node.name.lower() in ctes:
                    inner = ctes[node.name.lower()]
                while inner is not None and isinstance(inner.parent, exp.SetOperation):
                    inner = inner.parent  # a recursive CTE's reference to itself: sqlglot gives its first branch
                if inner is None or isinstance(node, exp.Table) and not hasattr(src, "expression"):
                    stored = True  # a stored table (or a table function's values)
                    continue
                named.extend(_named(inner, name, by_query, memo))
            if not picked or not named:
                stored = True
            if isinstance(select, exp.Select) and not col.table:  # DuckDB reads an earlier alias of its own SELECT
                named.extend(p for p in select.selects if p.alias.lower() == name and not inside(col, p))
            out[id(col)] = (stored, named)
    return out


def _star_width(query: exp.Expr, scopes: dict[int, object], widths: dict[int, int]) -> int:
    """How many columns a query's projections expand to (a stored table's star counts one)."""
    key = id(query)
    if key in widths:
        return widths[key]
    widths[key] = 1  # a cycle: a recursive CTE
    total = 0
    for branch in _branches(query):
        if not isinstance(branch, exp.Select):
            total = max(total, 1)
            continue
        count = 0
        for p in branch.selects:
            if p.find(exp.Star) is None:
                count += 1
                continue
            scope = scopes.get(id(branch))
            for _, inner in (scope.selected_sources.values() if scope is not None else []):
                count += _star_width(inner.expression, scopes, widths) if hasattr(inner, "expression") else 1
        total = max(total, count)
    widths[key] = min(total, 10**9)
    return widths[key]


def inside(node: exp.Expr, ancestor: exp.Expr) -> bool:
    while node is not None:
        if node is ancestor:
            return True
        node = node.parent
    return False
