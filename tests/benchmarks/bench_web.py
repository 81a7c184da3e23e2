"""Benchmark: what the web front door adds to a statement, beside the embedded connection.

Not part of the test suite (timings are reported, not asserted). Run:

    python tests/benchmarks/bench_web.py

On a fresh demo database (an analyst with room for every run, remembered answers off), the
median over 30 runs of three statements through ``dpgate.connect`` in this process and through
``POST /api/query`` on ``dpgate web`` over loopback (one session): a DP count of 5 groups with
an AVG, a free ``EXPLAIN PRIVACY``, and a public statement of 42 rows.
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "web"))
import dpgate
from dpgate.interfaces import demo
from dpgate.catalog.owner import Owner
from webserver import ThreadWeb, add_logins

d = tempfile.mkdtemp()
path = d + "/demo.duckdb"
demo.build(path)
with Owner(path) as o:
    o.add_analyst("demo", epsilon=1e6, epsilon_per_query=10)
    o.set_answer_memory("off")
add_logins(path, ["demo"])
Q = {"DP count, 5 groups": "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.01) race, COUNT(*) AS n, AVG(age) AS a FROM adult GROUP BY race",
     "EXPLAIN PRIVACY (free)": "EXPLAIN PRIVACY SELECT COUNT(*) FROM adult",
     "public, 42 rows": "SELECT * FROM country_regions"}
N = 30
res = {}
with dpgate.connect(path, analyst="demo") as con:
    cur = con.cursor()
    for k, q in Q.items():
        cur.execute(q); cur.fetchall()
        ts = []
        for _ in range(N):
            t = time.perf_counter(); cur.execute(q); cur.fetchall(); ts.append(time.perf_counter() - t)
        res[k] = [statistics.median(ts)]
w = ThreadWeb(path)
c = w.client(); c.login("demo")
for k, q in Q.items():
    c.query(q)
    ts = []
    for _ in range(N):
        t = time.perf_counter(); s, b = c.query(q); ts.append(time.perf_counter() - t); assert s == 200, b
    res[k].append(statistics.median(ts))
w.stop()
print("| statement | dpgate.connect (ms) | POST /api/query (ms) | added (ms) |")
print("|---|---|---|---|")
for k, (a, b) in res.items():
    print(f"| {k} | {a*1000:.1f} | {b*1000:.1f} | {(b-a)*1000:.1f} |")
shutil.rmtree(d)
