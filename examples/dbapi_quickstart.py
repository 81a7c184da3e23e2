"""dpgate through the Python DB-API: connect, ask, read the error bars and the budget.

Run:  python examples/dbapi_quickstart.py [path/to/demo.duckdb]
(builds the demo database in a temporary directory when no path is given)
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import dpgate
from dpgate.interfaces import demo


def main(path: str | None = None) -> None:
    db = Path(path) if path else demo.build(Path(tempfile.mkdtemp()) / "demo.duckdb")
    with dpgate.connect(str(db), analyst="demo") as con:
        cur = con.cursor()
        cur.execute(
            "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5) "
            "education, COUNT(*) AS n, AVG(age) AS mean_age FROM adult GROUP BY education ORDER BY n DESC"
        )
        print(f"{'education':<14} {'n':>8} {'95% interval':>18} {'mean_age':>9} {'95% interval':>16}")
        for row, iv in zip(cur.fetchall(), cur.release.intervals):
            n_lo, n_hi = iv["n"]
            a_lo, a_hi = iv["mean_age"]
            print(f"{row[0]:<14} {row[1]:>8} [{n_lo:>7}, {n_hi:>7}] {row[2]:>9.2f} [{a_lo:6.2f}, {a_hi:6.2f}]")
        rel = cur.release
        print(f"\ncharged ε={rel.epsilon:g}; {rel.subjects_charged} subjects used, "
              f"{rel.subjects_excluded} left out; analyst ε left {rel.epsilon_remaining:g}")  # fmt: skip
        for name, info in rel.columns.items():
            print(f"  {name}: {info.description}")

        # Parameters use qmark style; the DP options can be parameters too.
        cur.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = ?) COUNT(*) FROM adult WHERE age >= ?", [0.2, 65])
        print(f"\npeople aged 65+: {cur.fetchone()[0]} (±{rel_half(cur)})")

        # A refusal is a PEP 249 exception with a stable code and a hint; it costs nothing.
        try:
            cur.execute("SELECT age FROM adult")
        except dpgate.Error as e:
            print(f"\nrefused [{e.code}]: {e.message}\n  hint: {e.hint}")
        print(f"remaining quota: ε={con.budget()[0]:g}")


def rel_half(cur) -> int:
    lo, hi = next(iter(cur.release.intervals[0].values()))
    return (hi - lo) // 2


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
