"""The data owner's side: declare protected tables, column facts, analysts and budgets.

Declarations live in the ``dpgate`` schema of the database file (DDL in ``sql/``), so
they travel with the data. Everything declared here is a public fact: analysts may learn
it (through ``.schema``, ``SHOW BUDGET``, ``EXPLAIN PRIVACY``), and mechanisms may use it
without spending budget.

From Python::

    owner = dpgate.Owner("company.duckdb")
    owner.protect("adult", unit="person_id", max_rows=1, epsilon=2.0,
                  domains={"sex": ["Female", "Male"]}, bounds={"age": (17, 90)})
    owner.add_analyst("alice", epsilon=5.0, delta=1e-5, epsilon_per_query=1.0)

or from a TOML policy file with ``dpgate policy apply company.duckdb policy.toml``.
"""

from __future__ import annotations

import json
import math
import os
import tomllib
import warnings
from collections.abc import Iterable, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import duckdb

from dpgate import database, errors, resources
from dpgate.catalog import caps as release_caps
from dpgate.catalog import hooks
from dpgate.catalog import tables as catalog
from dpgate.catalog import releases as registry
from dpgate.catalog import sample_order as sample_order_mod
from dpgate.catalog.tables import domain_problem, quote_ident

SCHEMA_VERSION = "1"
DEFAULT_SUBJECT_DELTA = 1e-5
DEFAULT_SUBJECT_EPSILON = 1.0


quote = quote_ident


def roster_name(subjects: str) -> str:
    return f"roster_{subjects.lower()}"


class Owner:
    """Administrative access to one database file (owner only; analysts use ``dpgate.connect``)."""

    def __init__(
        self, path: str | os.PathLike, *, create: bool = True, read_only: bool = False, spark: Any = None
    ):
        """``read_only``: for commands that only read (ledger, budget, quality): a file without
        dpgate's schema is refused (DP321) rather than given one. ``spark``: a ``SparkSession``
        for tables whose rows live in Spark (else the policy's ``[backends.spark] master``)."""
        self._spark = spark
        self._spark_own: Any = None
        self._instance = database.acquire(path, create=create and not read_only)
        self._con = self._instance.root.cursor()
        self.path = os.fspath(path)
        if read_only and not catalog.schema_exists(self._con):
            self.close()
            raise errors.PolicyError(
                f"{self.path} has no dpgate schema: it is a plain DuckDB file", code="DP321",
                hint="declare protected tables first (`dpgate protect`, `dpgate policy apply`)",
            )  # fmt: skip
        if not read_only:
            self.init()

    # -- lifecycle ---------------------------------------------------------------------
    def close(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None
            database.release(self._instance)

    def __enter__(self) -> Owner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        if self._con is None:
            raise errors.InterfaceError("This Owner handle is closed", code="DP100")
        return self._con

    @contextmanager
    def _transaction(self, declarations: bool = True):
        """One transaction under the ledger lock. ``declarations``: it changes what queries are planned
        against, so the catalog version moves (every gateway re-reads the catalog, and a statement in
        flight restarts, or fails closed after its debit). A login is not such a change: an analyst may
        change their own password as often as they like, and each bump cost other analysts' statements
        in flight their debit (red team helper-42)."""
        with self._instance.ledger_lock:
            self.con.execute("BEGIN TRANSACTION")
            try:
                yield self.con
                if declarations:
                    self.con.execute(
                        f"UPDATE {catalog.SCHEMA}.settings SET value = CAST(CAST(value AS BIGINT) + 1 AS VARCHAR) "
                        "WHERE key = 'catalog_version'"
                    )
            except BaseException:
                self.con.execute("ROLLBACK")
                raise
            self.con.execute("COMMIT")

    def init(self) -> None:
        """Create dpgate's schema if it is missing (idempotent)."""
        with self._instance.ledger_lock:
            if catalog.schema_exists(self.con):
                registry.ensure(self.con)  # a database made by an older dpgate
                return
            self.con.execute("BEGIN TRANSACTION")
            try:
                self.con.execute(resources.read_sql("schema.sql"))
                self.con.execute(
                    f"INSERT INTO {catalog.SCHEMA}.settings VALUES "
                    "('schema_version', ?), ('catalog_version', '1')",
                    [SCHEMA_VERSION],
                )
            except BaseException:
                self.con.execute("ROLLBACK")
                raise
            self.con.execute("COMMIT")

    # -- settings ----------------------------------------------------------------------
    def allow_test_seed(self, analyst: str, allowed: bool = True) -> None:
        """Let one analyst ask for a fixed noise seed (tests only: results are marked not private).

        A seeded analyst can reproduce the noise, and so remove it: grant this only to test
        accounts, never on real data.
        """
        _check_flag("allowed", allowed)
        with self._transaction() as con:
            if not con.execute(f"SELECT 1 FROM {catalog.SCHEMA}.analysts WHERE name = ?", [analyst]).fetchone():
                raise errors.PolicyError(f"Unknown analyst {analyst!r}", code="DP302", hint="add_analyst() first")
            con.execute(
                f"UPDATE {catalog.SCHEMA}.analysts SET allow_test_seed = ? WHERE name = ?", [allowed, analyst]
            )

    # -- protected tables ----------------------------------------------------------------
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
        (``dpgate.catalog.sample_order``). The default is ``"per_query"``.

        Re-declaring an existing protected table updates its bounds and declarations; its
        subjects keep what they have spent. Changing the privacy unit is refused.
        """
        table = table.lower()
        unit = unit.lower()
        self._refuse_release(table)
        if spark is not None:
            self._spark_stub(table, spark)
        elif self._spark_source(table) is not None:
            raise errors.PolicyError(
                f"{table} was declared with a Spark source; re-declare it with spark = ... (or drop it first)",
                code="DP340", hint="unprotect the table and drop its empty DuckDB stub to move it back to DuckDB",
            )  # fmt: skip
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
        _check_positive_int("max_rows", max_rows)
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
            _check_flag("experimental", experimental)
        if sample_order is not None and sample_order not in sample_order_mod.CHOICES:
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
        _check_positive_int("max_groups", max_groups)
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
        elif budget_table is not None:
            source = "table"
            budget_table = budget_table.lower()
            budget_table_unit = (budget_table_unit or unit).lower()
            bcols = dict(catalog.table_columns(self.con, budget_table))
            for needed in (budget_table_unit, budget_table_column.lower()):
                if needed not in bcols:
                    raise errors.PolicyError(
                        f"Budget table {budget_table!r} has no column {needed!r}", code="DP313",
                        hint=f"its columns are: {', '.join(bcols) or '(table missing)'}",
                    )
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
        if sample_order is not None:
            options["sample_order"] = sample_order
        if options.get("sample_order") == sample_order_mod.STORED and spark is not None:  # asked now, or kept
            raise errors.PolicyError(
                f"sample_order = 'stored' is kept for tables in DuckDB; a Spark table ({table!r}) samples per query",
                code="DP312", hint="leave sample_order out, or set it to 'per_query', for a Spark source",
            )  # fmt: skip
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
                sample_order_mod.build(con, table, unit)
            else:
                sample_order_mod.drop(con, table)
        if not public_roster:
            warnings.warn(
                f"The roster of {table} is derived from its rows: its size ({n} subjects) becomes public "
                "(SHOW BUDGET shows it). Pass public_roster=True (policy: public_roster = true) if that count "
                "is public already.",
                errors.RosterWarning,
                stacklevel=2,
            )

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
    ) -> None:
        """Declare an edge table as a protected graph, with edge-level DP.

        Neighbouring graphs differ in one edge of the simple undirected graph on a public
        node universe: ``nodes = N`` (ids are the integers ``0 .. N-1``; other ids are never
        read) or ``nodes = "<public table>"`` whose ``node_column`` (default: its only
        column) lists the node ids. The universe is a declaration, never counted from the
        edges. ``epsilon`` is the lifetime budget of every potential edge; since every query
        charges all of them alike, it is kept as one shared budget. ``allow_kclique`` lets
        analysts ask for k-cliques with k >= 4 when C(N, k) exceeds a million (their cost
        grows with the cliques of the graph; see ``dpgate.mechanisms.graphs``).
        """
        table = table.lower()
        src, dst = src.lower(), dst.lower()
        self._refuse_release(table)
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
                [table, src, epsilon, DEFAULT_SUBJECT_DELTA, roster, json.dumps({"graph": graph})],
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

    def refresh_roster(self, table: str) -> int:
        """Add new subjects and re-read budgets from their source; spent budget is kept.

        Returns the number of subjects on the roster. Rows whose unit is not on the roster
        are never used by any query (they could not be charged).
        """
        table = table.lower()
        self._require_protected(table)
        with self._transaction() as con:
            n = self._refresh_roster(con, table)
            unit, options = con.execute(
                f"SELECT unit_column, options FROM {catalog.SCHEMA}.protected_tables WHERE table_name = ?", [table]
            ).fetchone()
            if json.loads(options or "{}").get("sample_order") == sample_order_mod.STORED:
                sample_order_mod.build(con, table, unit)  # a fresh draw for the rows as they are now
            return n

    def _refresh_roster(self, con, table: str) -> int:
        (roster, source, bcol, btab, btab_unit, btab_col, default_eps) = con.execute(
            f"SELECT roster_table, budget_source, budget_column, budget_table, budget_table_unit, "
            f"budget_table_column, default_epsilon FROM {catalog.SCHEMA}.protected_tables WHERE table_name = ?",
            [table],
        ).fetchone()
        members = con.execute(
            f"SELECT table_name, unit_column, kind FROM {catalog.SCHEMA}.protected_tables WHERE roster_table = ?",
            [roster],
        ).fetchall()
        # Every subject of every table in the subject space (the roster is theirs together). A
        # graph's roster is one row: the budget every potential edge shares (edge-level DP).
        rows_of = {t: quote(t) for t, _, _ in members}
        for t, u, _ in members:  # rows in Spark: their units (and budget column) copied here first
            src = self._spark_source(t, con)
            if src is not None:
                arrow = hooks.spark().unit_rows(self.spark_session(), src, u, bcol if source == "column" else None)
                rows_of[t] = quote(f"__dp_spark_units_{t}")
                con.register("__dp_spark_arrow", arrow)
                try:
                    con.execute(f"CREATE OR REPLACE TEMP TABLE {rows_of[t]} AS SELECT * FROM __dp_spark_arrow")
                finally:
                    con.unregister("__dp_spark_arrow")
        units = " UNION ".join(
            "SELECT CAST(0 AS BIGINT) AS unit" if kind == "graph"
            else f"SELECT {quote(u)} AS unit FROM {rows_of[t]} WHERE {quote(u)} IS NOT NULL"
            for t, u, kind in members
        )  # fmt: skip
        r = f"{catalog.SCHEMA}.{quote(roster)}"
        params: list[Any] = []
        if source == "default":
            src = f"SELECT unit, CAST(? AS DOUBLE) AS eps FROM ({units})"
            params = [default_eps]
        elif source == "column":
            t, u, _ = members[0]
            src = (
                f"SELECT {quote(u)} AS unit, greatest(coalesce(min(CAST({quote(bcol)} AS DOUBLE)), 0), 0) AS eps "
                f"FROM {rows_of[t]} WHERE {quote(u)} IS NOT NULL GROUP BY {quote(u)}"
            )
        else:
            bu = quote(btab_unit)
            src = (
                f"SELECT {bu} AS unit, greatest(coalesce(max(CAST({quote(btab_col)} AS DOUBLE)), 0), 0) AS eps "
                f"FROM {quote(btab)} WHERE {bu} IS NOT NULL GROUP BY {bu}"
            )
            if default_eps is not None:
                src += (
                    f" UNION ALL SELECT unit, CAST(? AS DOUBLE) FROM ({units}) "
                    f"WHERE unit NOT IN (SELECT {bu} FROM {quote(btab)} WHERE {bu} IS NOT NULL)"
                )
                params = [default_eps]
        # New subjects start at minus the space's common offset (their total spending is zero)
        # and carry a new generation (see roster.sql).
        con.execute(
            f"UPDATE {catalog.SCHEMA}.roster_offsets SET generation = generation + 1 WHERE roster = ?", [roster]
        )
        con.execute(
            f"INSERT INTO {r} (unit, epsilon_budget, epsilon_spent, delta_spent, added) "
            f"SELECT s.unit, s.eps, -o.epsilon_spent, -o.delta_spent, o.generation FROM ({src}) s, "
            f"(SELECT epsilon_spent, delta_spent, generation FROM {catalog.SCHEMA}.roster_offsets WHERE roster = ?) o "
            "ON CONFLICT (unit) DO UPDATE SET epsilon_budget = excluded.epsilon_budget",
            [*params, roster],
        )
        return con.execute(f"SELECT count(*) FROM {r}").fetchone()[0]

    # -- tables whose rows live in Spark ---------------------------------------------------
    def spark_session(self) -> Any:
        """The Spark session for Spark sources: the one given to ``Owner``, else the policy's master."""
        if self._spark is None:
            self._spark = hooks.spark().session_from_settings(catalog.load(self.con).settings)
        if self._spark_own is None:  # dpgate's settings (partition columns as strings), the caller's catalog
            self._spark_own = hooks.spark().session_for(self._spark)
        return self._spark_own

    def set_spark(self, master: str | None, conf: Mapping[str, Any] | None = None) -> None:
        """Record the Spark master URL (and session settings) analysts' sessions connect with.

        ``master`` is any Spark master URL: ``"local[4]"``, ``"spark://host:7077"``,
        ``"yarn"``, ``"k8s://https://host:443"``. Connections that pass their own
        ``SparkSession`` use that one instead.
        """
        if not isinstance(master, str) or not master:
            raise errors.PolicyError("[backends.spark] needs master = \"<Spark master URL>\"", code="DP330")
        conf = dict(conf or {})
        if not all(isinstance(k, str) and isinstance(v, (str, int, float, bool)) for k, v in conf.items()):
            raise errors.PolicyError("[backends.spark] conf maps setting names to values", code="DP330")
        with self._transaction() as con:
            for key, value in (("spark_master", master), ("spark_conf", json.dumps(conf))):
                con.execute(f"INSERT OR REPLACE INTO {catalog.SCHEMA}.settings (key, value) VALUES (?, ?)", [key, value])

    def _spark_source(self, table: str, con=None) -> str | None:
        row = (con or self.con).execute(
            f"SELECT options FROM {catalog.SCHEMA}.protected_tables WHERE table_name = ?", [table]
        ).fetchone()
        return json.loads(row[0]).get("spark") if row and row[0] else None

    def _spark_stub(self, table: str, source: str) -> None:
        """Create (or re-create) the empty DuckDB table with the Spark source's columns."""
        sources = hooks.spark()
        sources.parse_source(source)
        columns = sources.stub_columns(sources.read_source(self.spark_session(), source), source)
        if _exists(self.con, table) and self._spark_source(table) is None:
            (n,) = self.con.execute(f"SELECT count(*) FROM (SELECT 1 FROM main.{quote(table)} LIMIT 1)").fetchone()
            if n:
                raise errors.PolicyError(
                    f"{table} is a DuckDB table with rows; a Spark table needs the name for its empty stub",
                    code="DP340", hint="protect the Spark source under another name, or drop the DuckDB table",
                )  # fmt: skip
        cols = ", ".join(f"{quote(n)} {t}" for n, t in columns)
        with self._transaction() as con:
            con.execute(f"CREATE OR REPLACE TABLE main.{quote(table)} ({cols})")

    def _require_protected(self, table: str) -> None:
        if not self.con.execute(
            f"SELECT 1 FROM {catalog.SCHEMA}.protected_tables WHERE table_name = ?", [table]
        ).fetchone():
            raise errors.PolicyError(
                f"{table!r} is not a protected table", code="DP310", hint="protect() it first"
            )

    # -- analysts ------------------------------------------------------------------------
    def add_analyst(
        self,
        name: str,
        *,
        epsilon: float,
        delta: float = 1e-5,
        epsilon_per_query: float | None = None,
        delta_per_query: float | None = None,
    ) -> None:
        """Create an analyst, or change the quotas of an existing one (what they spent stays)."""
        epsilon_per_query = epsilon if epsilon_per_query is None else epsilon_per_query
        delta_per_query = delta if delta_per_query is None else delta_per_query
        for label, value in (
            ("epsilon", epsilon), ("delta", delta),
            ("epsilon_per_query", epsilon_per_query), ("delta_per_query", delta_per_query),
        ):  # fmt: skip
            if not (value >= 0 and math.isfinite(value)):
                raise errors.PolicyError(f"{label} must be finite and >= 0, got {value}", code="DP320")
        if not name or not isinstance(name, str):
            raise errors.PolicyError("Analyst name must be a non-empty string", code="DP320")
        from dpgate.catalog import logins

        with self._transaction() as con:
            if logins.owner_login(con, name):  # that name logs in to dpgate serve as the owner (red team helper-42)
                raise errors.PolicyError(f"{name!r} is an owner login; an analyst needs a name of its own", code="DP326")
            con.execute(
                f"INSERT INTO {catalog.SCHEMA}.analysts (name, epsilon_quota, delta_quota, epsilon_per_query, "
                "delta_per_query) VALUES (?, ?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET "
                "epsilon_quota = excluded.epsilon_quota, delta_quota = excluded.delta_quota, "
                "epsilon_per_query = excluded.epsilon_per_query, delta_per_query = excluded.delta_per_query",
                [name, epsilon, delta, epsilon_per_query, delta_per_query],
            )

    def set_release_caps(self, analyst: str | None = None, **caps: int | None) -> None:
        """Cap what an analyst's releases may hold in this file: ``release_rows`` (one release),
        ``releases`` (how many they hold), ``release_bytes`` (their estimated bytes); without
        ``analyst``, the database's defaults. A cap given as None follows the default again.
        Checked before each release's debit (``dpgate.catalog.caps``)."""
        with self._transaction(declarations=False) as con:
            release_caps.set_caps(con, analyst, caps)

    def release_caps(self, analyst: str) -> dict[str, int]:
        """The release caps that hold for ``analyst``."""
        return release_caps.caps_of(self.con, analyst)

    def set_login(self, name: str, *, password: str | None = None, verifier: str | None = None,
                  owner: bool = False) -> None:  # fmt: skip
        """Let ``name`` log in to ``dpgate serve`` (SCRAM-SHA-256; only the verifier is stored).

        An analyst's login runs as that analyst; ``owner=True`` makes an owner login (owner
        operations over the server), whose name must not be an analyst's.
        """
        from dpgate.catalog import logins

        with self._transaction(declarations=False) as con:
            logins.set_login(con, name, role="owner" if owner else "analyst", password=password, verifier=verifier)

    def logins(self) -> list[tuple[str, str]]:
        """(name, role) of every login of ``dpgate serve``."""
        from dpgate.catalog import logins

        return logins.names(self.con)

    def load(self, table: str, path: str | os.PathLike, *, replace: bool = False, format: str | None = None) -> int:
        """Bring a CSV, Parquet or JSON file in as table ``table`` (DuckDB's readers); its rows.

        The table is public until ``protect`` declares it. ``format`` overrides the file's
        extension (``csv``, ``parquet``, ``json``).
        """
        path = os.fspath(path)
        if not os.path.isfile(path):
            raise errors.ProgrammingError(f"No file at {path!r}", code="DP611", hint="check the path")
        fmt = format or _FORMATS.get(os.path.splitext(path)[1].lower())
        if fmt not in _READERS:
            raise errors.ProgrammingError(
                f"Cannot tell the format of {path!r}", code="DP612",
                hint="use a .csv, .parquet or .json file, or say --format csv|parquet|json",
            )  # fmt: skip
        name = table.lower()
        if not name.isidentifier() or name.startswith("__"):
            raise errors.ProgrammingError(f"{table!r} is not a table name", code="DP612", hint="e.g. visits")
        if _exists(self.con, name):
            if not replace:
                raise errors.ProgrammingError(
                    f"Table {name} exists already", code="DP613", hint="pass --replace (replace=True) to load it anew"
                )
            if catalog.load(self.con).protected(name) is not None:
                raise errors.PolicyError(
                    f"{name} is protected: loading over it would change the data behind its roster", code="DP613",
                    hint="unprotect it first, or load into a new table",
                )  # fmt: skip
        verb = "CREATE OR REPLACE TABLE" if replace else "CREATE TABLE"
        # The database's own connection may not touch files (LOCKED_CONFIG): a separate in-memory
        # DuckDB reads the file, and its columns come over typed.
        reader = duckdb.connect()
        try:
            rel = reader.sql(f"SELECT * FROM {_READERS[fmt]}(?)", params=[path])
            types = [str(t) for t in rel.types]
            names = list(rel.columns)
            columns = list(zip(*rel.fetchall())) or [[] for _ in names]
        except duckdb.Error as e:
            raise errors.ProgrammingError(
                f"DuckDB cannot read {path!r} as {fmt}: {str(e).splitlines()[0]}", code="DP612",
                hint="check the file, or say --format",
            ) from e
        finally:
            reader.close()
        lists = [database.typed_list(f"c{i}", list(c), t) for i, (c, t) in enumerate(zip(columns, types))]
        select = ", ".join(f"unnest({sql}) AS {quote(n)}" for (sql, _), n in zip(lists, names))
        with self._transaction() as con:
            con.execute(f"{verb} main.{quote(name)} AS SELECT {select}", {f"c{i}": v for i, (_, v) in enumerate(lists)})
        return int(self.con.execute(f"SELECT count(*) FROM main.{quote(name)}").fetchone()[0])

    def budgets(self) -> tuple[list[tuple], list[tuple]]:
        """The analysts' quotas and spending, and per protected table its subjects' remaining ε."""
        analysts = self.con.execute(
            f"SELECT name, epsilon_quota, epsilon_spent, epsilon_quota - epsilon_spent, delta_quota, delta_spent, "
            f"epsilon_per_query, delta_per_query FROM {catalog.SCHEMA}.analysts ORDER BY name"
        ).fetchall()
        tables = []
        for t in catalog.load(self.con).tables.values():
            left = "epsilon_budget - epsilon_spent"
            row = self.con.execute(
                f"SELECT count(*), min({left}), median({left}), max({left}), count(*) FILTER (WHERE {left} <= 0) "
                f"FROM {t.roster_sql}"
            ).fetchone()
            tables.append((t.name, t.kind, t.unit, *row))
        return analysts, tables

    # -- reading -------------------------------------------------------------------------
    def quality(self, release: str) -> dict:
        """Compare a release with its source table: average TVD of all 1-, 2- and 3-way marginals.

        Owner only: it reads the raw rows, so no analyst interface offers it. The columns are
        coded exactly as the release was (the codings are kept in its registry row).
        """
        rec = registry.active(self.con, release)
        if rec is None:
            raise errors.ProgrammingError(
                f"No release named {release!r}", code="DP225", hint="SHOW RELEASES lists the releases"
            )
        if rec.kind != "synthetic table" or "codings" not in rec.parameters:
            # DiffPart's and the Markov model's tables are synthetic too, but not coded column by column
            raise errors.NotSupportedError(
                f"No quality report for a {rec.kind} made with {rec.mechanism}", code="DP221",
                hint="quality compares the marginals of MST, PrivBayes and independent-column releases",
            )  # fmt: skip
        coder = hooks.release_coding()
        codings = [coder.coding_from_dict(d) for d in rec.parameters["codings"]]
        source = rec.sources[0]
        cols = ", ".join(quote(c.name) for c in codings)
        report = coder.quality(self.con, f"SELECT {cols} FROM main.{quote(source)}", rec.name, codings)
        return {"release": rec.name, "source": source, **report}

    def catalog(self) -> catalog.Catalog:
        return catalog.load(self.con)

    def ledger(self, analyst: str | None = None) -> list[tuple]:
        """The append-only ledger (owner only): every debit, newest last."""
        sql = (
            f"SELECT l.entry_id, l.logged_at, l.analyst, l.query_class, l.mechanism, l.table_name, l.epsilon, "
            f"l.delta, l.subjects_charged, l.subjects_excluded, l.private, r.entry_id IS NOT NULL AS released, "
            f"l.statement FROM {catalog.SCHEMA}.ledger l LEFT JOIN {catalog.SCHEMA}.releases r USING (entry_id)"
        )
        params: list[Any] = []
        if analyst is not None:
            sql += " WHERE l.analyst = ?"
            params.append(analyst)
        return self.con.execute(sql + " ORDER BY l.entry_id", params).fetchall()

    # -- policy files --------------------------------------------------------------------
    def apply_policy(self, policy: Mapping[str, Any] | str | os.PathLike) -> list[str]:
        """Apply a policy (a parsed mapping, or the path of a TOML file). Returns what was done."""
        if not isinstance(policy, Mapping):
            with open(policy, "rb") as f:
                try:
                    policy = tomllib.load(f)
                except tomllib.TOMLDecodeError as e:
                    raise errors.PolicyError(f"Policy file is not valid TOML: {e}", code="DP330") from e
        _check_keys("policy", policy, {"tables", "graphs", "analysts", "owners", "backends", "release_caps"})
        done = []
        backends = policy.get("backends", {})
        _check_keys("[backends]", backends, {"spark"})
        if "spark" in backends:  # before the tables: their Spark sources are read with it
            spec = backends["spark"]
            _check_keys("[backends.spark]", spec, {"master", "conf"})
            self.set_spark(spec.get("master"), spec.get("conf"))
            done.append(f"Spark backend at {spec.get('master')}")
        for tname, spec in policy.get("tables", {}).items():
            _check_keys(
                f"[tables.{tname}]",
                spec,
                {"unit", "max_rows", "max_groups", "budget", "subject_delta", "columns", "options", "subjects",
                 "public_roster", "experimental", "spark", "sample_order"},
            )
            if "unit" not in spec:
                raise errors.PolicyError(f"[tables.{tname}] needs unit = \"<column>\"", code="DP330")
            budget = spec.get("budget", {"default": DEFAULT_SUBJECT_EPSILON})
            if not isinstance(budget, Mapping):
                budget = {"default": budget}
            _check_keys(f"[tables.{tname}].budget", budget, {"default", "column", "table", "unit", "epsilon_column"})
            domains, bounds, trees = {}, {}, {}
            for cname, cspec in spec.get("columns", {}).items():
                _check_keys(f"[tables.{tname}.columns.{cname}]", cspec, {"domain", "bounds", "nullable", "hierarchy"})
                if "hierarchy" in cspec:
                    trees[cname] = cspec["hierarchy"]
                if "domain" in cspec:
                    domains[cname] = list(cspec["domain"]) + ([None] if cspec.get("nullable") else [])
                if "bounds" in cspec:
                    lo, hi = cspec["bounds"]
                    bounds[cname] = (lo, hi)
            self.protect(
                tname,
                unit=spec["unit"],
                max_rows=spec.get("max_rows", 1),
                max_groups=spec.get("max_groups"),
                epsilon=budget.get("default"),
                budget_column=budget.get("column"),
                budget_table=budget.get("table"),
                budget_table_unit=budget.get("unit"),
                budget_table_column=budget.get("epsilon_column", "epsilon"),
                subject_delta=spec.get("subject_delta", DEFAULT_SUBJECT_DELTA),
                domains=domains,
                bounds=bounds,
                options=spec.get("options"),
                subjects=spec.get("subjects"),
                public_roster=_check_flag(f"[tables.{tname}] public_roster", spec.get("public_roster", False)),
                hierarchies=trees,
                # the policy is authoritative: a table whose entry no longer says experimental = true is closed
                experimental=_check_flag(f"[tables.{tname}] experimental", spec.get("experimental", False)),
                spark=spec.get("spark"),
                # the policy is authoritative here too: an entry without the key samples per query
                sample_order=spec.get("sample_order", sample_order_mod.PER_QUERY),
            )
            done.append(f"protected {tname} (unit {spec['unit']})")
        for gname, spec in policy.get("graphs", {}).items():
            _check_keys(f"[graphs.{gname}]", spec, {"src", "dst", "nodes", "node_column", "epsilon", "allow_kclique"})
            for key in ("src", "dst", "nodes"):
                if key not in spec:
                    raise errors.PolicyError(f"[graphs.{gname}] needs {key} = ...", code="DP330")
            self.protect_graph(
                gname,
                src=spec["src"],
                dst=spec["dst"],
                nodes=spec["nodes"],
                node_column=spec.get("node_column"),
                epsilon=spec.get("epsilon"),
                allow_kclique=_check_flag(f"[graphs.{gname}] allow_kclique", spec.get("allow_kclique", False)),
            )
            done.append(f"protected graph {gname} ({spec['src']} - {spec['dst']})")
        if "release_caps" in policy:  # the database's defaults
            _check_keys("[release_caps]", policy["release_caps"], release_caps.DEFAULTS)
            self.set_release_caps(None, **policy["release_caps"])
            done.append("release caps " + ", ".join(f"{k} = {v}" for k, v in policy["release_caps"].items()))
        for aname, spec in policy.get("analysts", {}).items():
            _check_keys(
                f"[analysts.{aname}]", spec,
                {"epsilon", "delta", "epsilon_per_query", "delta_per_query", "allow_test_seed", "scram",
                 *release_caps.DEFAULTS},
            )  # fmt: skip
            if "epsilon" not in spec:
                raise errors.PolicyError(f"[analysts.{aname}] needs epsilon = <quota>", code="DP330")
            self.add_analyst(
                aname,
                epsilon=spec["epsilon"],
                delta=spec.get("delta", 1e-5),
                epsilon_per_query=spec.get("epsilon_per_query"),
                delta_per_query=spec.get("delta_per_query"),
            )
            if "allow_test_seed" in spec:
                self.allow_test_seed(aname, _check_flag(f"[analysts.{aname}] allow_test_seed", spec["allow_test_seed"]))
            if "scram" in spec:  # a login for dpgate serve: a verifier, never a password, in a file
                self.set_login(aname, verifier=spec["scram"])
            own = {k: spec[k] for k in release_caps.DEFAULTS if k in spec}
            if own:
                self.set_release_caps(aname, **own)
            done.append(f"analyst {aname} (epsilon quota {spec['epsilon']})")
        for oname, spec in policy.get("owners", {}).items():  # owner logins of dpgate serve
            _check_keys(f"[owners.{oname}]", spec, {"scram"})
            if "scram" not in spec:
                raise errors.PolicyError(f"[owners.{oname}] needs scram = <SCRAM-SHA-256 verifier>", code="DP330")
            self.set_login(oname, verifier=spec["scram"], owner=True)
            done.append(f"owner login {oname}")
        return done


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


_FORMATS = {".csv": "csv", ".tsv": "csv", ".txt": "csv", ".parquet": "parquet", ".pq": "parquet",
            ".json": "json", ".jsonl": "json", ".ndjson": "json"}  # fmt: skip
_READERS = {"csv": "read_csv_auto", "parquet": "read_parquet", "json": "read_json_auto"}


def _exists(con, name: str) -> bool:
    return bool(con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE schema_name = 'main' AND table_name = ?", [name]
    ).fetchone()[0])  # fmt: skip


def _check_positive_int(label: str, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise errors.PolicyError(f"{label} must be a positive integer, got {value!r}", code="DP312")


def _check_flag(where: str, value: Any) -> bool:
    """A true/false switch: only a real boolean (``"false"`` is a non-empty string, so truthy)."""
    if not isinstance(value, bool):
        raise errors.PolicyError(f"{where} must be true or false, got {value!r}", code="DP330")
    return value


def _check_keys(where: str, mapping: Any, allowed: Iterable[str]) -> None:
    allowed = set(allowed)
    if not isinstance(mapping, Mapping):
        raise errors.PolicyError(f"{where} must be a table", code="DP330")
    unknown = sorted(set(mapping) - allowed)
    if unknown:
        raise errors.PolicyError(
            f"Unknown key(s) {', '.join(unknown)} in {where}",
            code="DP330",
            hint=f"accepted keys: {', '.join(sorted(allowed))}",
        )
