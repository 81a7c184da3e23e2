"""A dashboard that refreshes: the same DP statements asked 100 times spend ε once.

Run:  python examples/dashboard_refresh.py [path/to/demo.duckdb] [--refreshes N]
(builds the demo database in a temporary directory when no path is given)

Each refresh asks the same two statements. The first round draws and pays for their answers; every
later round gets the same answers back, free, with a note saying when they were released. A new
draw is asked for with OPTIONS (fresh = true), and paid for.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import dpgate
from dpgate.interfaces import demo

CHARTS = {
    "people by sex": "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.2) sex, COUNT(*) AS n FROM adult GROUP BY sex",
    "mean age by race": "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.3) race, AVG(age) AS mean_age "
    "FROM adult GROUP BY race ORDER BY race",
}


def main(path: str | None = None, refreshes: int = 100) -> None:
    db = Path(path) if path else demo.build(Path(tempfile.mkdtemp()) / "demo.duckdb")
    with dpgate.connect(str(db), analyst="demo") as con:
        cur = con.cursor()
        start = con.budget()[0]
        seen: dict[str, set] = {name: set() for name in CHARTS}
        started = time.perf_counter()
        for _ in range(refreshes):
            for name, sql in CHARTS.items():
                seen[name].add(tuple(cur.execute(sql).fetchall()))
        took = time.perf_counter() - started
        spent = start - con.budget()[0]
        print(f"{refreshes} refreshes of {len(CHARTS)} charts in {took:.2f} s: ε spent {spent:g} "
              f"(the charts' ε once: {0.2 + 0.3:g})")  # fmt: skip
        for name in CHARTS:
            print(f"  {name}: {len(seen[name])} distinct answer(s)")
        print("the last refresh's note:", cur.release.notes[0])

        fresh = CHARTS["people by sex"].replace("epsilon = 0.2", "epsilon = 0.2, fresh = true")
        cur.execute(fresh).fetchall()
        print(f"a fresh draw of 'people by sex' charged ε {cur.release.epsilon:g}; "
              f"quota left ε {con.budget()[0]:g}")  # fmt: skip


if __name__ == "__main__":
    args = sys.argv[1:]
    n = int(args[args.index("--refreshes") + 1]) if "--refreshes" in args else 100
    paths = [a for i, a in enumerate(args) if a != "--refreshes" and (i == 0 or args[i - 1] != "--refreshes")]
    main(paths[0] if paths else None, n)
