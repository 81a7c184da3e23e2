"""Data planes: where the exact, bounded statistics of a query are computed.

dpgate splits every DP query in two. The *control plane* (catalog, roster, ledger, release
registry, planning, noise, post-processing) always lives in the DuckDB database file and in
dpgate's process. The *data plane* computes the exact integer statistics the mechanism
perturbs: the rows of the charged subjects, each subject's contribution bounded, aggregated
per cell. For most tables the data plane is the same DuckDB file (``dpgate.backends.duckdb``
for counting, ``dpgate.backends.charged`` for the other classes' SQL). A table the owner declares
with a Spark source has its rows in Spark instead (``dpgate.backends.spark``); the DuckDB file then
holds an empty table with the same columns, so that everything before the debit (classifying,
planning, DuckDB's bind checks) runs as for any table.

The statistics themselves (clamping, the grid, the per-kind sums and counts, the rank hashes) are
built once, as sqlglot trees, in ``dpgate.backends.bounded`` and written for each engine there.

The interface a data plane offers the query classes is small (``DataPlane``): check before the
debit that a plan will run, and after it return the plan's exact statistics. Noise is never drawn
in the engine. A query class a data plane does not serve is refused for its tables before
anything is charged (``require_served``). No backend imports a query package.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from sqlglot import exp

from dpgate import errors
from dpgate.catalog.tables import ProtectedTable

#: Table option naming a table's Spark source (set by ``Owner.protect(..., spark=...)``).
SPARK_OPTION = "spark"

#: Query classes each data plane serves; the others are refused for its tables before the debit.
SERVED = {"spark": ("count", "top_k", "synthetic", "subgraph")}
#: The synthesizers a data plane runs (``CREATE SYNTHETIC TABLE ... USING name``); the others are refused.
SYNTHESIZERS_SERVED = {"spark": ("mst", "privbayes", "independent", "diffpart", "privtree", "privtree_markov")}


class DataPlane(Protocol):
    """What the query classes ask of the engine that holds a table's rows.

    ``con`` is always the statement's connection to the database file, which holds the ledger's
    charged (unit, part) relation ``charged`` (and ``probe``, an empty one of the same columns,
    before the debit); a plane elsewhere reads the charged units from it.
    """

    name: str

    def bind_check(self, con: Any, plan: Any, probe: str) -> None:
        """Refuse (free) a plan the engine could not run, before the debit."""

    def exact(self, con: Any, plan: Any, charged: str, salt: int, n_parts: int = 1, *,
              generation: int | None = None) -> Any:
        """The plan's exact bounded statistics over the charged subjects (a ``plans.ExactAnswer``).
        ``generation``: the roster generation a uniform debit charged (lets DuckDB skip work)."""

    def forget(self) -> None:
        """Drop whatever the plane keeps between statements (cached charged sets)."""

    def interrupt(self) -> bool:
        """Stop the engine work running now; the gateway calls it before the debit only (DuckDB's
        own work stops with the connection's interrupt)."""

    def end(self) -> None:
        """The statement is over (the gateway calls it after every statement): end its progress line."""

    # A plane that serves the top-k class (``SERVED``) also has:

    def check_top_k(self, plan: Any) -> None:
        """Refuse (free) a top-k plan the engine could not run, before the debit."""

    def top_k(self, con: Any, plan: Any, charged: str) -> Any:
        """A context manager giving the top-k plan's exact statistics over the charged subjects:
        ``key_subjects(salt)`` (DP key selection's per-key subject counts, keys as text) and
        ``pairs(labels)`` (a ``mechanisms.pairs.PairStatistics``)."""


@dataclass(frozen=True)
class Charged:
    """The charged subjects, read from the ledger's relation in DuckDB for a data plane.

    ``units()``: one row per charged unit (``unit``, ``__seen``), read when the plane has not kept
    them; ``pairs``: the (unit, part) rows when the plan has several parts, else None; ``key``: a
    fingerprint of the units (their count and two independent 64-bit hash sums), which names the
    set in the plane's cache; ``count``: how many units.
    """

    units: Callable[[], Any]
    pairs: Any
    key: tuple
    count: int


def engine_of(table: ProtectedTable) -> str:
    """'duckdb' (the rows are in the database file) or 'spark'."""
    return "spark" if table.options.get(SPARK_OPTION) else "duckdb"


def protected_tables(classified: Any, catalog: Any) -> tuple[ProtectedTable, ...]:
    """Every protected table a statement reads: named in FROM / JOIN, resolved through views and
    table functions (``dp_top_k_columns('t', ...)``) by the classifier, or joined on the unit."""
    found: dict[str, ProtectedTable] = {}
    for c in (classified, getattr(classified, "inner", None)):
        if c is None:
            continue
        for t in (c.protected, *c.joined, *(r.protected for r in c.refs)):
            if t is not None:
                found[t.name] = t
        for node in c.statement.find_all(exp.Table):
            if node.name and node.name.lower() in catalog.tables:
                found[node.name.lower()] = catalog.tables[node.name.lower()]
    return tuple(found[n] for n in sorted(found))


def require_served(query_class: str, tables: tuple[ProtectedTable, ...], what: str) -> None:
    """Refuse a statement over a table whose data plane does not serve its query class, or that
    mixes engines: each data plane reads its own tables only (a DuckDB plan would read a Spark
    table's empty stub; the Spark plane runs one table without joins)."""
    engines = {engine_of(t) for t in tables}
    if len(engines) > 1:
        others = ", ".join(f"{t.name} ({engine_of(t)})" for t in tables)
        raise errors.UnsupportedQueryError(
            f"This statement reads {others}: a statement reads tables of one engine (protected tables in Spark "
            "join each other on the unit, not tables in the database file)", code="DP261",
            hint="ask about the Spark tables alone, or about the database file's alone; nothing was charged",
        )  # fmt: skip
    for t in tables:
        engine = engine_of(t)
        if engine == "duckdb":
            continue
        if query_class not in SERVED[engine]:
            raise errors.UnsupportedQueryError(
                f"{t.name} lives in Spark, and the Spark backend serves counting, top-k, subgraph counts and "
                f"synthetic releases, not {what}", code="DP260",
                hint="ask COUNT / SUM / AVG / VARIANCE / STDDEV / MEDIAN with WHERE and GROUP BY, the top k "
                f"(GROUP BY ... ORDER BY COUNT(*) DESC LIMIT k), or CREATE SYNTHETIC TABLE ... USING "
                f"{' | '.join(SYNTHESIZERS_SERVED[engine])} over {t.name}; nothing was charged",
            )  # fmt: skip


def require_synthesizer(mechanism: str, table: ProtectedTable) -> None:
    """Refuse (free) a synthesizer the table's data plane does not run."""
    engine = engine_of(table)
    if engine != "duckdb" and mechanism not in SYNTHESIZERS_SERVED[engine]:
        raise errors.UnsupportedQueryError(
            f"{table.name} lives in Spark, and the Spark backend runs the vetted synthesizers only, not "
            f"USING {mechanism}", code="DP260",
            hint=f"USING {' | '.join(SYNTHESIZERS_SERVED[engine])}; nothing was charged",
        )  # fmt: skip


#: The data planes of the statement being run (set by the gateway around its checks and its run).
_PLANES: contextvars.ContextVar[Callable[[str], DataPlane] | None] = contextvars.ContextVar("planes", default=None)


@contextmanager
def planes(get: Callable[[str], DataPlane]) -> Iterator[None]:
    token = _PLANES.set(get)
    try:
        yield
    finally:
        _PLANES.reset(token)


def plane_for(engine: str, *, spark: Any = None, settings: Callable[[], dict[str, str]] | None = None,
              progress: Callable[[], Any] | None = None) -> DataPlane:
    """A new data plane for ``engine`` ('duckdb' or 'spark'; ``engine_of``).

    DuckDB's plane keeps no state (the connection comes with each call), so there is one. Spark's
    runs in dpgate's own session on ``spark`` (the caller's SparkSession) or, without one, on the
    process's session for the policy's ``[backends.spark]`` settings (``settings()``, read only
    then), started once. ``progress()``: the statement's progress callback, told while Spark starts
    and while a Spark job runs longer than a second.
    """
    if engine == "duckdb":
        from dpgate.backends.duckdb import PLANE

        return PLANE
    if engine == "spark":
        from dpgate.backends.spark import SparkPlane, session_from_settings
        from dpgate.backends.spark.runtime import cannot_run

        if spark is None:
            spark = session_from_settings(settings() if settings else {}, progress() if progress else None)
        try:
            return SparkPlane(spark, progress)
        except errors.Error:
            raise
        except Exception as e:  # noqa: BLE001 - py4j's errors: a stopped session, a driver that is gone
            raise cannot_run(e) from None
    raise errors.InternalError(f"no data plane for engine {engine!r}")


def spark_cores(spark: Any, settings: Callable[[], dict[str, str]]) -> int:
    """The cores a statement's Spark work may count on (``SparkPlane.cores``), from the caller's
    running session, else from the policy's ``[backends.spark]`` master and conf: starts nothing."""
    import json

    from dpgate.backends.spark import plane as spark_plane

    if spark is not None:
        return spark_plane.statement_cores(spark)
    given = settings()
    try:
        conf = json.loads(given.get("spark_conf") or "{}")
    except ValueError:
        conf = {}
    return spark_plane.cores_of(given.get("spark_master") or "", conf.get(spark_plane.CORES_SETTING))


def plane(engine: str) -> DataPlane:
    """The statement's data plane for ``engine``. The database file's is always there; the others
    come from the gateway (``planes``), made on first use."""
    if engine == "duckdb":
        return plane_for("duckdb")
    get = _PLANES.get()
    if get is None:
        raise errors.InternalError(f"no {engine} data plane is open for this statement")
    return get(engine)
