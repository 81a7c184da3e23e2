"""Benchmark: ladder quantities on the WormNet gene network, beside networkx's triangle count.

Not part of the test suite (timings are reported, not asserted). Run:

    python tests/benchmarks/bench_ladder.py [--repeat 5]

For triangles and 3-stars it times ``ladder_function``: canonicalising the edges, the exact
count and every ladder quantity (``I_0 .. I_{M-1}``, ``M``, the width statistic); the target
is under 10 s each on 2 cores. Beside it: the exact count alone, one release with its DP
interval, and networkx 3.6.1 counting triangles only (``sum(nx.triangles(G).values()) // 3``
on a prebuilt ``nx.Graph``; building the graph is reported separately).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import networkx as nx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))

from ladder_utility import load_gene_network  # noqa: E402

from dpgate.mechanisms import graphs  # noqa: E402
from dpgate.mechanisms.ladder import ladder_function, release_with_interval  # noqa: E402

TARGET_SECONDS = 10.0


def timed(fn, repeat: int) -> tuple[float, float, object]:
    """(first call, median of ``repeat`` further calls, result)."""
    t = time.perf_counter()
    result = fn()
    first = time.perf_counter() - t
    samples = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t)
    return first, statistics.median(samples), result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()

    t = time.perf_counter()
    edges, n = load_gene_network()
    load = time.perf_counter() - t
    print(f"WormNet v3: {n:,} nodes, {len(edges):,} edges (loaded in {load:.2f} s); {os.cpu_count()} CPUs; "
          f"median of {args.repeat} runs after a first call")  # fmt: skip
    rows = []
    for query, k, label in [("triangle", None, "triangles"), ("kstar", 3, "3-stars")]:
        first, sec, lf = timed(lambda: ladder_function(edges, n, query, k), args.repeat)
        _, count_sec, _ = timed(lambda: graphs.subgraph_count(edges, n, query, k), args.repeat)
        rng = np.random.default_rng(0)
        _, release_sec, _ = timed(lambda: release_with_interval(lf, 0.5, rng=rng), args.repeat)
        verdict = "ok" if max(first, sec) < TARGET_SECONDS else "OVER TARGET"
        note = f"first call {first:.3f} s; f = {lf.value:,}, M = {lf.M:,} ({verdict})"
        rows.append((f"dpgate {label}: count + all ladder quantities", sec, note))
        rows.append((f"dpgate {label}: exact count only", count_sec, ""))
        rows.append((f"dpgate {label}: one release + DP interval (ε = 0.5)", release_sec, ""))

    t = time.perf_counter()
    graph = nx.Graph()
    graph.add_nodes_from(range(n))
    graph.add_edges_from(edges.tolist())
    build = time.perf_counter() - t
    nx_first, nx_sec, nx_count = timed(lambda: sum(nx.triangles(graph).values()) // 3, args.repeat)
    rows.append(("networkx: build nx.Graph", build, ""))
    rows.append(("networkx: count triangles only", nx_sec, f"first call {nx_first:.3f} s; f = {nx_count:,}"))

    rows += _through_sql(args.repeat)
    width = max(len(r[0]) for r in rows)
    for name, sec, note in rows:
        print(f"{name:<{width}}  {sec:8.3f} s  {note}")


def _through_sql(repeat: int) -> list[tuple[str, float, str]]:
    """The same counts as SQL on the demo database: plan, debit, edge query, ladder, release."""
    import tempfile

    import dpgate
    from dpgate.interfaces import demo

    path = demo.build(Path(tempfile.mkdtemp()) / "demo.duckdb")
    out = []
    with dpgate.connect(str(path), analyst="demo") as con:
        cur = con.cursor()
        for label, call in (("triangles", "TRIANGLE_COUNT(src, dst)"), ("3-stars", "KSTAR_COUNT(src, dst, 3)")):
            sql = f"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.01) {call} FROM wormnet"
            _, sec, _ = timed(lambda: cur.execute(sql).fetchall(), repeat)
            out.append((f"dpgate SQL {label} (ledger debit included)", sec, ""))
    return out


if __name__ == "__main__":
    main()
