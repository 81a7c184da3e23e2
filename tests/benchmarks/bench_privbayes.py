"""Benchmark: PrivBayes on UCI Adult at ε = 1 — time, peak memory, 2-way and 3-way TVD.

Not part of the test suite (numbers are reported; the targets are printed next to them).
Run from the repository root:

    python tests/benchmarks/bench_privbayes.py [--epsilon 1.0] [--repeat 5] [--seed 11]

Data and discretisation as in ``examples/privbayes_adult.py`` (32,561 rows, 15 attributes,
16 equi-width bins on public bounds, NULL as a category). Each repeat fits PrivBayes with
the defaults (vanilla encoding, score R, θ = 4, β = 0.3), samples the model's noisy row
count, and scores all 105 two-way and 455 three-way marginals by total variation distance.
Timing covers fit + sample (the gateway's work); peak memory is tracemalloc's peak over the
same span (numpy allocations included) plus the process's maximum resident set size.

Targets: under 30 s on 2 cores; average 2-way TVD under 0.06. References on the same data:
MST 0.042, independent baseline 0.083.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import resource
import statistics
import time
import tracemalloc
from pathlib import Path

import numpy as np

from dpgate.mechanisms import privbayes

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "privbayes_adult.py"


def load_adult():
    spec = importlib.util.spec_from_file_location("privbayes_adult", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.load_adult()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--seed", type=int, default=11)
    args = ap.parse_args()

    t = time.perf_counter()
    codes, sizes, names = load_adult()
    load_s = time.perf_counter() - t
    real2 = privbayes.marginal_tables(codes, sizes, 2)
    real3 = privbayes.marginal_tables(codes, sizes, 3)
    print(f"Adult: {codes.shape[0]} rows × {codes.shape[1]} attributes (loaded and coded in {load_s:.2f} s); "
          f"cpus: {os.cpu_count()}; ε = {args.epsilon:g}; {args.repeat} repeats\n")  # fmt: skip

    rows = []
    for r in range(args.repeat):
        rng = np.random.default_rng(args.seed + r)
        tracemalloc.start()
        t0 = time.perf_counter()
        model = privbayes.fit(codes, sizes, args.epsilon, rng=rng)
        t1 = time.perf_counter()
        synth = privbayes.sample(model, model.noisy_rows, rng=rng)
        t2 = time.perf_counter()
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        base = privbayes.independent_baseline(codes, sizes, args.epsilon, rng=rng)
        bsynth = privbayes.sample(base, base.noisy_rows, rng=rng)
        rows.append(
            dict(
                fit=t1 - t0,
                sample=t2 - t1,
                total=t2 - t0,
                peak=peak,
                tvd2=privbayes.tvd_between(real2, privbayes.marginal_tables(synth, sizes, 2)),
                tvd3=privbayes.tvd_between(real3, privbayes.marginal_tables(synth, sizes, 3)),
                ind2=privbayes.tvd_between(real2, privbayes.marginal_tables(bsynth, sizes, 2)),
                ind3=privbayes.tvd_between(real3, privbayes.marginal_tables(bsynth, sizes, 3)),
                degree=model.degree,
                n=model.noisy_rows,
            )
        )
        print(f"  run {r + 1}: fit {rows[-1]['fit']:.3f} s, sample {rows[-1]['sample']:.3f} s, "
              f"peak {peak:.1f} MiB, degree {model.degree}, rows {model.noisy_rows}, "
              f"2-way {rows[-1]['tvd2']:.4f}, 3-way {rows[-1]['tvd3']:.4f}")  # fmt: skip

    def stat(key: str) -> str:
        vals = [row[key] for row in rows]
        sd = statistics.stdev(vals) if len(vals) > 1 else 0.0
        return f"{statistics.mean(vals):.4f} ± {sd:.4f}"

    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print()
    print(f"time (fit + sample), median: {statistics.median(r['total'] for r in rows):.3f} s   (target < 30 s)")
    fit_s, sample_s = (statistics.median(r[k] for r in rows) for k in ("fit", "sample"))
    print(f"  fit {fit_s:.3f} s, sample {sample_s:.3f} s")
    print(f"peak traced memory: {max(r['peak'] for r in rows):.1f} MiB; process max RSS: {maxrss:.0f} MiB")
    print(f"2-way TVD  PrivBayes {stat('tvd2')}   independent {stat('ind2')}"
          "   (target < 0.06; references: MST 0.042, independent 0.083)")  # fmt: skip
    print(f"3-way TVD  PrivBayes {stat('tvd3')}   independent {stat('ind3')}")
    print()
    print("\n".join(model.describe(names)))
    _through_sql(args)


def _through_sql(args) -> None:
    """The same release as SQL on the demo database: plan, debit, read, fit, sample, write, register."""
    import tempfile
    import time

    import dpgate
    from dpgate.interfaces import demo
    from dpgate.catalog.owner import Owner

    path = demo.build(Path(tempfile.mkdtemp()) / "demo.duckdb")
    with Owner(path) as owner:
        owner.add_analyst("bench", epsilon=1e6, delta=1e-3, epsilon_per_query=1e3)
    times = []
    with dpgate.connect(str(path), analyst="bench") as con:
        for i in range(args.repeat):
            t = time.perf_counter()
            con.cursor().execute(
                f"CREATE SYNTHETIC TABLE syn{i} FROM adult USING privbayes WITH (epsilon = {args.epsilon})"
            )
            times.append(time.perf_counter() - t)
    with Owner(path) as owner:
        report = owner.quality("syn0")  # later ones use fewer subjects: the demo budgets run out
    print(f"\nthrough SQL (CREATE SYNTHETIC TABLE, debit and registry included), median: "
          f"{statistics.median(times):.3f} s; first release 2-way TVD {report['tvd_2way']:.4f}")  # fmt: skip


if __name__ == "__main__":
    main()
