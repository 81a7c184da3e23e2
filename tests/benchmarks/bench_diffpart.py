"""Benchmark: CREATE SYNTHETIC TABLE ... USING diffpart through SQL, end to end, as records grow.

Not part of the test suite (timings are reported, not asserted). Run:

    python tests/benchmarks/bench_diffpart.py [--records 100000,1000000,3000000]

Data: the MSNBC-shaped generator of ``examples/setvalued_release.py`` (17 items, ~1.7 per record)
loaded as a protected (user, category) table, and the demo's supermarket baskets. Reports the
release time (read, mechanism, write) beside raw DuckDB's ``GROUP BY user`` pass over the same
rows, and their ratio.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import duckdb
import numpy as np

import dpgate
from dpgate.catalog.owner import Owner
from dpgate.interfaces import demo

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from setvalued_release import msnbc_like  # noqa: E402

ITEMS = [f"c{i:02d}" for i in range(17)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", default="100000,1000000,3000000")
    args = ap.parse_args()
    print("| data | records | rows | raw GROUP BY ms | release ms | ratio | itemsets |\n|---|---|---|---|---|---|---|")
    for n in [int(x) for x in args.records.split(",")]:
        m = msnbc_like(n, np.random.default_rng(1))
        r, i = np.nonzero(m)
        path = Path(tempfile.mkdtemp()) / "bench.duckdb"
        con = duckdb.connect(str(path))
        con.execute("CREATE TABLE visits AS SELECT unnest($1) AS uid, unnest($2) AS category",
                    [r.astype(np.int64).tolist(), [ITEMS[k] for k in i.tolist()]])  # fmt: skip
        t0 = time.perf_counter()
        con.execute("SELECT uid, list(category) FROM visits GROUP BY uid").fetchall()
        raw = time.perf_counter() - t0
        con.close()
        with Owner(path) as owner:
            owner.protect("visits", unit="uid", max_rows=17, epsilon=1e6, public_roster=True, domains={"category": ITEMS})
            owner.add_analyst("bench", epsilon=1e6)
        with dpgate.connect(str(path), analyst="bench") as dp:
            t0 = time.perf_counter()
            cur = dp.execute("CREATE SYNTHETIC TABLE v_dp FROM visits USING diffpart WITH (epsilon = 1)")
            took = time.perf_counter() - t0
            itemsets = dp.execute("SELECT count(*) FROM v_dp_itemsets").fetchone()[0]
        print(f"| MSNBC-shaped | {n:,} | {len(r):,} | {raw * 1000:.0f} | {took * 1000:.0f} | {took / raw:.1f}x | {itemsets:,} |")
        del cur
    path = demo.build(Path(tempfile.mkdtemp()) / "demo.duckdb")
    with dpgate.connect(str(path), analyst="demo") as dp:
        t0 = time.perf_counter()
        dp.execute("CREATE SYNTHETIC TABLE b_dp FROM baskets USING diffpart WITH (epsilon = 1)")
        took = time.perf_counter() - t0
        itemsets = dp.execute("SELECT count(*) FROM b_dp_itemsets").fetchone()[0]
    with Owner(path, create=False, read_only=True) as owner:
        rows, baskets = owner.con.execute("SELECT count(*), count(DISTINCT basket_id) FROM baskets").fetchone()
    print(f"| supermarket baskets | {baskets:,} | {rows:,} | | {took * 1000:.0f} | | {itemsets:,} |")


if __name__ == "__main__":
    main()
