"""Benchmark: dpgate serve under 32 concurrent psycopg clients, beside the embedded connection.

Not part of the test suite (timings are reported, not asserted). Run:

    python tests/benchmarks/bench_server.py [--rows 100000] [--clients 32] [--queries 100]

Data: as ``bench_gateway.py`` (subjects of 10 rows, a 20-value category). Every client runs the
same DP ``GROUP BY cat20, COUNT(*)`` at ε = 0.001 over its own connection; the analyst's quota
allows them all. Reports p50 / p99 latency and throughput for the server, the same statement
through ``dpgate.connect`` in one thread, and raw DuckDB's GROUP BY.

``--hostile`` instead measures ``dpgate serve`` (a child process, default settings) against
hostile clients on loopback: wrong passwords for one name, sprayed names, idle pre-login sockets,
a guesser rotating 127.x.y.z source addresses, clients that ask for large public results and do
not read them, and how long an endless public statement runs. Each line reports what an honest
client got meanwhile (its login's outcome and time) or what the attack obtained.
"""

from __future__ import annotations

import argparse
import json
import os
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
from pgserver import OWNER_PASSWORD, PASSWORD, ProcessServer, ThreadServer  # noqa: E402
import rawclient  # noqa: E402

DP = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.001, fresh = true) cat20, COUNT(*) AS n FROM events GROUP BY cat20"
RAW = "SELECT cat20, COUNT(*) AS n FROM events GROUP BY cat20"


def report(name: str, lat: list[float], wall: float) -> None:
    a = np.array(lat) * 1000
    print(f"| {name} | {len(a)} | {np.percentile(a, 50):.1f} | {np.percentile(a, 99):.1f} | {len(a) / wall:.0f} |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--hostile", action="store_true", help="hostile clients instead of the latency benchmark")
    args = ap.parse_args()
    if args.hostile:
        hostile()
        return
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


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _honest(port: int, user: str = "alice", password: str = PASSWORD) -> str:
    verdict, seconds, _ = rawclient.login(port, user, password, timeout=90)
    return f"{verdict} in {seconds:.2f} s"


def _guess(port: int, threads: int, seconds: float, alice_at: float | None) -> dict[str, object]:
    """Guess alice's password from rotating 127.x.y.z addresses; answers by kind (and alice's own login
    at ``alice_at`` seconds, from this process)."""
    answered: dict[str, object] = {}
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def guesser(k: int) -> None:
        n = 0
        while time.monotonic() < stop:
            source = f"127.{k}.{n % 250}.{1 + n // 250 % 250}"
            verdict, _, _ = rawclient.login(port, "alice", f"guess {k} {n}", source=source, timeout=90)
            n += 1
            with lock:
                kind = verdict.split(" [")[0][:60]
                answered[kind] = answered.get(kind, 0) + 1

    pool = [threading.Thread(target=guesser, args=(k,)) for k in range(1, threads + 1)]
    for t in pool:
        t.start()
    if alice_at is not None:
        time.sleep(alice_at)
        answered["alice"] = _honest(port)
        answered["bob"] = _honest(port, "bob")
    for t in pool:
        t.join()
    return answered


def hostile(only_logins: bool = False) -> None:
    """Attacks on a default ``dpgate serve`` (each bounded in time), with what honest clients got."""
    path = Path(tempfile.mkdtemp()) / "hostile.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE t AS SELECT i AS uid, i % 5 AS g FROM range(1000) r(i)")
    con.close()
    with Owner(path) as owner:
        owner.protect("t", unit="uid", epsilon=100.0, public_roster=True, domains={"g": [0, 1, 2, 3, 4]})
        for name in ("alice", "bob"):
            owner.add_analyst(name, epsilon=10.0)
            owner.set_login(name, password=PASSWORD)
        owner.set_login("boss", password=OWNER_PASSWORD, owner=True)

    def fresh() -> ProcessServer:
        return ProcessServer(path)

    # 1. five wrong passwords for alice from 127.0.0.1, then alice's right one
    server = fresh()
    for _ in range(5):
        rawclient.login(server.port, "alice", "wrong password")
    print(f"1a. after 5 wrong passwords for alice: alice's right password: {_honest(server.port)}")
    server.stop()

    # 1b. 50 sprayed names (from 127.0.0.1, eight at a time), then the owner and bob
    server = fresh()
    verdicts: list[str] = []

    def spray(k: int) -> None:
        for i in range(k, 50, 8):
            verdicts.append(rawclient.login(server.port, f"user{i}", "guess", timeout=60)[0])

    threads = [threading.Thread(target=spray, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(f"1b. after 50 sprayed names ({verdicts.count('failed')} answered wrong): owner "
          f"{_honest(server.port, 'boss', OWNER_PASSWORD)}; bob {_honest(server.port, 'bob')}")  # fmt: skip
    server.stop()

    # 1c. idle pre-login sockets: 32 from 127.0.0.1, then 128 from 127.0.0.2..129
    server = fresh()
    idle = [rawclient.connect(server.port) for _ in range(32)]
    time.sleep(0.3)
    print(f"1c. 32 idle sockets from 127.0.0.1: alice {_honest(server.port)}")
    idle += [rawclient.connect(server.port, f"127.0.0.{2 + i}") for i in range(128)]
    time.sleep(0.3)
    print(f"    +128 idle sockets from 127.0.0.2-129: alice {_honest(server.port)}")
    for s in idle:
        s.close()
    server.stop()

    # 1d. a guesser on alice rotating source addresses: 64 threads for 10 s, as the same local user as
    # alice's client, then (when run as root) as another local user
    for other in (False, True):
        if other and os.getuid() != 0:
            print("1d. (another local user: run as root to measure)")
            continue
        server = fresh()
        read, write = os.pipe()
        pid = os.fork() if other else 0
        if pid == 0:  # the guesser (a child process of uid 65534 when other)
            if other:
                os.setuid(65534)
            started = time.monotonic()
            answered = _guess(server.port, 64, 10.0, alice_at=None if other else 5.0)
            answered["seconds"] = time.monotonic() - started  # the last guesses end after their waits
            os.write(write, json.dumps(answered).encode())
            if other:
                os._exit(0)
        during = ""
        if other:
            time.sleep(5)
            during = f"{_honest(server.port)}; bob {_honest(server.port, 'bob')}"
            os.waitpid(pid, 0)
        os.close(write)
        answered = json.loads(os.read(read, 1 << 20))
        os.close(read)
        if "alice" in answered:
            during = f"{answered.pop('alice')}; bob {answered.pop('bob')}"
        seconds = answered.pop("seconds")
        wrong = answered.pop("failed", 0)
        who = "another local user" if other else "alice's own local user"
        print(f"1d. rotating guesser on alice, 64 threads for 10 s, as {who}: {wrong} wrong passwords tested in "
              f"{seconds:.0f} s ({wrong / seconds:.2f}/s), other answers {answered}; "
              f"alice meanwhile: {during}")  # fmt: skip
        server.stop()

    if only_logins:
        return

    # 2a. three clients ask for 10M rows of two BIGINTs and never read
    server = fresh()
    before = _rss_mb(server.proc.pid)
    socks = []
    for _ in range(3):
        verdict, _, s = rawclient.login(server.port, "alice", PASSWORD, keep=True)
        rawclient.query(s, "SELECT range AS a, range AS b FROM range(10000000)")
        socks.append(s)
    peak = before
    for _ in range(40):
        time.sleep(0.5)
        peak = max(peak, _rss_mb(server.proc.pid))
    print(f"2a. 3 non-reading clients of 10M-row results: server RSS {before:.0f} MB -> {peak:.0f} MB; "
          f"alice meanwhile: {_honest(server.port)}")  # fmt: skip
    for s in socks:
        s.close()
    server.stop()

    # 2b. an endless public statement: how long it runs (bounded here at 90 s)
    server = fresh()
    _, _, s = rawclient.login(server.port, "alice", PASSWORD, keep=True)
    start = time.monotonic()
    rawclient.query(s, "SELECT count(*) FROM range(1000000000000)")
    s.settimeout(90)
    try:
        rows, err = rawclient.read_until_ready(s)
        print(f"2b. SELECT count(*) FROM range(1e12): ended after {time.monotonic() - start:.0f} s ({err})")
    except (TimeoutError, OSError):
        print("2b. SELECT count(*) FROM range(1e12): still running after 90 s")
    s.close()
    server.stop()


if __name__ == "__main__":
    main()
