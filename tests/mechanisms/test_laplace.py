"""The counting mechanism (discrete Laplace on bounded counts, sums and averages).

(a) cost and sensitivity exactly; (b) the released noise against its analytic CDF; (c) a
neighbouring-database audit through the real bounding SQL; (d) error-bar coverage on Adult.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import TEST_SEED

import dpgate
from dpgate import noise
from dpgate.backends import duckdb as execute
from dpgate.frontend.classify import classify
from dpgate.frontend.dialect import parse_one
from dpgate.mechanisms import LaplaceCounting
from dpgate.mechanisms.base import ExactAnswer
from dpgate.resources import data_dir


def planned(db, sql, analyst="alice"):
    con = dpgate.connect(str(db), analyst=analyst)
    g = con.gateway
    cat = g.catalog()
    return con, g.plan(classify(parse_one(sql), cat), cat)


def replicate(plan, exact_values: dict, n: int):
    """An exact answer with one cell, released n times at once (independent noise per copy)."""
    comps = {k: np.array([[v]], dtype=object) for k, v in exact_values.items()}
    return ExactAnswer([()], comps, None, 0, 0), np.zeros(n, dtype=np.int64)


@pytest.fixture
def tiny(make_db):
    return make_db(
        "CREATE TABLE t (uid INT, x DOUBLE); INSERT INTO t SELECT i, i % 7 FROM range(1, 50) r(i)",
        {"t": dict(unit="uid", max_rows=2, epsilon=1e6, bounds={"x": (0, 10)})},
        analysts={"alice": {"epsilon": 1e9, "delta": 1e-3}},
    )


@pytest.mark.statistical
def test_count_noise_matches_its_distribution(tiny):
    con, plan = planned(tiny, "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.4) COUNT(*) FROM t")
    con.close()
    comp = plan.aggs[0].components[0]
    assert (comp.epsilon, comp.sensitivity) == (0.4, 2)
    exact, rows = replicate(plan, {(0, "count"): 1000}, 100_000)
    rng = np.random.default_rng(TEST_SEED)
    col = LaplaceCounting().release(plan, exact, rows, rng=rng)[0]
    z = np.array(col.values, dtype=np.int64) - 1000
    grid = np.arange(z.min(), z.max() + 1)
    cdf = np.cumsum(noise.discrete_laplace_pmf(0.4, 2, grid))
    emp = np.searchsorted(np.sort(z), grid, side="right") / len(z)
    assert np.max(np.abs(emp - cdf / cdf[-1])) < 1.63 / math.sqrt(len(z))
    w = noise.discrete_laplace_half_width(0.4, 2, 0.05)
    assert np.all(np.array(col.high, dtype=np.int64) - np.array(col.values, dtype=np.int64) == w)


@pytest.mark.statistical
def test_sum_noise_is_on_the_grid(make_db):
    db = make_db("CREATE TABLE t (uid INT, x DOUBLE); INSERT INTO t VALUES (1, 0.3)", {"t": dict(unit="uid", bounds={"x": (0, 1)})})
    con, plan = planned(db, "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1.0) SUM(x) FROM t")
    con.close()
    agg = plan.aggs[0]
    exact, rows = replicate(plan, {(0, "sum"): agg.grid_int(0.3)}, 50_000)
    col = LaplaceCounting().release(plan, exact, rows, rng=np.random.default_rng(TEST_SEED))[0]
    vals = np.asarray(col.values, dtype=float)
    assert np.all(np.mod(vals, agg.grid) == 0)  # exact multiples of a power of two: no float porosity
    z = vals / agg.grid - agg.grid_int(0.3)
    assert z.std() == pytest.approx(noise.discrete_laplace_std(1.0, agg.components[0].sensitivity), rel=0.03)


NEIGHBOURS = "CREATE TABLE t (uid INT, k VARCHAR, x DOUBLE); INSERT INTO t SELECT i % 30, ['a', 'b'][1 + i % 2], i % 11 FROM range(0, 150) r(i);"


@pytest.mark.statistical
@pytest.mark.parametrize(
    "sql, label",
    [
        ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5) k, COUNT(*) FROM t GROUP BY k", "count"),
        ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5) k, SUM(x) FROM t GROUP BY k", "sum"),
    ],
)
def test_neighbouring_audit(make_db, sql, label):
    """D and D minus subject 7 (all its rows), bounded by the real SQL: for every output the
    empirical log-ratio stays below ε plus 5 standard deviations of sampling error."""
    # Sampled per query: both worlds then keep the same rows of every other subject under one salt.
    # A stored order is drawn afresh in each file, so two separately built worlds would sample the
    # other subjects differently and the audit would measure that, not one subject's influence.
    spec = {"t": dict(unit="uid", max_rows=3, epsilon=1e6, domains={"k": ["a", "b"]}, bounds={"x": (0, 10)},
                      sample_order="per_query")}
    big = {"alice": {"epsilon": 1e9, "delta": 1e-3}}
    d = make_db(NEIGHBOURS, spec, big)
    d2 = make_db(NEIGHBOURS + "DELETE FROM t WHERE uid = 7;", spec, big)
    outs = []
    for db in (d, d2):
        con, plan = planned(db, sql)
        g = con.gateway
        debit = g.ledger.reserve(g._cost(plan, sql, True))
        ans = execute.run(g._con, plan, debit.charged, salt=99)
        g.ledger.discard(debit)
        con.close()
        exact, rows = replicate(plan, {(0, label): ans.components[(0, label)][0, 0]}, 300_000)
        col = LaplaceCounting().release(plan, exact, rows, rng=np.random.default_rng(TEST_SEED + len(outs)))[0]
        outs.append(np.asarray(col.values, dtype=float))
    eps = plan.aggs[0].epsilon
    a, b = outs
    # Any set of outputs must satisfy the ratio bound: unit bins for counts, 80 equal bins for sums.
    lo, hi = min(a.min(), b.min()), max(a.max(), b.max())
    bins = np.arange(lo - 0.5, hi + 1.5) if label == "count" else np.linspace(lo, hi, 81)
    ha, _ = np.histogram(a, bins)
    hb, _ = np.histogram(b, bins)
    ok = (ha >= 500) & (hb >= 500)
    assert ok.sum() >= 5
    ratio = np.abs(np.log(ha[ok] / hb[ok]))
    slack = 5 * np.sqrt(1 / ha[ok] + 1 / hb[ok])
    assert np.all(ratio <= eps + slack)


@pytest.fixture(scope="module")
def adult_db(tmp_path_factory):
    """Adult with generous budgets (nobody is left out), for utility and coverage checks."""
    import duckdb

    from dpgate.catalog.owner import Owner

    path = tmp_path_factory.mktemp("adult") / "adult.duckdb"
    raw = duckdb.connect(str(path))
    raw.execute(f"CREATE TABLE adult AS SELECT * FROM read_parquet('{data_dir() / 'adult.parquet'}')")
    raw.close()
    with Owner(path) as o:
        o.protect("adult", unit="person_id", epsilon=1e6, bounds={"age": (17, 90), "hours_per_week": (1, 99)},
                  domains={"native_country": [None, *sorted(
                      r[0] for r in o.con.execute("SELECT DISTINCT native_country FROM adult WHERE native_country IS NOT NULL").fetchall())]})  # fmt: skip
        o.add_analyst("alice", epsilon=1e9, delta=1e-3)
        o.allow_test_seed("alice")
    return path


@pytest.mark.statistical
def test_interval_coverage_on_adult(adult_db):
    """Over 40 queries × 42 countries, counts fall inside their 95% intervals at the nominal rate."""
    import duckdb

    raw = duckdb.connect(str(adult_db), read_only=True)
    truth = dict(raw.execute("SELECT native_country, count(*) FROM adult GROUP BY 1").fetchall())
    truth_avg = dict(raw.execute("SELECT native_country, avg(age) FROM adult GROUP BY 1").fetchall())
    raw.close()
    inside = total = inside_avg = 0
    with dpgate.connect(str(adult_db), analyst="alice", test_seed=TEST_SEED) as con:
        cur = con.cursor()
        for _ in range(40):
            cur.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.2) native_country, COUNT(*) AS n, AVG(age) AS a "
                        "FROM adult GROUP BY native_country")  # fmt: skip
            for row, iv in zip(cur.fetchall(), cur.release.intervals):
                t = truth.get(row[0], 0)
                inside += iv["n"][0] <= t <= iv["n"][1]
                if row[0] in truth_avg:
                    inside_avg += iv["a"][0] <= truth_avg[row[0]] <= iv["a"][1]
                total += 1
    a = noise.discrete_laplace_alpha(0.1, 1)
    w = noise.discrete_laplace_half_width(0.1, 1, 0.05)
    nominal = 1 - 2 * a ** (w + 1) / (1 + a)  # exact coverage of the discrete interval (>= 0.95)
    sd = math.sqrt(nominal * (1 - nominal) / total)
    # clamping at zero only widens intervals near 0, so coverage can only rise there
    assert nominal - 4 * sd <= inside / total <= 1.0
    assert inside / total <= nominal + 4 * sd + 0.01
    # AVG intervals are conservative (Bonferroni): at least the nominal 95%
    assert inside_avg / total >= 0.95 - 4 * math.sqrt(0.05 * 0.95 / total)


@pytest.mark.statistical
def test_utility_error_shrinks_with_epsilon(adult_db):
    """Mean absolute error of COUNT with random predicates scales like 1/ε (a known answer trend)."""
    import duckdb

    REPEATS = 3  # noqa: N806 - noisy answers per predicate and ε
    raw = duckdb.connect(str(adult_db), read_only=True)
    rng = np.random.default_rng(TEST_SEED)
    preds = [f"age BETWEEN {lo} AND {lo + span}" for lo, span in zip(rng.integers(17, 70, 30), rng.integers(1, 20, 30))]
    truth = [raw.execute(f"SELECT count(*) FROM adult WHERE {p}").fetchone()[0] for p in preds]
    raw.close()
    errors_by_eps = {}
    with dpgate.connect(str(adult_db), analyst="alice", test_seed=TEST_SEED) as con:
        cur = con.cursor()
        for eps in (0.1, 1.0):
            errs = []
            for p, t in zip(preds, truth):
                for _ in range(REPEATS):
                    cur.execute(f"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = {eps}, clamp_counts = false) COUNT(*) FROM adult WHERE {p}")
                    errs.append(abs(cur.fetchone()[0] - t))
            errors_by_eps[eps] = float(np.mean(errs))
    # E|Z| for discrete Laplace: 2a/(1-a^2); 30 × REPEATS samples: 5 standard errors of the mean
    for eps, err in errors_by_eps.items():
        a = noise.discrete_laplace_alpha(eps, 1)
        mean_abs = 2 * a / (1 - a * a)
        se = noise.discrete_laplace_std(eps, 1) / math.sqrt(len(preds) * REPEATS)
        assert abs(err - mean_abs) <= 5 * se
    assert errors_by_eps[1.0] < errors_by_eps[0.1] / 5
