"""Benchmark: CREATE SYNTHETIC TABLE ... USING diffpart through SQL, end to end, both paths.

Not part of the test suite (timings are reported, not asserted). Run:

    python tests/benchmarks/bench_diffpart.py [--records 100000,1000000,3000000] [--epsilons 0.5,1,2]

Data: the MSNBC-shaped generator of ``examples/setvalued_release.py`` (17 items, ~1.7 per record)
loaded as a protected (user, category) table, the supermarket baskets, and the example's sparse
baskets (4,043 records of a median 8 of 104 items), each with budgets large enough for every run. For each it reports the path the
route took, the release time (read, mechanism, write) beside raw DuckDB's ``GROUP BY user`` pass
over the same rows, and, for the baskets, the relative error of the 50 largest item and pair
supports read back from ``name_supports`` with SQL, beside ``COUNT(DISTINCT unit) GROUP BY item``
at the same ε through the gateway.
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
from dpgate.resources import data_dir

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from setvalued_release import baskets, msnbc_like, sparse_baskets

ITEMS = [f"c{i:02d}" for i in range(17)]
TOP = 50


def _load(records: np.ndarray, items: list[str], max_rows: int) -> Path:
    r, i = np.nonzero(records)
    path = Path(tempfile.mkdtemp()) / "bench.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE visits AS SELECT unnest($1) AS uid, unnest($2) AS category",
                [r.astype(np.int64).tolist(), [items[k] for k in i.tolist()]])  # fmt: skip
    con.close()
    with Owner(path) as owner:
        owner.protect("visits", unit="uid", max_rows=max_rows, max_groups=max_rows, epsilon=1e6, public_roster=True,
                      domains={"category": items})  # fmt: skip
        owner.add_analyst("bench", epsilon=1e6, epsilon_per_query=1e6)
        owner.set_release_caps("bench", release_rows=1 << 40, releases=1 << 20, release_bytes=1 << 50)
    return path


def _top_errors(con, release: str, x: np.ndarray, names: list[str]) -> tuple[float, float, list[int], np.ndarray]:
    """Mean relative error of the 50 largest true item and pair supports, read from NAME_supports."""
    true_items = x.sum(axis=0).astype(float)
    true_pairs = x.T.astype(np.float64) @ x.astype(np.float64)
    got = {tuple(sorted(i)): s for i, s in con.execute(f"SELECT items, support FROM {release}_supports").fetchall()}
    top_i = list(np.argsort(-true_items, kind="stable")[:TOP])
    iu = np.triu_indices(len(names), 1)
    top_p = np.argsort(-true_pairs[iu], kind="stable")[:TOP]
    ei = np.mean([abs(got.get((names[k],), 0) - true_items[k]) / true_items[k] for k in top_i])
    ep = np.mean([abs(got.get(tuple(sorted((names[iu[0][t]], names[iu[1][t]]))), 0) - true_pairs[iu[0][t], iu[1][t]])
                  / true_pairs[iu[0][t], iu[1][t]] for t in top_p])  # fmt: skip
    return ei, ep, top_i, true_items


def _release(dp, sql: str) -> tuple[float, str, int]:
    t0 = time.perf_counter()
    cur = dp.execute(sql)
    took = time.perf_counter() - t0
    return took, cur.message


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", default="100000,1000000,3000000")
    ap.add_argument("--epsilons", default="0.5,1,2")
    args = ap.parse_args()
    epsilons = [float(e) for e in args.epsilons.split(",")]
    print("| data | records | rows | ε | path | raw GROUP BY ms | release ms | ratio |\n|---|---|---|---|---|---|---|---|")
    for n in [int(x) for x in args.records.split(",")]:
        path = _load(msnbc_like(n, np.random.default_rng(1)), ITEMS, 17)
        raw_con = duckdb.connect(str(path), read_only=True)
        t0 = time.perf_counter()
        rows = len(raw_con.execute("SELECT uid, list(category) FROM visits GROUP BY uid").fetchall())
        raw = time.perf_counter() - t0
        nrows = raw_con.execute("SELECT count(*) FROM visits").fetchone()[0]
        raw_con.close()
        with dpgate.connect(str(path), analyst="bench") as dp:
            for k, eps in enumerate(epsilons):
                took, msg = _release(dp, f"CREATE SYNTHETIC TABLE v{k} FROM visits USING diffpart WITH (epsilon = {eps})")
                path_taken = "partition" if "(DiffPart)" in msg else "marginals"
                print(f"| MSNBC-shaped | {rows:,} | {nrows:,} | {eps:g} | {path_taken} | {raw * 1000:.0f} | "
                      f"{took * 1000:.0f} | {took / raw:.1f}x |")  # fmt: skip
    print("\n| data | ε | path | release ms | items (top 50) | pairs (top 50) | COUNT GROUP BY item (top 50) |\n"
          "|---|---|---|---|---|---|---|")  # fmt: skip
    names = [r[0] for r in duckdb.execute("SELECT DISTINCT item FROM read_parquet(?) ORDER BY item",
                                          [str(data_dir() / "supermarket_baskets.parquet")]).fetchall()]  # fmt: skip
    sparse_names = [f"i{k:03d}" for k in range(104)]
    for label, x, items, top in (("supermarket baskets", baskets(), names, 48),
                                 ("sparse baskets", sparse_baskets(rng=np.random.default_rng(8)), sparse_names, 40)):  # fmt: skip
        path = _load(x, items, top)
        with dpgate.connect(str(path), analyst="bench") as dp:
            for k, eps in enumerate(epsilons):
                for forced in ("", ", method = 'partition'"):
                    name = f"r{k}{'p' if forced else ''}"
                    took, msg = _release(dp, f"CREATE SYNTHETIC TABLE {name} FROM visits USING diffpart WITH "
                                             f"(epsilon = {eps}{forced})")  # fmt: skip
                    ei, ep, top_i, true_items = _top_errors(dp, name, x, items)
                    counted = dict(dp.execute(
                        f"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = {eps}) category, COUNT(DISTINCT uid) AS n "
                        "FROM visits GROUP BY category").fetchall())  # fmt: skip
                    ec = np.mean([abs(counted[items[j]] - true_items[j]) / true_items[j] for j in top_i])
                    path_taken = "partition" if "(DiffPart)" in msg else "marginals"
                    print(f"| {label} | {eps:g} | {path_taken} | {took * 1000:.0f} | {ei:.3f} | {ep:.3f} | {ec:.3f} |")


if __name__ == "__main__":
    main()
