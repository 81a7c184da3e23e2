"""The embedded demo database and a short tour of dpgate on it.

``dpgate demo`` builds (or reuses) a DuckDB file from the example data shipped with
dpgate — UCI Adult as the protected table ``adult`` — applies ``sql/demo/policy.toml``,
and runs a few queries as the analyst ``demo``, showing answers, error bars and the
budget going down.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import duckdb

from dpgate import errors, resources
from dpgate.owner import Owner

DEMO_ANALYST = "demo"


def default_path() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "dpgate" / "demo.duckdb"


def build(path: str | os.PathLike | None = None, *, force: bool = False) -> Path:
    """Create the demo database at ``path`` (default: the user's data directory); reuse it if present."""
    path = Path(path) if path is not None else default_path()
    if path.exists() and not force:
        with Owner(path, create=False) as owner:
            if "adult" in owner.catalog().tables:
                return path
        raise errors.InterfaceError(
            f"{path} exists but is not a dpgate demo database", code="DP101",
            hint="pass another --db path, or remove the file",
        )  # fmt: skip
    if path.exists():
        path.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)
    adult = resources.data_dir() / "adult.parquet"
    ddl = resources.read_sql("demo/demo.sql").replace("{adult}", "'" + str(adult).replace("'", "''") + "'")
    # Loading reads files, so it uses a plain DuckDB connection, closed before dpgate opens the file.
    con = duckdb.connect(str(path))
    try:
        con.execute(ddl)
    finally:
        con.close()
    with Owner(path) as owner:
        owner.apply_policy(resources.sql_dir() / "demo" / "policy.toml")
    return path


TOUR = [
    ("How many people are in the data? (ε = 0.1)",
     "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1) COUNT(*) AS people FROM adult"),
    ("Counts and mean age per education level: every declared level appears (ε = 0.5, split 0.25 / 0.25)",
     "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5) education, COUNT(*) AS n, "
     "ROUND(AVG(age), 1) AS mean_age FROM adult GROUP BY education ORDER BY n DESC LIMIT 6"),
    ("A join with a public lookup table, and a WHERE clause",
     "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.3) r.region, COUNT(*) AS high_earners "
     "FROM adult a JOIN country_regions r ON a.native_country = r.native_country "
     "WHERE a.income = '>50K' GROUP BY r.region"),
    ("What would a query cost? EXPLAIN PRIVACY spends nothing",
     "EXPLAIN PRIVACY SELECT sex, SUM(hours_per_week) FROM adult GROUP BY sex"),
    ("Raw rows never leave: this is refused, and charges nothing",
     "SELECT * FROM adult LIMIT 5"),
    ("The budget after the tour", "SHOW BUDGET"),
]  # fmt: skip


def tour(path: str | os.PathLike, out: Callable[[str], None] = print) -> None:
    """Run the tour queries against the demo database as the analyst ``demo``."""
    from dpgate import connect
    from dpgate.render import format_result

    with connect(str(path), analyst=DEMO_ANALYST) as con:
        eps, delta = con.budget()
        out(f"Connected to {path} as analyst '{DEMO_ANALYST}': ε quota left {eps:g}, δ left {delta:g}\n")
        for title, sql in TOUR:
            out(f"-- {title}\n{sql};")
            cur = con.cursor()
            try:
                cur.execute(sql)
            except errors.Error as e:
                out(f"refused: [{e.code}] {e.message}\n  hint: {e.hint}\n")
                continue
            out(format_result(cur.result, intervals=True) + "\n")
