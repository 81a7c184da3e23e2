"""Synthetic sequences from a private Markov model (PrivTree, thesis §4.3): top-k strings and lengths.

Run:

    python examples/privtree_sequences.py [--sequences 100000] [--runs 5] [--seed 1]

Two datasets, one sequence per subject:

- the school-to-work careers shipped with dpgate (mvad: 712 people × 72 monthly states, 6 states),
  truncated at l⊤ = 73 (every sequence and its end);
- a generated set with the thesis's msnbc shape (17 symbols, ``--sequences`` sequences, mean length
  about 5, from a mixture of 8 first-order Markov chains), l⊤ = 20.

For ε in {0.1, 0.2, 0.4, 0.8, 1.6}: the model is released (``dpgate.mechanisms.privtree``), as many
sequences as it estimates are sampled, and the report gives the precision of the top-k most
frequent strings (contiguous substrings of length 1–4, counted by occurrences; k = 10 and 20)
against the full data, the total-variation distance of the length distribution (lengths capped at
l⊤), and both for **truncate**: the exact data cut at l⊤ (not private; the thesis's reference).
The true figures come from the raw data: this is the owner's evaluation.
"""

from __future__ import annotations

import argparse
import collections
import time

import duckdb
import numpy as np

from dpgate import noise
from dpgate.mechanisms.privtree import sequence_release
from dpgate.resources import data_dir

EPSILONS = (0.1, 0.2, 0.4, 0.8, 1.6)


def careers() -> tuple[list[np.ndarray], int]:
    path = str(data_dir() / "mvad_sequences.parquet")
    rows = duckdb.connect().execute(
        "SELECT person_id, list(state ORDER BY t) FROM read_parquet($p) GROUP BY 1 ORDER BY 1", {"p": path}
    ).fetchall()
    states = sorted({s for _, seq in rows for s in seq})
    code = {s: i for i, s in enumerate(states)}
    return [np.array([code[s] for s in seq]) for _, seq in rows], len(states)


def msnbc_like(n: int, rng) -> tuple[list[np.ndarray], int]:
    k, chains = 17, 8
    pop = 1.0 / np.arange(1, k + 1)
    starts = rng.dirichlet(np.full(k, 0.5), size=chains) * pop
    starts /= starts.sum(axis=1, keepdims=True)
    trans = rng.dirichlet(np.full(k + 1, 0.3), size=(chains, k))
    trans[:, :, k] += 0.25  # an end probability of about 1/5 per step: mean length ~5
    trans /= trans.sum(axis=2, keepdims=True)
    out = []
    for c in rng.integers(0, chains, n):
        s = [int(rng.choice(k, p=starts[c]))]
        while len(s) < 200:
            x = int(rng.choice(k + 1, p=trans[c, s[-1]]))
            if x == k:
                break
            s.append(x)
        out.append(np.array(s))
    return out, k


def substrings(seqs, longest: int = 4) -> collections.Counter:
    c = collections.Counter()
    for s in seqs:
        t = tuple(int(x) for x in s)
        for n in range(1, longest + 1):
            for i in range(len(t) - n + 1):
                c[t[i : i + n]] += 1
    return c


def top(c: collections.Counter, k: int) -> set:
    return {s for s, _ in c.most_common(k)}


def length_tvd(a, b, cap: int) -> float:
    la = np.bincount(np.minimum(np.array([len(s) for s in a], dtype=np.int64), cap), minlength=cap + 1) / max(len(a), 1)
    lb = np.bincount(np.minimum(np.array([len(s) for s in b], dtype=np.int64), cap), minlength=cap + 1) / max(len(b), 1)
    return 0.5 * float(np.abs(la - lb).sum())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sequences", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--seed", type=int, default=None, help="fixed seed (reproducible, not private)")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed) if args.seed is not None else noise.fresh().rng
    for name, (seqs, k), l_top in (("careers (mvad)", careers(), 73),
                                   ("msnbc-shaped", msnbc_like(args.sequences, np.random.default_rng(4)), 20)):  # fmt: skip
        truth = substrings(seqs)
        cut = [s[: l_top - 1] if len(s) >= l_top else s for s in seqs]  # what the mechanism sees (no end past l⊤)
        tcut = substrings(cut)
        cap = l_top
        print(f"\n{name}: {len(seqs):,} sequences, {k} symbols, mean length {np.mean([len(s) for s in seqs]):.2f}, "
              f"l⊤ = {l_top} ({sum(len(s) >= l_top for s in seqs):,} truncated), {args.runs} run(s)")  # fmt: skip
        print(f"truncate: top-10 {len(top(tcut, 10) & top(truth, 10)) / 10:.2f}, top-20 "
              f"{len(top(tcut, 20) & top(truth, 20)) / 20:.2f}, length TVD {length_tvd(cut, seqs, cap):.3f}")  # fmt: skip
        print("    ε   top-10  top-20  length TVD  sequences  contexts  seconds")
        for eps in EPSILONS:
            p10, p20, tvd, ns, ctx, secs = [], [], [], [], [], []
            for _ in range(args.runs):
                t0 = time.perf_counter()
                model = sequence_release(seqs, k, l_top, eps, rng=rng)
                syn = model.sample(model.expected_sequences(), rng)
                secs.append(time.perf_counter() - t0)
                c = substrings(syn)
                p10.append(len(top(c, 10) & top(truth, 10)) / 10)
                p20.append(len(top(c, 20) & top(truth, 20)) / 20)
                tvd.append(length_tvd(syn, seqs, cap))
                ns.append(len(syn))
                ctx.append(len(model.contexts))
            print(f"{eps:5.1f}   {np.mean(p10):6.2f}  {np.mean(p20):6.2f}  {np.mean(tvd):10.3f}  {np.mean(ns):9.0f}  "
                  f"{np.mean(ctx):8.0f}  {np.mean(secs):7.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
