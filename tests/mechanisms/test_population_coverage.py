"""Intervals cover the population's answer under every personalization rule (Adult, 200 runs).

The population of an answer is everyone the rule uses or samples with a known probability
(``pdp.answer_population``): subjects with no budget left, and those the threshold rule
leaves out, are not in it — the answer says so. The interval must cover that population's
exact total with at least its stated probability, including the sampling error of the sample
rule and any extrapolation. Budgets here are *correlated* with the data (older people have
smaller budgets), the case where scaling up a sample without saying so under-covers.

The cell: people over 40 in Adult (one row per person, sensitivity 1). Budgets: 10% of people
0.5, 30% 1.0, 60% 5.0 (older people first in the small tiers); the query asks ε = 2. "After"
is the same roster after everyone spent 0.5: the first tier is exhausted.
"""

from __future__ import annotations

import math
from decimal import Decimal as D
from pathlib import Path
from types import SimpleNamespace

import duckdb
import numpy as np
import pytest

from dpgate.mechanisms import laplace, pdp

from conftest import TEST_SEED

ADULT = Path(__file__).resolve().parents[2] / "examples" / "data" / "adult.parquet"
RUNS = 200
ALPHA = 0.05
#: Coverage must reach 1 - α minus three binomial standard errors at RUNS runs.
FLOOR = 1 - ALPHA - 3 * math.sqrt(ALPHA * (1 - ALPHA) / RUNS)


@pytest.fixture(scope="module")
def people():
    ages = np.array([a for (a,) in duckdb.connect().execute(f"SELECT age FROM '{ADULT}' ORDER BY age DESC").fetchall()])
    y = (ages > 40).astype(np.int64)
    n = len(y)
    budget = np.full(n, 5.0)
    budget[: n // 10] = 0.5  # the oldest tenth has the smallest budget
    budget[n // 10 : n // 10 + 3 * n // 10] = 1.0
    return y, budget


def _levels(allowance: np.ndarray) -> tuple[list[pdp.Level], int]:
    values, counts = np.unique(allowance, return_counts=True)
    levels = [pdp.Level(D(repr(float(v))), int(c)) for v, c in zip(values, counts) if v > 0]
    return levels, int(sum(c for v, c in zip(values, counts) if v <= 0))


def _coverage(y, allowance, rule: str, rng) -> tuple[float, float]:
    levels, excluded = _levels(allowance)
    plan = pdp.plan(rule, levels, D("2"), excluded=excluded, strata=rule == "sample", min_size=100)
    level_of = np.array([D(repr(float(a))) for a in allowance], dtype=object)
    rounds = 1 + max(p.round for p in plan.parts)
    in_population = np.array([any((a, r) in plan.assignment for r in range(rounds)) for a in level_of])
    truth = int(y[in_population].sum())
    assert int(in_population.sum()) == pdp.answer_population(plan)
    comp = SimpleNamespace(epsilon=2.0, sensitivity=1, label="count")
    agg = SimpleNamespace(index=0, kind="count_rows", label="count(*)")
    fake = SimpleNamespace(epsilon=2.0, max_rows=1)
    parts = laplace._Parts([float(p.epsilon) for p in plan.parts], plan)
    masks = [(j, np.array([plan.assignment.get((a, r)) == j for a in level_of]))
             for r in range(rounds) for j in range(len(plan.parts))]  # fmt: skip
    probs = np.array([plan.sample_probability.get(a, 0.0) for a in level_of]) if rule == "sample" else None
    hits, widths = 0, []
    for _ in range(RUNS):
        keep = pdp.draw_sample(probs, rng=rng).astype(bool) if probs is not None else np.ones(len(y), dtype=bool)
        x = np.zeros((len(plan.parts), 1), dtype=np.int64)
        for j, members in masks:
            x[j, 0] += int(y[members & keep].sum())
        exact = SimpleNamespace(components={(0, "count"): x})
        got = laplace._component(fake, agg, comp, exact, [0], parts, ALPHA, rng)
        est, half = float(got.values[0]), float(got.half[0])
        hits += abs(est - truth) <= half
        widths.append(2 * half)
    return hits / RUNS, float(np.mean(widths))


@pytest.mark.statistical
@pytest.mark.parametrize("when", ["before", "after"])
@pytest.mark.parametrize("rule", pdp.RULES)
def test_intervals_cover_the_population(people, rule, when):
    y, budget = people
    allowance = np.minimum(budget - (0.5 if when == "after" else 0.0), 2.0)
    if rule == "threshold" and not (allowance >= 2.0).any():
        pytest.fail("the threshold rule needs subjects with the whole ε")
    rng = np.random.default_rng([TEST_SEED, pdp.RULES.index(rule), when == "after"])
    coverage, width = _coverage(y, allowance, rule, rng)
    print(f"{rule:9s} {when:6s} coverage {coverage:.3f} mean width {width:.1f}")
    assert coverage >= FLOOR, (rule, when, coverage, width)
