"""Variance, quantiles, dates, joins and per-subject values on the company example.

Run:  python examples/beyond_counts.py
(builds company.duckdb from examples/company.sql and examples/policy.toml in a temporary directory)
"""

from __future__ import annotations

import tempfile
import warnings
from pathlib import Path

import duckdb

import dpgate
from dpgate.catalog.owner import Owner

HERE = Path(__file__).resolve().parent
DP = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.2) "
QUERIES = {
    "spread of purchase amounts": DP + "category, AVG(amount) AS mean, STDDEV_POP(amount) AS sd, "
    "MEDIAN(amount) AS median FROM purchases GROUP BY category",
    "purchases per month (dates bounded by the owner)": DP + "month(purchased_on) AS month, COUNT(*) AS n "
    "FROM purchases GROUP BY 1",
    "a join of two protected tables of one subject space": DP + "c.region, SUM(p.amount) AS spent "
    "FROM customers c JOIN purchases p USING (customer_id) GROUP BY c.region",
    "a lookup join with a public table": DP + "s.city, COUNT(*) AS n FROM purchases p JOIN stores s USING (store_id) "
    "GROUP BY s.city",
    "per-subject values: how many customers made n purchases": DP + "n, COUNT(*) AS customers FROM "
    "(SELECT customer_id, COUNT(*) AS n FROM purchases GROUP BY customer_id) GROUP BY n",
}


def build(path: Path) -> Path:
    with duckdb.connect(str(path)) as raw:
        raw.execute((HERE / "company.sql").read_text())
    with warnings.catch_warnings(), Owner(path) as owner:
        warnings.simplefilter("ignore", dpgate.RosterWarning)  # the made-up roster's size may be public
        owner.apply_policy(HERE / "policy.toml")
    return path


def main() -> None:
    db = build(Path(tempfile.mkdtemp()) / "company.duckdb")
    with dpgate.connect(str(db), analyst="alice") as con:
        cur = con.cursor()
        for title, sql in QUERIES.items():
            cur.execute(sql)
            print(f"-- {title}")
            names = [d[0] for d in cur.description]
            for row, iv in zip(cur.fetchall()[:12], cur.release.intervals):
                cells = []
                for name, value in zip(names, row):
                    shown = f"{value:.4g}" if isinstance(value, float) else str(value)
                    if name in iv and iv[name][0] is not None:
                        lo, hi = iv[name]
                        shown += f" [{lo:.4g}, {hi:.4g}]" if isinstance(lo, float) else f" [{lo}, {hi}]"
                    cells.append(f"{name}={shown}")
                print("   " + ", ".join(cells))
            for message in cur.messages:
                print(f"   # {message}")
        print(f"alice has ε {cur.release.epsilon_remaining:g} left")


if __name__ == "__main__":
    main()
