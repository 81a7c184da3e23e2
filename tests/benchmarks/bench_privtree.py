"""Benchmark: a PrivTree synopsis of the 170,391 demo places, and range counts answered from it.

Not part of the test suite (timings are reported, not asserted). Run:

    python tests/benchmarks/bench_privtree.py [--queries 200]

Reports the synopsis build through SQL (CREATE SYNTHETIC TABLE ... USING privtree, ε = 1) and the
median time of a range count answered from it (OPTIONS (from_synopsis = ...)) beside raw DuckDB's
``COUNT(*) ... WHERE lon BETWEEN ... AND lat BETWEEN ...`` on the same table, same run. The
accuracy of those counts against grids is measured by ``examples/privtree_cities.py``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import duckdb
import numpy as np

import dpgate
from dpgate.interfaces import demo


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--queries", type=int, default=200)
    args = ap.parse_args()
    path = demo.build(Path(tempfile.mkdtemp()) / "demo.duckdb")
    rng = np.random.default_rng(1)
    boxes = []
    for _ in range(args.queries):
        x0, y0 = rng.uniform(-180, 150), rng.uniform(-90, 60)
        boxes.append((x0, x0 + rng.uniform(1, 30), y0, y0 + rng.uniform(1, 30)))
    with dpgate.connect(str(path), analyst="demo") as con:
        t0 = time.perf_counter()
        con.execute("CREATE SYNTHETIC TABLE cities_tree FROM cities USING privtree WITH (epsilon = 1, columns = 'lon, lat')")
        build = time.perf_counter() - t0
        nodes, leaves = con.execute("SELECT count(*), count(*) FILTER (is_leaf) FROM cities_tree").fetchone()
        syn = []
        for x0, x1, y0, y1 in boxes:
            t0 = time.perf_counter()
            con.execute(f"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (from_synopsis = 'cities_tree') COUNT(*) FROM cities "
                        f"WHERE lon BETWEEN {x0} AND {x1} AND lat BETWEEN {y0} AND {y1}").fetchall()  # fmt: skip
            syn.append(time.perf_counter() - t0)
    raw_con = duckdb.connect(str(path), read_only=True)
    raw = []
    for x0, x1, y0, y1 in boxes:
        t0 = time.perf_counter()
        raw_con.execute(f"SELECT count(*) FROM cities WHERE lon BETWEEN {x0} AND {x1} AND lat BETWEEN {y0} AND {y1}").fetchall()
        raw.append(time.perf_counter() - t0)
    print(f"| synopsis build (170,391 places, ε = 1) | {build * 1000:.0f} ms | {nodes:,} nodes, {leaves:,} leaves |")
    s, r = statistics.median(syn), statistics.median(raw)
    print(f"| range count from the synopsis (median of {args.queries}) | {s * 1000:.2f} ms | raw DuckDB {r * 1000:.2f} ms, "
          f"ratio {s / r:.1f}x |")


if __name__ == "__main__":
    main()
