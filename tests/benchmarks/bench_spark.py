"""Benchmark: dpgate on DuckDB and on Spark, each against its own engine's raw query, same data.

Not part of the test suite (timings are reported, not asserted). Run:

    python tests/benchmarks/bench_spark.py [--rows 1000000 10000000] [--repeat 3] [--master local[2]] [--only top MST]
        [--max-rows 10 2]

Data: one Parquet file per size, 10 rows per subject, a 10-value department (declared domain), a
100-value city and an income (declared bounds). The DuckDB database loads the same file into a
table; the Spark twin protects the Parquet path. Two policies: ``max_rows = 10`` (no subject
exceeds its bound) and ``max_rows = 2`` (every subject is sampled down); ``max_groups = 1`` (each
subject counts for one item of a top-k). Queries: COUNT and AVG per department, the mean of each subject's row count (the per-subject
subquery), a top-10 of cities
(DP key selection, one-shot), a top-3 of departments with counts (declared domain, TPS with PFM:
record lengths, and counts sampled to one item per subject) and an MST release of department and
income (16 bins, 100,000 rows written), against the raw count of the same coded rows. ``--only`` runs the queries whose
names start with it. Reports the medians and the DP / raw ratio per engine.
"""

from __future__ import annotations

import argparse
import itertools
import shutil
import tempfile
from pathlib import Path

import duckdb
from timing import timed

import dpgate
from dpgate.catalog.owner import Owner

DEPTS = [f"d{i}" for i in range(10)]
QUERIES = {
    "COUNT GROUP BY": ("SELECT dept, COUNT(*) FROM events GROUP BY dept", "SELECT dept, count(*) FROM {t} GROUP BY dept"),
    "AVG GROUP BY": ("SELECT dept, AVG(income) FROM events GROUP BY dept",
                     "SELECT dept, avg(least(greatest(income, 0), 1000)) FROM {t} GROUP BY dept"),
    "per-subject AVG": ("SELECT AVG(n) FROM (SELECT uid, COUNT(*) AS n FROM events GROUP BY uid) s",
                        "SELECT avg(n) FROM (SELECT uid, least(count(*), 10) AS n FROM {t} GROUP BY uid)"),
    "top-10 cities": ("SELECT city, COUNT(*) AS n FROM events GROUP BY city ORDER BY n DESC LIMIT 10",
                      "SELECT city, count(*) AS n FROM {t} GROUP BY city ORDER BY n DESC LIMIT 10"),
    "top-3 depts, tps_pfm, counts": (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (topk_method = 'tps_pfm') dept, COUNT(*) AS n FROM events "
        "GROUP BY dept ORDER BY n DESC LIMIT 3",
        "SELECT dept, count(DISTINCT uid) AS n FROM {t} GROUP BY dept ORDER BY n DESC LIMIT 3"),
    # each run writes a new release ({n}); the raw query counts the same coded rows
    "MST release": ("CREATE SYNTHETIC TABLE s{n} FROM events WITH (epsilon = 1, rows = 100000, "
                    "columns = 'dept, income')",
                    "SELECT dept, least(floor(greatest(income, 0) / 62.5), 15) AS b, count(*) FROM {t} GROUP BY ALL"),
}  # fmt: skip
_RELEASES = itertools.count()


def build(tmp: Path, rows: int) -> Path:
    out = tmp / f"events_{rows}.parquet"
    con = duckdb.connect()
    con.execute(
        f"""COPY (SELECT (i // 10)::BIGINT AS uid, 'd' || CAST(hash(i, 1) % 10 AS VARCHAR) AS dept,
                  'c' || lpad(CAST(hash(i, 2) % 100 AS VARCHAR), 3, '0') AS city,
                  CAST(hash(i, 3) % 100000 AS DOUBLE) / 100 AS income
           FROM range({rows}) r(i)) TO '{out}' (FORMAT parquet, ROW_GROUP_SIZE 1000000)"""
    )
    con.close()
    return out


def databases(tmp: Path, parquet: Path, spark, max_rows: int) -> tuple[Path, Path]:
    duck, twin = tmp / f"duck_{max_rows}.duckdb", tmp / f"spark_{max_rows}.duckdb"
    con = duckdb.connect(str(duck))
    con.execute(f"CREATE TABLE events AS SELECT * FROM read_parquet('{parquet}')")
    con.close()
    spec = dict(unit="uid", max_rows=max_rows, max_groups=1, epsilon=1e9, public_roster=True,
                domains={"dept": DEPTS}, bounds={"income": (0, 1000)})  # fmt: skip
    with Owner(duck) as owner:
        owner.protect("events", **spec)
        owner.add_analyst("bench", epsilon=1e12, delta=1e-3)
    with Owner(twin, spark=spark) as owner:
        owner.protect("events", spark=f"parquet:{parquet}", **spec)
        owner.add_analyst("bench", epsilon=1e12, delta=1e-3)
    return duck, twin


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, nargs="+", default=[1_000_000])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--only", nargs="*", default=[""], help="run the queries whose names start with one of these")
    ap.add_argument("--max-rows", nargs="*", type=int, default=[10, 2], help="the regimes: max_rows 10 (nobody "
                    "over the bound) and / or 2 (everyone sampled)")
    args = ap.parse_args()
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master(args.master).appName("dpgate-bench")
             .config("spark.ui.showConsoleProgress", "false").config("spark.driver.memory", "8g")
             .config("spark.sql.shuffle.partitions", "8").getOrCreate())  # fmt: skip
    spark.sparkContext.setLogLevel("ERROR")
    results = []
    for rows in args.rows:
        tmp = Path(tempfile.mkdtemp())
        parquet = build(tmp, rows)
        raw_duck = duckdb.connect()
        raw_duck.execute(f"CREATE TABLE events AS SELECT * FROM read_parquet('{parquet}')")
        for max_rows, regime in ((10, "no subject over max_rows"), (2, "every subject sampled")):
            if max_rows not in args.max_rows:
                continue
            duck, twin = databases(tmp, parquet, spark, max_rows)
            for name, (dp_sql, raw_sql) in QUERIES.items():
                if not name.startswith(tuple(args.only)):
                    continue
                for engine, path in (("DuckDB", duck), ("Spark", twin)):
                    if engine == "DuckDB":
                        raw = timed(lambda: raw_duck.execute(raw_sql.format(t="events")).fetchall(), args.repeat)
                    else:
                        q = raw_sql.format(t=f"parquet.`{parquet}`")
                        raw = timed(lambda: spark.sql(q).collect(), args.repeat)
                    with dpgate.connect(str(path), analyst="bench", spark=spark) as con:
                        cur = con.cursor()
                        cur.execute("SET dp_fresh = true")  # each run a new release, not the remembered answer
                        dp = timed(lambda: cur.execute(dp_sql.format(n=next(_RELEASES))).fetchall(), args.repeat)
                    results.append((rows, name, regime, engine, raw, dp))
                    print(f"{rows:>11,} | {name} | {regime} | {engine} | raw {raw * 1000:,.0f} ms | "
                          f"dpgate {dp * 1000:,.0f} ms | {dp / raw:.1f}x", flush=True)
        raw_duck.close()
        shutil.rmtree(tmp)
    print("\n| rows | query | regime | engine | raw | dpgate | ratio |\n|---|---|---|---|---|---|---|")
    for rows, name, regime, engine, raw, dp in results:
        print(f"| {rows:,} | {name} | {regime} | {engine} | {raw * 1000:,.0f} ms | {dp * 1000:,.0f} ms | {dp / raw:.1f}× |")


if __name__ == "__main__":
    main()
