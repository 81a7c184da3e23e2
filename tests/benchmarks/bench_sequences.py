"""Benchmark: the PrivTree Markov model's utility on sequences shaped like per-aircraft destinations.

Not part of the test suite (errors are reported, not asserted). Run:

    python tests/benchmarks/bench_sequences.py [--sequences 4000] [--symbols 104] [--runs 5]

Data (generated, fixed seed): each aircraft flies from a home hub (8 hubs, Zipf-popular) to
Zipf-popular spokes among ``--symbols`` airports, returning to its hub after most legs (heavy
repeats: hub, spoke, hub, spoke ...) and sometimes hopping spoke to spoke; 4 to 30 legs. The
release runs at ε ∈ {0.5, 1, 2} with l⊤ = 21 (most sequences fit). Reported, as the median over
``--runs`` releases: the relative error of the 20 most frequent pairs and triples (consecutive
symbols) in the synthetic sequences against the real ones (counts per sequence), the model's mass
against the real number of transitions, and the share of its mass on transitions never seen.
Also the 6-state school-to-work sequences (712 people, runs of one state collapsed).
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from pathlib import Path

import numpy as np

from dpgate.mechanisms import privtree


def aircraft(n: int, symbols: int, seed: int = 20261129) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    hubs = 8
    spoke_p = 1.0 / np.arange(1, symbols - hubs + 1) ** 1.1
    spoke_p /= spoke_p.sum()
    hub_p = 1.0 / np.arange(1, hubs + 1)
    hub_p /= hub_p.sum()
    out = []
    for _ in range(n):
        hub = int(rng.choice(hubs, p=hub_p))
        legs = int(rng.integers(4, 31))
        seq, here = [hub], hub
        while len(seq) < legs:
            if here >= hubs and rng.random() < 0.75:
                here = hub  # back to base
            else:
                here = hubs + int(rng.choice(symbols - hubs, p=spoke_p))
            seq.append(here)
        out.append(np.array(seq, dtype=np.int64))
    return out


def mvad() -> tuple[list[np.ndarray], int]:
    import duckdb

    path = Path(__file__).resolve().parents[2] / "examples" / "data" / "mvad_sequences.parquet"
    rows = duckdb.sql(f"SELECT person_id, state FROM read_parquet('{path}') ORDER BY person_id, t").fetchall()
    states = sorted({s for _, s in rows})
    code = {s: i for i, s in enumerate(states)}
    seqs: dict[int, list[int]] = {}
    for pid, s in rows:
        seq = seqs.setdefault(pid, [])
        if not seq or seq[-1] != code[s]:
            seq.append(code[s])
    return [np.array(s, dtype=np.int64) for s in seqs.values()], len(states)


def grams(seqs, k: int, max_length: int) -> Counter:
    c: Counter = Counter()
    for s in seqs:
        s = list(s[:max_length])
        for i in range(len(s) - k + 1):
            c[tuple(s[i : i + k])] += 1
    return c


def errors(real, synthetic, k: int, max_length: int, top: int = 20) -> float:
    """Median relative error of the top pairs (k = 2) or triples (k = 3), counts per sequence."""
    r, s = grams(real, k, max_length), grams(synthetic, k, max_length)
    scale = len(real) / max(len(synthetic), 1)
    best = [g for g, _ in r.most_common(top)]
    return float(np.median([abs(s[g] * scale - r[g]) / r[g] for g in best]))


def phantom(model: privtree.SequenceModel, real, max_length: int) -> tuple[float, float]:
    """(model mass / real transitions, share of the leaves' mass on (context, next) never seen)."""
    seen = Counter()
    total = 0
    for s in real:
        s = [int(x) for x in s[:max_length]]
        padded = [privtree.START] + s + ([model.end] if len(s) < max_length else [])
        total += len(padded) - 1
        for i in range(1, len(padded)):
            v = model.node_for(padded[:i])
            seen[(v, padded[i])] += 1
    leaves = np.flatnonzero(model.leaf)
    mass = float(model.hist[leaves].sum())
    unseen = sum(float(model.hist[v, x]) for v in leaves for x in np.flatnonzero(model.hist[v]) if (v, int(x)) not in seen)
    return mass / total, unseen / mass if mass else 0.0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sequences", type=int, default=4000)
    ap.add_argument("--symbols", type=int, default=104)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    max_length = 21
    sets = [(f"aircraft ({args.sequences:,} sequences, {args.symbols} airports)", aircraft(args.sequences, args.symbols),
             args.symbols)]  # fmt: skip
    sets.append(("school-to-work (712 people, 6 states)", *mvad()))
    print("| data | ε | top-20 pairs | top-20 triples | model mass / real | mass never seen | contexts | s |")
    print("|---|---|---|---|---|---|---|---|")
    for label, real, n_symbols in sets:
        for eps in (0.5, 1.0, 2.0):
            rows = []
            for run in range(args.runs):
                rng = np.random.default_rng([run, int(eps * 10)])
                t = time.perf_counter()
                model = privtree.sequence_release(real, n_symbols, max_length, eps, rng=rng)
                synthetic = model.sample(model.expected_sequences(), rng)
                took = time.perf_counter() - t
                mass, unseen = phantom(model, real, max_length)
                rows.append((errors(real, synthetic, 2, max_length), errors(real, synthetic, 3, max_length), mass, unseen,
                             len(model.contexts), took))  # fmt: skip
            m = np.median(np.array(rows), axis=0)
            print(f"| {label} | {eps:g} | {m[0]:.1%} | {m[1]:.1%} | {m[2]:.2f} | {m[3]:.1%} | {m[4]:,.0f} | {m[5]:.1f} |")


if __name__ == "__main__":
    main()
