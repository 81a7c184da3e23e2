"""Declaring protected tables and graphs, and the public facts of their columns.

The ``protect``, ``protect_graph``, ``declare``, ``unprotect`` and ``drop_release`` methods of
``dpgate.Owner`` (``dpgate.catalog.owner`` puts them together): what the owner declares is checked
against the table's columns and types, never its rows, then written to dpgate's schema in one
transaction with the table's roster.
"""

from __future__ import annotations

import functools
import json
import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import duckdb

from dpgate import errors, resources
from dpgate.catalog import hooks
from dpgate.catalog import releases as registry
from dpgate.catalog import sample_order as sample_order_mod
from dpgate.catalog import tables as catalog
from dpgate.catalog.checks import check_flag, check_positive_int
from dpgate.catalog.tables import domain_problem
from dpgate.catalog.tables import quote_ident as quote

DEFAULT_SUBJECT_DELTA = 1e-5
DEFAULT_SUBJECT_EPSILON = 1.0


def roster_name(subjects: str) -> str:
    return f"roster_{subjects.lower()}"


def _stub_restored(declare: Callable[..., None]) -> Callable[..., None]:
    """A declaration whose ``spark`` source gets its stub first (its checks read the stub's columns),
    put back as it was when the declaration is refused (``_spark_stub_declared``); a published
    release is refused before any stub could replace its table."""

    @functools.wraps(declare)
    def declared(self, table: str, *args: Any, spark: str | None = None, **kwargs: Any) -> None:
        table = table.lower()
        self._refuse_release(table)
        with self._spark_stub_declared(table, spark):
            declare(self, table, *args, spark=spark, **kwargs)

    return declared


class Declarations:
    """Part of ``Owner``: protected tables, graphs and column facts (needs ``con`` and ``_transaction``)."""

    # -- protected tables ----------------------------------------------------------------
    @_stub_restored
    def protect(
        self,
        table: str,
        *,
        unit: str,
        max_rows: int = 1,
        max_groups: int | None = None,
        epsilon: float | None = None,
        budget_column: str | None = None,
        budget_table: str | None = None,
        budget_table_unit: str | None = None,
        budget_table_column: str = "epsilon",
        subject_delta: float = DEFAULT_SUBJECT_DELTA,
        domains: Mapping[str, Sequence[Any]] | None = None,
        bounds: Mapping[str, tuple[float, float]] | None = None,
        options: Mapping[str, Any] | None = None,
        subjects: str | None = None,
        public_roster: bool = False,
        hierarchies: Mapping[str, Any] | None = None,
        experimental: bool | None = None,
        spark: str | None = None,
        sample_order: str | None = None,
    ) -> None:
        """Declare ``table`` protected, with ``unit`` as its privacy unit.

        The roster (who the subjects are, and so how many) is derived from the table's rows:
        its size becomes a public fact (``SHOW BUDGET`` and the answers' populations show
        it). ``protect`` warns about that (``dpgate.RosterWarning``) unless the owner says the
        subject count is public already (``public_roster=True``, e.g. a published census).

        ``subjects`` names the subject space (default: the table's own name). Tables whose
        privacy units identify the same people must share one (e.g. ``subjects="customers"``
        on both ``customers`` and ``purchases``): they then share one roster, so a person's
        spending on either table counts against one lifetime budget. Tables sharing a
        subject space must declare the same budget source (not a per-table column).

        Each subject's lifetime ε budget comes from exactly one source: ``epsilon`` (the
        same for everyone; the default when nothing is given), ``budget_column`` (a column
        of the table; the smallest value per subject), or ``budget_table`` (a table of
        ``(budget_table_unit, budget_table_column)`` rows; subjects missing from it get
        ``epsilon`` if given, else are left off the roster and never used).

        ``hierarchies`` maps columns to value generalization hierarchies (see
        ``catalog.hierarchies``) for generalized releases; ``experimental=True`` lets analysts
        use experimental mechanisms (``USING supermodular``) on this table.

        ``spark`` says the rows live in Apache Spark: a table of the Spark session catalog
        (``"db.table"``) or a Parquet path (``"parquet:/data/t"``). dpgate then keeps an empty
        table of the same columns in this file (for planning), reads the roster's units from
        Spark, and runs counting queries' exact aggregation there (``dpgate.backends.spark``).

        ``sample_order="stored"`` keeps, in dpgate's schema, a random order of each subject's rows
        (drawn from the OS, rebuilt when the rows change): a subject over ``max_rows`` then keeps
        the best-ranked of its rows that a query selects, the same rows for every query until the
        table changes, instead of a fresh hash-ranked sample per query; sampling becomes a filter
        (``dpgate.catalog.sample_order``). That is the default for a base table of the database file;
        for a Spark source stored as Parquet (a path, or a Parquet, ORC, Delta or Iceberg table) it
        keeps a random key instead, with which Spark ranks each row by a hash of the row (the same
        rows for every query until ``protect`` or ``refresh_roster`` draws a new key). A view (in
        the file or in Spark), a Spark table of a text format and a table with a column named
        ``__dp_rank`` sample per query (``"per_query"``: a fresh hash-ranked sample for each
        query). ``None`` keeps what the table had (or the default, the first time); ``"default"``
        asks for the default.

        Re-declaring an existing protected table updates its bounds and declarations; its
        subjects keep what they have spent. Changing the privacy unit is refused.
        """
        unit = unit.lower()
        self._stays_in_spark(table, spark)
        cols = dict(catalog.table_columns(self.con, table))
        if not cols:
            raise errors.PolicyError(
                f"No table {table!r} in schema main", code="DP310",
                hint="create and load the table first, then protect it",
            )
        if unit not in cols:
            raise errors.PolicyError(
                f"Table {table!r} has no column {unit!r} for the privacy unit", code="DP311",
                hint=f"columns are: {', '.join(cols)}",
            )
        why = catalog.column_collation(self.con, table, unit, cols[unit], sample_order_mod.definition(self.con, table),
                                       "unit column")  # fmt: skip
        if why is not None:
            raise errors.PolicyError(
                f"The privacy unit of {table!r} cannot have a collation: {why}", code="DP329",
                hint="subjects must compare as bytes (DuckDB's COUNT(DISTINCT) and unique indexes ignore a collation): "
                f"protect the column without COLLATE, or a view that selects lower({unit}) COLLATE \"binary\" AS {unit} "
                "if case must not tell subjects apart",
            )  # fmt: skip
        check_positive_int("max_rows", max_rows)
        options = dict(options or {})
        reserved = sorted(
            set(options) & {"experimental", "hierarchies", "graph", "max_groups_default", "spark", "sample_order"}
        )
        if reserved:
            raise errors.PolicyError(
                f"{', '.join(reserved)} cannot be set through options", code="DP312",
                hint="use protect(experimental=..., hierarchies=...) or the policy keys experimental / hierarchy",
            )  # fmt: skip
        if experimental is not None:
            check_flag("experimental", experimental)
        if sample_order is not None and sample_order not in (*sample_order_mod.CHOICES, sample_order_mod.DEFAULT):
            raise errors.PolicyError(
                f"sample_order must be one of {', '.join(map(repr, sample_order_mod.CHOICES))}, got {sample_order!r}",
                code="DP312",
            )  # fmt: skip
        if sample_order == sample_order_mod.STORED and sample_order_mod.RANK in cols:
            raise errors.PolicyError(
                f"{table!r} has a column named {sample_order_mod.RANK}, which a stored sample order uses",
                code="DP312", hint="rename the column",
            )  # fmt: skip
        if max_groups is None:  # not declared: 1 for the counting class, unbiased top-k counts (see topk)
            max_groups = 1
            options["max_groups_default"] = True
        else:
            options.pop("max_groups_default", None)
        check_positive_int("max_groups", max_groups)
        if not (0 <= subject_delta < 1):
            raise errors.PolicyError("subject_delta must be in [0, 1)", code="DP312")
        sources = [s for s in (budget_column, budget_table) if s is not None]
        if len(sources) > 1:
            raise errors.PolicyError(
                "Give one budget source: epsilon, budget_column or budget_table", code="DP313"
            )
        if budget_column is not None:
            source = "column"
            budget_column = budget_column.lower()
            if budget_column not in cols:
                raise errors.PolicyError(
                    f"No budget column {budget_column!r} in {table!r}", code="DP313"
                )
            if budget_column == unit.lower():
                raise errors.PolicyError(
                    f"The budget column {budget_column!r} is the privacy unit", code="DP313",
                    hint="budgets are public facts (their spread shows in SHOW BUDGET and EXPLAIN PRIVACY): "
                    "give a column of consent levels, not the subjects' identifiers",
                )  # fmt: skip
            _check_budgets(self.con, f"main.{catalog.quote_ident(table)}", budget_column, str(cols[budget_column]))
        elif budget_table is not None:
            source = "table"
            budget_table = budget_table.lower()
            budget_table_unit = (budget_table_unit or unit).lower()
            if self.con.execute(
                "SELECT 1 FROM duckdb_views() WHERE database_name = current_database() AND schema_name = 'main' "
                "AND lower(view_name) = ?", [budget_table],
            ).fetchone():  # fmt: skip  (analysts may not read budget tables, but could read a view's)
                raise errors.PolicyError(
                    f"Budget table {budget_table!r} is a view: the tables it reads would stay readable by analysts",
                    code="DP313", hint="give a table of (unit, epsilon) rows (CREATE TABLE ... AS SELECT ...)",
                )  # fmt: skip
            if self.con.execute(f"SELECT 1 FROM {catalog.SCHEMA}.protected_tables WHERE table_name = ?",
                                [budget_table]).fetchone():  # fmt: skip
                raise errors.PolicyError(f"Budget table {budget_table!r} is a protected table", code="DP313",
                                         hint="keep the budgets in a table of their own")  # fmt: skip
            bcols = dict(catalog.table_columns(self.con, budget_table))
            for needed in (budget_table_unit, budget_table_column.lower()):
                if needed not in bcols:
                    raise errors.PolicyError(
                        f"Budget table {budget_table!r} has no column {needed!r}", code="DP313",
                        hint=f"its columns are: {', '.join(bcols) or '(table missing)'}",
                    )
            col = budget_table_column.lower()
            _check_budgets(self.con, f"main.{catalog.quote_ident(budget_table)}", col, str(bcols[col]))
        else:
            source = "default"
            if epsilon is None:
                epsilon = DEFAULT_SUBJECT_EPSILON
        if epsilon is not None and not (epsilon >= 0 and math.isfinite(epsilon)):
            raise errors.PolicyError("epsilon budget must be finite and >= 0", code="DP313")

        existing = self.con.execute(
            f"SELECT unit_column, kind, options FROM {catalog.SCHEMA}.protected_tables WHERE table_name = ?", [table]
        ).fetchone()
        kept = json.loads(existing[2]) if existing and existing[2] else {}
        # declarations not repeated stay as they were (``options`` cannot carry these keys: reserved above)
        options.update({key: kept[key] for key in ("hierarchies", "experimental", "sample_order") if key in kept})
        if experimental is not None:
            options["experimental"] = bool(experimental)
        if sample_order == sample_order_mod.DEFAULT or (sample_order is None and "sample_order" not in options):
            options["sample_order"] = sample_order_mod.default_for(self.con, table, cols, spark)
        elif sample_order is not None:
            options["sample_order"] = sample_order
        if spark is not None and options.get("sample_order") == sample_order_mod.STORED:
            # A kept key hashes every column of each row; a view's or a text file's column could fail on
            # one value, and would then fail every statement after the debit, on any row
            if not hooks.spark().reads_every_column_safely(self.spark_session(), spark):
                if sample_order == sample_order_mod.STORED:  # asked for now
                    raise errors.PolicyError(
                        f"sample_order = 'stored' needs a Spark source whose every column reads without failing "
                        f"(a Parquet path, or a Parquet, ORC, Delta or Iceberg table); {spark!r} is a view or "
                        "another format", code="DP312",
                        hint="leave sample_order out (it then samples per query), or protect the table the view reads",
                    )  # fmt: skip
                options["sample_order"] = sample_order_mod.PER_QUERY
        if spark is not None:
            options["spark"] = spark
        if existing and existing[1] == "graph":
            raise errors.PolicyError(
                f"{table!r} is protected as a graph", code="DP314",
                hint="call unprotect() first to protect it as an ordinary table",
            )  # fmt: skip
        if self.con.execute(
            f"SELECT 1 FROM {catalog.SCHEMA}.protected_tables WHERE roster_table = ? AND kind = 'graph'",
            [roster_name(subjects or table)],
        ).fetchone():
            raise errors.PolicyError(
                f"The subject space {subjects or table!r} is a graph's edge budget", code="DP317",
                hint="choose another subjects name",
            )  # fmt: skip
        if existing and existing[0] != unit:
            raise errors.PolicyError(
                f"{table!r} is protected with privacy unit {existing[0]!r}; changing it to {unit!r} "
                "would reset every subject's budget",
                code="DP314",
                hint="call unprotect() first if you really mean to start over",
            )

        roster = roster_name(subjects or table)
        spec = (source, budget_column, budget_table, budget_table_unit,
                budget_table_column.lower() if budget_table else None, epsilon, subject_delta)  # fmt: skip
        for other, o_unit, *o_spec in self.con.execute(
            f"SELECT table_name, unit_column, budget_source, budget_column, budget_table, budget_table_unit, "
            f"budget_table_column, default_epsilon, subject_delta FROM {catalog.SCHEMA}.protected_tables "
            "WHERE roster_table = ? AND table_name <> ?",
            [roster, table],
        ).fetchall():
            o_type = dict(catalog.table_columns(self.con, other)).get(o_unit)
            same = (
                o_spec[0] == source != "column"
                and tuple(o_spec[1:5]) == spec[1:5]
                and (o_spec[5] is None) == (epsilon is None)
                and (epsilon is None or float(o_spec[5]) == float(epsilon))
                and float(o_spec[6]) == float(subject_delta)
            )
            if o_type != cols[unit] or not same:
                raise errors.PolicyError(
                    f"{table!r} and {other!r} share the subject space {subjects or table!r} but declare "
                    "different unit types or budget sources",
                    code="DP317",
                    hint="tables sharing subjects need the same unit type, the same epsilon or budget_table, "
                    "and the same subject_delta",
                )
        with self._transaction() as con:
            con.execute(
                f"INSERT OR REPLACE INTO {catalog.SCHEMA}.protected_tables "
                "(table_name, kind, unit_column, max_rows, max_groups, budget_source, budget_column, "
                "budget_table, budget_table_unit, budget_table_column, default_epsilon, subject_delta, "
                "roster_table, options) VALUES (?, 'table', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    table, unit, max_rows, max_groups, source, budget_column, budget_table,
                    budget_table_unit, budget_table_column.lower() if budget_table else None,
                    epsilon, subject_delta, roster, json.dumps(dict(options or {})),
                ],
            )  # fmt: skip
            ddl = resources.read_sql("roster.sql").format(
                roster=f"{catalog.SCHEMA}.{quote(roster)}",
                offsets=f"{catalog.SCHEMA}.roster_offsets",
                view=f"{catalog.SCHEMA}.{quote(catalog.subjects_view(roster))}",
                name="'" + roster.replace("'", "''") + "'",
                unit_type=cols[unit],
            )
            con.execute(ddl)
            for col, values in (domains or {}).items():
                self._declare(con, table, cols, col, domain=values)
            for col, (lo, hi) in (bounds or {}).items():
                self._declare(con, table, cols, col, bounds=(lo, hi))
            for col, spec in (hierarchies or {}).items():
                self._declare_hierarchy(con, table, cols, col, spec)
            self._revalidate_hierarchies(con, table, cols, skip=set(hierarchies or {}))
            n = self._refresh_roster(con, table)
            if options.get("sample_order") == sample_order_mod.STORED:
                sample_order_mod.keep(con, table, unit, spark)
            else:
                sample_order_mod.drop(con, table)
        if not public_roster:
            warnings.warn(
                f"The roster of {table} is derived from its rows: its size ({n} subjects) becomes public "
                "(SHOW BUDGET shows it). Pass public_roster=True (policy: public_roster = true) if that count "
                "is public already.",
                errors.RosterWarning,
                stacklevel=3,  # the caller of protect (through _stub_restored)
            )

    @_stub_restored
    def protect_graph(
        self,
        table: str,
        *,
        src: str,
        dst: str,
        nodes: int | str,
        node_column: str | None = None,
        epsilon: float | None = None,
        allow_kclique: bool = False,
        spark: str | None = None,
    ) -> None:
        """Declare an edge table as a protected graph, with edge-level DP.

        Neighbouring graphs differ in one edge of the simple undirected graph on a public
        node universe: ``nodes = N`` (ids are the integers ``0 .. N-1``; other ids are never
        read) or ``nodes = "<public table>"`` whose ``node_column`` (default: its only
        column) lists the node ids. The universe is a declaration, never counted from the
        edges. ``epsilon`` is the lifetime budget of every potential edge; since every query
        charges all of them alike, it is kept as one shared budget. ``allow_kclique`` lets
        analysts ask for k-cliques with k >= 4 when C(N, k) exceeds a million (their cost
        grows with the cliques of the graph; see ``dpgate.mechanisms.graphs``). ``spark``: the edges
        live in Apache Spark (a catalog table or ``"parquet:/path"``, as for ``protect``); Spark then
        reads them for each query, and the node universe is ``nodes = N`` or a public table of the
        database file.
        """
        src, dst = src.lower(), dst.lower()
        self._stays_in_spark(table, spark)
        cols = dict(catalog.table_columns(self.con, table))
        if not cols:
            raise errors.PolicyError(
                f"No table {table!r} in schema main", code="DP310", hint="create and load the edge table first"
            )
        for c in (src, dst):
            if c not in cols:
                raise errors.PolicyError(
                    f"Table {table!r} has no column {c!r}", code="DP311", hint=f"columns are: {', '.join(cols)}"
                )
        if src == dst:
            raise errors.PolicyError("src and dst must be two different columns", code="DP311")
        for c in (src, dst):  # an endpoint that compares with a collation joins 'x' and 'X' of the node table
            why = catalog.column_collation(self.con, table, c, cols[c], sample_order_mod.definition(self.con, table),
                                           "endpoint column")  # fmt: skip
            if why is not None:
                raise errors.PolicyError(
                    f"Graph {table} cannot be protected: {why}", code="DP329",
                    hint="endpoints must compare as bytes: protect a view that selects them with COLLATE \"binary\"",
                )  # fmt: skip
        graph: dict[str, Any] = {"src": src, "dst": dst, "allow_kclique": bool(allow_kclique)}
        if isinstance(nodes, bool) or not isinstance(nodes, (int, str)):
            raise errors.PolicyError(
                "nodes must be the node count N or the name of a public node table", code="DP318"
            )
        if isinstance(nodes, int):
            if nodes < 2:
                raise errors.PolicyError(f"The node universe needs at least 2 nodes, got {nodes}", code="DP318")
            for c in (src, dst):
                if cols[c].upper() not in catalog.INTEGER_TYPES:
                    raise errors.PolicyError(
                        f"nodes = {nodes} numbers the nodes 0 .. {nodes - 1}, but {table}.{c} is {cols[c]}",
                        code="DP318",
                        hint='declare a public node table instead: nodes = "<table>", node_column = "<id column>"',
                    )
            graph["nodes"] = nodes
        else:
            node_table = nodes.lower()
            ncols = dict(catalog.table_columns(self.con, node_table))
            if not ncols:
                raise errors.PolicyError(f"No node table {node_table!r}", code="DP318")
            if self.con.execute(
                f"SELECT 1 FROM {catalog.SCHEMA}.protected_tables WHERE table_name = ?", [node_table]
            ).fetchone():
                raise errors.PolicyError(
                    f"The node table {node_table!r} is protected; the node universe must be public", code="DP318"
                )
            if node_column is None:
                if len(ncols) != 1:
                    raise errors.PolicyError(
                        f"Node table {node_table!r} has several columns", code="DP318",
                        hint="name the id column with node_column",
                    )  # fmt: skip
                node_column = next(iter(ncols))
            node_column = node_column.lower()
            if node_column not in ncols:
                raise errors.PolicyError(f"Node table {node_table!r} has no column {node_column!r}", code="DP318")
            for c in (src, dst):
                if not catalog.join_exact(cols[c], ncols[node_column]):
                    raise errors.PolicyError(
                        f"{table}.{c} ({cols[c]}) and {node_table}.{node_column} ({ncols[node_column]}) "
                        "are not comparable types: joining them would convert values row by row, or match one "
                        "endpoint with several node ids (an integer with a floating-point type)",
                        code="DP318",
                        hint="use the same type for the endpoints and the node ids",
                    )
            graph["node_table"], graph["node_column"] = node_table, node_column
        if epsilon is None:
            epsilon = DEFAULT_SUBJECT_EPSILON
        if not (epsilon >= 0 and math.isfinite(epsilon)):
            raise errors.PolicyError("epsilon budget must be finite and >= 0", code="DP313")
        existing = self.con.execute(
            f"SELECT kind FROM {catalog.SCHEMA}.protected_tables WHERE table_name = ?", [table]
        ).fetchone()
        if existing and existing[0] != "graph":
            raise errors.PolicyError(
                f"{table!r} is protected as an ordinary table", code="DP314",
                hint="call unprotect() first to declare it a graph",
            )  # fmt: skip
        roster = roster_name(table)
        with self._transaction() as con:
            con.execute(
                f"INSERT OR REPLACE INTO {catalog.SCHEMA}.protected_tables "
                "(table_name, kind, unit_column, max_rows, max_groups, budget_source, budget_column, "
                "budget_table, budget_table_unit, budget_table_column, default_epsilon, subject_delta, "
                "roster_table, options) VALUES (?, 'graph', ?, 1, 1, 'default', NULL, NULL, NULL, NULL, ?, ?, ?, ?)",
                [table, src, epsilon, DEFAULT_SUBJECT_DELTA, roster,
                 json.dumps({"graph": graph, **({"spark": spark} if spark is not None else {})})],
            )
            ddl = resources.read_sql("roster.sql").format(
                roster=f"{catalog.SCHEMA}.{quote(roster)}",
                offsets=f"{catalog.SCHEMA}.roster_offsets",
                view=f"{catalog.SCHEMA}.{quote(catalog.subjects_view(roster))}",
                name="'" + roster.replace("'", "''") + "'",
                unit_type="BIGINT",
            )
            con.execute(ddl)
            self._refresh_roster(con, table)

    def _stays_in_spark(self, table: str, spark: str | None) -> None:
        """A table declared with a Spark source stays there until it is unprotected (the stub for a
        ``spark`` declaration is made by ``_spark_stub_declared``)."""
        if spark is None and self._spark_source(table) is not None:
            raise errors.PolicyError(
                f"{table} was declared with a Spark source; re-declare it with spark = ... (or drop it first)",
                code="DP340", hint="unprotect the table and drop its empty DuckDB stub to move it back to DuckDB",
            )  # fmt: skip

    def _refuse_release(self, table: str) -> None:
        if registry.active(self.con, table) is not None:
            raise errors.PolicyError(
                f"{table!r} is a published release: it is public already, and protecting it would not take it back",
                code="DP314",
                hint="drop the release (DROP SYNTHETIC TABLE, or Owner.drop_release) and protect the source instead",
            )

    def drop_release(self, name: str) -> None:
        """Drop a release's table (the owner may drop any); its lineage stays in the registry."""
        with self._instance.ledger_lock:
            if self.con.execute(
                f"SELECT 1 FROM {catalog.SCHEMA}.protected_tables WHERE table_name = ?", [name.lower()]
            ).fetchone():
                raise errors.PolicyError(f"{name!r} is protected", code="DP320", hint="unprotect it first")
            registry.drop(self.con, name, by="owner", owner=True)

    def declare(
        self,
        table: str,
        column: str,
        *,
        domain: Sequence[Any] | None = None,
        bounds: tuple[float, float] | None = None,
        hierarchy: Any = None,
    ) -> None:
        """Declare the public domain, bounds or generalization hierarchy of one column of a protected table."""
        table = table.lower()
        self._require_protected(table)
        cols = dict(catalog.table_columns(self.con, table))
        with self._transaction() as con:
            if domain is not None or bounds is not None:
                self._declare(con, table, cols, column, domain=domain, bounds=bounds)
            if hierarchy is not None:
                self._declare_hierarchy(con, table, cols, column, hierarchy)
            self._revalidate_hierarchies(con, table, cols, skip={column.lower()} if hierarchy is not None else set())

    def _revalidate_hierarchies(self, con, table: str, cols: dict[str, str], skip: set[str]) -> None:
        """Rebuild every stored tree from its declaration against the column's current domain and
        bounds: a re-declared domain or bounds must still fit the tree (else DP327), never leave it stale."""
        (options,) = con.execute(
            f"SELECT options FROM {catalog.SCHEMA}.protected_tables WHERE table_name = ?", [table]
        ).fetchone()
        stored = (json.loads(options) if options else {}).get("hierarchies") or {}
        for column, tree in stored.items():
            if column in skip:
                continue
            if not isinstance(tree, Mapping) or "spec" not in tree:
                raise errors.PolicyError(
                    f"The hierarchy of {table}.{column} was stored without its declaration", code="DP327",
                    hint=f"declare it again: Owner.declare({table!r}, {column!r}, hierarchy=...)",
                )  # fmt: skip
            self._declare_hierarchy(con, table, cols, column, tree["spec"])

    def _declare_hierarchy(self, con, table: str, cols: dict[str, str], column: str, spec: Any) -> None:
        """Validate a hierarchy against the column's declared domain or bounds and store it."""
        from dpgate.catalog import hierarchies

        column = column.lower()
        if column not in cols:
            raise errors.PolicyError(f"Table {table!r} has no column {column!r}", code="DP311",
                                     hint=f"columns are: {', '.join(cols)}")  # fmt: skip
        row = con.execute(
            f"SELECT lower, upper, domain FROM {catalog.SCHEMA}.columns WHERE table_name = ? AND column_name = ?",
            [table, column],
        ).fetchone()
        lo, hi, dom = row if row else (None, None, None)
        sql_type = cols[column]
        intervals = isinstance(spec, Mapping) and bool(set(spec) & {"widths", "breaks"})
        if dom is None and not intervals:
            raise errors.PolicyError(
                f"A hierarchy of values needs {table}.{column}'s declared domain: its leaves are those values",
                code="DP327", hint="declare domain = [...] for the column too (from a codebook, not from the rows)",
            )  # fmt: skip
        if catalog.is_temporal_type(sql_type):
            raise errors.PolicyError(f"Hierarchies of {sql_type} columns are not supported ({table}.{column})",
                                     code="DP327", hint="generalize a derived integer or text column instead")  # fmt: skip
        tree = hierarchies.build(
            f"{table}.{column}", column, spec, sql_type=sql_type, numeric=catalog.is_numeric_type(sql_type),
            integer=sql_type.upper() in catalog.INTEGER_TYPES, domain=json.loads(dom) if dom else None,
            bounds=(lo, hi) if lo is not None and hi is not None else None,
        )  # fmt: skip
        (options,) = con.execute(
            f"SELECT options FROM {catalog.SCHEMA}.protected_tables WHERE table_name = ?", [table]
        ).fetchone()
        options = json.loads(options) if options else {}
        options.setdefault("hierarchies", {})[column] = {**json.loads(tree.to_json()), "spec": spec}
        con.execute(f"UPDATE {catalog.SCHEMA}.protected_tables SET options = ? WHERE table_name = ?",
                    [json.dumps(options), table])  # fmt: skip

    def _declare(self, con, table, cols, column, *, domain=None, bounds=None) -> None:
        column = column.lower()
        if column not in cols:
            raise errors.PolicyError(
                f"Table {table!r} has no column {column!r}", code="DP311",
                hint=f"columns are: {', '.join(cols)}",
            )
        lo = hi = dom = None
        if bounds is not None:
            temporal = catalog.is_temporal_type(cols[column])
            if not catalog.is_numeric_type(cols[column]) and not temporal:
                raise errors.PolicyError(
                    f"Bounds need a numeric, DATE or TIMESTAMP column; {table}.{column} is {cols[column]}",
                    code="DP315",
                )
            if temporal:
                lo, hi = (_epoch(con, cols[column], b, f"{table}.{column}") for b in bounds)
            else:
                lo, hi = float(bounds[0]), float(bounds[1])
            if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
                raise errors.PolicyError(
                    f"Bounds of {table}.{column} must be finite with lower < upper, got {bounds}",
                    code="DP315",
                )
        if domain is not None:
            values = list(domain)
            if not values:
                raise errors.PolicyError(f"Domain of {table}.{column} is empty", code="DP316")
            try:
                dom = json.dumps(values)
            except TypeError as e:
                raise errors.PolicyError(
                    f"Domain values of {table}.{column} must be strings, numbers, booleans or null",
                    code="DP316",
                ) from e
            if len({json.dumps(v) for v in values}) != len(values):
                raise errors.PolicyError(f"Domain of {table}.{column} repeats a value", code="DP316")
            # The values must be values of the column's type, read alike as numbers and as text, and
            # distinct once read (checked without reading rows); the catalog checks again at each load.
            try:
                problem = domain_problem(con, cols[column], values)
            except duckdb.Error as e:
                problem = str(e).strip().splitlines()[0]
            if problem is not None:
                raise errors.PolicyError(
                    f"Domain of {table}.{column} does not fit its type {cols[column]}: {problem}", code="DP316",
                    hint="declare the values exactly as the column holds them (a DECIMAL(10, 2) holds 0.14 and 0.15, "
                    "not 0.145), each once",
                )  # fmt: skip
        existing = con.execute(
            f"SELECT lower, upper, domain FROM {catalog.SCHEMA}.columns WHERE table_name = ? AND column_name = ?",
            [table, column],
        ).fetchone()
        if existing:
            lo = lo if bounds is not None else existing[0]
            hi = hi if bounds is not None else existing[1]
            dom = dom if domain is not None else existing[2]
        con.execute(
            f"INSERT OR REPLACE INTO {catalog.SCHEMA}.columns VALUES (?, ?, ?, ?, ?)",
            [table, column, lo, hi, dom],
        )

    def unprotect(self, table: str) -> None:
        """Forget a protected table's declarations, and its roster (with the subjects' spending
        history) unless another table shares it."""
        table = table.lower()
        self._require_protected(table)
        with self._transaction() as con:
            (roster,) = con.execute(
                f"SELECT roster_table FROM {catalog.SCHEMA}.protected_tables WHERE table_name = ?", [table]
            ).fetchone()
            shared = con.execute(
                f"SELECT count(*) FROM {catalog.SCHEMA}.protected_tables WHERE roster_table = ? AND table_name <> ?",
                [roster, table],
            ).fetchone()[0]
            if not shared:
                con.execute(f"DROP VIEW IF EXISTS {catalog.SCHEMA}.{quote(catalog.subjects_view(roster))}")
                con.execute(f"DROP TABLE IF EXISTS {catalog.SCHEMA}.{quote(roster)}")
                con.execute(f"DELETE FROM {catalog.SCHEMA}.roster_offsets WHERE roster = ?", [roster])
            con.execute(f"DELETE FROM {catalog.SCHEMA}.columns WHERE table_name = ?", [table])
            con.execute(f"DELETE FROM {catalog.SCHEMA}.protected_tables WHERE table_name = ?", [table])
            sample_order_mod.drop(con, table)

    def _require_protected(self, table: str) -> None:
        if not self.con.execute(
            f"SELECT 1 FROM {catalog.SCHEMA}.protected_tables WHERE table_name = ?", [table]
        ).fetchone():
            raise errors.PolicyError(
                f"{table!r} is not a protected table", code="DP310", hint="protect() it first"
            )


def _epoch(con, sql_type: str, value: Any, where: str) -> float:
    """A DATE bound as days since 1970-01-01, a TIMESTAMP bound as seconds since then."""
    is_date = sql_type.upper() in catalog.DATE_TYPES
    expr = "date_diff('day', DATE '1970-01-01', CAST(? AS DATE))" if is_date else "epoch(CAST(? AS TIMESTAMP))"
    try:
        return float(con.execute(f"SELECT {expr}", [str(value)]).fetchone()[0])
    except (duckdb.Error, TypeError) as e:
        raise errors.PolicyError(
            f"Bound {value!r} of {where} is not a {'date' if is_date else 'timestamp'}", code="DP315",
            hint="write bounds = [\"2020-01-01\", \"2024-12-31\"]" if is_date
            else "write bounds = [\"2020-01-01 00:00:00\", \"2024-12-31 23:59:59\"]",
        ) from e


_NUMERIC = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT",
            "FLOAT", "DOUBLE", "DECIMAL")


def _check_budgets(con: duckdb.DuckDBPyConnection, relation: str, column: str, sql_type: str) -> None:
    """A budget column must hold numbers, finite ones: a text value, NaN or infinity cannot become a
    lifetime ε (the roster stores budgets as exact decimals), and would fail the declaration midway."""
    if not sql_type.upper().startswith(_NUMERIC):
        raise errors.PolicyError(f"The budget column {column!r} is {sql_type}, not a number", code="DP313",
                                 hint="budgets are lifetime ε values: give a numeric column")  # fmt: skip
    q = catalog.quote_ident(column)
    (bad,) = con.execute(
        f"SELECT count(*) FROM {relation} WHERE {q} IS NOT NULL AND (NOT isfinite(CAST({q} AS DOUBLE)) "
        f"OR abs(CAST({q} AS DOUBLE)) >= 1e15)"
    ).fetchone()
    if bad:
        raise errors.PolicyError(
            f"{bad:,} value(s) of the budget column {column!r} are not finite numbers below 10^15 (NaN, infinity "
            "or huge)", code="DP313", hint="set them to a lifetime ε (0 leaves the subject out of every query)",
        )  # fmt: skip
