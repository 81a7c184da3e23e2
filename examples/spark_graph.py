"""A gene network protected twice: its edges in DuckDB, and the same Parquet file read by Apache Spark.

Run from a checkout (needs ``pip install '.[spark]'`` and Java 17 or later):

    python examples/spark_graph.py [--master local[2]]

WormNet v3 (78,736 edges between C. elegans genes, ``examples/data/wormnet_edges.parquet``) is
declared a graph with edge-level DP over a public node table of the genes. On the Spark twin the
edges stay in the Parquet file: Spark applies the WHERE and returns the distinct edges, and the
ladder (count, local sensitivities, error bar) runs in dpgate's process, so the same test seed
gives the same answer on both engines. The script prints each count with its 95% interval and how
long each engine took.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import duckdb

import dpgate

EDGES = Path(__file__).resolve().parent / "data" / "wormnet_edges.parquet"
QUERIES = [
    "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5) TRIANGLE_COUNT(src, dst) AS triangles FROM wormnet",
    "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5) KSTAR_COUNT(src, dst, 2) AS two_stars FROM wormnet "
    "WHERE src < 'M'",
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--master", default="local[2]", help="Spark master URL (default local[2])")
    args = ap.parse_args()
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master(args.master).appName("dpgate-example")
             .config("spark.ui.showConsoleProgress", "false").config("spark.sql.shuffle.partitions", "4")
             .getOrCreate())  # fmt: skip
    spark.sparkContext.setLogLevel("ERROR")
    try:
        run(spark)
    finally:
        spark.stop()


def run(spark, seed: int | None = None) -> None:
    """Both databases and the counts side by side (on ``spark``); ``seed``: a test seed for both."""
    tmp = Path(tempfile.mkdtemp())
    try:
        _both(spark, tmp, seed)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _both(spark, tmp: Path, seed: int | None) -> None:
    paths = {"DuckDB": tmp / "genes.duckdb", "Spark": tmp / "genes_spark.duckdb"}
    for engine, path in paths.items():
        con = duckdb.connect(str(path))
        # The node universe is public: the genome's gene list (here, the genes the file names)
        con.execute(f"CREATE TABLE genes AS SELECT DISTINCT g AS id FROM (SELECT src AS g FROM read_parquet('{EDGES}') "
                    f"UNION SELECT dst FROM read_parquet('{EDGES}'))")  # fmt: skip
        if engine == "DuckDB":
            con.execute(f"CREATE TABLE wormnet AS SELECT * FROM read_parquet('{EDGES}')")
        con.close()
        with dpgate.Owner(path, spark=spark if engine == "Spark" else None) as owner:
            owner.protect_graph("wormnet", src="src", dst="dst", nodes="genes", epsilon=5.0,
                                spark=f"parquet:{EDGES}" if engine == "Spark" else None)  # fmt: skip
            owner.add_analyst("ana", epsilon=5.0)
            if seed is not None:
                owner.allow_test_seed("ana")
    for sql in QUERIES:
        print(f"\n{sql}")
        for engine, path in paths.items():
            with dpgate.connect(str(path), analyst="ana", spark=spark, test_seed=seed) as con:
                cur = con.cursor()
                t = time.perf_counter()
                cur.execute(sql)
                ((value,),) = cur.fetchall()
                low, high = cur.release.intervals[0][cur.description[0][0]]  # the count's 95% interval
                print(f"  {engine:<6} {value:>12,} [{low:,}, {high:,}]  ({(time.perf_counter() - t) * 1000:,.0f} ms)")


if __name__ == "__main__":
    main()
