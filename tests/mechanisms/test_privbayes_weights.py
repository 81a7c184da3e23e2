"""PrivBayes on weighted rows (``CodedRows.weights``: each distinct coded row and its count, as an
engine that aggregates returns them): every count is the one over the rows repeated, so the model,
noise included, is the same for the same seed, and the generator is left in the same state."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import TEST_SEED
from dpgate import errors
from dpgate.mechanisms import mst
from dpgate.mechanisms import privbayes as pb
from dpgate.mechanisms import privbayes_network as pbn
from dpgate.mechanisms.base import CodedRows
from test_privbayes import correlated, recorded  # noqa: F401 (recorded: a fixture)

#: Six attributes, one wide (200 values): with the rows one by one every table is scored dense or
#: without its empty columns; weighted (far fewer rows) the wide ones take the sparse path.
SIZES = (4, 3, 6, 2, 200, 5)


def weighted_table(n: int = 6000, pool: int = 150, zeros: int = 20, seed: int = TEST_SEED):
    """``n`` tuples drawn from ``pool`` distinct rows (skewed), and the same table weighted: its
    distinct rows and counts (``np.unique``), plus ``zeros`` rows of weight 0 (values absent from
    the table among them), shuffled."""
    rng = np.random.default_rng(seed)
    base = correlated(pool, SIZES, rng)
    p = rng.dirichlet(np.ones(pool))
    rows = base[rng.choice(pool, size=n, p=p)]
    distinct, counts = np.unique(rows, axis=0, return_counts=True)
    extra = np.stack([rng.integers(0, s, zeros) for s in SIZES], axis=1)
    codes = np.concatenate([distinct, extra])
    weights = np.concatenate([counts, np.zeros(zeros, dtype=np.int64)])
    order = rng.permutation(len(codes))
    return rows, codes[order], weights[order]


def assert_same_model(a: pb.PrivBayesModel, b: pb.PrivBayesModel) -> None:
    assert a.network == b.network and a.noisy_rows == b.noisy_rows and a.charges == b.charges
    assert a.degree == b.degree and a.columns == b.columns
    assert len(a.conditionals) == len(b.conditionals)
    assert all(np.array_equal(x, y) for x, y in zip(a.conditionals, b.conditionals))


CASES = [
    (score, encoding, mode)
    for score in ("R", "F", "MI")
    for encoding in ("vanilla", "binary", "gray")
    for mode in ("fixed", "theta")
    if not (score == "F" and encoding == "vanilla")  # F needs binary attributes (vanilla: tested below)
]


@pytest.mark.parametrize("score, encoding, mode", CASES)
def test_weighted_rows_fit_the_model_of_the_rows_repeated(score, encoding, mode):
    """For every score, encoding and way of choosing the degree: the same network, conditionals
    (bit for bit), noisy row count and charges, and the generator in the same state afterwards."""
    rows, codes, weights = weighted_table()
    options = dict(score=score, encoding=encoding, **(dict(degree=3) if mode == "fixed" else dict(theta=2.0)))
    if score == "MI":
        options["max_rows"] = 10_000
    epsilon = 1.0 if mode == "fixed" else 0.5 if score == "F" else 20.0  # θ: wide sets; F at degree 5 (slow DP)
    gens = [np.random.default_rng(7), np.random.default_rng(7)]
    a = pb.fit(rows, SIZES, epsilon, rng=gens[0], **options)
    b = pb.fit(codes, SIZES, epsilon, rng=gens[1], weights=weights, **options)
    assert_same_model(a, b)
    assert gens[0].bit_generator.state == gens[1].bit_generator.state
    assert max(len(p) for _, p in a.network) >= 2  # parents were chosen: the search ran


@pytest.mark.parametrize("mode", ["fixed", "theta"])
def test_weighted_binary_attributes_fit_the_same_f_model(mode):
    """Score F on attributes binary as they are (vanilla), float weights."""
    rng = np.random.default_rng(TEST_SEED)
    sizes = (2,) * 7
    rows = correlated(3000, sizes, rng)
    distinct, counts = np.unique(rows, axis=0, return_counts=True)
    options = dict(degree=2) if mode == "fixed" else dict(theta=4.0)
    a = pb.fit(rows, sizes, 2.0, score="F", rng=np.random.default_rng(3), **options)
    b = pb.fit(distinct, sizes, 2.0, score="F", rng=np.random.default_rng(3), weights=counts.astype(float), **options)
    assert_same_model(a, b)


@pytest.mark.parametrize("score", ["R", "MI"])
def test_weighted_scores_are_those_of_the_rows_repeated_on_every_path(score, monkeypatch):
    """Scoring reads the rows, so its path (dense, empty columns dropped, non-empty cells only)
    follows how many rows come; each path gives the same number, bit for bit, zero weights kept."""
    rows, codes, weights = weighted_table()
    cols_rows = [np.ascontiguousarray(rows[:, j]) for j in range(len(SIZES))]
    cols_w = [np.ascontiguousarray(codes[:, j]) for j in range(len(SIZES))]
    plan = pbn._Plan(sizes=SIZES, score=score, sensitivity=2.0, epsilon_step=1.0, k=3, max_cells=None)
    cands = [(x, ps) for ps in [(0,), (1, 2), (0, 3), (0, 1, 2), (4,), (2, 4), (0, 2, 4), (1, 4, 5), (0, 2, 3, 5)]
             for x in range(len(SIZES)) if x not in ps]  # fmt: skip
    paths: list[str] = []
    sparse, joint = pbn._score_sparse, pbn._joint
    monkeypatch.setattr(pbn, "_score_sparse", lambda *a, **k: paths.append("sparse") or sparse(*a, **k))
    monkeypatch.setattr(pbn, "_joint", lambda *a, **k: paths.append("dense") or joint(*a, **k))
    a = pbn._score_candidates(cols_rows, plan, cands, {})
    used_rows, paths[:] = list(paths), []
    b = pbn._score_candidates(cols_w, plan, cands, {}, weights=weights.astype(float))
    assert np.array_equal(a, b)
    assert "sparse" not in used_rows and "sparse" in paths  # the paths differed
    assert paths.count("dense") < used_rows.count("dense")
    monkeypatch.undo()
    full = [pbn._score_counts(pbn._joint(cols_rows, SIZES, x, ps), score) for x, ps in cands]
    assert b.tolist() == full


def test_the_synthesizer_reads_weighted_rows_without_repeating_them(monkeypatch):
    """``USING privbayes`` on ``CodedRows(codes, sizes, weights)``: the model of the rows one by one,
    and ``rows()`` (the repetition) is never called."""
    from dpgate import mechanisms

    rows, codes, weights = weighted_table()
    synth = mechanisms.synthesizer("privbayes")
    options = dict(encoding="gray", theta=3.0)
    a = synth.synthesize(CodedRows(rows, SIZES), epsilon=2.0, rng=np.random.default_rng(11), options=options)

    def refuse(self):
        raise AssertionError("PrivBayes repeated the weighted rows")

    monkeypatch.setattr(CodedRows, "rows", refuse)
    b = synth.synthesize(CodedRows(codes, SIZES, weights), epsilon=2.0, rng=np.random.default_rng(11),
                         options=options)  # fmt: skip
    assert a.epsilon == b.epsilon
    assert_same_model(a.release, b.release)


def test_bad_weights_are_refused_before_any_noise(recorded):
    """One whole count ≥ 0 per row (PrivBayes, the independent baseline, MST), else no noise: dpgate
    makes the weights (an engine's counts), so anything else is a bug (DP500)."""
    _, codes, weights = weighted_table(n=500, pool=30)
    bad = {
        "negative": np.where(np.arange(len(weights)) == 0, -1, weights),
        "fractional": weights * 0.5 + 0.25,
        "wrong shape": weights[:-1],
        "two-dimensional": weights.reshape(-1, 1),
        "not finite": np.where(np.arange(len(weights)) == 0, np.inf, weights.astype(float)),
        "nan": np.where(np.arange(len(weights)) == 0, np.nan, weights.astype(float)),
        "text": weights.astype(str),
        "too many tuples": np.full(len(weights), 2.0**53),
    }
    for what, w in bad.items():
        for run in (pb.fit, pb.independent_baseline, mst.fit):
            with pytest.raises(errors.InternalError) as e:
                run(codes, SIZES, 1.0, rng=np.random.default_rng(1), weights=w)
            assert e.value.code == "DP500", what
    assert recorded == []
    with pytest.raises(errors.InternalError):  # max_rows bounds the tuples, not the rows given
        pb.fit(codes, SIZES, 1.0, score="MI", max_rows=int(weights.sum()) - 1, rng=np.random.default_rng(1),
               weights=weights)  # fmt: skip


def test_all_weights_zero_is_an_empty_table():
    """Rows of weight 0 stand for no tuple: the fit is that of an empty table."""
    _, codes, weights = weighted_table(n=500, pool=30)
    a = pb.fit(codes[:0], SIZES, 1.0, degree=2, rng=np.random.default_rng(5))
    b = pb.fit(codes, SIZES, 1.0, degree=2, rng=np.random.default_rng(5), weights=np.zeros_like(weights))
    assert_same_model(a, b)
