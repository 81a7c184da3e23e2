"""Top-k selection (TPS + PFM, TPS + EM, k-fold EM, one-shot Gumbel, freFirst).

Privacy is checked step by step on tiny neighbouring databases (one subject's record added):
the exact output distribution of each step is computed from the sampler's own pmf, every
probability ratio must stay within e^ε of that step's share, and the real sampler must
reproduce the exact distribution. Then correctness (large ε, ties, errors) and utility
(the paper's ordering on a long-tail set, and why it reverses on the supermarket baskets).

Sampled checks allow 5 standard errors (a false alarm well below 1e-5 per comparison) plus
the stated slack; ordering checks require a gap of 3 standard errors of the difference.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections import Counter

import duckdb
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import TEST_SEED
from dpgate import noise
from dpgate.mechanisms import exponential, topk
from dpgate.mechanisms.topk import METHODS, f1_score, noisy_counts, top_k, top_k_from_records
from dpgate.resources import data_dir

PAIRS = "SELECT u AS __unit, it AS __item FROM pairs"
RATIO_SLACK = 1e-9  # float error of the exact sums


def _con(records) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    rows = [(u, int(i)) for u, rec in enumerate(records) for i in sorted(set(int(x) for x in rec))]
    con.execute("CREATE TABLE pairs (u INTEGER, it INTEGER)")
    if rows:
        con.executemany("INSERT INTO pairs VALUES (?, ?)", rows)
    return con


def _stats(records, n_items) -> topk._Stats:
    return topk._stats_from_records([np.asarray(r, dtype=np.int64) for r in records], n_items)


def _max_log_ratio(p: dict, q: dict, floor: float = 1e-10) -> float:
    """Largest |log p/q| over outcomes; an outcome possible under one only is infinite."""
    worst = 0.0
    for key in set(p) | set(q):
        a, b = p.get(key, 0.0), q.get(key, 0.0)
        if max(a, b) < floor:
            continue
        if min(a, b) <= 0.0:
            return math.inf
        worst = max(worst, abs(math.log(a / b)))
    return worst


def _assert_samples_match(samples: Counter, exact: dict, n: int) -> None:
    for key in set(samples) | set(exact):
        p = exact.get(key, 0.0)
        assert abs(samples.get(key, 0) / n - p) <= 5 * math.sqrt(p * (1 - p) / n) + 2e-3, (key, samples.get(key), p)


@dataclasses.dataclass
class CSR:
    """Records as compressed sparse rows, the CSR-like form ``top_k_from_records`` accepts."""

    indptr: np.ndarray
    indices: np.ndarray


def _synthetic(n: int, d: int, seed: int, s: float = 1.1, mean_len: float = 6.5) -> CSR:
    """Zipf(s) item popularity, geometric record lengths, item ids shuffled: a long tail."""
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, d + 1) ** s
    lengths = np.minimum(rng.geometric(1 / mean_len, size=n), 60)
    rec = np.repeat(np.arange(n), lengths)
    items = rng.permutation(d)[rng.choice(d, size=rec.size, p=p / p.sum())]
    key = np.unique(rec * d + items)
    indptr = np.zeros(n + 1, dtype=np.int64)
    indptr[1:] = np.cumsum(np.bincount(key // d, minlength=n))
    return CSR(indptr, key % d)


# -- the API and its errors ------------------------------------------------------------------------
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("k", [0, 6, -1])
def test_k_outside_the_universe_is_refused_before_any_data_is_read(method, k):
    con = duckdb.connect()
    with pytest.raises(ValueError, match="between 1 and the universe size 5"):
        top_k(con, "SELECT this query is never run", None, 5, k, 1.0, method, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="between 1 and the universe size 5"):
        top_k_from_records([[0, 1]], 5, k, 1.0, method, rng=np.random.default_rng(0))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(method="svt"), "unknown top-k method 'svt'"),
        (dict(epsilon=0.0), "epsilon must be positive"),
        (dict(epsilon=-1.0), "epsilon must be positive"),
        (dict(epsilon=math.inf), "epsilon must be positive"),
        (dict(epsilon=math.nan), "epsilon must be positive"),
        (dict(epsilon=1e-12), "too small"),
        (dict(k=2.5), "k must be an integer"),
    ],
)
def test_bad_parameters_are_refused(kwargs, message):
    args = dict(n_items=5, k=2, epsilon=1.0, method="tps_pfm") | kwargs
    with pytest.raises(ValueError, match=message):
        top_k_from_records([[0, 1]], rng=np.random.default_rng(0), **args)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("epsilon", [0.01, 0.3, 1.0, 7.77])
def test_shares_add_up_to_the_requested_epsilon(method, epsilon):
    rel = top_k_from_records([[0, 1], [1, 2], [2]], 4, 2, epsilon, method, rng=np.random.default_rng(TEST_SEED))
    assert rel.epsilon == epsilon and rel.method == method
    assert math.fsum(rel.shares.values()) == pytest.approx(epsilon, rel=1e-15)
    expected = {
        "tps_pfm": {"truncation": 0.1, "phase1": 0.6, "phase2": 0.3},
        "tps_em": {"truncation": 0.1, "phase1": 0.6, "phase2": 0.3},
        "laplace": {"truncation": 0.1, "counts": 0.9},
        "em": {"selection": 1.0},
        "oneshot": {"selection": 1.0},
    }[method]
    assert {name: pytest.approx(share * epsilon, rel=1e-12) for name, share in expected.items()} == rel.shares
    assert len(rel.items) == len(set(rel.items)) == 2 and all(0 <= i < 4 for i in rel.items)
    assert (rel.truncation is None) == (method in ("em", "oneshot"))
    assert rel.truncation is None or 1 <= rel.truncation <= 4


@pytest.mark.parametrize("method", METHODS)
def test_sql_and_in_memory_records_give_the_same_release(method):
    """Same data, same generator state: the same release (the mechanism code is shared)."""
    rng = np.random.default_rng(TEST_SEED)
    records = [rng.choice(30, size=rng.integers(1, 12), replace=False) for _ in range(400)]
    con = _con(records)
    # rows the mechanism must ignore: no unit, items outside the universe
    con.execute("INSERT INTO pairs VALUES (NULL, 3), (NULL, 4), (7, 30), (8, -1), (9, NULL)")
    indptr = np.concatenate([[0], np.cumsum([len(r) for r in records])])
    csr = CSR(indptr, np.concatenate(records))
    for epsilon in (0.2, 3.0):
        seed = int(rng.integers(2**32))
        a = top_k(con, PAIRS, {}, 30, 7, epsilon, method, rng=np.random.default_rng(seed))
        b = top_k_from_records(records, 30, 7, epsilon, method, rng=np.random.default_rng(seed))
        c = top_k_from_records(csr, 30, 7, epsilon, method, rng=np.random.default_rng(seed))
        assert a == b == c


def test_sql_statistics_match_the_in_memory_ones():
    rng = np.random.default_rng(1)
    records = [rng.choice(12, size=rng.integers(1, 9), replace=False) for _ in range(300)]
    via_sql = topk._stats_from_sql(_con(records), f"SELECT * FROM ({PAIRS}) WHERE $x", {"x": True}, 12, True)
    in_memory = _stats(records, 12)
    assert np.array_equal(via_sql.counts, in_memory.counts)
    assert np.array_equal(via_sql.length_histogram(), in_memory.length_histogram())
    for theta in (1, 3, 12):
        assert np.array_equal(via_sql.truncated(theta), in_memory.truncated(theta))
    assert np.array_equal(topk._stats_from_sql(_con(records), PAIRS, None, 12, False).counts, in_memory.counts)


def test_f1_accepts_any_tie_consistent_top_k():
    counts = np.array([9, 7, 5, 5, 1])
    assert f1_score([0, 1, 2], counts, 3) == f1_score([0, 1, 3], counts, 3) == 1.0
    assert f1_score([0, 2, 3], counts, 3) == pytest.approx(2 / 3)
    assert f1_score([0, 4], counts, 3) == pytest.approx(2 * (1 / 2) * (1 / 3) / (1 / 2 + 1 / 3))


# -- privacy, one step at a time ------------------------------------------------------------------
_TINY_LENGTHS = [1, 1, 2, 3, 3, 5]


def _hist(lengths, n_items):
    return np.bincount(np.asarray(lengths, dtype=np.int64), minlength=n_items + 1)


@pytest.mark.parametrize("epsilon_counts", [0.05, 1.0, 50.0])
def test_truncation_choice_is_epsilon1_dp(epsilon_counts):
    n_items, epsilon_theta = 6, 0.7
    base = _hist(_TINY_LENGTHS, n_items)
    q = topk.truncation_quality(base, epsilon_counts)
    p = exponential.probabilities(q, epsilon_theta, 1.0)
    for added in range(1, n_items + 1):
        q2 = topk.truncation_quality(_hist(_TINY_LENGTHS + [added], n_items), epsilon_counts)
        assert np.max(np.abs(q2 - q)) <= 1.0  # [sens-trunc-q]
        p2 = exponential.probabilities(q2, epsilon_theta, 1.0)
        assert np.max(np.abs(np.log(p2 / p))) <= epsilon_theta + RATIO_SLACK


def test_truncation_tends_to_no_truncation_as_epsilon_grows():
    hist = 100 * _hist(_TINY_LENGTHS, 40)
    low = np.argmax(topk.truncation_quality(hist, 0.1)) + 1
    mid = np.argmax(topk.truncation_quality(hist, topk.TRUNCATION_SCALE)) + 1
    high = np.argmax(topk.truncation_quality(hist, 1e4)) + 1
    # the shortest records (ranking needs little), the median at ε_f = TRUNCATION_SCALE, the longest
    assert (low, mid, high) == (1, 2, max(_TINY_LENGTHS))
    assert topk.truncation_level(topk.TRUNCATION_SCALE) == 0.5


@pytest.mark.statistical
def test_truncation_sampler_matches_its_exact_distribution():
    records = [list(range(n)) for n in _TINY_LENGTHS]
    stats = _stats(records, 6)
    p = exponential.probabilities(topk.truncation_quality(stats.length_histogram(), 0.6), 0.4, 1.0)
    rng = np.random.default_rng(TEST_SEED)
    n = 20_000
    got = Counter(topk._choose_truncation(stats, 0.4, 0.6, rng) for _ in range(n))
    _assert_samples_match(got, {theta: float(p[theta - 1]) for theta in range(1, 7)}, n)


def _plackett_luce(counts, k, epsilon) -> dict:
    """Exact distribution of the ordered k draws of the monotone k-fold EM (and one-shot Gumbel)."""
    scale = epsilon / k - noise.EPSILON_MARGIN
    out = {}
    for seq in itertools.permutations(range(len(counts)), k):
        prob, left = 1.0, list(range(len(counts)))
        for j in seq:
            w = np.exp(scale * (np.asarray(counts, dtype=float)[left] - max(counts)))
            prob *= w[left.index(j)] / w.sum()
            left.remove(j)
        out[seq] = prob
    return out


def test_k_fold_em_is_epsilon_dp_on_every_neighbour():
    counts, k, epsilon = np.array([3, 2, 2, 0]), 2, 1.3
    base = _plackett_luce(counts, k, epsilon)
    assert sum(base.values()) == pytest.approx(1.0)
    for added in itertools.product([0, 1], repeat=counts.size):  # which items the new record holds
        assert _max_log_ratio(base, _plackett_luce(counts + np.array(added), k, epsilon)) <= epsilon + RATIO_SLACK


@pytest.mark.statistical
@pytest.mark.parametrize("sampler", [topk._peel, topk._oneshot])
def test_peeling_em_and_one_shot_gumbel_have_the_exact_k_fold_em_distribution(sampler):
    # ``_oneshot`` no longer adds double-precision Gumbel noise (which gives far items
    # probability 0); it samples the same law by ``_peel``'s exact draws, so this now checks
    # that the method is wired to the exact sampler with the per-draw scale ε/k.
    counts, k, epsilon = np.array([3, 2, 2, 0]), 2, 1.3
    rng = np.random.default_rng(TEST_SEED)
    n = 20_000
    got = Counter(tuple(sampler(counts, k, epsilon, rng)) for _ in range(n))
    _assert_samples_match(got, _plackett_luce(counts, k, epsilon), n)


_P1_RECORDS = [[0, 1], [0], [1, 2], [2], [0, 1, 2], [0, 2]]


def _phase1_exact(stats, theta, epsilon, k) -> dict:
    """Exact distribution of (R1, B) over the three items' discrete Laplace noise and random tie order."""
    sensitivity = theta << topk.GRID_BITS
    a = noise.discrete_laplace_alpha(epsilon, sensitivity)
    width = int(math.ceil(36 / -math.log(a)))  # a^width < e^-36
    z = np.arange(-width, width + 1)
    pz = noise.discrete_laplace_pmf(epsilon, sensitivity, z)
    z1, z2, z3 = np.meshgrid(z, z, z, indexing="ij")
    v = np.stack([z1.ravel(), z2.ravel(), z3.ravel()]) + stats.truncated(theta)[:, None]
    prob = (pz[:, None, None] * pz[None, :, None] * pz[None, None, :]).ravel()
    delta = topk.ZONE_WIDTH * sensitivity / epsilon
    perms = list(itertools.permutations(range(3)))
    consistent = [(v[p[0]] >= v[p[1]]) & (v[p[1]] >= v[p[2]]) for p in perms]
    n_orders = np.sum(consistent, axis=0)  # ties: every consistent order equally likely
    out: dict = {}
    for perm, ok in zip(perms, consistent):
        s = v[list(perm)]
        tau = s[k - 1]
        n_r1 = np.sum(s > tau + delta, axis=0)
        n_zone = np.sum(s >= tau - delta, axis=0)
        for r1 in range(k):
            for zone in range(k, 4):
                mass = float(np.sum(prob * ok * (n_r1 == r1) * (n_zone == zone) / n_orders))
                key = (perm[:r1], perm[r1:zone])
                out[key] = out.get(key, 0.0) + mass
    return out


@pytest.fixture
def coarse_grid(monkeypatch):
    """Phase 1 with a 1/2-count grid, so its exact distribution can be enumerated."""
    monkeypatch.setattr(topk, "GRID_BITS", 1)


def test_phase1_zones_are_epsilon2_dp_on_every_neighbour(coarse_grid):
    theta, epsilon, k = 1, 2.0, 2
    base = _phase1_exact(_stats(_P1_RECORDS, 3), theta, epsilon, k)
    assert sum(base.values()) == pytest.approx(1.0, abs=1e-12)
    assert len([p for p in base.values() if p > 1e-6]) > 5
    for record in itertools.chain.from_iterable(itertools.combinations(range(3), r) for r in (1, 2, 3)):
        neighbour = _phase1_exact(_stats(_P1_RECORDS + [list(record)], 3), theta, epsilon, k)
        assert _max_log_ratio(base, neighbour) <= epsilon + RATIO_SLACK


@pytest.mark.statistical
def test_phase1_sampler_matches_its_exact_distribution(coarse_grid):
    theta, epsilon, k = 1, 2.0, 2
    stats = _stats(_P1_RECORDS, 3)
    rng = np.random.default_rng(TEST_SEED)
    n = 10_000
    got = Counter()
    for _ in range(n):
        r1, unsafe = topk._zones(stats, theta, epsilon, k, rng)
        assert r1.size <= k - 1 and unsafe.size >= k - r1.size  # [zones]
        got[(tuple(int(i) for i in r1), tuple(int(i) for i in unsafe))] += 1
    _assert_samples_match(got, _phase1_exact(stats, theta, epsilon, k), n)


@given(
    records=st.lists(st.lists(st.integers(0, 7), min_size=1, max_size=8), max_size=12),
    added=st.lists(st.integers(0, 7), min_size=1, max_size=8),
    theta=st.integers(1, 8),
)
@settings(max_examples=150, deadline=None)
def test_one_record_moves_truncated_frequencies_by_at_most_l_in_l1(records, added, theta):
    before, after = _stats(records, 8), _stats(records + [added], 8)
    change = after.truncated(theta) - before.truncated(theta)
    assert np.all(change >= 0) and change.sum() <= theta << topk.GRID_BITS  # [sens-trunc]
    assert set(np.unique(after.counts - before.counts)) <= {0, 1}  # [sens-freq], monotone


class _NoCloseCharge(topk._BlockScan):
    """A broken PFM that never pays for the comparison that closes a block."""

    def _charge_close(self, eps_c):
        pass


def _p_frequent(x: np.ndarray, doubled_f: int, eps: float) -> np.ndarray:
    """P(2f + ν >= x) for ν discrete Laplace with sensitivity 2 (the sampler's own alpha)."""
    a = noise.discrete_laplace_alpha(eps, 2)
    t = x - doubled_f
    return np.where(t >= 1, a ** np.maximum(t, 0) / (1 + a), 1 - a ** np.maximum(1 - t, 0) / (1 + a))


def _pfm_exact(freqs, k_delta, epsilon, scan_class=topk._BlockScan) -> dict:
    """Exact distribution of PFM's label transcript, driven by the real budget bookkeeping."""
    top = np.sort(freqs)[::-1]
    rho2 = int(top[k_delta - 1]) + int(top[k_delta])
    doubled = 2 * np.asarray(freqs, dtype=np.int64)
    out: dict = {}

    def threshold(eps):
        a = noise.discrete_laplace_alpha(eps, 2)
        z = np.arange(-int(36 / -math.log(a)) - 1, int(36 / -math.log(a)) + 2)
        return rho2 + z, noise.discrete_laplace_pmf(eps, 2, z)

    def walk(pos, scan, xs, weight, done_mass, labels):
        eps_c = None if scan.done or pos == len(freqs) else scan.comparison_epsilon()
        if eps_c is None:
            out[tuple(labels)] = out.get(tuple(labels), 0.0) + done_mass * weight.sum()
            return
        pf = _p_frequent(xs, int(doubled[pos]), eps_c)
        for label in (True, False):
            nxt = dataclasses.replace(scan, charges=list(scan.charges))
            w = weight * (pf if label else 1 - pf)
            if nxt.record(label, eps_c):  # the block closed and the scan goes on
                eps_e = nxt.open_block()
                if eps_e is None:
                    out[tuple(labels + [label])] = out.get(tuple(labels + [label]), 0.0) + done_mass * w.sum()
                    continue
                xs2, w2 = threshold(eps_e)
                walk(pos + 1, nxt, xs2, w2, done_mass * w.sum(), labels + [label])
            else:
                walk(pos + 1, nxt, xs, w, done_mass, labels + [label])

    first = scan_class(k_delta, epsilon)
    xs, w = threshold(first.open_block())
    walk(0, first, xs, w, 1.0, [])
    return out


_PFM_FREQS = np.array([6, 5, 5, 4, 6])


def test_pfm_label_transcript_is_epsilon3_dp_on_every_neighbour():
    k_delta, epsilon = 2, 1.0
    base = _pfm_exact(_PFM_FREQS, k_delta, epsilon)
    assert sum(base.values()) == pytest.approx(1.0, abs=1e-12)
    assert len(base) >= 10
    worst = max(
        _max_log_ratio(base, _pfm_exact(_PFM_FREQS + np.array(added), k_delta, epsilon))
        for added in itertools.product([0, 1], repeat=_PFM_FREQS.size)
    )
    assert worst <= epsilon + RATIO_SLACK


def test_the_pfm_audit_catches_a_mechanism_that_skips_the_closing_charge():
    """The same audit has power: without the closing charges the loss exceeds ε_3."""
    k_delta, epsilon = 3, 1.0
    freqs = np.array([6, 5, 5, 4, 6, 5, 4])
    base = _pfm_exact(freqs, k_delta, epsilon, _NoCloseCharge)
    worst = max(
        _max_log_ratio(base, _pfm_exact(freqs + np.array(added), k_delta, epsilon, _NoCloseCharge))
        for added in itertools.product([0, 1], repeat=freqs.size)
    )
    assert worst > epsilon + 0.2


@pytest.mark.statistical
def test_pfm_sampler_matches_its_exact_distribution():
    k_delta, epsilon = 2, 1.0
    rng = np.random.default_rng(TEST_SEED)
    n = 8_000
    got = Counter(tuple(topk._pfm(_PFM_FREQS, k_delta, epsilon, rng)[0]) for _ in range(n))
    _assert_samples_match(got, _pfm_exact(_PFM_FREQS, k_delta, epsilon), n)


def test_pfm_bookkeeping_on_a_hand_built_label_sequence():
    """Labels (+, +, -, -, -, +): two blocks closed, two closing charges, three thresholds."""
    scan = topk._BlockScan(k_delta=4, epsilon=1.0)
    eps_e = scan.open_block()
    assert eps_e == pytest.approx(1.0 / 16)
    closes = []
    for label in (True, True, False, False, False, True):
        eps_c = scan.comparison_epsilon()
        closed = scan.record(label, eps_c)
        closes.append(closed)
        if closed:
            scan.open_block()
    assert closes == [False, False, True, False, False, True]
    assert scan.closed == 2 and scan.thresholds == 3 and scan.found == 3 and not scan.done
    assert math.fsum(scan.charges) == pytest.approx(scan.spent) and scan.spent < 1.0


def test_pfm_stops_where_the_printed_algorithm_divides_by_zero():
    """One frequent item left and a frequent block closes: the whole rest was just spent."""
    scan = topk._BlockScan(k_delta=1, epsilon=0.3)
    scan.open_block()
    assert scan.record(False, scan.comparison_epsilon()) is False  # block of infrequent labels opens
    scan2 = topk._BlockScan(k_delta=2, epsilon=0.3)
    scan2.open_block()
    assert scan2.record(True, scan2.comparison_epsilon()) is False
    assert scan2.record(False, scan2.comparison_epsilon()) is True  # closes with m = 1: all spent
    assert scan2.remaining == pytest.approx(0.0, abs=1e-15)
    assert scan2.open_block() is None and scan2.done
    assert scan2.spent <= 0.3 * (1 + 1e-12)


@given(
    freqs=st.lists(st.integers(0, 60), min_size=2, max_size=40),
    k_share=st.floats(0.0, 1.0),
    epsilon=st.floats(1e-3, 20.0),
    seed=st.integers(0, 2**32 - 1),
)
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_pfm_never_overspends(freqs, k_share, epsilon, seed):
    freqs = np.array(freqs)
    k_delta = 1 + int(k_share * (freqs.size - 2))
    labels, scan = topk._pfm(freqs, k_delta, epsilon, np.random.default_rng(seed))
    assert scan.spent <= epsilon * (1 + 1e-12) and all(c >= 0 for c in scan.charges)  # [pfm-budget]
    assert sum(labels) <= k_delta and 1 <= scan.thresholds <= min(k_delta, 1 + scan.closed)


@given(
    seed=st.integers(0, 2**32 - 1),
    k=st.integers(1, 12),
    epsilon=st.sampled_from([0.05, 0.5, 5.0]),
    method=st.sampled_from(["tps_pfm", "tps_em"]),
)
@settings(max_examples=60, deadline=None)
def test_tps_structure(seed, k, epsilon, method):
    rng = np.random.default_rng(seed)
    records = [rng.choice(15, size=rng.integers(1, 6), replace=False) for _ in range(60)]
    rel, trace = topk._select(_stats(records, 15), k, epsilon, method, rng)
    assert len(trace.r1) <= k - 1 and 1 <= trace.k_delta <= len(trace.unsafe)
    assert not set(trace.r1) & set(trace.unsafe)
    assert len(rel.items) == len(set(rel.items)) == k and rel.items[: len(trace.r1)] == tuple(trace.r1)
    assert set(rel.items[len(trace.r1) :]) <= set(trace.unsafe) and 0 <= rel.filled <= trace.k_delta


# -- noisy counts for the selected items ------------------------------------------------------------
def test_noisy_counts_bounds_each_subject_with_a_random_sample():
    con = _con([list(range(10)), [0, 1]])
    items = list(range(10))
    rng = np.random.default_rng(TEST_SEED)
    kept = np.zeros(10)
    runs = 600
    for _ in range(runs):
        counts = noisy_counts(con, PAIRS, None, items, 1e6, rng=rng, max_items_per_subject=3)
        assert sum(counts) == 5  # subject 0 keeps 3 of its 10, subject 1 both of its 2
        kept += np.array(counts) - np.array([1, 1] + [0] * 8)
    share = kept / runs
    assert np.all(np.abs(share - 0.3) <= 5 * math.sqrt(0.3 * 0.7 / runs))  # uniform, not storage order


@pytest.mark.statistical
def test_noisy_counts_noise_has_the_stated_sensitivity():
    rng = np.random.default_rng(TEST_SEED)
    records = [rng.choice(200, size=rng.integers(1, 5), replace=False) for _ in range(500)]
    con = _con(records)
    items = list(range(200))
    exact = np.bincount(np.concatenate(records), minlength=200)
    draws = [noisy_counts(con, PAIRS, None, items, 0.8, rng=rng, max_items_per_subject=5) for _ in range(50)]
    z = (np.array(draws) - exact).ravel()
    grid = np.arange(z.min(), z.max() + 1)
    cdf = np.cumsum(noise.discrete_laplace_pmf(0.8, 5, grid))  # sensitivity min(200, 5) = 5
    emp = np.searchsorted(np.sort(z), grid, side="right") / z.size
    assert np.max(np.abs(emp - cdf / cdf[-1])) < 1.63 / math.sqrt(z.size)


@pytest.mark.parametrize(
    "items, m, message", [([], 2, "at least one item"), ([1, 1], 2, "distinct"), ([1, 2], 0, "max_items_per_subject")]
)
def test_noisy_counts_refuses_bad_arguments(items, m, message):
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match=message):
        noisy_counts(duckdb.connect(), "never run", None, items, 1.0, rng=rng, max_items_per_subject=m)


# -- correctness ---------------------------------------------------------------------------------
def _length_biased_records():
    """Item 0 is the most frequent item but occurs only in long records; truncation would hide it."""
    rng = np.random.default_rng(5)
    records = [[0] + list(rng.choice(np.arange(10, 300), size=29, replace=False)) for _ in range(60)]
    for item, count in zip(range(1, 8), (55, 50, 45, 40, 35, 30, 25)):
        records += [[item]] * count
    return records


@pytest.mark.parametrize("method", METHODS)
def test_a_very_large_epsilon_returns_the_true_top_k(method):
    records = _length_biased_records()
    counts = _stats(records, 300).counts
    truth = tuple(np.argsort(-counts, kind="stable")[:6])
    assert counts[list(truth)].tolist() == [60, 55, 50, 45, 40, 35]
    rng = np.random.default_rng(TEST_SEED)
    for _ in range(5):
        rel = top_k_from_records(records, 300, 6, 1e4, method, rng=rng)
        assert rel.items == truth and rel.filled == 0
        assert rel.truncation is None or rel.truncation >= 30  # nothing truncated


@pytest.mark.statistical
@pytest.mark.parametrize("method", METHODS)
def test_a_tie_at_rank_k_is_broken_each_way_half_the_time(method):
    # items 0, 1 lead; items 2 and 3 tie for the third place in records of the same shapes
    records = [[0, 1]] * 40 + [[0, 1, 2]] * 10 + [[0, 1, 3]] * 10 + [[2]] * 10 + [[3]] * 10 + [[4]] * 5
    rng = np.random.default_rng(TEST_SEED)
    runs = 400
    picks = Counter()
    for _ in range(runs):
        rel = top_k_from_records(records, 6, 3, 1e3, method, rng=rng)
        assert set(rel.items[:2]) == {0, 1}
        picks[rel.items[2]] += 1
    assert set(picks) <= {2, 3}
    assert abs(picks[2] / runs - 0.5) <= 5 * math.sqrt(0.25 / runs)


# -- utility ----------------------------------------------------------------------------------------
def _mean_f1(stats, k, epsilon, method, runs, rng):
    releases = [topk._select(stats, k, epsilon, method, rng)[0] for _ in range(runs)]
    f = np.array([f1_score(rel.items, stats.counts, k) for rel in releases])
    return f.mean(), f.std(ddof=1) / math.sqrt(runs)


def _assert_better(a, b):
    (mean_a, se_a), (mean_b, se_b) = a, b
    assert mean_a - mean_b > 3 * math.hypot(se_a, se_b), (a, b)


@pytest.mark.statistical
@pytest.mark.parametrize("epsilon", [0.05, 0.1])
def test_on_a_long_tail_tps_pfm_beats_tps_em_beats_em(epsilon):
    """The paper's ordering, where it reports it: large k, short records, many items, small ε."""
    stats = topk._stats_from_records(_synthetic(50_000, 1000, seed=11), 1000)
    rng = np.random.default_rng(TEST_SEED)
    pfm, tps_em, em = (_mean_f1(stats, 200, epsilon, m, 16, rng) for m in ("tps_pfm", "tps_em", "em"))
    _assert_better(pfm, tps_em)
    _assert_better(tps_em, em)


def _baskets():
    con = duckdb.connect()
    path = data_dir() / "supermarket_baskets.parquet"
    con.execute(
        f"CREATE TABLE pairs AS SELECT DISTINCT basket_id AS u, dense_rank() OVER (ORDER BY item) - 1 AS it "
        f"FROM read_parquet('{path}')"
    )
    return topk._stats_from_sql(con, PAIRS, None, 122, True)


BASKETS_MAX_ROWS = 48  # the longest basket, standing in for the owner's max_rows


@pytest.mark.statistical
def test_on_the_supermarket_baskets_the_default_beats_tps_at_small_k():
    """Long baskets, few items, small k: phase 1's noise l/ε_2 (l ≈ 18) dwarfs EM's k/ε, so
    the ordering reverses; the default rule picks ``oneshot`` there from public facts."""
    stats = _baskets()
    rng = np.random.default_rng(TEST_SEED)
    pick = topk.default_method(5, 0.1, 122, BASKETS_MAX_ROWS)
    assert pick == "oneshot"
    # 80 runs: with the ranking truncation tps_em's gap is about 0.07 (3 s.e. of 30 runs is 0.08)
    default = _mean_f1(stats, 5, 0.1, pick, 80, rng)
    for method in ("tps_pfm", "tps_em", "laplace"):
        _assert_better(default, _mean_f1(stats, 5, 0.1, method, 80, rng))


@pytest.mark.statistical
def test_on_the_supermarket_baskets_the_default_beats_oneshot_at_large_k():
    """k = 50 on the same baskets: the longest basket (48) is within 4 k, the rule picks a
    length method, and it beats one-shot (measured 0.880 ± 0.005 against 0.758 ± 0.007)."""
    stats = _baskets()
    rng = np.random.default_rng(TEST_SEED)
    pick = topk.default_method(50, 0.1, 122, BASKETS_MAX_ROWS)
    assert pick == "laplace"
    _assert_better(_mean_f1(stats, 50, 0.1, pick, 20, rng), _mean_f1(stats, 50, 0.1, "oneshot", 20, rng))


@pytest.mark.statistical
@pytest.mark.parametrize("method", ["tps_em", "laplace"])
def test_ranking_truncation_beats_the_count_oriented_one_on_long_records(method, monkeypatch):
    """The truncation level aims at ranking (a low quantile at ordinary ε): on long records
    (geometric, mean 48) it beats DPSense's count-oriented median-or-above level, the former
    rule (measured at k = 10, ε = 0.5 over 10,000 items: tps_em 0.71 against 0.43)."""
    stats = topk._stats_from_records(_synthetic(10_000, 10_000, seed=3, s=0.5, mean_len=48), 10_000)
    rng = np.random.default_rng(TEST_SEED)
    new = _mean_f1(stats, 10, 0.5, method, 30, rng)
    monkeypatch.setattr(topk, "truncation_level", lambda eps: 1.0 - 0.5 / (1.0 + eps))  # the former rule
    _assert_better(new, _mean_f1(stats, 10, 0.5, method, 30, rng))


# -- the default method, from public facts ----------------------------------------------------------
@pytest.mark.parametrize(
    "k, epsilon, n_items, max_length, expected",
    [
        (5, 0.1, 122, 48, "oneshot"),  # long records for k: one-shot's k/ε is the smaller noise
        (10, 1.0, 10_000, 48, "oneshot"),
        (12, 0.5, 10_000, 48, "laplace"),  # 48 <= 4 k: phase 1's l/ε is the smaller noise
        (50, 0.1, 122, 48, "laplace"),
        (50, 2.0, 122, 48, "laplace"),
        (50, 2.0, 1000, None, "oneshot"),  # no length bound but the universe
        (50, 2.0, 150, None, "laplace"),
        (3, 1.0, None, 12, "laplace"),  # universe from key selection: the bound still holds
        (3, 1.0, None, 13, "oneshot"),
        (10, 1.0, 2 * topk.NOISED_ITEMS, 5, "oneshot"),  # past the length methods' work cap
        (10, 1e-9, 100, 5, "oneshot"),  # past the length methods' smallest ε
    ],
)
def test_default_method_from_public_facts(k, epsilon, n_items, max_length, expected):
    assert topk.default_method(k, epsilon, n_items, max_length) == expected
    assert topk.default_method(k, epsilon, n_items, max_length) in METHODS


def test_auto_resolves_to_the_default_in_the_mechanism_api():
    records = [[0, 1], [1, 2], [1]]
    rel = top_k_from_records(records, 3, 1, 50.0, topk.AUTO, rng=np.random.default_rng(1))
    assert rel.method == topk.default_method(1, 50.0, 3) and rel.items == (1,)


@pytest.mark.parametrize("m", [2, 5])
def test_top_k_with_counts_counts_the_chosen_items(m):
    """Both paths (counts reused from the selection's query, or the capped second query) give
    the exact subject counts at a huge ε, aligned with the chosen items."""
    con = duckdb.connect()
    con.execute("CREATE TABLE p AS SELECT u, j FROM range(40) t(u), range(6) s(j) WHERE u < 5 * (8 - j)")
    release, counts = topk.top_k_with_counts(
        con, "SELECT u AS __unit, j AS __item FROM p", None, 6, 3, 500.0, 500.0, "oneshot",
        rng=np.random.default_rng(TEST_SEED), max_items_per_subject=m,
    )  # fmt: skip
    assert release.items == (0, 1, 2)
    expected = [5 * (8 - j) for j in release.items]
    if m >= 3:
        assert counts == expected
    else:  # a subject holding all three keeps two of them: counts drop, never rise
        assert all(c <= e for c, e in zip(counts, expected)) and sum(counts) < sum(expected)
