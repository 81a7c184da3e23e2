"""The bounded statement of a counting plan, written once as sqlglot trees for every engine.

After a data plane has its source rows (``__unit``, keys ``__k0..``, aggregate inputs ``__v..``,
restricted to the charged subjects the engine's own way), the rest of the statement is the same on
every engine and is built here:

1. ``sampled``: each subject's rows bounded by sampling — the rows outside the keys' public domains
   dropped first (they never count towards a bound), then at most ``max_groups`` groups per subject
   (a dense rank by a keyed hash of the group), then at most ``max_rows`` rows (a row number by a
   keyed hash of the row, with duplicate numbers so that equal rows rank apart [dup]); or, with a
   stored sample order or a unique row key, by those instead of the duplicate numbers;
2. ``aggregate``: the bounded rows joined with their subject's part (personalization), grouped by
   (part and) keys into the per-aggregate statistics of ``bounded.stat_trees``, and each key with a
   public domain turned into its position in it.

What differs per engine is left to sqlglot's generators and ``bounded.for_engine``: Spark has no
``QUALIFY`` (the generator moves the window into a subquery), orders NULLs first by default (every
ORDER BY here says NULLS LAST, DuckDB's default, so a hash tie is broken the same way on both), and
needs an ORDER BY in a row number (the duplicate numbers get one; equal rows need no order).

The pieces an engine writes itself — the source rows, each key's position expression (DuckDB reads
the domain as a parameter, Spark as a literal array) — enter the trees verbatim (``_verbatim``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from dpgate.backends import bounded
from dpgate.plans import CountPlan


def _verbatim(sql: str) -> exp.Expr:
    """SQL already written for the engine, embedded in a tree as is (a Var renders its text)."""
    return exp.Var(this=sql)


def _rows(sql: str, alias: str) -> exp.Subquery:
    return exp.Subquery(this=_verbatim(sql), alias=exp.TableAlias(this=exp.to_identifier(alias)))


def _order(*terms: exp.Expr | str) -> exp.Order:
    """ORDER BY terms, NULLs last on every engine."""
    return exp.Order(
        expressions=[exp.Ordered(this=exp.column(t) if isinstance(t, str) else t, nulls_first=False) for t in terms]
    )


def _window(fun: str, partition: list[str], order: exp.Order | None) -> exp.Window:
    return exp.Window(this=exp.Anonymous(this=fun), partition_by=[exp.column(c) for c in partition], order=order)


def _select(*items: exp.Expr | str, source: exp.Expr) -> exp.Select:
    """SELECT items FROM source, built without parsing or copying (a statement builds several)."""
    cols = [exp.Star() if i == "*" else exp.column(i) if isinstance(i, str) else i for i in items]
    return exp.Select(expressions=cols).from_(source, copy=False)


def _sql(tree: exp.Expr, engine: str) -> str:
    return tree.sql(dialect=engine, copy=False)  # the trees are this statement's own


@dataclass
class Skeleton:
    """The engine-independent part of one plan's bounded statement (see the module's docstring)."""

    plan: CountPlan
    engine: str
    salt: exp.Expr  # the salt of the keyed hashes: a parameter on DuckDB, a literal on Spark
    positions: list[str | None]  # per key: the engine's SQL for its position in its domain, or None
    stats: list[tuple[int, str, exp.Expr]]  # (aggregate index, component label, statistic tree)
    charged: str = ""  # the charged (unit, part) relation (a name or a parenthesized query), for the part join
    n_parts: int = 1
    ordered: bool = False  # rows carry ``__rank``, their stored sample order [order]
    row_key: tuple[str, ...] = ()  # [key] columns that tell a subject's rows apart
    row_salt: exp.Expr | None = None  # [key] the key of their hash, when it is not ``salt`` (a kept sample key)
    keys: list[str] = field(init=False)
    cols: list[str] = field(init=False)

    def __post_init__(self) -> None:
        self.keys = [f"__k{j}" for j in range(len(self.plan.keys))]
        values = sorted({f"__v{a.index}" for a in self.plan.aggs if a.expr is not None})
        self.cols = ["__unit", *self.keys, *values]

    @property
    def labels(self) -> list[tuple[int, str]]:
        """(aggregate index, label) of each statistic (the subject count of key selection is last, unlabelled)."""
        return [(i, label) for i, label, _ in self.stats if i >= 0]

    @property
    def in_domain(self) -> str | None:
        """Whether a row's (or group's) keys all lie in their public domains, or None without domains."""
        return " AND ".join(f"({p}) IS NOT NULL" for p in self.positions if p is not None) or None

    @property
    def sample_cols(self) -> list[str]:
        """The columns ``sampled`` reads: with a stored order also ``__rank``, with a row key its columns."""
        if self.ordered:
            return [*self.cols, "__rank"]
        return [*self.cols, *(f"__pk{i}" for i in range(len(self.row_key)))]

    def sampled(self, rows: str) -> str:
        """``rows`` (a SELECT of ``sample_cols``) with each subject's rows bounded by sampling."""
        plan = self.plan
        q = _select("*", source=_rows(rows, "__s"))
        if self.in_domain:
            q = q.where(_verbatim(self.in_domain), copy=False)
        if plan.bound_groups:
            group_hash = bounded.for_engine(bounded.rank_tree(["__unit", *self.keys], self.salt), self.engine)
            rank = _window("dense_rank", ["__unit"], _order(group_hash, *self.keys))
            ranked = _select("*", exp.alias_(rank, "__gr"), source=q.subquery("__g", copy=False))
            q = _select(*self.sample_cols, source=ranked.subquery("__gk", copy=False)).where(
                exp.column("__gr") <= int(plan.max_groups), copy=False
            )
        if self.ordered:
            # A stored order ranks each subject's rows once per table version [order]: its ranks are
            # distinct within a subject, so no duplicate numbers are needed.
            order = _order("__rank")
        elif self.row_key:
            # [key] A unique, non-NULL key tells the subject's rows apart: each row's rank is a keyed
            # hash of its key, a function of that row alone; no duplicate numbers are needed.
            pk = [f"__pk{i}" for i in range(len(self.row_key))]
            salt = self.salt if self.row_salt is None else self.row_salt
            order = _order(bounded.for_engine(bounded.rank_tree(pk, salt), self.engine), *pk, *self.cols)
        else:
            # Rows equal in every column used get distinct duplicate numbers, so that each row, not
            # each distinct value, has its own pseudo-random rank [dup]. Equal rows need no order
            # among themselves; Spark wants one all the same.
            dup = _window("row_number", self.cols, _order("__unit") if self.engine == "spark" else None)
            q = _select("*", exp.alias_(dup, "__dup"), source=q.subquery("__d", copy=False))
            row_hash = bounded.rank_tree([*self.cols, "__dup"], self.salt)
            order = _order(bounded.for_engine(row_hash, self.engine), "__dup")
        kept = _select(*self.cols, source=q.subquery("__r", copy=False))
        kept = kept.qualify(_window("row_number", ["__unit"], order) <= int(plan.max_rows), copy=False)
        return _sql(kept, self.engine)

    def aggregate(self, rows: str, *, filtered: bool = False, check: bool = False, key_text: bool = False) -> str:
        """The statistics of ``rows`` (bounded rows of ``cols``) per (part and) cell.

        Keys with a domain become positions, and groups outside the domains are dropped (``filtered``:
        ``rows`` are inside them already). ``key_text``: keys without a domain travel as text [transport].
        ``check`` keeps the groups outside the domains and adds the group's row count ``__nall`` and
        whether it is inside them ``__in``, for the stored order's filter check [order].
        """
        src = _rows(rows, "__b")
        group = list(self.keys)
        if self.n_parts > 1:
            # A subject in several rounds contributes to one part per round.
            parted = _select(
                exp.Column(this=exp.Star(), table=exp.to_identifier("__b")),
                exp.alias_(exp.column("part", "__c"), "__part"),
                source=src,
            )
            src = parted.join(
                exp.Table(this=_verbatim(self.charged), alias=exp.TableAlias(this=exp.to_identifier("__c"))),
                on=exp.column("__unit", "__b").eq(exp.column("unit", "__c")),
                copy=False,
            ).subquery("__bp", copy=False)
            group = ["__part", *group]
        aggs = [
            exp.alias_(bounded.for_engine(tree, self.engine), f"__a{i}") for i, (_, _, tree) in enumerate(self.stats)
        ]
        extra = [exp.alias_(exp.Count(this=exp.Star()), "__nall")] if check else []
        inner = _select(*group, *aggs, *extra, source=src)
        if group:
            inner = inner.group_by(*(exp.column(g) for g in group), copy=False)
        positioned = any(p is not None for p in self.positions)
        if not positioned and not key_text:
            return _sql(
                _select("*", exp.alias_(exp.true(), "__in"), source=inner.subquery("__y", copy=False)) if check else inner,
                self.engine,
            )
        outer: list[exp.Expr] = [exp.column("__part")] if self.n_parts > 1 else []
        for j, p in enumerate(self.positions):
            if p is not None:
                outer.append(exp.alias_(exp.Paren(this=_verbatim(p)), f"__k{j}"))
            elif key_text:
                outer.append(exp.alias_(exp.cast(exp.column(f"__k{j}"), "TEXT"), f"__k{j}"))
            else:
                outer.append(exp.column(f"__k{j}"))
        outer += [exp.column(f"__a{i}") for i in range(len(aggs))]
        in_domain = self.in_domain
        if check:
            outer += [
                exp.column("__nall"),
                exp.alias_(exp.func("coalesce", _verbatim(in_domain or "true"), exp.false()), "__in"),
            ]
        q = _select(*outer, source=inner.subquery("__y", copy=False))
        if in_domain and not filtered and not check:
            q = q.where(_verbatim(in_domain), copy=False)
        return _sql(q, self.engine)


def stats(plan: CountPlan, unclamped: frozenset[int] = frozenset()) -> list[tuple[int, str, exp.Expr]]:
    """(aggregate index, label, tree) of every statistic, and a distinct-subject count per key with
    key selection (labelled as ``bounded.labels`` expects)."""
    out = [
        (agg.index, label, tree)
        for agg in plan.aggs
        for label, tree in bounded.stat_trees(agg, clamp=agg.index not in unclamped)
    ]
    if plan.key_selection is not None:
        out.append((-1, "__subjects", exp.Count(this=exp.Distinct(expressions=[exp.column("__unit")]))))
    return out
