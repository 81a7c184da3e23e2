"""Benchmark: DP top-10 (every method) against raw DuckDB's non-private top-10 on the same data;
with ``--utility``, every method's F1 over a grid of data shapes, k and ε.

Not part of the test suite (timings are reported, not asserted). Run:

    python tests/benchmarks/bench_topk.py [--rows 1000000] [--repeat 7] [--epsilon 1]
    python tests/benchmarks/bench_topk.py --utility [--runs 30] [--seed 1] [--quick]

The utility table (``utility``): F1 against the true top-k (the paper's only utility measure),
mean ± standard error over ``--runs`` releases with fixed seeds, for ε ∈ {0.1, 0.5, 1, 2},
k ∈ {10, 50}, on the supermarket baskets and on generated sets (10,000 records; Zipf item
popularity with exponent 0.5, 1 or 1.5 over 100, 1,000 or 10,000 items; geometric record
lengths of mean 4, 16 or 48 capped at ``max_rows`` = 8 × mean). ``*`` marks the methods within
2 standard errors of the best; ``D`` the one the default rule picks from public facts only.
``em`` is left out: its output law is ``oneshot``'s.

Data: a DuckDB file with ``--rows`` distinct (subject, item) rows, 1,000 items with a skewed
(power-law-like) popularity, and about 100,000 subjects whose record lengths are skewed too.

Each method is timed end to end: its DuckDB query plus selection and noise, fresh OS
randomness per release. The baseline is raw DuckDB's
``SELECT item, count(*) FROM pairs GROUP BY item ORDER BY 2 DESC LIMIT 10``.
The pairs query is ``SELECT uid AS __unit, item AS __item FROM pairs``, because the table is
distinct by construction; the gateway may skip DISTINCT when (unit, item) is declared unique.
A line with ``SELECT DISTINCT`` shows the cost when it cannot. The report gives medians, the
ratio to raw DuckDB (target: within 3x) and the split between query and mechanism.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import duckdb
import numpy as np
from timing import timed

from dpgate import noise
from dpgate.mechanisms import topk

N_ITEMS = 1000
K = 10
PAIRS = "SELECT uid AS __unit, item AS __item FROM pairs"
PAIRS_DISTINCT = "SELECT DISTINCT uid AS __unit, item AS __item FROM pairs"
RAW = "SELECT item, count(*) FROM pairs GROUP BY item ORDER BY 2 DESC LIMIT 10"


def build(path: Path, rows: int) -> None:
    con = duckdb.connect(str(path))
    raw = int(rows * 1.15)
    con.execute(
        f"""CREATE TABLE pairs AS
        WITH r AS (SELECT i FROM range({raw}) t(i)),
             z AS (SELECT CAST(floor(100000 * pow(hash(2 * i) / 18446744073709551616.0, 1.3)) AS INTEGER) AS uid,
                          CAST(floor({N_ITEMS} * pow(hash(2 * i + 1) / 18446744073709551616.0, 2.5)) AS INTEGER) AS item
                   FROM r)
        SELECT DISTINCT uid, item FROM z LIMIT {rows}"""
    )
    con.execute("CHECKPOINT")
    con.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--utility", action="store_true", help="print the F1 comparison table instead of timings")
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--quick", action="store_true", help="utility on a third of the generated shapes")
    args = ap.parse_args()
    if args.utility:
        utility(args.runs, args.seed, args.quick)
        return
    path = Path(tempfile.mkdtemp()) / "bench_topk.duckdb"
    build(path, args.rows)
    con = duckdb.connect(str(path), read_only=True)
    rows, items, subjects, longest = con.execute(
        "SELECT count(*), count(DISTINCT item), count(DISTINCT uid), "
        "(SELECT max(n) FROM (SELECT count(*) AS n FROM pairs GROUP BY uid)) FROM pairs"
    ).fetchone()
    print(f"{rows:,} rows, {items} items, {subjects:,} subjects (longest record {longest}); "
          f"top-{K}, ε={args.epsilon}, median of {args.repeat}")  # fmt: skip

    raw = timed(lambda: con.execute(RAW).fetchall(), args.repeat)
    print(f"\n{'raw DuckDB GROUP BY item ... LIMIT 10':44s} {1000 * raw:8.1f} ms")
    print(f"{'method':44s} {'total':>8s}    {'x raw':>6s}   {'query':>7s} {'mechanism':>9s}")

    def release(method: str, pairs: str = PAIRS) -> topk.TopKRelease:
        return topk.top_k(con, pairs, None, N_ITEMS, K, args.epsilon, method, rng=noise.fresh().rng)

    for method in topk.METHODS:
        total = timed(lambda: release(method), args.repeat)
        lengths = method in topk._LENGTH_METHODS
        query = timed(lambda: topk._stats_from_sql(con, PAIRS, None, N_ITEMS, lengths), args.repeat)
        stats = topk._stats_from_sql(con, PAIRS, None, N_ITEMS, lengths)
        mech = timed(lambda: topk._select(stats, K, args.epsilon, method, noise.fresh().rng), args.repeat)
        label = method + (" (default here)" if method == topk.default_method(K, args.epsilon, N_ITEMS) else "")
        print(f"{label:44s} {1000 * total:8.1f} ms {total / raw:6.1f}x   {1000 * query:6.1f}  {1000 * mech:8.1f}")
    total = timed(lambda: release(topk.DEFAULT_METHOD, PAIRS_DISTINCT), args.repeat)
    print(f"{topk.DEFAULT_METHOD + ' with SELECT DISTINCT pairs':44s} {1000 * total:8.1f} ms {total / raw:6.1f}x")
    con.close()
    gateway(path, raw, args)


def gateway(path: Path, raw: float, args) -> None:
    """The same top-10 through SQL: parse, plan, ledger debit, pairs query, selection, counts."""
    import dpgate
    from dpgate.catalog.owner import Owner

    raw_con = duckdb.connect(str(path))
    # The same rows with PRIMARY KEY (uid, item): a schema fact that lets dpgate skip DISTINCT.
    raw_con.execute("CREATE TABLE pairs_pk (uid INTEGER, item INTEGER, PRIMARY KEY (uid, item))")
    raw_con.execute("INSERT INTO pairs_pk SELECT * FROM pairs")
    raw_con.close()
    with Owner(path) as owner:
        for table in ("pairs", "pairs_pk"):
            owner.protect(table, unit="uid", max_rows=N_ITEMS, max_groups=N_ITEMS, epsilon=1e9,
                          bounds={"item": (0, N_ITEMS - 1)}, subjects="people")  # fmt: skip
        owner.add_analyst("bench", epsilon=1e9, delta=1e-3, epsilon_per_query=1e6)
    print(f"\n{'through dpgate SQL (ledger debit included)':52s} {'total':>8s}    {'x raw':>6s}")
    with dpgate.connect(str(path), analyst="bench") as con:
        cur = con.cursor()
        for table in ("pairs", "pairs_pk"):
            for label, sql, method in (
                ("items only, oneshot", f"item FROM {table} GROUP BY item ORDER BY COUNT(*) DESC LIMIT {K}", "oneshot"),
                ("items and counts, oneshot", f"item, COUNT(*) AS n FROM {table} GROUP BY item ORDER BY n DESC LIMIT {K}", "oneshot"),
                ("items and counts, tps_pfm", f"item, COUNT(*) AS n FROM {table} GROUP BY item ORDER BY n DESC LIMIT {K}", "tps_pfm"),
            ):  # fmt: skip
                full = f"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = {args.epsilon}, topk_method = '{method}', fresh = true) {sql}"
                total = timed(lambda: cur.execute(full).fetchall(), args.repeat)
                print(f"{table + ': ' + label:52s} {1000 * total:8.1f} ms {total / raw:6.1f}x")
        plan = timed(lambda: con.gateway.cost(full), args.repeat)
        print(f"{'planning alone (parse, classify, plan)':52s} {1000 * plan:8.1f} ms")


# -- utility ------------------------------------------------------------------------------------
UTILITY_METHODS = ("oneshot", "tps_pfm", "tps_em", "laplace")
UTILITY_EPSILONS = (0.1, 0.5, 1.0, 2.0)
UTILITY_KS = (10, 50)


def zipf_records(n: int, d: int, s: float, mean_len: int, max_rows: int, seed: int) -> topk._Stats:
    """``n`` records: geometric lengths (mean ``mean_len``, capped at ``max_rows``), items drawn
    with Zipf(``s``) popularity over ``d`` shuffled ids, deduplicated within a record."""
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, d + 1) ** s
    lengths = np.minimum(rng.geometric(1 / mean_len, size=n), max_rows)
    rec = np.repeat(np.arange(n), lengths)
    items = rng.permutation(d)[rng.choice(d, size=rec.size, p=p / p.sum())]
    key = np.unique(rec * d + items)
    records = np.split(key % d, np.cumsum(np.bincount(key // d, minlength=n))[:-1])
    return topk._stats_from_records(records, d)


def baskets_records() -> tuple[topk._Stats, int]:
    """The shipped supermarket baskets (122 items as in ``examples/topk_baskets.py``) and the
    longest basket, standing in for the owner's ``max_rows``."""
    from dpgate.resources import data_dir

    con = duckdb.connect()
    path = data_dir() / "supermarket_baskets.parquet"
    con.execute("CREATE TABLE p AS SELECT DISTINCT basket_id AS u, dense_rank() OVER (ORDER BY item) - 1 AS it "
                "FROM read_parquet($path)", {"path": str(path)})  # fmt: skip
    stats = topk._stats_from_sql(con, "SELECT u AS __unit, it AS __item FROM p", None, 122, True)
    longest = con.execute("SELECT max(n) FROM (SELECT count(*) AS n FROM p GROUP BY u)").fetchone()[0]
    return stats, int(longest)


def utility_shapes(quick: bool):
    """(label, statistics, universe size, max_rows) of every data shape in the table."""
    stats, longest = baskets_records()
    yield "baskets", stats, 122, longest
    for i, (d, s, mean_len) in enumerate(
        (d, s, m) for d in (100, 1000, 10_000) for s in (0.5, 1.0, 1.5) for m in (4, 16, 48)
    ):
        if quick and i % 3 != 1:
            continue
        yield f"zipf d={d} s={s} len={mean_len}", zipf_records(10_000, d, s, mean_len, 8 * mean_len, 100 + i), d, 8 * mean_len


def _f1_runs(stats: topk._Stats, k: int, epsilon: float, method: str, runs: int, seed: tuple) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.array([topk.f1_score(topk._select(stats, k, epsilon, method, rng)[0].items, stats.counts, k)
                     for _ in range(runs)])  # fmt: skip


def utility(runs: int, seed: int, quick: bool) -> None:
    choose = getattr(topk, "default_method", lambda k, epsilon, n_items, max_rows: topk.DEFAULT_METHOD)
    print(f"F1 against the true top-k, mean ± s.e. of {runs} runs (seed {seed}); * within 2 s.e. of the best, "
          f"D the default's pick")  # fmt: skip
    head = f"{'shape':32s} {'k':>3s} {'ε':>4s}  " + "  ".join(f"{m:>15s}" for m in UTILITY_METHODS)
    print(head)
    print("-" * len(head))
    regret, worse, wins, cells = [], 0, {m: 0 for m in UTILITY_METHODS}, 0
    for si, (label, stats, d, max_rows) in enumerate(utility_shapes(quick)):
        for k in UTILITY_KS:
            for epsilon in UTILITY_EPSILONS:
                f = {m: _f1_runs(stats, k, epsilon, m, runs, (seed, si, k, int(epsilon * 10), mi))
                     for mi, m in enumerate(UTILITY_METHODS)}  # fmt: skip
                mean = {m: v.mean() for m, v in f.items()}
                se = {m: v.std(ddof=1) / np.sqrt(runs) for m, v in f.items()}
                best = max(mean, key=mean.get)
                pick = choose(k, epsilon, d, max_rows)
                close = {m for m in mean if mean[best] - mean[m] <= 2 * np.hypot(se[best], se[m])}
                cells += 1
                for m in close:
                    wins[m] += 1
                regret.append(mean[best] - mean[pick])
                worse += pick not in close
                row = "  ".join(f"{mean[m]:.3f}±{se[m]:.3f}{'*' if m in close else ' '}{'D' if m == pick else ' '}"
                                for m in UTILITY_METHODS)  # fmt: skip
                print(f"{label:32s} {k:>3d} {epsilon:>4g}  {row}", flush=True)
    print(f"\nwithin 2 s.e. of the best, of {cells} cells: " + ", ".join(f"{m} {n}" for m, n in wins.items()))
    print(f"default rule: mean F1 below the best {np.mean(regret):.4f} (max {np.max(regret):.3f}); "
          f"significantly below it in {worse} of {cells} cells")  # fmt: skip


if __name__ == "__main__":
    main()
