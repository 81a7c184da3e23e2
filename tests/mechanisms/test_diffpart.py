"""DiffPart: the taxonomy, the budget telescoping, exact privacy on neighbouring inputs, branching."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from dpgate import noise
from dpgate.mechanisms.diffpart import Taxonomy, Trace, chain_budgets, critical_c2, release, thresholds

# The paper's Table 1: items I1..I4 as 0..3
TABLE1 = [{0, 1, 2, 3}, {1, 3}, {1}, {0, 1}, {1}, {0}, {0, 1, 2, 3}, {1, 2, 3}]


def matrix(records, n_items):
    m = np.zeros((len(records), n_items), dtype=bool)
    for i, r in enumerate(records):
        m[i, list(r)] = True
    return m


def first(nodes, rng):  # a fixed, data-independent choice of u (the exact computation below uses it)
    return nodes[0]


@pytest.mark.parametrize("n, f, height, internal", [(4, 2, 2, 3), (17, 10, 2, 3), (1012, 10, 4, 116), (17, 2, 5, 20), (1, 10, 0, 0)])
def test_taxonomy_shapes(n, f, height, internal):
    t = Taxonomy.build(n, f)
    assert t.height[t.root] == height and t.n_internal == internal
    assert sorted(i for v in range(len(t.lo)) if not t.children[v] for i in range(t.lo[v], t.hi[v])) == list(range(n))


def test_the_worked_example_budgets():
    # Example 4.2 / C.1 (f = 2): root B/6; {I12} B/3 (then leaves 5B/6); {I12, I34} B/6; {I12, I3, I4} leaves 2B/3
    t = Taxonomy.build(4, 2)
    A, Bn, root = 4, 5, 6  # nodes {I1,I2}, {I3,I4}, root
    assert (t.children[A], t.children[Bn], t.children[root]) == ((0, 1), (2, 3), (A, Bn))
    assert chain_budgets(t, 1.0, [(root,), (A,)]) == [Fraction(1, 6), Fraction(5, 6)]
    assert chain_budgets(t, 1.0, [(root,), (A, Bn), (A, 2, 3)]) == [Fraction(1, 6), Fraction(1, 6), Fraction(2, 3)]
    for path in ([(root,), (A,)], [(root,), (A, Bn), (A, 2, 3)], [(root,), (A, Bn), (0, 1, Bn)]):
        assert sum(chain_budgets(t, 1.0, path)) == 1  # every chain spends exactly B


def test_every_chain_spends_exactly_b_on_deeper_trees():
    rng = np.random.default_rng(3)
    for n, f in ((17, 2), (40, 3), (122, 10)):
        t = Taxonomy.build(n, f)
        for _ in range(50):  # random chains: expand a max-height node into a random non-empty subset
            cut, path = (t.root,), []
            while True:
                path.append(cut)
                if sum(t.internal[v] for v in cut) == 1:
                    break
                h = max(t.height[v] for v in cut)
                u = [v for v in cut if t.height[v] == h][0]
                kids = t.children[u]
                pick = [k for k in kids if rng.random() < 0.5] or [kids[0]]
                cut = tuple(sorted([v for v in cut if v != u] + pick))
                if all(t.height[v] == 0 for v in cut):
                    break
            budgets = chain_budgets(t, 1.0, path)
            if sum(t.internal[v] for v in path[-1]) == 1:
                assert sum(budgets) == 1
            else:
                assert sum(budgets) <= 1


def test_without_noise_it_returns_the_exact_histogram():
    out = release(matrix(TABLE1, 4), Taxonomy.build(4, 2), 1e7, rng=np.random.default_rng(1))
    assert out == {(0,): 1, (1,): 2, (0, 1): 1, (1, 3): 1, (1, 2, 3): 1, (0, 1, 2, 3): 2}


# -- exact privacy ------------------------------------------------------------------------------------
def exact_probability(records, t, eps, c1, c2, released):
    """P(release == released) for the fixed choice ``first``, summed over which partitions survive."""
    m = matrix(records, t.n_items) if records else np.zeros((0, t.n_items), dtype=bool)
    B = Fraction(eps)

    def pmf(e, z):
        return float(noise.discrete_laplace_pmf(float(e), 1, np.array([z]))[0])

    def tail_below(e, k, count):  # P(count + Z < k)
        a = noise.discrete_laplace_alpha(float(e), 1)
        d = k - count  # P(Z < d)
        return 1 - a**d / (1 + a) if d >= 1 else a ** (1 - d) / (1 + a)

    def under(cut):  # released itemsets whose leaf cut refines ``cut``
        covered = [set(range(t.lo[v], t.hi[v])) for v in cut]
        return [s for s in released if all(set(s) & c for c in covered) and set(s) <= set().union(*covered)]

    def prob(cut, ids, spare):
        n_internal = sum(t.internal[v] for v in cut)
        h = max(t.height[v] for v in cut)
        u = sorted(v for v in cut if t.height[v] == h)[0]
        kids = t.children[u]
        rest = [v for v in cut if v != u]
        leaf = n_internal == 1
        e = B / 2 + spare if leaf else spare / n_internal
        k = thresholds(1 if leaf else h, float(e), c1 if leaf else c2)
        p = 1.0
        for mask in range(1, 2 ** len(kids)):
            chosen = [kids[j] for j in range(len(kids)) if mask >> j & 1]
            new_cut = tuple(sorted(rest + chosen))
            mine = [i for i in ids if all(m[i, t.lo[c] : t.hi[c]].any() == bool(mask >> j & 1) for j, c in enumerate(kids))]
            if leaf:
                itemset = tuple(t.lo[v] for v in new_cut)
                if itemset in released:
                    n = released[itemset]
                    p *= pmf(e, n - len(mine)) if n >= k else 0.0
                else:
                    p *= tail_below(e, k, len(mine))
            else:
                survive = 1 - tail_below(e, k, len(mine))
                below = under(new_cut)
                p *= survive * prob(new_cut, mine, spare - e) + ((1 - survive) if not below else 0.0)
        return p

    return prob((t.root,), list(range(len(records))), B / 2)


@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0])
def test_exact_privacy_on_neighbouring_datasets(eps):
    """Every release seen on D or D' (one record added) has probability ratio ≤ e^ε, exactly."""
    t = Taxonomy.build(4, 2)
    c1, c2 = 0.3, 0.3  # low thresholds: many partitions survive, so the test exercises deep chains
    rng = np.random.default_rng(20261124)
    worst = 0.0
    for extra in ({0, 2}, {1, 2, 3}, {3}, {0, 1, 2, 3}):
        d = TABLE1
        d2 = TABLE1 + [extra]
        seen = set()
        for data in (d, d2):
            for _ in range(60):
                out = release(matrix(data, 4), t, eps, rng=rng, c1=c1, c2=c2, choose=first)
                seen.add(tuple(sorted(out.items())))
        for key in seen:
            r = dict(key)
            p1 = exact_probability(d, t, eps, c1, c2, r)
            p2 = exact_probability(d2, t, eps, c1, c2, r)
            assert p1 > 0 and p2 > 0
            worst = max(worst, abs(math.log(p1 / p2)))
            assert abs(math.log(p1 / p2)) <= eps + 1e-9, (key, p1, p2)
    assert worst > 0.5 * eps  # the test has teeth: some releases come close to the bound


def test_exact_probabilities_sum_to_one_and_match_the_sampler():
    # On a 2-item universe every release can be enumerated: the exact law sums to 1 and the
    # sampler's frequencies agree with it (chi-square, 4,000 runs, critical value at 0.999).
    t = Taxonomy.build(2, 2)
    data = [{0}, {0, 1}, {1}, {0}]
    eps, c1, c2 = 1.0, 0.3, 0.3
    support = {}
    for counts in itertools.product(range(0, 14), repeat=3):
        r = {s: n for s, n in zip([(0,), (1,), (0, 1)], counts) if n >= 1}
        key = tuple(sorted(r.items()))
        if key not in support:
            support[key] = exact_probability(data, t, eps, c1, c2, r)
    assert sum(support.values()) == pytest.approx(1.0, abs=2e-3)
    rng = np.random.default_rng(5)
    draws = [tuple(sorted(release(matrix(data, 2), t, eps, rng=rng, c1=c1, c2=c2).items())) for _ in range(4000)]
    top = sorted(support, key=support.get, reverse=True)[:12]
    observed = [sum(d == k for d in draws) for k in top]
    expected = [4000 * support[k] for k in top]
    rest_o, rest_e = 4000 - sum(observed), 4000 - sum(expected)
    chi2 = sum((o - e) ** 2 / e for o, e in zip(observed + [rest_o], expected + [rest_e]))
    assert chi2 < 34.5  # chi-square, 12 degrees of freedom, 0.999 quantile 32.9 (+ rounding of the support)


# -- branching ----------------------------------------------------------------------------------------
def test_fake_partitions_stay_subcritical_at_the_defaults():
    # No records at all: everything released or expanded is a fake. At the default C2 and fan-out
    # 10 an operation spawns 0.037 fakes on average (critical C2 4.41); 300 runs on 17 and 122 items.
    assert critical_c2(10) == pytest.approx(4.41, abs=0.01) and critical_c2(2) < 0.3
    rng = np.random.default_rng(11)
    for n in (17, 122):
        t = Taxonomy.build(n, 10)
        ops = []
        for _ in range(300):
            tr = Trace()
            release(np.zeros((0, n), dtype=bool), t, 1.0, rng=rng, trace=tr)
            ops.append(len(tr.operations))
        assert np.mean(ops) < 1.2 and max(ops) <= 6
    # Records holding every item: each operation has one real survivor and 1,022 empty candidates.
    # The paper's "slightly greater than 1" breeds fakes without end (stopped at 3,000 operations);
    # the default stays at the real chain plus a handful.
    t = Taxonomy.build(122, 10)
    full = np.ones((2000, 122), dtype=bool)
    tr = Trace()
    out = release(full, t, 1.0, rng=rng, trace=tr)
    assert len(tr.operations) < 40 and out.get(tuple(range(122)), 0) > 1900
    tr = Trace()
    release(full, t, 1.0, rng=rng, c2=1.1, c1=1.1, max_operations=3000, trace=tr)
    assert tr.stopped and len(tr.operations) == 3000  # stopped (and released what it had), no error


def test_a_release_stops_at_its_work_cap():
    """An operation costs OPERATION_UNITS plus its candidates (public): 607,000 operations of up
    to 2,047 candidates once ran two minutes after the debit. The run stops before the operation
    that would pass max_work, having done no more than that, and releases what it found."""
    from dpgate.mechanisms import diffpart

    rng = np.random.default_rng(7)
    t = Taxonomy.build(122, 10)
    full = np.ones((2000, 122), dtype=bool)
    cap = 40 * (diffpart.OPERATION_UNITS + 1023)
    tr = Trace()
    release(full, t, 1.0, rng=rng, c2=1.1, c1=1.1, max_work=cap, trace=tr)
    work = sum(diffpart.OPERATION_UNITS + n_cand for _, _, _, n_cand, _, _ in tr.operations)
    assert tr.stopped and work <= cap < work + diffpart.OPERATION_UNITS + 1023
    assert diffpart.MAX_WORK < 1_000_000 * (diffpart.OPERATION_UNITS + 1)


def test_fake_release_rate_matches_the_tail():
    # One item pair, no data: a leaf candidate passes with probability a^k / (1 + a), k = ⌈√2·C1/ε⌉
    t = Taxonomy.build(2, 2)
    eps, c1 = 1.0, 1.0
    k = thresholds(1, eps, c1)
    p = noise.discrete_laplace_tail(eps, 1, k)
    rng = np.random.default_rng(9)
    runs = 20000
    hits = sum(len(release(np.zeros((0, 2), dtype=bool), t, eps, rng=rng, c1=c1)) for _ in range(runs))
    expected = 3 * runs * p
    assert abs(hits - expected) < 4 * math.sqrt(expected)


def test_records_needed_is_exact_below_its_cap_and_quick_beyond_it():
    """The route's need is ``Σ_k C(groups, k) × itemsets × threshold``: exactly that wherever a roster
    could reach it, and ``NEEDED_CAP`` past it. Summed in full, 100,000 declared items (10,000 groups)
    with ``max_rows_contributed = 1,000,000`` took 17 s (10^6 items: over 10 minutes) of big-integer
    binomials — in a free EXPLAIN, and in the debit's transaction under the ledger's lock."""
    import time

    from dpgate.mechanisms.diffpart import NEEDED_CAP, records_needed

    for n, f, top in [(17, 10, 17), (30, 10, 8), (122, 10, 17), (60, 3, 5), (12, 2, 12), (400, 12, 40), (2000, 10, 100)]:
        tax = Taxonomy.build(n, f)
        groups = [v for v in range(len(tax.height)) if tax.height[v] == 1]
        largest = max(len(tax.children[v]) for v in groups)
        full = (sum(math.comb(len(groups), k) for k in range(1, min(len(groups), top) + 1))
                * sum(math.comb(largest, k) for k in range(1, min(largest, top) + 1))
                * thresholds(1, 1.0 / 2 / tax.n_internal, 6.75))  # fmt: skip
        assert records_needed(tax, 1.0, 2.75, 6.75, top) == min(full, NEEDED_CAP), (n, f, top)
    tax = Taxonomy.build(100_000, 10)
    t = time.perf_counter()
    assert records_needed(tax, 1.0, 2.75, 6.75, 1_000_000) == NEEDED_CAP
    assert time.perf_counter() - t < 1.0
