"""Set-valued releases: DiffPart, the marginals path and plain counts, on sparse and dense baskets.

Run:

    python examples/setvalued_release.py [--records 1000000] [--runs 3] [--seed 1] [--queries 2000]

Three datasets, one record per subject:

- the supermarket baskets shipped with dpgate (4,627 baskets of a median 18 of 122 items, the
  universe declared in alphabetical order as in ``topk_baskets.py``; ``max_rows`` 48);
- a generated set of sparse baskets (``sparse_baskets``: 4,043 records of a median 8 of 104
  items, drawn from 20 latent "shopping profiles" so that items co-occur; ``max_rows`` 40);
- a generated set with the MSNBC shape of the DiffPart paper (``msnbc_like``: 17 page categories,
  ``--records`` users, about 1.7 categories each, from 30 profiles; ``max_rows`` 17).

For ε in {0.5, 1, 2} it prints the relative error ``|est − true| / true`` of the 50 largest item
supports and of the 50 largest pair supports (supports: records holding the items; the mean and
the median over the 50), for:

- **partition**: DiffPart (``dpgate.mechanisms.diffpart``, fan-out 10, C1 = 2.75, C2 = 6.75),
  supports summed over its released itemsets — what ``USING diffpart`` released before;
- **marginals**: ``dpgate.mechanisms.setmarginals``: the supports it publishes (``name_supports``'s
  ``support``), then ``measured`` (its noisy supports before the pairs are shrunk and before
  clipping at 0) and ``records`` (the supports of its synthetic records, ``name``);
- **count**: what plain counting gives: ``COUNT(DISTINCT unit) GROUP BY item`` at the whole ε
  (each record in at most ``max_rows`` groups: discrete Laplace of that sensitivity on every
  declared item, as the counting class runs it), and the same over the declared pairs (a record
  keeps a random ``max_rows`` of its pairs; dpgate does not run self-joins, so this one is
  modelled) — each at the whole ε, so the two together would cost 2ε;

and which path ``USING diffpart`` takes there (``route``: public facts only). For the MSNBC shape
it also prints the DiffPart paper's metrics: the average relative error of ``--queries`` random
itemset-support queries of 1..6 items (sanity bound s = 0.1% of the records) and the top-K
frequent-itemset utility ``U = 1 − (1/K) Σ |sup − sup~| / sup`` (K = 50, 100). The true supports
come from the raw data: this is the owner's evaluation, not something an analyst could run.
Without ``--seed`` every run draws fresh OS randomness.
"""

from __future__ import annotations

import argparse
import time

import duckdb
import numpy as np

from dpgate import noise
from dpgate.mechanisms import diffpart, setmarginals
from dpgate.resources import data_dir

EPSILONS = (0.5, 1.0, 2.0)
TOP = 50


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


def _profiles(n: int, n_items: int, profiles: int, popularity: float, draw_sizes, rng: np.random.Generator) -> np.ndarray:
    """Records from ``profiles`` item distributions (Dirichlet(0.3) times a Zipf popularity, so the
    items of one profile co-occur), of sizes ``draw_sizes(rng)``."""
    weights = rng.dirichlet(np.full(n_items, 0.3), size=profiles) * (1.0 / np.arange(1, n_items + 1) ** popularity)
    weights /= weights.sum(axis=1, keepdims=True)
    who = rng.integers(0, profiles, size=n)
    size = draw_sizes(rng)
    m = np.zeros((n, n_items), dtype=bool)
    for p in range(profiles):
        idx = np.flatnonzero(who == p)
        for s in np.unique(size[idx]):
            rows = idx[size[idx] == s]
            keys = rng.random((len(rows), n_items)) ** (1.0 / weights[p])  # weighted sampling without replacement
            m[rows[:, None], np.argsort(-keys, axis=1)[:, :s]] = True
    return m


def msnbc_like(n: int, rng: np.random.Generator) -> np.ndarray:
    """MSNBC-shaped records: 17 categories, 30 profiles, sizes geometric with mean 1.72 (the paper's Table 2)."""
    return _profiles(n, 17, 30, 0.9, lambda g: np.minimum(g.geometric(1 / 1.72, size=n), 17), rng)


def sparse_baskets(n: int = 4043, n_items: int = 104, rng: np.random.Generator | None = None) -> np.ndarray:
    """Sparse baskets: 20 profiles, popularity ∝ rank^−0.8, sizes 1 + negative binomial (median 8, at most 40)."""
    rng = rng if rng is not None else np.random.default_rng(8)
    return _profiles(n, n_items, 20, 0.8, lambda g: np.minimum(1 + g.negative_binomial(4, 4 / (4 + 8.0), size=n), 40),
                     rng)  # fmt: skip


def pair_counts(x: np.ndarray) -> np.ndarray:
    xf = x.astype(np.float64)
    return xf.T @ xf


def errors_top(true_items, est_items, true_pairs, est_pairs) -> tuple[float, float, float, float]:
    """(mean, median) relative error of the TOP largest true item supports, then of the pairs."""
    top = np.argsort(-true_items, kind="stable")[:TOP]
    ei = np.abs(est_items[top] - true_items[top]) / true_items[top]
    iu = np.triu_indices(len(true_items), 1)
    tp = true_pairs[iu]
    keep = np.argsort(-tp, kind="stable")[:TOP]
    ep = np.abs(est_pairs[iu][keep] - tp[keep]) / tp[keep]
    return float(ei.mean()), float(np.median(ei)), float(ep.mean()), float(np.median(ep))


def partition_supports(out: dict, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Item and pair supports summed over DiffPart's released itemsets."""
    m = np.zeros((len(out), d))
    for r, k in enumerate(out):
        m[r, list(k)] = 1.0
    w = np.array(list(out.values()), dtype=np.float64)
    return w @ m, (m.T * w) @ m


def marginals_supports(rel: setmarginals.Marginals) -> tuple[np.ndarray, np.ndarray]:
    p = np.zeros((rel.n_items, rel.n_items))
    p[rel.pairs[:, 0], rel.pairs[:, 1]] = rel.pair_support
    return rel.items, p


def counting(x: np.ndarray, eps: float, max_groups: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """COUNT(DISTINCT unit) GROUP BY item, and GROUP BY pair, each at ε with a record in at most
    ``max_groups`` groups (a random sample of its items or pairs)."""
    d = x.shape[1]
    items = x.sum(axis=0).astype(np.float64)  # max_groups ≥ every record's size here: nothing sampled
    items += noise.discrete_laplace(eps, max_groups, d, rng)
    sizes = x.sum(axis=1)
    light = sizes * (sizes - 1) // 2 <= max_groups
    full = pair_counts(x[light])  # records with at most max_groups pairs keep them all
    for r in np.flatnonzero(~light):  # the others keep a random max_groups of their pairs
        held = np.flatnonzero(x[r])
        cells = np.array([(a, b) for i, a in enumerate(held) for b in held[i + 1 :]])
        kept = cells[rng.choice(len(cells), size=max_groups, replace=False)]
        np.add.at(full, (kept[:, 0], kept[:, 1]), 1)
        np.add.at(full, (kept[:, 1], kept[:, 0]), 1)
    iu = np.triu_indices(d, 1)
    full[iu] += noise.discrete_laplace(eps, max_groups, len(iu[0]), rng)
    return items, full


def route(x: np.ndarray, eps: float, max_rows: int) -> str:
    """The path ``USING diffpart`` takes (``setvalued.route``, on the same public facts)."""
    needed = diffpart.records_needed(diffpart.Taxonomy.build(x.shape[1], 10), eps, diffpart.DEFAULT_C1,
                                     diffpart.DEFAULT_C2, max_rows)  # fmt: skip
    return "partition" if len(x) >= needed else "marginals"


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


def histogram(x: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    d = x.shape[1]
    codes = (x.astype(np.int64) << np.arange(d)).sum(axis=1)
    h = np.bincount(codes, weights=weights, minlength=2**d).astype(float)
    h[0] = 0
    return h


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000, help="records of the MSNBC-shaped set")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--queries", type=int, default=2000, help="random support queries (MSNBC shape)")
    ap.add_argument("--seed", type=int, default=None, help="fixed seed (reproducible, not private)")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed) if args.seed is not None else noise.fresh().rng
    data_rng = np.random.default_rng(20111)  # the generated data is the same in every run
    sets = (("supermarket baskets", baskets(), 48), ("sparse baskets", sparse_baskets(rng=np.random.default_rng(8)), 40),
            ("MSNBC-shaped", msnbc_like(args.records, data_rng), 17))  # fmt: skip
    for name, x, max_rows in sets:
        n, d = x.shape
        true_items, true_pairs = x.sum(axis=0).astype(float), pair_counts(x)
        sizes = x.sum(axis=1)
        print(f"\n{name}: {n:,} records, {d} items, median {int(np.median(sizes))} (at most {sizes.max()}) per "
              f"record, max_rows {max_rows}; relative error of the top-{TOP} supports, mean / median, "
              f"{args.runs} run(s)")  # fmt: skip
        print("    ε  route       method      items mean  items med   pairs mean  pairs med    seconds")
        paper = []
        for eps in EPSILONS:
            rows: dict[str, list] = {"partition": [], "marginals": [], "measured": [], "records": [], "count": []}
            for _ in range(args.runs):
                t0 = time.perf_counter()
                out = diffpart.release(x, diffpart.Taxonomy.build(d, 10), eps, rng=rng)
                t1 = time.perf_counter()
                part_items, part_pairs = partition_supports(out, d)
                rows["partition"].append([*errors_top(true_items, part_items, true_pairs, part_pairs), t1 - t0])
                rel = setmarginals.measure(x, eps, rng=rng, max_size=max_rows)
                synthetic = setmarginals.records(rel, rng=rng, max_records=n)
                t2 = time.perf_counter()
                est_items, est_pairs = marginals_supports(rel)
                rows["marginals"].append([*errors_top(true_items, est_items, true_pairs, est_pairs), t2 - t1])
                measured = np.zeros((d, d))
                measured[rel.pairs[:, 0], rel.pairs[:, 1]] = rel.pair_measured
                rows["measured"].append([*errors_top(true_items, rel.item_measured, true_pairs, measured), t2 - t1])
                rows["records"].append([*errors_top(true_items, synthetic.sum(axis=0).astype(float), true_pairs,
                                                    pair_counts(synthetic)), t2 - t1])  # fmt: skip
                t3 = time.perf_counter()
                count_items, count_pairs = counting(x, eps, max_rows, rng)
                rows["count"].append([*errors_top(true_items, count_items, true_pairs, count_pairs),
                                      time.perf_counter() - t3])  # fmt: skip
                if d <= 20:
                    paper.append((eps, out, synthetic))
            path = route(x, eps, max_rows)
            for method, label in (("partition", "partition"), ("marginals", "marginals"), ("measured", "  measured"),
                                  ("records", "  records"), ("count", "count")):  # fmt: skip
                m = np.mean(rows[method], axis=0)
                print(f"{eps:5.1f}  {path:10s}  {label:10s}  {m[0]:10.3f} {m[1]:10.3f}  {m[2]:10.3f} {m[3]:10.3f}"
                      f"  {m[4]:9.2f}")  # fmt: skip
        if paper:
            _paper_metrics(x, paper, args.queries)


def _paper_metrics(x: np.ndarray, runs: list, n_queries: int) -> None:
    """The DiffPart paper's metrics for the partition and marginals paths (17 items: exact sums)."""
    n, d = x.shape
    true_sos = superset_sums(histogram(x), d)
    qrng = np.random.default_rng(2)
    qs = [qrng.choice(d, size=qrng.integers(1, 7), replace=False) for _ in range(n_queries)]
    qmask = np.array([int((1 << q).sum()) for q in qs])
    s = 0.001 * n
    print(f"  DiffPart paper's metrics: average relative error of {n_queries:,} random support queries of 1..6 "
          f"items (s = {s:,.0f}), and top-K itemset utility U")  # fmt: skip
    print("    ε  method       RE     U@50    U@100")
    for eps in EPSILONS:
        got = {"partition": [], "marginals": []}
        for e, out, synthetic in runs:
            if e != eps:
                continue
            h = np.zeros(2**d)
            for k, c in out.items():
                h[sum(1 << i for i in k)] += c
            for method, sos in (("partition", superset_sums(h, d)), ("marginals", superset_sums(histogram(synthetic), d))):
                re = float(np.mean(np.abs(sos[qmask] - true_sos[qmask]) / np.maximum(true_sos[qmask], s)))
                got[method].append([re, fim_utility(true_sos, sos, 50), fim_utility(true_sos, sos, 100)])
        for method, vals in got.items():
            m = np.mean(vals, axis=0)
            print(f"{eps:5.1f}  {method:10s}  {m[0]:6.3f}  {m[1]:6.3f}  {m[2]:6.3f}")


if __name__ == "__main__":
    main()
