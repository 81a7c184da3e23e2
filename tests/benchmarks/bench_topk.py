"""Benchmark: DP top-10 (every method) against raw DuckDB's non-private top-10 on the same data.

Not part of the test suite (timings are reported, not asserted). Run:

    python tests/benchmarks/bench_topk.py [--rows 1000000] [--repeat 7] [--epsilon 1]

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
    args = ap.parse_args()
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
        label = method + (" (default)" if method == topk.DEFAULT_METHOD else "")
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


if __name__ == "__main__":
    main()
