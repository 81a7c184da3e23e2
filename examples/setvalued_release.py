"""Set-valued releases with DiffPart: support-count error and top-K itemsets, against baselines.

Run:

    python examples/setvalued_release.py [--records 1000000] [--queries 5000] [--runs 3] [--seed 1]

Two datasets, one record per subject (a basket, a user's set of page categories):

- the supermarket baskets shipped with dpgate (4,627 baskets, 122 items, the universe declared in
  alphabetical order as in ``topk_baskets.py``);
- a generated set with the MSNBC shape of the DiffPart paper (17 page categories, ``--records``
  users, about 1.7 categories each, drawn from 30 latent "interest profiles" so that categories
  co-occur).

For each budget B in {0.5, 0.75, 1.0, 1.25} it reports the average relative error of
``--queries`` random itemset-support queries, ``|est − true| / max(true, s)`` with s = 0.1% of
the records (the paper's sanity bound), query lengths uniform in 1..4 (baskets) or 1..6, for:

- **diffpart**: ``dpgate.mechanisms.diffpart`` (fan-out 10, C1 = 2.75, C2 = 6.75), supports summed over the
  released itemsets;
- **basic** (17 items only): discrete Laplace at B on every one of the 2^17 − 1 itemsets (each record is in one
  cell, sensitivity 1), negative counts set to 0 — the paper's baseline;
- **independent**: noisy item frequencies and a noisy record count (one per-item count of sensitivity up to
  the largest record, ε split in half), supports as products of item frequencies — what a marginal or top-k
  path over per-item flags gives.

And for the 17-item set the top-K frequent-itemset utility ``U = 1 − (1/K) Σ |sup − sup~| / sup`` (K = 50,
100) as in the paper. The true supports are computed from the raw data: this is the owner's evaluation,
not something an analyst could run. Without ``--seed`` every run draws fresh OS randomness.
"""

from __future__ import annotations

import argparse
import time

import duckdb
import numpy as np

from dpgate import noise
from dpgate.mechanisms.diffpart import Taxonomy, release
from dpgate.resources import data_dir

BUDGETS = (0.5, 0.75, 1.0, 1.25)


def baskets() -> np.ndarray:
    con = duckdb.connect()
    path = str(data_dir() / "supermarket_baskets.parquet")
    rows = con.execute(
        "WITH b AS (SELECT * FROM read_parquet($p)), items AS (SELECT item, row_number() OVER (ORDER BY item) - 1 "
        "AS i FROM (SELECT DISTINCT item FROM b)) SELECT dense_rank() OVER (ORDER BY basket_id) - 1, i "
        "FROM b JOIN items USING (item)", {"p": path}
    ).fetchnumpy()  # fmt: skip
    r, i = (np.asarray(v, dtype=np.int64) for v in rows.values())
    m = np.zeros((r.max() + 1, i.max() + 1), dtype=bool)
    m[r, i] = True
    return m


def msnbc_like(n: int, rng: np.random.Generator) -> np.ndarray:
    n_items, profiles = 17, 30
    popularity = 1.0 / np.arange(1, n_items + 1) ** 0.9
    weights = rng.dirichlet(np.full(n_items, 0.3), size=profiles) * popularity
    weights /= weights.sum(axis=1, keepdims=True)
    who = rng.integers(0, profiles, size=n)
    size = np.minimum(rng.geometric(1 / 1.72, size=n), n_items)
    m = np.zeros((n, n_items), dtype=bool)
    for p in range(profiles):
        idx = np.flatnonzero(who == p)
        for s in np.unique(size[idx]):
            rows = idx[size[idx] == s]
            keys = rng.random((len(rows), n_items)) ** (1.0 / weights[p])  # weighted sampling without replacement
            top = np.argsort(-keys, axis=1)[:, :s]
            m[rows[:, None], top] = True
    return m


def queries(n_items: int, n: int, max_len: int, rng: np.random.Generator) -> list[np.ndarray]:
    return [rng.choice(n_items, size=rng.integers(1, max_len + 1), replace=False) for _ in range(n)]


def supports(itemsets: np.ndarray, weights: np.ndarray, qs: list[np.ndarray]) -> np.ndarray:
    return np.array([weights[itemsets[:, q].all(axis=1)].sum() for q in qs], dtype=float)


def as_matrix(out: dict, n_items: int) -> tuple[np.ndarray, np.ndarray]:
    m = np.zeros((len(out), n_items), dtype=bool)
    for r, k in enumerate(out):
        m[r, list(k)] = True
    return m, np.array(list(out.values()), dtype=float)


def superset_sums(hist: np.ndarray, bits: int) -> np.ndarray:
    f = hist.astype(float).copy()
    for b in range(bits):
        idx = np.arange(len(f))
        sel = idx[(idx >> b) & 1 == 0]
        f[sel] += f[sel | (1 << b)]
    return f


def fim_utility(true_sup: np.ndarray, est_sup: np.ndarray, k: int) -> float:
    true_top = np.argsort(-true_sup[1:])[:k] + 1
    est_top = set((np.argsort(-est_sup[1:])[:k] + 1).tolist())
    return 1 - np.mean([abs(true_sup[i] - (est_sup[i] if i in est_top else 0)) / true_sup[i] for i in true_top])


def independent(records: np.ndarray, eps: float, qs, rng) -> np.ndarray:
    cap = int(records.sum(axis=1).max())
    n = len(records) + int(noise.discrete_laplace(eps / 2, 1, 1, rng)[0])
    freq = records.sum(axis=0) + noise.discrete_laplace(eps / 2, cap, records.shape[1], rng)
    p = np.clip(freq / max(n, 1), 0, 1)
    return np.array([max(n, 0) * np.prod(p[q]) for q in qs])


def rel_error(est, true, s) -> float:
    return float(np.mean(np.abs(est - true) / np.maximum(true, s)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--queries", type=int, default=5000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seed", type=int, default=None, help="fixed seed (reproducible, not private)")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed) if args.seed is not None else noise.fresh().rng
    data_rng = np.random.default_rng(20111)  # the generated data is the same in every run

    for name, records, max_len in (("supermarket baskets", baskets(), 4),
                                   ("MSNBC-shaped", msnbc_like(args.records, data_rng), 6)):  # fmt: skip
        n, n_items = records.shape
        s = 0.001 * n
        qs = queries(n_items, args.queries, max_len, data_rng)
        true = supports(records, np.ones(n), qs) if n_items > 20 else None
        if n_items <= 20:
            codes = (records.astype(np.int64) << np.arange(n_items)).sum(axis=1)
            hist = np.bincount(codes, minlength=2**n_items)
            hist[0] = 0
            true_sos = superset_sums(hist, n_items)
            qmask = [int((1 << q).sum()) for q in qs]
            true = true_sos[qmask]
        tax = Taxonomy.build(n_items, 10)
        print(f"\n{name}: {n:,} records, {n_items} items ({tax.describe()}), {args.queries:,} queries, "
              f"sanity bound s = {s:.1f}, {args.runs} run(s)")  # fmt: skip
        header = "   B   diffpart  " + ("basic  " if n_items <= 20 else "") + "independent   itemsets  seconds"
        if n_items <= 20:
            header += "   U@50 dp  U@100 dp  U@50 basic  U@100 basic"
        print(header)
        for B in BUDGETS:
            errs, errs_basic, errs_ind, sizes, secs, fims = [], [], [], [], [], []
            for _ in range(args.runs):
                t0 = time.perf_counter()
                out = release(records, tax, B, rng=rng)
                secs.append(time.perf_counter() - t0)
                sizes.append(len(out))
                if n_items <= 20:
                    dp_hist = np.zeros(2**n_items)
                    for k, c in out.items():
                        dp_hist[sum(1 << i for i in k)] += c
                    dp_sos = superset_sums(dp_hist, n_items)
                    errs.append(rel_error(dp_sos[qmask], true, s))
                    basic = np.maximum(hist + noise.discrete_laplace(B, 1, len(hist), rng), 0).astype(float)
                    basic[0] = 0
                    basic_sos = superset_sums(basic, n_items)
                    errs_basic.append(rel_error(basic_sos[qmask], true, s))
                    fims.append([fim_utility(true_sos, dp_sos, 50), fim_utility(true_sos, dp_sos, 100),
                                 fim_utility(true_sos, basic_sos, 50), fim_utility(true_sos, basic_sos, 100)])  # fmt: skip
                else:
                    m, w = as_matrix(out, n_items)
                    errs.append(rel_error(supports(m, w, qs), true, s))
                errs_ind.append(rel_error(independent(records, B, qs, rng), true, s))
            line = f"{B:5.2f}   {np.mean(errs):7.3f}  "
            if n_items <= 20:
                line += f"{np.mean(errs_basic):6.3f}  "
            line += f"{np.mean(errs_ind):10.3f}   {np.mean(sizes):8.0f}  {np.mean(secs):7.2f}"
            if n_items <= 20:
                f = np.mean(fims, axis=0)
                line += f"   {f[0]:8.3f}  {f[1]:8.3f}  {f[2]:10.3f}  {f[3]:11.3f}"
            print(line)


if __name__ == "__main__":
    main()
