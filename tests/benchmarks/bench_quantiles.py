"""Benchmark: a DP median (and variance) per group beside raw DuckDB's quantile_cont, same data, same run.

Not part of the test suite (timings are reported, not asserted). Run:

    python tests/benchmarks/bench_quantiles.py [--rows 1000000] [--repeat 5]

Data: as ``bench_gateway.py`` (100,000 subjects of 10 rows, a 20-value category, an amount in
[0, 100]); ``max_rows = 10`` (nobody is sampled down). Reports medians of the timings, their ratio
to raw DuckDB, and how far each DP median's rank is from the true median's.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import duckdb
from bench_gateway import build
from timing import timed

import dpgate
from dpgate.catalog.owner import Owner


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    path = Path(tempfile.mkdtemp()) / "bench.duckdb"
    build(path, args.rows)
    with Owner(path) as owner:
        owner.protect("events", unit="uid", max_rows=10, max_groups=10, epsilon=1e9, public_roster=True,
                      domains={"cat20": [f"c{i:02d}" for i in range(20)]}, bounds={"amount": (0, 100)})  # fmt: skip
        owner.add_analyst("bench", epsilon=1e12, delta=1e-3)
    raw = duckdb.connect(str(path), read_only=True)
    queries = {
        "median": ("SELECT cat20, quantile_cont(amount, 0.5) FROM events GROUP BY cat20",
                   "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, fresh = true) cat20, MEDIAN(amount) FROM events GROUP BY cat20"),
        "variance": ("SELECT cat20, var_pop(amount) FROM events GROUP BY cat20",
                     "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, fresh = true) cat20, VAR_POP(amount) FROM events "
                     "GROUP BY cat20"),
    }  # fmt: skip
    truth = {k: v for k, v in raw.execute("SELECT cat20, list(amount ORDER BY amount) FROM events GROUP BY 1").fetchall()}
    raw_times = {name: timed(lambda s=sql: raw.execute(s).fetchall(), args.repeat) for name, (sql, _) in queries.items()}
    raw.close()
    con = dpgate.connect(str(path), analyst="bench")
    cur = con.cursor()
    print(f"{args.rows:,} rows, 20 groups, ε = 1")
    print(f"{'query':<10} {'raw DuckDB':>12} {'dpgate':>10} {'ratio':>7}")
    for name, (_, dp_sql) in queries.items():
        t = timed(lambda s=dp_sql: cur.execute(s).fetchall(), args.repeat)
        print(f"{name:<10} {raw_times[name] * 1000:>10.1f}ms {t * 1000:>8.1f}ms {t / raw_times[name]:>6.1f}x")
    cur.execute(queries["median"][1])
    errors = []
    for cat, value in cur.fetchall():
        x = truth[cat]
        below = sum(a < value for a in x)
        errors.append(abs(below - len(x) / 2) / len(x))
    print(f"median rank error: largest {max(errors):.2%} of the group's rows, mean {sum(errors) / len(errors):.2%}")
    print([m for m in cur.messages if "MEDIAN" in m][0])


if __name__ == "__main__":
    main()
