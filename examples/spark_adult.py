"""UCI Adult protected twice: once in DuckDB, once as a Parquet file read by Apache Spark.

Run from a checkout (needs ``pip install '.[spark]'`` and Java 17 or later):

    python examples/spark_adult.py [--master local[2]]

The same declarations, the same SQL, the same ledger: only the engine that aggregates the rows
differs. The script asks three counting queries of both databases and prints the answers side by
side with their 95% intervals, a top-k and a synthetic release on Spark, then what a Spark table
refuses (free) and what was spent.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
import warnings
from pathlib import Path

import duckdb

import dpgate

ADULT = Path(__file__).resolve().parent / "data" / "adult.parquet"
DECLARATION = dict(
    unit="person_id", max_rows=1, epsilon=10.0, public_roster=True,
    domains={"sex": ["Female", "Male"], "income": ["<=50K", ">50K"],
             "race": ["Amer-Indian-Eskimo", "Asian-Pac-Islander", "Black", "Other", "White"]},
    bounds={"age": (17, 90), "hours_per_week": (1, 99), "capital_gain": (0, 100000)},
)  # fmt: skip
QUERIES = [
    "SELECT sex, income, COUNT(*) AS n FROM adult GROUP BY sex, income ORDER BY sex, income",
    "SELECT race, AVG(hours_per_week) AS hours FROM adult WHERE age BETWEEN 25 AND 64 GROUP BY race ORDER BY race",
    "SELECT sex, MEDIAN(age) AS median_age, SUM(capital_gain / 1000) AS gain_k FROM adult GROUP BY sex ORDER BY sex",
]


def _cell(value, interval) -> str:
    """A noisy value and its 95% interval (a median has none)."""
    return f"{value:,.1f}" + (f" [{interval[0]:,.1f}, {interval[1]:,.1f}]" if interval and None not in interval else "")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--master", default="local[2]", help="Spark master URL (default local[2])")
    args = ap.parse_args()
    from pyspark.sql import SparkSession

    t = time.perf_counter()
    spark = (SparkSession.builder.master(args.master).appName("dpgate-example")
             .config("spark.ui.showConsoleProgress", "false").config("spark.sql.shuffle.partitions", "4")
             .getOrCreate())  # fmt: skip
    spark.sparkContext.setLogLevel("ERROR")
    print(f"Spark {spark.version} at {args.master} (started in {time.perf_counter() - t:.1f} s)")
    try:
        run(spark)
    finally:
        spark.stop()


def run(spark) -> None:
    """Both databases, the three queries side by side, the refusals and the budgets (on ``spark``)."""
    tmp = Path(tempfile.mkdtemp())
    try:
        _both(spark, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _both(spark, tmp: Path) -> None:
    in_duckdb, in_spark = tmp / "adult.duckdb", tmp / "adult_spark.duckdb"
    con = duckdb.connect(str(in_duckdb))
    con.execute(f"CREATE TABLE adult AS SELECT * FROM read_parquet('{ADULT}')")
    con.close()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dpgate.RosterWarning)
        with dpgate.Owner(in_duckdb) as owner:
            owner.protect("adult", **DECLARATION)
            owner.add_analyst("ana", epsilon=5.0)
        with dpgate.Owner(in_spark, spark=spark) as owner:  # the rows stay in the Parquet file
            owner.protect("adult", spark=f"parquet:{ADULT}", **DECLARATION)
            owner.add_analyst("ana", epsilon=5.0)

    duck = dpgate.connect(str(in_duckdb), analyst="ana")
    lake = dpgate.connect(str(in_spark), analyst="ana", spark=spark)
    for sql in QUERIES:
        print(f"\n{sql}")
        answers = {}
        for name, con in (("DuckDB", duck), ("Spark", lake)):
            cur = con.cursor()
            t = time.perf_counter()
            cur.execute(sql)
            answers[name] = (cur.fetchall(), cur.release, time.perf_counter() - t)
        names = [d[0] for d in cur.description]
        for (rows_d, rel_d, t_d), (rows_s, rel_s, t_s) in [(answers["DuckDB"], answers["Spark"])]:
            for rd, rs, iv_d, iv_s in zip(rows_d, rows_s, rel_d.intervals, rel_s.intervals):
                keys = ", ".join(str(v) for v, n in zip(rd, names) if n not in rel_d.columns)
                cells = []
                for col in rel_d.columns:
                    i = names.index(col)
                    cells.append(f"{col}: DuckDB {_cell(rd[i], iv_d.get(col))}  Spark {_cell(rs[i], iv_s.get(col))}")
                print(f"  {keys:<28} " + "; ".join(cells))
            print(f"  ε = {rel_s.epsilon:g} each; {t_d * 1000:,.0f} ms on DuckDB, {t_s * 1000:,.0f} ms on Spark")

    # A top-k runs on Spark too: DP key selection finds the occupations, then the top 3 are chosen
    top = "SELECT occupation, COUNT(*) AS n FROM adult GROUP BY occupation ORDER BY n DESC LIMIT 3"
    cur = lake.cursor()
    cur.execute(top)
    print(f"\n{top}\n  on Spark: " + ", ".join(f"{occupation} ({n:,})" for occupation, n in cur.fetchall()))

    # A synthetic release too: Spark codes the rows and returns each distinct coded row and its count;
    # MST fits its model in dpgate's process and the release is an ordinary public table in the file
    release = ("CREATE SYNTHETIC TABLE adult_synthetic FROM adult WITH (epsilon = 0.5, "
               "columns = 'sex, income, race, age, hours_per_week')")
    cur = lake.cursor()
    t = time.perf_counter()
    cur.execute(release)
    seconds = time.perf_counter() - t
    (rows,) = cur.execute("SELECT COUNT(*) FROM adult_synthetic").fetchone()
    print(f"\n{release}\n  on Spark: {rows:,} rows in {seconds:.1f} s; free from now on:")
    cur.execute("SELECT income, COUNT(*) AS n, ROUND(AVG(age), 1) AS age FROM adult_synthetic GROUP BY income "
                "ORDER BY income")
    for income, n, age in cur.fetchall():
        print(f"    income {income}: {n:,} rows, mean age {age}")

    print("\nWhat a Spark table refuses, free:")
    for sql in ("SELECT COUNT(*) FROM adult WHERE lower(occupation) LIKE 'tech%'",
                "SELECT COUNT(*) FROM adult WHERE age % 10 = 0"):  # fmt: skip
        try:
            lake.cursor().execute(sql)
        except dpgate.Error as e:
            print(f"  [{e.code}] {e.message}")
    for name, con in (("DuckDB", duck), ("Spark", lake)):
        (row,) = [r for r in con.cursor().execute("SHOW BUDGET").fetchall() if r[0] == "analyst ana"]
        print(f"{name}: ε left {row[1]:g} of 5")
    duck.close()
    lake.close()


if __name__ == "__main__":
    main()
