"""Benchmark: dpgate's DP GROUP BY against raw DuckDB on the same data, in the same run.

Not part of the test suite (timings are reported, not asserted). Run:

    python tests/benchmarks/bench_gateway.py [--rows 1000000] [--repeat 7]

Data: 1,000,000 rows, 100,000 subjects with 10 rows each, a 20-value and a 200-value
categorical column (declared domains) and a numeric column (declared bounds).
``MEDIAN`` beside ``quantile_cont`` (no subject over its bound). Three policies: ``max_rows = 10`` (no subject exceeds the bound), ``max_rows = 5`` with the owner's
default settings (bounding samples every subject down; the default stored sample order makes the
sample a filter over a stored order of each subject's rows), and ``max_rows = 5`` with
``sample_order = "per_query"`` (a fresh hash-ranked sample per query: two window passes). Reports medians and ratios to raw DuckDB, the time
spent parsing, checking the catalog, classifying and planning, and the whole statement on a 1,000-row table
(the fixed work of a debited statement; a statement asked again reuses its plan, so also with a new
text each time), and a statement answered again from memory (free).
The DP statements ask for ``fresh = true``: a repeat would otherwise be answered from memory.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import duckdb
from timing import timed

import dpgate
from dpgate.frontend.classify import classify
from dpgate.frontend.dialect import parse_one
from dpgate.catalog.owner import Owner


def build(path: Path, rows: int) -> None:
    subjects = rows // 10
    con = duckdb.connect(str(path))
    con.execute(
        f"""CREATE TABLE events AS
        SELECT (i % {subjects})::INTEGER AS uid,
               'c' || lpad(CAST(hash(i, 1) % 20 AS VARCHAR), 2, '0') AS cat20,
               'k' || lpad(CAST(hash(i, 2) % 200 AS VARCHAR), 3, '0') AS cat200,
               (hash(i, 3) % 10000) / 100.0 AS amount
        FROM range({rows}) r(i)"""
    )
    con.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--only-stored", action="store_true", help="only the sampled regime with the default stored order")
    ap.add_argument("--skip-per-query-sampling", action="store_true",
                    help="leave out the per-query sampled regime (about 20 s a query at 50M rows)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp())
    path = tmp / "bench.duckdb"
    build(path, args.rows)
    domains = {"cat20": [f"c{i:02d}" for i in range(20)], "cat200": [f"k{i:03d}" for i in range(200)]}
    with Owner(path) as owner:
        owner.protect("events", unit="uid", max_rows=5, max_groups=10, epsilon=1e9, domains=domains,
                      bounds={"amount": (0, 100)})  # fmt: skip
        owner.add_analyst("bench", epsilon=1e12, delta=1e-3)

    raw = duckdb.connect(str(path), read_only=True)
    results = []
    for col in ("cat20", "cat200"):
        sql = f"SELECT {col}, count(*), avg(amount) FROM events GROUP BY {col}"
        t_raw = timed(lambda: raw.execute(sql).fetchall(), args.repeat)
        results.append((f"raw DuckDB GROUP BY {col}", t_raw, None))
    t_med_raw = timed(lambda: raw.execute("SELECT cat20, quantile_cont(amount, 0.5) FROM events GROUP BY cat20").fetchall(),
                      args.repeat)  # fmt: skip
    raw.close()

    regimes = [(10, "default"), (5, "default"), (5, "per_query")]
    if args.only_stored:
        regimes = [(5, "default")]
    elif args.skip_per_query_sampling:
        regimes = regimes[:2]
    for max_rows, order in regimes:
        with Owner(path) as owner:
            owner.protect("events", unit="uid", max_rows=max_rows, max_groups=10, epsilon=1e9, domains=domains,
                          bounds={"amount": (0, 100)}, sample_order=order)  # fmt: skip
        con = dpgate.connect(str(path), analyst="bench")
        cur = con.cursor()
        for col, t_raw in (("cat20", results[0][1]), ("cat200", results[1][1])):
            sql = f"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, fresh = true) {col}, COUNT(*), AVG(amount) FROM events GROUP BY {col}"
            t = timed(lambda: cur.execute(sql).fetchall(), args.repeat)
            label = "bounding samples every subject" if max_rows == 5 else "no subject exceeds max_rows"
            label += ", owner's defaults (stored sample order)" if order == "default" else ", per-query sample"
            results.append((f"dpgate DP GROUP BY {col} ({label})", t, t / t_raw))
        if max_rows == 10:
            med = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, fresh = true) cat20, MEDIAN(amount) FROM events GROUP BY cat20"
            t = timed(lambda: cur.execute(med).fetchall(), args.repeat)
            results.append(("raw DuckDB quantile_cont(amount, 0.5) GROUP BY cat20", t_med_raw, None))
            results.append(("dpgate DP MEDIAN(amount) GROUP BY cat20 (no subject exceeds max_rows)", t, t / t_med_raw))
        g = con.gateway
        plan_sql = ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) cat200, COUNT(*), AVG(amount) "
                    "FROM events GROUP BY cat200")  # fmt: skip

        def plan_only():
            cat = g.catalog()
            g.plan(classify(parse_one(plan_sql), cat), cat)

        t_plan = timed(plan_only, args.repeat * 5)
        results.append((f"parse + catalog check + classify + plan, max_rows={max_rows}, {order}", t_plan, None))
        con.close()

    # Fixed work: the same statement on a 1,000-row table, where the engine's scans cost almost nothing.
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE small AS SELECT * FROM events LIMIT 1000")
    con.close()
    with Owner(path) as owner:
        owner.protect("small", unit="uid", max_rows=10, max_groups=10, epsilon=1e9, domains=domains,
                      bounds={"amount": (0, 100)})  # fmt: skip
    con = dpgate.connect(str(path), analyst="bench")
    cur = con.cursor()
    sql = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, fresh = true) cat20, COUNT(*), AVG(amount) FROM small GROUP BY cat20"
    cur.execute(sql).fetchall()
    t_small = timed(lambda: cur.execute(sql).fetchall(), args.repeat * 5)
    results.append(("fixed work: the same DP statement on a 1,000-row table (parse to release, ledger debit)", t_small, None))
    # A new text each time (another literal in the WHERE): planned, probed and bind-checked anew.
    texts = iter(range(1, 10**9))
    t_new = timed(lambda: cur.execute(sql.replace("FROM small", f"FROM small WHERE amount < {next(texts) + 100}"))
                  .fetchall(), args.repeat * 5)  # fmt: skip
    results.append(("fixed work, a new statement text each time (planned anew, not from the session's plans)", t_new, None))
    remembered = sql.replace(", fresh = true", "")
    cur.execute(remembered).fetchall()  # released once; then given again, free
    t_hit = timed(lambda: cur.execute(remembered).fetchall(), args.repeat * 5)
    results.append(("the same statement answered again from memory (free), 1,000 rows", t_hit, None))
    big = remembered.replace("FROM small", "FROM events")
    cur.execute(big).fetchall()
    t_big = timed(lambda: cur.execute(big).fetchall(), args.repeat)
    results.append((f"answered again from memory (free), {args.rows:,} rows (no row is read)", t_big,
                    t_big / results[0][1]))  # fmt: skip
    con.close()

    width = max(len(r[0]) for r in results)
    print(f"{args.rows:,} rows, {args.rows // 10:,} subjects; median of {args.repeat} runs")
    for label, t, ratio in results:
        extra = f"  {ratio:5.2f}× raw" if ratio is not None else ""
        print(f"{label:<{width}}  {t * 1000:8.2f} ms{extra}")


if __name__ == "__main__":
    main()
