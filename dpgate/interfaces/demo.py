"""The embedded demo database and a short tour of dpgate on it.

``dpgate demo`` builds a fresh DuckDB file from the example data shipped with dpgate — UCI
Adult as the protected table ``adult``, supermarket baskets as ``baskets`` (one row per item)
and ``basket_flags`` (one BOOLEAN column per item), and the graphs ``karate`` and ``wormnet``
— applies ``sql/demo/policy.toml``, and runs a few queries as the analyst ``demo``, showing
answers, error bars, whose data each answer is about, and the budget going down. Every run
starts from a fresh database (``--keep`` keeps the existing one and what it has spent). The
people in ``adult`` have lifetime budgets between ε = 3 and 20 and the tour spends ε = 1.1 of
each, so after it every answer is still about everyone.
"""

from __future__ import annotations

import os
import re
import shlex
import tomllib
import warnings
from collections.abc import Callable
from pathlib import Path

import duckdb

from dpgate import database, errors, resources
from dpgate.catalog.owner import Owner

DEMO_ANALYST = "demo"


#: The protected tables of the current demo; an older demo database without them is rebuilt.
DEMO_TABLES = {"adult", "baskets", "basket_flags", "karate", "wormnet", "cities", "careers"}
DATA_FILES = {"adult": "adult.parquet", "baskets": "supermarket_baskets.parquet", "wormnet": "wormnet_edges.parquet",
              "cities": "cities_points.parquet", "careers": "mvad_sequences.parquet"}


def flag_column(item: str) -> str:
    """The wide table's column for an item: lower case, runs of other characters as ``_``."""
    name = re.sub(r"[^a-z0-9]+", "_", item.lower()).strip("_")
    return "item_" + name if name[:1].isdigit() else name


def basket_flags_sql(items: list[str]) -> str:
    """``basket_flags``: one row per basket, one BOOLEAN column per catalogue item."""
    cols = ", ".join(
        f"bool_or(item = '{item.replace(chr(39), chr(39) * 2)}') AS \"{flag_column(item)}\"" for item in items
    )
    return f"CREATE TABLE basket_flags AS SELECT basket_id, {cols} FROM baskets GROUP BY basket_id ORDER BY basket_id"


def karate_edges() -> list[tuple[int, int]]:
    """Zachary's karate club (78 edges on 34 members), as networkx ships it."""
    import networkx as nx

    return sorted((min(u, v), max(u, v)) for u, v in nx.karate_club_graph().edges())


def default_path() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "dpgate" / "demo.duckdb"


def shell_quote(path: str | os.PathLike) -> str:
    """A path as a shell word (quoted only when it needs to be)."""
    return shlex.quote(os.fspath(path))


def _inspect(path: Path) -> tuple[set[str], set[str]] | None:
    """(main tables, protected tables) of an existing file, read without changing it; None if not dpgate's."""
    try:
        con = duckdb.connect(str(path), read_only=True)
    except duckdb.Error as e:
        raise errors.OperationalError(
            f"Cannot open {path}: {str(e).splitlines()[0]}", code="DP102",
            hint="close other programs using it (a dpgate shell, a DuckDB session), or pass another --db path",
        ) from e  # fmt: skip
    try:
        main = {r[0] for r in con.execute(
            "SELECT lower(table_name) FROM duckdb_tables() WHERE schema_name = 'main' AND database_name = current_database()"
        ).fetchall()}  # fmt: skip
        has_catalog = con.execute(
            "SELECT count(*) FROM duckdb_tables() WHERE schema_name = 'dpgate' AND table_name = 'protected_tables' "
            "AND database_name = current_database()"
        ).fetchone()[0]
        if not has_catalog:
            return None
        protected = {r[0] for r in con.execute("SELECT table_name FROM dpgate.protected_tables").fetchall()}
        return main, protected
    finally:
        con.close()


def build(path: str | os.PathLike | None = None, *, force: bool = False) -> Path:
    """Create the demo database at ``path`` (default: the user's data directory).

    An existing demo database is reused, unless ``force`` (what ``dpgate demo`` does without
    ``--keep``): then it is rebuilt with fresh budgets. A file that is not a demo database is
    never replaced.
    """
    path = Path(path) if path is not None else default_path()
    if path.exists():
        found = _inspect(path)
        if found is None or not {"adult", "subject_budgets", "country_regions"} <= found[0] or "adult" not in found[1]:
            raise errors.InterfaceError(
                f"{path} exists but is not a dpgate demo database", code="DP101",
                hint="pass another --db path, or remove the file",
            )  # fmt: skip
        if not force and DEMO_TABLES <= found[1]:
            return path
        # rebuilt: asked for, or a demo database from an older dpgate (fresh budgets either way)
    for stale in (path, Path(str(path) + ".wal")):
        if stale.exists():
            stale.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)
    ddl = resources.read_sql("demo/demo.sql")
    for name in DATA_FILES:
        file = resources.data_dir() / DATA_FILES[name]
        ddl = ddl.replace("{" + name + "}", "'" + str(file).replace("'", "''") + "'")
    with open(resources.sql_dir() / "demo" / "policy.toml", "rb") as f:
        items = tomllib.load(f)["tables"]["baskets"]["columns"]["item"]["domain"]
    # Loading reads files, so it uses a plain DuckDB connection, closed before dpgate opens the file; it
    # writes the file in the storage format dpgate's own new files have (readable by DuckDB 1.4 and 2).
    con = duckdb.connect(str(path), config=dict(database.STORAGE_CONFIG))
    try:
        con.execute(ddl)
        con.execute(basket_flags_sql(items))
        con.execute("CREATE TABLE karate (src INTEGER NOT NULL, dst INTEGER NOT NULL)")
        con.executemany("INSERT INTO karate VALUES (?, ?)", karate_edges())
    finally:
        con.close()
    with Owner(path) as owner:
        owner.apply_policy(resources.sql_dir() / "demo" / "policy.toml")
    return path


#: The query the demo suggests afterwards (``Try:``): about everyone, after any number of tours.
TRY_QUERY = "SELECT COUNT(*) FROM adult WHERE age > 60"


TOUR = [
    ("How many people are in the data? (ε = 0.1). The population line says whose data the answer is about",
     "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1) COUNT(*) AS people FROM adult"),
    ("Counts and mean age per education level: every declared level appears (ε = 0.3, split 0.15 / 0.15)",
     "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.3) education, COUNT(*) AS n, "
     "ROUND(AVG(age), 1) AS mean_age FROM adult GROUP BY education ORDER BY n DESC LIMIT 6"),
    ("A join with a public lookup table, and a WHERE clause (ε = 0.2)",
     "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.2) r.region, COUNT(*) AS high_earners "
     "FROM adult a JOIN country_regions r ON a.native_country = r.native_country "
     "WHERE a.income = '>50K' GROUP BY r.region"),
    ("Top-k: the 5 most common items in 4,627 supermarket baskets, with noisy counts (ε = 1: 0.5 each)",
     "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) item, COUNT(*) AS baskets FROM baskets "
     "GROUP BY item ORDER BY baskets DESC LIMIT 5"),
    ("Subgraph counts: triangles in the WormNet gene network (2,445 genes), edge-level DP with ladder functions",
     "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5) TRIANGLE_COUNT(src, dst) AS triangles FROM wormnet"),
    ("A synthetic release of Adult (ε = 0.5; the default synthesizer, MST), written as an ordinary table, "
     "public from then on",
     "CREATE SYNTHETIC TABLE adult_syn FROM adult WITH (epsilon = 0.5)"),
    ("Queries over a release are free, SELECT * included",
     "SELECT age, education, occupation, sex, hours_per_week, income FROM adult_syn LIMIT 3"),
    ("A PrivTree synopsis of 170,391 places (ε = 0.5): a table of the tree's nodes, fine where the places are dense",
     "CREATE SYNTHETIC TABLE cities_tree FROM cities USING privtree WITH (epsilon = 0.5, columns = 'lon, lat')"),
    ("Range counts from the synopsis are free: places in a box around Europe",
     "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (from_synopsis = 'cities_tree') COUNT(*) AS places FROM cities "
     "WHERE lon BETWEEN -10 AND 30 AND lat BETWEEN 35 AND 70"),
    ("What would a query cost? EXPLAIN PRIVACY spends nothing",
     "EXPLAIN PRIVACY SELECT sex, SUM(hours_per_week) FROM adult GROUP BY sex"),
    ("Raw rows never leave: this is refused, and charges nothing",
     "SELECT * FROM adult LIMIT 5"),
    ("The budget after the tour: yours (the analyst's quota) and the people's (their lifetime ε and δ)",
     "SHOW BUDGET"),
]  # fmt: skip


def _reads_adult(sql: str) -> bool:
    return re.search(r"\bFROM adult\b", sql) is not None and not sql.startswith("EXPLAIN")


def _made(sql: str) -> str | None:
    """The release a tour statement creates (None for other statements)."""
    m = re.match(r"CREATE SYNTHETIC TABLE (\w+)", sql)
    return m.group(1) if m else None


def _smallest_left(path: str | os.PathLike) -> float:
    """The least ε any person in ``adult`` has left (the roster's budgets are public facts)."""
    with Owner(path, create=False) as owner:
        table = owner.catalog().tables["adult"]
        (left,) = owner.con.execute(f"SELECT min(epsilon_budget - epsilon_spent) FROM {table.roster_sql}").fetchone()
    return float(left or 0)


def _cost(con, sql: str) -> tuple[float, float] | None:
    try:
        return con.gateway.cost(sql)
    except errors.Error:  # refused (the tour shows it), or reads a release not made yet
        return None


def tour(path: str | os.PathLike, out: Callable[[str], None] = print, max_width: int | None = None) -> None:
    """Run the tour queries against the demo database as the analyst ``demo`` (tables and prose
    fitted to ``max_width``: the terminal's, from the CLI; the SQL stays one line, to copy)."""
    from dpgate import connect
    from dpgate.interfaces.fit import wrap
    from dpgate.interfaces.render import format_result, wrap_lines

    def comment(title: str) -> str:
        return "\n".join("-- " + line for line in (wrap(title, max_width - 3) if max_width else [title]))

    smallest = _smallest_left(path)
    with connect(str(path), analyst=DEMO_ANALYST) as con, warnings.catch_warnings():
        warnings.simplefilter("ignore", errors.PopulationWarning)  # each answer prints its population
        eps, delta = con.budget()
        out(wrap_lines(f"Connected to {path} as analyst '{DEMO_ANALYST}': ε quota left {eps:g}, δ left {delta:g}\n",
                       max_width))  # fmt: skip
        releases = con.gateway.catalog().releases
        todo = [sql for _, sql in TOUR if _made(sql) not in releases]
        costs = [_cost(con, sql) for sql in todo]
        analyst_cost = sum(c[0] for c in costs if c is not None)
        adult_cost = sum(c[0] for sql, c in zip(todo, costs) if c is not None and _reads_adult(sql))
        if smallest < adult_cost or eps < analyst_cost:
            out(wrap_lines(f"Heads-up: this demo database was used before (--keep). The tour spends ε {adult_cost:g} of each "
                f"person in adult, and some have only {smallest:g} left"
                + (f"; it spends ε {analyst_cost:g} of your quota, which has {eps:g} left" if eps < analyst_cost else "")
                + ". Some answers will leave people out or be refused; `dpgate demo` without --keep starts afresh.\n",
                max_width))  # fmt: skip
        for title, sql in TOUR:
            if _made(sql) in releases:
                out(f"{comment(title)}\n({_made(sql)} exists from an earlier tour: SHOW RELEASES lists it)\n")
                continue
            out(f"{comment(title)}\n{sql};")
            cur = con.cursor()
            try:
                cur.execute(sql)
            except errors.Error as e:
                out(wrap_lines(f"refused: [{e.code}] {e.message}\n  hint: {e.hint}\n", max_width, "  "))
                continue
            out(format_result(cur.result, intervals=True, max_width=max_width) + "\n")
