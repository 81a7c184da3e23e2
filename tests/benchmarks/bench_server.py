"""Benchmark: dpgate serve under 32 concurrent psycopg clients, beside the embedded connection.

Not part of the test suite (timings are reported, not asserted). Run:

    python tests/benchmarks/bench_server.py [--rows 100000] [--clients 32] [--queries 100]

Data: as ``bench_gateway.py`` (subjects of 10 rows, a 20-value category). Every client runs the
same DP ``GROUP BY cat20, COUNT(*)`` at ε = 0.001 over its own connection; the analyst's quota
allows them all. Reports p50 / p99 latency and throughput for the server, the same statement
through ``dpgate.connect`` in one thread, and raw DuckDB's GROUP BY.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path

import duckdb
import numpy as np
import psycopg
from bench_gateway import build

import dpgate
from dpgate.catalog.owner import Owner

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))
from pgserver import PASSWORD, ThreadServer  # noqa: E402

DP = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.001) cat20, COUNT(*) AS n FROM events GROUP BY cat20"
RAW = "SELECT cat20, COUNT(*) AS n FROM events GROUP BY cat20"


def report(name: str, lat: list[float], wall: float) -> None:
    a = np.array(lat) * 1000
    print(f"| {name} | {len(a)} | {np.percentile(a, 50):.1f} | {np.percentile(a, 99):.1f} | {len(a) / wall:.0f} |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--queries", type=int, default=100)
    args = ap.parse_args()
    path = Path(tempfile.mkdtemp()) / "bench.duckdb"
    build(path, args.rows)
    with Owner(path) as owner:
        owner.protect("events", unit="uid", max_rows=10, max_groups=10, epsilon=1e9, public_roster=True,
                      domains={"cat20": [f"c{i:02d}" for i in range(20)]})  # fmt: skip
        owner.add_analyst("bench", epsilon=1e12, delta=1e-3)
        owner.set_login("bench", password=PASSWORD)
    print(f"{args.rows:,} rows, {args.clients} clients x {args.queries} queries\n")
    print("| path | queries | p50 ms | p99 ms | queries/s |\n|---|---|---|---|---|")

    raw = duckdb.connect(str(path), read_only=True)
    lat = []
    t0 = time.perf_counter()
    for _ in range(args.queries):
        s = time.perf_counter()
        raw.execute(RAW).fetchall()
        lat.append(time.perf_counter() - s)
    report("raw DuckDB, one thread", lat, time.perf_counter() - t0)
    raw.close()

    with dpgate.connect(str(path), analyst="bench") as con:
        lat = []
        t0 = time.perf_counter()
        for _ in range(args.queries):
            s = time.perf_counter()
            con.execute(DP).fetchall()
            lat.append(time.perf_counter() - s)
        report("dpgate.connect, one thread", lat, time.perf_counter() - t0)

    server = ThreadServer(path)
    for clients in (1, args.clients):
        lat, lock = [], threading.Lock()

        def client():
            with psycopg.connect(server.url("bench"), autocommit=True) as pg:
                mine = []
                for _ in range(args.queries):
                    s = time.perf_counter()
                    pg.execute(DP).fetchall()
                    mine.append(time.perf_counter() - s)
            with lock:
                lat.extend(mine)

        threads = [threading.Thread(target=client) for _ in range(clients)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        report(f"dpgate serve, {clients} psycopg client(s)", lat, time.perf_counter() - t0)
    server.stop()


if __name__ == "__main__":
    main()
