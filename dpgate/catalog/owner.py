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

``Owner`` is one class assembled from the catalog's owner modules: ``declare`` (protect, protect_graph,
declare, unprotect, drop_release), ``rosters`` (refresh_roster, Spark sources), ``policy``
(apply_policy) and ``reports`` (budgets, ledger, catalog, quality); this module keeps the handle's
lifecycle, settings, analysts, logins, release caps and loading files.
"""

from __future__ import annotations

import math
import os
from contextlib import contextmanager
from typing import Any

import duckdb

from dpgate import database, errors, resources
from dpgate.catalog import caps as release_caps
from dpgate.catalog import releases as registry
from dpgate.catalog import remembered
from dpgate.catalog import shares as budget_shares
from dpgate.catalog import tables as catalog
from dpgate.catalog.checks import check_flag, main_table_exists
from dpgate.catalog.declare import DEFAULT_SUBJECT_DELTA, DEFAULT_SUBJECT_EPSILON, Declarations, roster_name
from dpgate.catalog.policy import PolicyFiles
from dpgate.catalog.reports import Reports
from dpgate.catalog.rosters import Rosters
from dpgate.catalog.tables import quote_ident

__all__ = ["DEFAULT_SUBJECT_DELTA", "DEFAULT_SUBJECT_EPSILON", "SCHEMA_VERSION", "Owner", "quote", "roster_name"]

SCHEMA_VERSION = "1"

quote = quote_ident


class Owner(Declarations, Rosters, PolicyFiles, Reports):
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
        in flight their debit."""
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
                self.con.execute(remembered.DDL)
                budget_shares.ensure(self.con)
                return
            self.con.execute("BEGIN TRANSACTION")
            try:
                self.con.execute(resources.read_sql("schema.sql"))
                self.con.execute(remembered.DDL)
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
        check_flag("allowed", allowed)
        with self._transaction() as con:
            if not con.execute(f"SELECT 1 FROM {catalog.SCHEMA}.analysts WHERE name = ?", [analyst]).fetchone():
                raise errors.PolicyError(f"Unknown analyst {analyst!r}", code="DP302", hint="add_analyst() first")
            con.execute(
                f"UPDATE {catalog.SCHEMA}.analysts SET allow_test_seed = ? WHERE name = ?", [allowed, analyst]
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
            if logins.owner_login(con, name):  # that name logs in to dpgate serve as the owner
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

    def set_budget_share(self, share: str | float | None, analyst: str | None = None) -> None:
        """How much of each subject's lifetime ε one analyst may use (``catalog.shares``): a fraction in
        (0, 1], ``'equal'`` (1 / the number of analysts) or ``'none'``/None (the whole budget). Without
        ``analyst``, the database's default; for an analyst, None follows the default again."""
        # checked (DP347) before anything is written; an analyst's 'default' follows the database's again
        share = budget_shares.own_share(share) if analyst is not None else budget_shares.parse(share)
        with self._transaction(declarations=False) as con:
            if analyst is not None:
                self._known_analyst(con, analyst)
            budget_shares.set_share(con, analyst, share)

    def budget_share(self, analyst: str) -> str:
        """The share that holds for ``analyst``: a fraction, 'equal' or 'none' (with ' (default)' when it
        is the database's)."""
        self._known_analyst(self.con, analyst)
        return budget_shares.describe(self.con, analyst)

    def _known_analyst(self, con: duckdb.DuckDBPyConnection, analyst: Any) -> None:
        if not isinstance(analyst, str) or not con.execute(
            f"SELECT count(*) FROM {catalog.SCHEMA}.analysts WHERE name = ?", [analyst]
        ).fetchone()[0]:  # fmt: skip
            raise errors.PolicyError(f"Unknown analyst {analyst!r}", code="DP302",
                                     hint="dpgate analyst list shows the analysts")  # fmt: skip

    def release_caps(self, analyst: str) -> dict[str, int]:
        """The release caps that hold for ``analyst``."""
        return release_caps.caps_of(self.con, analyst)

    def set_answer_memory(self, mode: str | None = None, *, max_entries: int | None = None,
                          max_bytes: int | None = None, max_age: int | None = None) -> None:  # fmt: skip
        """How analysts' DP answers are remembered and given again for free (``catalog.remembered``):
        ``mode`` 'own' (the default: each analyst's own answers), 'shared' (any analyst's answer is free
        for everyone: the subjects pay nothing more) or 'off' (forgets them all); each analyst keeps at
        most ``max_entries`` answers and ``max_bytes`` stored bytes (the oldest go first; 0 remembers
        nothing); ``max_age`` seconds after its release an answer is drawn afresh (0: no limit)."""
        with self._transaction() as con:  # sessions read the settings with the catalog
            remembered.set_settings(con, mode, max_entries=max_entries, max_bytes=max_bytes, max_age=max_age)

    def answer_memory(self) -> dict[str, Any]:
        """The settings, and how many answers are remembered per analyst."""
        m = remembered.settings(self.con)
        return {"mode": m.mode, "max_entries": m.max_entries, "max_bytes": m.max_bytes, "max_age": m.max_age,
                "analysts": {a: n for a, n, _, _ in remembered.summary(self.con)}}  # fmt: skip

    def forget_answers(self, analyst: str | None = None) -> int:
        """Forget remembered answers (one analyst's, or everyone's): their next ask is drawn afresh and
        charged; the ledger keeps what was paid. Everyone's also starts a new data generation, so an
        answer being stored meanwhile is not kept as current: what to run after changing rows with
        plain SQL, which dpgate does not notice. Returns how many were forgotten."""
        with self._transaction(declarations=analyst is None) as con:  # a new generation: read with the catalog
            if analyst is None:
                remembered.new_generation(con)
            return remembered.clear(con, analyst)

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
        if main_table_exists(self.con, name):
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
            remembered.new_generation(con)  # remembered answers are drawn afresh
        return int(self.con.execute(f"SELECT count(*) FROM main.{quote(name)}").fetchone()[0])


_FORMATS = {".csv": "csv", ".tsv": "csv", ".txt": "csv", ".parquet": "parquet", ".pq": "parquet",
            ".json": "json", ".jsonl": "json", ".ndjson": "json"}  # fmt: skip
_READERS = {"csv": "read_csv_auto", "parquet": "read_parquet", "json": "read_json_auto"}

