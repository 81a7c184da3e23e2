"""Top-k frequent items on real supermarket baskets: every method's F1 against the true top-k.

Run:

    python examples/topk_baskets.py [--runs 10] [--seed 1]

Data: ``examples/data/supermarket_baskets.parquet``, one row per (basket, item), 4,627
baskets. A basket is one subject's record. Neighbouring databases add or remove one basket.

The item universe must be public. The original file declares 216 item attributes, but their
names are not in the parquet. So this example declares the 122 distinct items that occur in
the file as the universe, numbered in alphabetical order. Reading that list from the data is
what a real deployment must not do: there, the universe comes from the catalog, zero-frequency
items included.

For each k in {5, 10, 20} and ε in {0.1, 0.5, 1, 2}, every method runs ``--runs`` times. The
table shows the mean F1 against the true top-k, as in the paper's figures; a set that differs
from the true top-k only by tied items counts as correct. The paper's Fscore is
``2 P R / (P + R)``; with k released items it equals ``|hits| / k``.

Without ``--seed`` every run draws fresh OS randomness; with it, the table is reproducible
(and not private).
"""

from __future__ import annotations

import argparse
import statistics
import time

import duckdb
import numpy as np

from dpgate import noise
from dpgate.mechanisms.topk import DEFAULT_METHOD, METHODS, f1_score, top_k
from dpgate.resources import data_dir

KS = (5, 10, 20)
EPSILONS = (0.1, 0.5, 1.0, 2.0)
PAIRS = "SELECT DISTINCT b.basket_id AS __unit, i.idx AS __item FROM baskets b JOIN items i USING (item)"


def load() -> tuple[duckdb.DuckDBPyConnection, list[str]]:
    con = duckdb.connect()
    path = data_dir() / "supermarket_baskets.parquet"
    con.execute("CREATE TABLE baskets AS SELECT * FROM read_parquet($path)", {"path": str(path)})
    # The example's declared universe: the items of the file (see the module docstring).
    con.execute(
        "CREATE TABLE items AS SELECT item, CAST(row_number() OVER (ORDER BY item) - 1 AS INTEGER) AS idx "
        "FROM (SELECT DISTINCT item FROM baskets)"
    )
    names = [r[0] for r in con.execute("SELECT item FROM items ORDER BY idx").fetchall()]
    return con, names


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--seed", type=int, default=None, help="fixed seed (reproducible, not private)")
    args = ap.parse_args()
    rng = noise.fresh(args.seed).rng

    con, names = load()
    n_items = len(names)
    truth = np.zeros(n_items, dtype=np.int64)
    for idx, n in con.execute(f"SELECT __item, count(*) FROM ({PAIRS}) GROUP BY 1").fetchall():
        truth[idx] = n
    baskets = con.execute("SELECT count(DISTINCT basket_id) FROM baskets").fetchone()[0]
    print(f"{baskets} baskets, universe of {n_items} items (declared for this example: the items of the file)")
    top5 = np.argsort(-truth, kind="stable")[:5]
    print("true top 5: " + ", ".join(f"{names[i]} ({truth[i]})" for i in top5))
    print()
    print(f"F1 against the true top-k, mean of {args.runs} runs (default method: {DEFAULT_METHOD})")
    header = f"{'k':>3} {'ε':>5}  " + "  ".join(f"{m:>8}" for m in METHODS) + "   mean l (TPS)"
    print(header)
    print("-" * len(header))
    started = time.perf_counter()
    releases = 0
    for k in KS:
        for epsilon in EPSILONS:
            cells, lengths = [], []
            for method in METHODS:
                scores = []
                for _ in range(args.runs):
                    rel = top_k(con, PAIRS, None, n_items, k, epsilon, method, rng=rng)
                    scores.append(f1_score(rel.items, truth, k))
                    if method == "tps_pfm":
                        lengths.append(rel.truncation)
                    releases += 1
                cells.append(statistics.fmean(scores))
            row = "  ".join(f"{c:8.3f}" for c in cells)
            print(f"{k:>3} {epsilon:>5g}  {row}   {statistics.fmean(lengths):6.1f}")
    elapsed = time.perf_counter() - started
    print(f"\n{releases} releases in {elapsed:.1f} s ({1000 * elapsed / releases:.1f} ms each, query included)")
    rel = top_k(con, PAIRS, None, n_items, 5, 0.5, rng=rng)
    print(f"\none release, k=5, ε=0.5, {rel.method}: " + ", ".join(names[i] for i in rel.items))


if __name__ == "__main__":
    main()
