"""Benchmark: ladder quantities on the WormNet gene network, beside networkx's triangle count.

Not part of the test suite (timings are reported, not asserted). Run:

    python tests/benchmarks/bench_ladder.py [--repeat 5]
    python tests/benchmarks/bench_ladder.py --intervals [--runs 600] [--epsilons 0.1,0.4,1.6]
        [--graphs road,rgg,er,powerlaw,wormnet,karate] [--share 0.2] [--exact] [--out after.jsonl]
    python tests/benchmarks/bench_ladder.py --compare before.jsonl after.jsonl [--long]
    python tests/benchmarks/bench_ladder.py --cost

``--cost`` prints the seconds and peak memory of one calibrated error bar from ε = 10 down to
10^-6 on 34 and 2,445 nodes, and the most (rung, window) pairs one probe visited.

``--intervals`` prints, per graph, query and ε, the mean half-width of the 95% error bar over
``--runs`` releases (``release_with_interval`` with ``--share`` of ε on the width statistic, as
the SQL answer makes them) divided by the count's mean |X - f| (exact, from the ladder's law:
the errors are heavy-tailed, and 600 of them give their mean to about ±6%), the coverage (of the
interval as the SQL answer clamps it at zero) and, beside it, the 99.9% one-sided binomial
lower bound on the true coverage given that many hits (Clopper-Pearson), how often the
interval collapsed to ``[0, 0]`` below a positive count, and the floor: the exact 95% quantile
of |X - f| divided by its exact mean (what an error bar that knew the private ladder would
give). With ``--exact`` it also prints the mean half-width over the mean error and the coverage
summed over the width statistic's exact noise law instead of sampled (the half-width is a function
of the noisy statistic; the count's noise is independent of it): the expectations the sampled
columns estimate, the coverage unclamped (a lower bound on the clamped one's). It uses only
``ladder_function`` and ``release_with_interval``, so the same script
measures an earlier release of the package (put it first on ``PYTHONPATH``); ``--out`` writes
the rows as JSON lines and ``--compare`` prints two such files side by side as a Markdown table
(with ``--long``, one row per graph, query and ε: both ratios, both coverages with their bounds,
and the floor).

Graphs (fixed seeds): karate; a road-like 55 x 55 grid with 8% of its diagonals (3,025 nodes,
mean degree 4.1); a random geometric graph (3,000 nodes, mean degree 5.8); a sparse random
graph G(3,000, 5/2,999); a power-law graph with clustering (Holme-Kim, 3,000 nodes, 2 edges per
new node, triangle probability 0.5: mean degree 4, largest degree 137); and WormNet. Queries:
triangles, 2- and 3-stars, 2-triangles and, where the graph has any, 4-cliques (served on the
3,000-node graphs only with the owner's ``allow_kclique``).

For triangles and 3-stars it times ``ladder_function``: canonicalising the edges, the exact
count and every ladder quantity (``I_0 .. I_{M-1}``, ``M``, the width statistic); the target
is under 10 s each on 2 cores. Beside it: the exact count alone, one release with its DP
interval, and networkx 3.6.1 counting triangles only (``sum(nx.triangles(G).values()) // 3``
on a prebuilt ``nx.Graph``; building the graph is reported separately).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import networkx as nx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "mechanisms"))  # the error-bar tests' exact law

from ladder_exact import exact_mean_error, over_the_noise  # noqa: E402
from ladder_utility import load_gene_network  # noqa: E402

from dpgate.mechanisms import graphs  # noqa: E402
from dpgate.mechanisms.ladder import ladder_function, release_with_interval  # noqa: E402

TARGET_SECONDS = 10.0


def timed(fn, repeat: int) -> tuple[float, float, object]:
    """(first call, median of ``repeat`` further calls, result)."""
    t = time.perf_counter()
    result = fn()
    first = time.perf_counter() - t
    samples = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t)
    return first, statistics.median(samples), result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--intervals", action="store_true", help="error-bar width against the actual error")
    ap.add_argument("--runs", type=int, default=600)
    ap.add_argument("--epsilons", default="0.1,0.4,1.6")
    ap.add_argument("--graphs", default="road,rgg,er,powerlaw,wormnet,karate")
    ap.add_argument("--queries", default="triangle,kstar2,kstar3,ktriangle2,kclique4")
    ap.add_argument("--share", type=float, default=None, help="interval_share (default: the package's)")
    ap.add_argument("--exact", action="store_true",
                    help="also sum the mean half-width and the miss probability over the statistic's noise")
    ap.add_argument("--out", default=None, help="also write the rows as JSON lines here")
    ap.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"), help="two --out files as a Markdown table")
    ap.add_argument("--long", action="store_true", help="with --compare: one row per graph, query and ε")
    ap.add_argument("--cost", action="store_true", help="the error bar's time and memory from ε = 10 to 1e-6")
    args = ap.parse_args()
    if args.cost:
        cost()
        return
    if args.compare:
        (compare_long if args.long else compare)(*args.compare)
        return
    if args.intervals:
        epsilons = [float(e) for e in args.epsilons.split(",")]
        intervals(args.runs, epsilons, args.graphs.split(","), args.queries.split(","), args.share, args.out,
                  args.exact)
        return

    t = time.perf_counter()
    edges, n = load_gene_network()
    load = time.perf_counter() - t
    print(f"WormNet v3: {n:,} nodes, {len(edges):,} edges (loaded in {load:.2f} s); {os.cpu_count()} CPUs; "
          f"median of {args.repeat} runs after a first call")  # fmt: skip
    rows = []
    for query, k, label in [("triangle", None, "triangles"), ("kstar", 3, "3-stars")]:
        first, sec, lf = timed(lambda: ladder_function(edges, n, query, k), args.repeat)
        _, count_sec, _ = timed(lambda: graphs.subgraph_count(edges, n, query, k), args.repeat)
        rng = np.random.default_rng(0)
        _, release_sec, _ = timed(lambda: release_with_interval(lf, 0.5, rng=rng), args.repeat)
        verdict = "ok" if max(first, sec) < TARGET_SECONDS else "OVER TARGET"
        note = f"first call {first:.3f} s; f = {lf.value:,}, M = {lf.M:,} ({verdict})"
        rows.append((f"dpgate {label}: count + all ladder quantities", sec, note))
        rows.append((f"dpgate {label}: exact count only", count_sec, ""))
        rows.append((f"dpgate {label}: one release + DP interval (ε = 0.5)", release_sec, ""))

    t = time.perf_counter()
    graph = nx.Graph()
    graph.add_nodes_from(range(n))
    graph.add_edges_from(edges.tolist())
    build = time.perf_counter() - t
    nx_first, nx_sec, nx_count = timed(lambda: sum(nx.triangles(graph).values()) // 3, args.repeat)
    rows.append(("networkx: build nx.Graph", build, ""))
    rows.append(("networkx: count triangles only", nx_sec, f"first call {nx_first:.3f} s; f = {nx_count:,}"))

    rows += _through_sql(args.repeat)
    width = max(len(r[0]) for r in rows)
    for name, sec, note in rows:
        print(f"{name:<{width}}  {sec:8.3f} s  {note}")


def cost() -> None:
    """Seconds and peak memory of one calibrated error bar (every cache cleared; 10% of ε on the
    statistic, a noisy statistic of 5, 95%), and the most (rung, window) pairs one probe of the
    band bound visited: it runs after the debit, so its work must not grow with 1/ε."""
    import resource
    import tracemalloc

    from dpgate.mechanisms import ladder_bounds

    visits = []

    class Counted(ladder_bounds._Band):
        def ok(self, m, beta):
            result = super().ok(m, beta)
            visits.append(self.visits[-1])
            return result

    ladder_bounds._Band = Counted
    print(f"{'N':>6} {'query':<12} {'ε':>7} {'seconds':>8} {'peak MB':>8} {'pairs/probe':>12} {'half-width':>14}")
    for n in (34, 2445):
        for query, k in (("triangle", None), ("kstar", 3), ("ktriangle", 2)):
            for eps in (10.0, 1.0, 0.1, 0.01, 1e-3, 1e-4, 1e-6):
                _clear_caches()
                del visits[:]
                tracemalloc.start()
                t = time.perf_counter()
                m, _, _ = ladder_bounds.calibrated_half_width(query, k, n, 0.9 * eps, 5, 0.1 * eps, 0.05)
                seconds = time.perf_counter() - t
                peak = tracemalloc.get_traced_memory()[1] / 2**20
                tracemalloc.stop()
                label = query if k is None else f"{query} {k}"
                print(f"{n:>6} {label:<12} {eps:>7g} {seconds:>8.2f} {peak:>8.1f} {max(visits, default=0):>12,} "
                      f"{m:>14,}", flush=True)  # fmt: skip
    print(f"process peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024} MB")


def _clear_caches() -> None:
    """Every memo of the error bars' modules (whichever of them this version of the package has)."""
    import importlib

    for name in ("dpgate.mechanisms.ladder_bounds", "dpgate.mechanisms.ladder_widths", "dpgate.mechanisms.graphs"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        for value in vars(module).values():
            if callable(getattr(value, "cache_clear", None)):
                value.cache_clear()


def interval_graphs(names: list[str]) -> dict[str, tuple[np.ndarray, int]]:
    """The benchmark graphs (fixed seeds), built only when asked for."""
    def karate():
        return np.array(sorted((min(u, v), max(u, v)) for u, v in nx.karate_club_graph().edges()), dtype=np.int64), 34

    def road():
        side = 55
        g = nx.grid_2d_graph(side, side)
        rng = np.random.default_rng(3)
        for i in range(side - 1):
            for j in range(side - 1):
                if rng.random() < 0.08:
                    g.add_edge((i, j), (i + 1, j + 1))
        g = nx.convert_node_labels_to_integers(g)
        return graphs.simple_edges(*np.array(g.edges()).T), g.number_of_nodes()

    def generated(g, n):
        return graphs.simple_edges(*np.array(g.edges()).T), n

    makers = {
        "karate": karate,
        "road": road,
        "rgg": lambda: generated(nx.random_geometric_graph(3000, (6.0 / (np.pi * 3000)) ** 0.5, seed=7), 3000),
        "er": lambda: generated(nx.fast_gnp_random_graph(3000, 5 / 2999, seed=11), 3000),
        "powerlaw": lambda: generated(nx.powerlaw_cluster_graph(3000, 2, 0.5, seed=5), 3000),
        "wormnet": load_gene_network,
    }
    return {name: makers[name]() for name in names}


QUERY_NAMES = {"triangle": ("triangle", None), "kstar2": ("kstar", 2), "kstar3": ("kstar", 3),
               "ktriangle2": ("ktriangle", 2), "kclique4": ("kclique", 4)}  # fmt: skip


def intervals(runs: int, epsilons: list[float], names: list[str], queries: list[str], share, out,
              exact: bool = False) -> None:
    import json

    from dpgate.mechanisms.ladder import LadderMechanism
    from dpgate.queries.subgraph import clamped_interval

    available = interval_graphs(names)
    mech = LadderMechanism()
    kwargs = {} if share is None else {"width_share": share}
    sink = open(out, "a") if out else None
    import dpgate

    print(f"package: {Path(dpgate.__file__).parent}; {runs} releases per row; interval_share "
          f"{'the default' if share is None else share}")
    print(f"{'graph':<9} {'query':<12} {'f':>12} {'ε':>4} {'mean |err|':>11} {'± / |err|':>9} {'floor':>6} "
          f"{'coverage':>8} {'≥ (99.9%)':>9} {'[0, 0]':>6} {'s/release':>9}"
          + (f" {'exact ±/|err|':>13} {'exact cover':>11}" if exact else ""))  # fmt: skip
    for name in names:
        edges, n = available[name]
        for label in queries:
            query, k = QUERY_NAMES[label]
            lf = ladder_function(edges, n, query, k)
            if lf.value == 0:
                continue
            for eps in epsilons:
                rng = np.random.default_rng(2026)
                widths, errors, hits, collapsed = [], [], 0, 0
                t = time.perf_counter()
                for _ in range(runs):
                    r = release_with_interval(lf, eps, rng=rng, **kwargs)
                    _, low, high = clamped_interval(r.value, r.interval.half_width, True)
                    widths.append(r.interval.half_width)
                    errors.append(abs(r.value - lf.value))
                    hits += low <= lf.value <= high
                    collapsed += low == high == 0
                seconds = (time.perf_counter() - t) / runs
                eps_count = r.interval.epsilon
                mean_error = exact_mean_error(lf, eps_count)  # E|X - f| from the law: the sample's is heavy-tailed
                floor = mech.error_quantile(lf, eps_count, 0.95) / mean_error
                row = {"graph": name, "query": label, "f": lf.value, "epsilon": eps, "share": r.interval.epsilon_width / eps,
                       "mean_error": mean_error, "sampled_mean_error": float(np.mean(errors)),
                       "mean_half_width": float(np.mean(widths)), "ratio": float(np.mean(widths)) / mean_error,
                       "floor": floor, "runs": runs, "hits": hits, "coverage_low": _coverage_bound(hits, runs, 1e-3),
                       "collapsed": collapsed}  # fmt: skip
                extra = ""
                if exact:  # the same two quantities summed over the statistic's exact law, not sampled
                    miss, mean_width = over_the_noise(lf, eps, r.interval.epsilon_width / eps, 0.05)
                    row.update(exact_ratio=mean_width / mean_error, exact_coverage=1 - miss)
                    extra = f" {row['exact_ratio']:>13.2f} {1 - miss:>11.4f}"
                print(f"{name:<9} {label:<12} {lf.value:>12,} {eps:>4} {mean_error:>11.4g} {row['ratio']:>9.1f} "
                      f"{floor:>6.1f} {hits / runs:>8.3f} {row['coverage_low']:>9.3f} {collapsed:>6} {seconds:>9.3f}{extra}",
                      flush=True)  # fmt: skip
                if sink:
                    sink.write(json.dumps(row) + "\n")
                    sink.flush()
    if sink:
        sink.close()


def _coverage_bound(hits: int, runs: int, false_alarm: float) -> float:
    """One-sided Clopper-Pearson lower bound: the smallest p with P(Bin(runs, p) >= hits) >=
    false_alarm (bisection on the exact binomial tail)."""
    import math

    def tail(p: float) -> float:  # P(Bin(runs, p) >= hits)
        if p <= 0.0:
            return 0.0 if hits else 1.0
        if p >= 1.0:
            return 1.0
        logs = [math.lgamma(runs + 1) - math.lgamma(j + 1) - math.lgamma(runs - j + 1)
                + j * math.log(p) + (runs - j) * math.log1p(-p) for j in range(hits, runs + 1)]  # fmt: skip
        top = max(logs)
        return math.exp(top) * sum(math.exp(x - top) for x in logs)

    lo, hi = 0.0, hits / runs
    for _ in range(50):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if tail(mid) < false_alarm else (lo, mid)
    return lo


def compare(before_path: str, after_path: str) -> None:
    """Two --out files as one Markdown table: half-width / mean error before → after per ε, the
    range of the sampled coverage after (over ε), and how the count's own mean error changed
    (after / before: a larger share of ε on the error bar leaves less for the count)."""
    import json

    def load(path):
        return {(r["graph"], r["query"], r["epsilon"]): r for r in map(json.loads, open(path))}

    before, after = load(before_path), load(after_path)
    keys = [key for key in after if key in before]
    epsilons = sorted({key[2] for key in keys})
    print("| graph | query | " + " | ".join(f"ε = {e:g}" for e in epsilons) + " | coverage | count error × |")
    print("|---|---|" + "---|" * len(epsilons) + "---|---|")
    for graph, query in dict.fromkeys((key[0], key[1]) for key in keys):
        rows = [(before.get((graph, query, e)), after.get((graph, query, e))) for e in epsilons]
        cells = [f"{b['ratio']:.1f} → {a['ratio']:.1f}" if a and b else "" for b, a in rows]
        cover = [a["hits"] / a["runs"] for _, a in rows if a]
        change = [a["mean_error"] / b["mean_error"] for b, a in rows if a and b]
        print(f"| {graph} | {query} | " + " | ".join(cells) + f" | {min(cover):.3f}–{max(cover):.3f} | "
              f"{min(change):.2f}–{max(change):.2f} |")  # fmt: skip


def compare_long(before_path: str, after_path: str) -> None:
    """Two --out files as one Markdown row per graph, query and ε: the half-width over the mean
    error before and after, the floor (after: the exact 95% quantile of |X - f| over its mean at
    the count's ε), the count's own mean error after over before (a larger share of ε on the
    error bar leaves less for the count), the half-width itself after over before, and each
    coverage with its 99.9% binomial lower bound; from two ``--exact`` runs, also the ratios before
    and after and the coverage after summed over the statistic's noise."""
    import json

    def load(path):
        return {(r["graph"], r["query"], r["epsilon"]): r for r in map(json.loads, open(path))}

    def cover(r):
        return f"{r['hits'] / r['runs']:.3f} (≥ {r['coverage_low']:.3f})"

    before, after = load(before_path), load(after_path)
    exact = all("exact_ratio" in r for r in [*before.values(), *after.values()])  # --exact runs: both sums too
    print("| graph | subgraph | ε | ± / mean error before | after | floor | count error × | ± × | coverage before | "
          "coverage after |" + (" summed: ± / mean error before | after | coverage after |" if exact else ""))  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|" + ("---|---|---|" if exact else ""))
    for key, a in after.items():
        b = before.get(key)
        if b is None:
            continue
        graph, query, eps = key
        change = a["mean_error"] / b["mean_error"]
        narrower = a["mean_half_width"] / b["mean_half_width"]
        summed = f" {b['exact_ratio']:.2f} | {a['exact_ratio']:.2f} | {a['exact_coverage']:.4f} |" if exact else ""
        print(f"| {graph} | {query} | {eps:g} | {b['ratio']:.1f} | {a['ratio']:.1f} | {a['floor']:.1f} | "
              f"{change:.2f} | {narrower:.2f} | {cover(b)} | {cover(a)} |{summed}")  # fmt: skip


def _through_sql(repeat: int) -> list[tuple[str, float, str]]:
    """The same counts as SQL on the demo database: plan, debit, edge query, ladder, release."""
    import tempfile

    import dpgate
    from dpgate.interfaces import demo

    path = demo.build(Path(tempfile.mkdtemp()) / "demo.duckdb")
    out = []
    with dpgate.connect(str(path), analyst="demo") as con:
        cur = con.cursor()
        for label, call in (("triangles", "TRIANGLE_COUNT(src, dst)"), ("3-stars", "KSTAR_COUNT(src, dst, 3)")):
            sql = f"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.01, fresh = true) {call} FROM wormnet"
            _, sec, _ = timed(lambda: cur.execute(sql).fetchall(), repeat)
            out.append((f"dpgate SQL {label} (ledger debit included)", sec, ""))
    return out


if __name__ == "__main__":
    main()
