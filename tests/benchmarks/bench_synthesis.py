"""Benchmark: synthetic releases of a wide categorical table through SQL (issue target: a
200,000 × 42 release in under 5 s on 2 cores), with each mechanism's marginal error.

Not part of the test suite (numbers are reported). Run from the repository root:

    python tests/benchmarks/bench_synthesis.py [--rows 200000] [--columns 42] [--epsilon 1.0] [--privbayes]

The table is generated (seeded) as a random tree of dependencies: each column's values are drawn
given one earlier column from Dirichlet(0.3) conditionals, domain sizes from {2, ..., 50}; every
column has a declared domain. For each mechanism the script times ``CREATE SYNTHETIC TABLE``
through ``dpgate.connect`` (debit, reading and coding the rows, the model, sampling, writing and
the registry) next to the raw engine writing a copy of the same table (``CREATE TABLE ... AS
SELECT *``), and scores the release's 1- and 2-way marginals (average total variation distance;
the 3-way average over 11,480 triples is left out for time). ``--privbayes`` adds PrivBayes
(tens of seconds at ε = 1).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import duckdb
import numpy as np

import dpgate
from dpgate.catalog.owner import Owner
from dpgate.mechanisms import privbayes


def generate(rows: int, columns: int, seed: int = 5) -> tuple[np.ndarray, list[int]]:
    rng = np.random.default_rng(seed)
    sizes = [int(s) for s in rng.choice([2, 3, 5, 8, 10, 17, 24, 50], size=columns)]
    out = np.zeros((rows, columns), dtype=np.int64)
    out[:, 0] = rng.choice(sizes[0], rows, p=rng.dirichlet(np.ones(sizes[0])))
    for j in range(1, columns):
        p = int(rng.integers(0, j))
        cond = np.cumsum(rng.dirichlet(np.full(sizes[j], 0.3), size=sizes[p]), axis=1)
        u = rng.random(rows)
        out[:, j] = np.minimum((u[:, None] >= cond[out[:, p]]).sum(axis=1), sizes[j] - 1)
    return out, sizes


def build(path: Path, codes: np.ndarray, sizes: list[int]) -> None:
    con = duckdb.connect(str(path))
    data = {"uid": np.arange(codes.shape[0])}
    for j in range(codes.shape[1]):
        data[f"c{j:02d}"] = np.array([f"v{k}" for k in range(sizes[j])])[codes[:, j]]
    con.register("src", data)
    con.execute("CREATE TABLE wide AS SELECT * FROM src")
    con.close()
    with Owner(path) as owner:
        owner.protect("wide", unit="uid", epsilon=1e9, public_roster=True,
                      domains={f"c{j:02d}": [f"v{k}" for k in range(sizes[j])] for j in range(codes.shape[1])})  # fmt: skip
        owner.add_analyst("bench", epsilon=1e12)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--columns", type=int, default=42)
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--privbayes", action="store_true")
    args = ap.parse_args()
    codes, sizes = generate(args.rows, args.columns)
    path = Path(tempfile.mkdtemp()) / "wide.duckdb"
    build(path, codes, sizes)
    real = {w: privbayes.marginal_tables(codes, sizes, w) for w in (1, 2)}

    raw = duckdb.connect(str(path))
    t = time.perf_counter()
    raw.execute("CREATE TABLE copy_of_wide AS SELECT * FROM wide")
    t_raw = time.perf_counter() - t
    raw.close()
    print(f"{args.rows:,} rows × {args.columns} columns, ε = {args.epsilon:g}; raw copy of the table: {t_raw:.2f} s\n")
    print(f"{'mechanism':<12} {'seconds':>8} {'vs raw copy':>12} {'1-way TVD':>10} {'2-way TVD':>10}")
    mechanisms = ["mst", "independent"] + (["privbayes"] if args.privbayes else [])
    with dpgate.connect(str(path), analyst="bench") as con:
        for m in mechanisms:
            t = time.perf_counter()
            con.execute(f"CREATE SYNTHETIC TABLE syn_{m} FROM wide USING {m} WITH (epsilon = {args.epsilon})")
            seconds = time.perf_counter() - t
            cols = ", ".join(f"c{j:02d}" for j in range(args.columns))
            rows = con.execute(f"SELECT {cols} FROM syn_{m}").fetchall()
            synth = np.array([[int(v[1:]) for v in r] for r in rows], dtype=np.int64)
            tvd = [privbayes.tvd_between(real[w], privbayes.marginal_tables(synth, sizes, w)) for w in (1, 2)]
            print(f"{m:<12} {seconds:8.2f} {seconds / t_raw:11.1f}× {tvd[0]:10.4f} {tvd[1]:10.4f}")


if __name__ == "__main__":
    main()
