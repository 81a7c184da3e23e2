"""The source rows of a counting plan on Spark when the FROM is more than one table: protected
tables joined on the unit (one subject space), or the per-subject subquery.

The privacy argument is the single-table one (``dpgate.backends.spark.plane``), table by table:

only charged subjects' rows, cut first [pre-bound]
    Each protected table is replaced by its charged subjects' rows (the source joined with the
    charged units' view, which carries the nullable data column ``__seen``), each subject's rows cut
    to the table's declared ``max_rows`` by a keyed hash of the row (``xxhash64``, duplicate rows
    numbered apart), as DuckDB cuts them (``dpgate.backends.charged.restrict_to_charged``). A
    subject's joined rows are then at most the product of those bounds, whatever they hold, and the
    joined relation is bounded again as for any table (``dpgate.backends.statement``). A subject's
    cut depends on its own rows only.
analyst expressions see charged rows only [charged-only]
    Every analyst expression (keys, aggregate inputs, WHERE, a join condition, a per-subject
    aggregate's input) is guarded by ``CASE WHEN a.__seen0 IS NOT NULL AND b.__seen1 IS NOT NULL
    THEN ... END`` over every protected table of its query: data columns of the joins' other sides,
    which the optimizer can neither fold nor push a guarded expression below. Only the equality of
    the tables' units stays unguarded (dpgate compares units, which Spark needs as the join's key);
    outer joins, ``USING`` and joins with tables outside Spark are refused (a guard over a missing
    side would differ from DuckDB's answer). The per-subject subquery carries its own
    ``max(__seen0)`` out of its GROUP BY, so the outer query's expressions are guarded too.

Kinds: a column name that two joined tables hold with different types has no kind here, so any
expression that needs one is refused (``translate``). The per-subject values are ``BIGINT`` (a
COUNT) or ``DOUBLE`` (SUM, AVG, MIN, MAX of clamped inputs, integers or DOUBLEs only).
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp

from dpgate.backends import bounded
from dpgate.backends.charged import table_nodes
from dpgate.backends.spark.translate import _kind, _sql, _unsupported, to_spark
from dpgate.catalog.tables import ProtectedTable
from dpgate.plans import CountPlan

#: The per-subject subquery's column that carries its subject's ``__seen`` out of the GROUP BY.
SEEN = "__seen_ps"


def _q(name: str) -> str:
    return exp.to_identifier(name, quoted=True).sql("spark")


def keyed_rank(columns: Sequence[str | exp.Expr], salt: int) -> str:
    """The keyed hash of ``columns`` on Spark (``bounded.rank_tree``: ``xxhash64``), keyed with the
    62-bit ``salt``: a row's rank depends on its own columns and the salt only [bound]."""
    salted = exp.Cast(this=exp.Literal.number(int(salt)), to=exp.DataType.build("BIGINT"))
    return bounded.sql(bounded.rank_tree(list(columns), salted), "spark")


def cut_rows(t: ProtectedTable, view: str, units: str, seen: str, salt: int, *, max_rows: int | None = None) -> str:
    """The charged subjects' rows of ``t`` (its columns and ``seen``), at most ``max_rows`` per subject
    (default: the table's declared bound)."""
    max_rows = t.max_rows if max_rows is None else max_rows
    unit = _q(t.unit)
    base = f"SELECT __t.*, __c.__seen AS {seen} FROM {view} AS __t JOIN {units} AS __c ON __t.{unit} = __c.unit"
    cols = [_q(c) for c in t.columns]
    if t.unique_unit and max_rows >= 1:  # one row per subject already
        return base
    numbered = f"SELECT *, row_number() OVER (PARTITION BY {', '.join(cols)} ORDER BY {unit}) AS __dup FROM ({base}) __b"
    columns = [exp.column(exp.to_identifier(c, quoted=True)) for c in t.columns]
    rank = keyed_rank([*columns, "__dup"], salt)
    ranked = (
        f"SELECT *, row_number() OVER (PARTITION BY {unit} ORDER BY {rank} NULLS LAST, __dup NULLS LAST) AS __rn "
        f"FROM ({numbered}) __n"
    )
    return f"SELECT {', '.join(cols)}, {seen} FROM ({ranked}) __x WHERE __rn <= {int(max_rows)}"


def _types(tables: list[ProtectedTable]) -> dict[str, str]:
    """Column name -> DuckDB type over the tables; a name with two types has none (no kind)."""
    out: dict[str, str] = {}
    clash: set[str] = set()
    for t in tables:
        for c in t.columns.values():
            name = c.name.lower()
            if name in out and out[name].upper() != c.type.upper():
                clash.add(name)
            out.setdefault(name, c.type)
    return {k: v for k, v in out.items() if k not in clash}


def _guarded(node: exp.Expr, guard: str, types: dict[str, str], *, predicate: bool = False) -> exp.Expr:
    """The analyst's expression for Spark, evaluated on guarded rows only [charged-only]."""
    dates = frozenset(k for k, v in types.items() if v.upper() == "DATE")
    tr = _sql(to_spark(node, dates, types, predicate=predicate))
    if predicate:
        return exp.Var(this=f"CASE WHEN {guard} THEN ({tr}) ELSE false END")
    return exp.Var(this=f"CASE WHEN {guard} THEN {tr} END")


def _replace_tables(q: exp.Select, tables: list[ProtectedTable], views: dict[str, tuple[str, str]],
                    salt: int, by_alias: dict[str, str] | None = None) -> list[str]:  # fmt: skip
    """Replace each protected table of ``q`` by its cut charged rows; their ``__seen`` columns (also
    put in ``by_alias`` under the table's alias, lower case)."""
    seen = []
    for i, t in enumerate(tables):
        nodes = table_nodes(q, t)
        if not nodes:
            raise _unsupported(f"A plan that does not read {t.name} where dpgate expects it")
        view, units = views[t.name]
        for node in nodes:
            alias = node.alias or t.name
            sub = exp.Subquery(this=exp.Var(this=cut_rows(t, view, units, f"__seen{i}", salt)),
                               alias=exp.TableAlias(this=exp.to_identifier(alias, quoted=True)))  # fmt: skip
            node.replace(sub)
            seen.append(f"{_q(alias)}.__seen{i}")
            if by_alias is not None:
                by_alias[alias.lower()] = seen[-1]
    return seen


def _all_seen(seen: list[str]) -> str:
    return " AND ".join(f"{c} IS NOT NULL" for c in seen)


def _unit_columns(q: exp.Select, tables: list[ProtectedTable]) -> set[tuple[str, str]]:
    """(alias, unit column) of each protected table read in ``q``'s FROM and JOINs."""
    out = set()
    for t in tables:
        for node in table_nodes(q, t):
            out.add(((node.alias or t.name).lower(), t.unit.lower()))
    return out


def _conjuncts(n: exp.Expr):
    """The terms of an AND, through parentheses."""
    if isinstance(n, exp.Paren):
        yield from _conjuncts(n.this)
    elif isinstance(n, exp.And):
        yield from _conjuncts(n.this)
        yield from _conjuncts(n.expression)
    else:
        yield n


def _is_unit_equality(n: exp.Expr, units: set[tuple[str, str]]) -> bool:
    if not isinstance(n, exp.EQ) or not all(isinstance(s, exp.Column) for s in (n.this, n.expression)):
        return False
    return all((s.table.lower(), s.name.lower()) in units for s in (n.this, n.expression))


def check(plan: CountPlan) -> None:
    """Refuse, before the debit, a multi-table shape this module does not write."""
    q = plan.source
    if plan.prebound:
        inner = q.args["from_"].this.this
        if q.args.get("joins") or inner.args.get("joins"):
            raise _unsupported("A join in or beside the per-subject subquery")
        for p in inner.expressions:
            node = p.unalias()
            if isinstance(node, exp.Column) or isinstance(node, exp.Count):
                continue
            if not _clamped_input(node):
                raise _unsupported(f"The per-subject value {node.sql('duckdb')[:60]}")
        return
    protected = {t.name.lower() for t in (plan.table, *plan.joined)}
    for join in q.args.get("joins") or []:
        table = join.this
        if not isinstance(table, exp.Table) or table.name.lower() not in protected:
            raise _unsupported("A join with a table that is not a protected table in Spark")
        if join.side or join.kind not in ("", "INNER") or join.args.get("using"):
            raise _unsupported("An outer join, or a join with USING, of tables in Spark (write INNER JOIN ... ON)")


def _clamped_input(node: exp.Expr) -> exp.Expr | None:
    """A per-subject SUM / AVG / MIN / MAX's clamp ``LEAST(GREATEST(TRY(x), lo), hi)``: (x, lo, hi) or None."""
    if not isinstance(node, (exp.Sum, exp.Avg, exp.Min, exp.Max)):
        return None
    least = node.this
    if not (isinstance(least, exp.Least) and len(least.expressions) == 1 and isinstance(least.this, exp.Greatest)):
        return None
    greatest = least.this
    if len(greatest.expressions) != 1:
        return None
    return greatest


def source(plan: CountPlan, views: dict[str, tuple[str, str]], salt: int) -> str:
    """Spark SQL of the plan's source rows (``__unit``, keys, aggregate inputs) over the charged
    subjects, for a plan with joins on the unit or the per-subject subquery."""
    check(plan)
    q = plan.source.copy()
    if plan.prebound:
        return _per_subject(plan, q, views, salt)
    tables = [plan.table, *plan.joined]
    types = _types(tables)
    unit_cols = _unit_columns(q, tables)
    by_alias: dict[str, str] = {}
    guard = _all_seen(_replace_tables(q, tables, views, salt, by_alias))
    in_scope = [by_alias[q.args["from_"].this.alias_or_name.lower()]]
    for join in q.args.get("joins") or []:
        # A join's condition is guarded by the tables joined so far: a later table's __seen is not in
        # scope there (Spark could not bind the statement), and these are the tables it can refer to.
        in_scope.append(by_alias[join.this.alias_or_name.lower()])
        on = join.args.get("on")
        if on is None:
            raise _unsupported("A join without ON")
        conjuncts = list(_conjuncts(on))
        kept = [c for c in conjuncts if _is_unit_equality(c, unit_cols)]
        rest = [c for c in conjuncts if not _is_unit_equality(c, unit_cols)]
        if not kept:
            raise _unsupported("A join whose ON does not equate the tables' units")
        terms = [exp.Var(this=_sql(c)) for c in kept]
        if rest:
            terms.append(_guarded(exp.and_(*rest), _all_seen(in_scope), types, predicate=True))
        join.set("on", exp.and_(*terms))
    _guard_outer(q, guard, types)
    return _sql(q)


def _guard_outer(q: exp.Select, guard: str, types: dict[str, str]) -> None:
    out = []
    for e in q.expressions:
        name = e.alias_or_name
        node = e.unalias()
        if name == "__unit":
            out.append(exp.alias_(exp.Var(this=_sql(to_spark(node, frozenset(), types))), name))
        else:
            out.append(exp.alias_(_guarded(node, guard, types), name))
    q.set("expressions", out)
    where = q.args.get("where")
    if where is not None:
        q.set("where", exp.Where(this=_guarded(where.this, guard, types, predicate=True)))


def _per_subject(plan: CountPlan, q: exp.Select, views: dict[str, tuple[str, str]], salt: int) -> str:
    """``FROM (SELECT unit, agg(...) AS v FROM t [WHERE] GROUP BY unit) s``: ``t`` cut first, every
    inner expression guarded, ``max(__seen0)`` carried out for the outer guard."""
    sub = q.args["from_"].this
    inner: exp.Select = sub.this
    alias = sub.alias_or_name
    t = plan.table
    types = _types([t])
    seen = _replace_tables(inner, [t], views, salt)
    guard = _all_seen(seen)
    out: list[exp.Expr] = []
    value_types: dict[str, str] = {}
    for p in inner.expressions:
        name = p.alias_or_name
        node = p.unalias()
        if isinstance(node, exp.Column):  # the unit
            out.append(exp.alias_(exp.Var(this=_sql(to_spark(node, frozenset(), types))), name, quoted=True))
            value_types[name.lower()] = t.columns[t.unit].type
            continue
        if isinstance(node, exp.Count):
            arg = node.this
            if isinstance(arg, exp.Star):
                agg = "count(*)"
            elif isinstance(arg, exp.Distinct):
                agg = f"count(DISTINCT {_sql(_guarded(arg.expressions[0], guard, types))})"
            else:
                agg = f"count({_sql(_guarded(arg, guard, types))})"
            out.append(exp.alias_(exp.Var(this=agg), name, quoted=True))
            value_types[name.lower()] = "BIGINT"
            continue
        greatest = _clamped_input(node)
        if greatest is None:
            raise _unsupported(f"The per-subject value {node.sql('duckdb')[:60]}")
        x, lo, hi = greatest.this, greatest.expressions[0], node.this.expressions[0]
        kind = _kind_of_input(x, types)
        if kind not in ("int", "double"):
            raise _unsupported(f"A per-subject {node.key.upper()} of a value that is not an integer or a DOUBLE")
        v = _sql(_guarded(x, guard, types))
        clamped = f"CASE WHEN ({v}) IS NULL THEN NULL ELSE least(greatest(CAST(({v}) AS DOUBLE), {_sql(lo)}), {_sql(hi)}) END"
        fn = {exp.Sum: "sum", exp.Avg: "avg", exp.Min: "min", exp.Max: "max"}[type(node)]
        out.append(exp.alias_(exp.Var(this=f"CAST({fn}({clamped}) AS DOUBLE)"), name, quoted=True))
        value_types[name.lower()] = "DOUBLE"
    out.append(exp.alias_(exp.Var(this=f"max({seen[0]})"), SEEN))
    inner.set("expressions", out)
    where = inner.args.get("where")
    if where is not None:
        inner.set("where", exp.Where(this=_guarded(where.this, guard, types, predicate=True)))
    group = inner.args.get("group")
    if group is not None:
        group.set("expressions", [exp.Var(this=_sql(to_spark(g, frozenset(), types))) for g in group.expressions])
    _guard_outer(q, f"{_q(alias)}.{SEEN} IS NOT NULL", value_types)
    return _sql(q)


def _kind_of_input(x: exp.Expr, types: dict[str, str]) -> str | None:
    """The kind of a per-subject aggregate's input (inside its TRY), as the translator sees it."""
    inside = x.this if isinstance(x, exp.Try) else x
    return _kind(inside, types)
