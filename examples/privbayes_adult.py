"""Synthetic releases of UCI Adult: MST (the default), PrivBayes and independent columns compared.

Run from the repository root:

    python examples/privbayes_adult.py [--epsilons 0.1 0.4 1.0 1.6] [--runs 8] [--seed 7]

Adult (examples/data/adult.parquet, 32,561 rows) without ``person_id``. Every domain is a
public declaration, never read from the data: numeric columns are cut into 16 equi-width
bins on fixed bounds (values outside are clamped), categorical columns use the value lists
documented with the UCI data, and NULL is its own category in the three columns the UCI
documentation lists with missing values. For each ε the script fits, on the same seed,

- MST (``dpgate.mechanisms.mst``, the default of ``CREATE SYNTHETIC TABLE``),
- PrivBayes (vanilla encoding, score R, θ = 4, β = 0.3),
- independent columns (every column from its own noisy 1-way marginal),

samples as many rows as each model's noisy row count, and prints the average total variation
distance over all 1-, 2- and 3-way marginals, with the median time of fit + sample.

The seed makes the run repeatable; it is for evaluation only — a real release draws its
generator from the OS (``dpgate.noise.fresh()``).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import duckdb
import numpy as np

from dpgate.mechanisms import mst, privbayes

DATA = Path(__file__).resolve().parent / "data" / "adult.parquet"
BINS = 16

#: Public bounds of the numeric columns.
NUMERIC = {
    "age": (17, 90),
    "fnlwgt": (0, 1_500_000),
    "education_num": (1, 16),
    "capital_gain": (0, 100_000),
    "capital_loss": (0, 5_000),
    "hours_per_week": (1, 99),
}

#: Declared domains of the categorical columns (UCI adult.names); True = NULL is a category.
CATEGORICAL = {
    "workclass": (["Federal-gov", "Local-gov", "Never-worked", "Private", "Self-emp-inc", "Self-emp-not-inc",
                   "State-gov", "Without-pay"], True),
    "education": (["10th", "11th", "12th", "1st-4th", "5th-6th", "7th-8th", "9th", "Assoc-acdm", "Assoc-voc",
                   "Bachelors", "Doctorate", "HS-grad", "Masters", "Preschool", "Prof-school", "Some-college"], False),
    "marital_status": (["Divorced", "Married-AF-spouse", "Married-civ-spouse", "Married-spouse-absent",
                        "Never-married", "Separated", "Widowed"], False),
    "occupation": (["Adm-clerical", "Armed-Forces", "Craft-repair", "Exec-managerial", "Farming-fishing",
                    "Handlers-cleaners", "Machine-op-inspct", "Other-service", "Priv-house-serv", "Prof-specialty",
                    "Protective-serv", "Sales", "Tech-support", "Transport-moving"], True),
    "relationship": (["Husband", "Not-in-family", "Other-relative", "Own-child", "Unmarried", "Wife"], False),
    "race": (["Amer-Indian-Eskimo", "Asian-Pac-Islander", "Black", "Other", "White"], False),
    "sex": (["Female", "Male"], False),
    "native_country": (["Cambodia", "Canada", "China", "Columbia", "Cuba", "Dominican-Republic", "Ecuador",
                        "El-Salvador", "England", "France", "Germany", "Greece", "Guatemala", "Haiti",
                        "Holand-Netherlands", "Honduras", "Hong", "Hungary", "India", "Iran", "Ireland", "Italy",
                        "Jamaica", "Japan", "Laos", "Mexico", "Nicaragua", "Outlying-US(Guam-USVI-etc)", "Peru",
                        "Philippines", "Poland", "Portugal", "Puerto-Rico", "Scotland", "South", "Taiwan",
                        "Thailand", "Trinadad&Tobago", "United-States", "Vietnam", "Yugoslavia"], True),
    "income": (["<=50K", ">50K"], False),
}  # fmt: skip

COLUMNS = ["age", "workclass", "fnlwgt", "education", "education_num", "marital_status", "occupation",
           "relationship", "race", "sex", "capital_gain", "capital_loss", "hours_per_week", "native_country",
           "income"]  # fmt: skip


def load_adult(path: Path = DATA) -> tuple[np.ndarray, list[int], list[str]]:
    """Adult as integer codes over the declared domains: ``(codes, sizes, names)``."""
    table = duckdb.sql(f"SELECT {', '.join(COLUMNS)} FROM read_parquet('{path}')").fetchnumpy()
    cols, sizes = [], []
    for name in COLUMNS:
        raw = table[name]
        if name in NUMERIC:
            lo, hi = NUMERIC[name]
            v = np.ma.filled(np.ma.asarray(raw).astype(float), np.nan)
            if np.isnan(v).any():
                raise ValueError(f"{name} has NULLs but declares no NULL category")
            cols.append(np.clip(np.floor((v - lo) / ((hi - lo) / BINS)), 0, BINS - 1).astype(np.int64))
            sizes.append(BINS)
        else:
            values, nullable = CATEGORICAL[name]
            index = {v: i for i, v in enumerate(values)}
            null_code = len(values) if nullable else None
            data = np.ma.asarray(raw)
            mask = np.ma.getmaskarray(data)
            out = np.empty(len(data), dtype=np.int64)
            for i, (val, missing) in enumerate(zip(data.data, mask)):
                code = null_code if (missing or val is None) else index.get(val)
                if code is None:
                    raise ValueError(f"{name}: value {val!r} is outside the declared domain")
                out[i] = code
            cols.append(out)
            sizes.append(len(values) + (1 if nullable else 0))
    return np.stack(cols, axis=1), sizes, list(COLUMNS)


MECHANISMS = {
    "mst": lambda codes, sizes, eps, rng: mst.fit(codes, sizes, eps, rng=rng),
    "privbayes": lambda codes, sizes, eps, rng: privbayes.fit(codes, sizes, eps, rng=rng),
    "independent": lambda codes, sizes, eps, rng: privbayes.independent_baseline(codes, sizes, eps, rng=rng),
}


def run_once(codes, sizes, epsilon, seed, real):
    """One run of every mechanism on the same seed: 1-, 2-, 3-way TVD and seconds of each."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, fit in MECHANISMS.items():
        t0 = time.perf_counter()
        model = fit(codes, sizes, epsilon, rng)
        synth = privbayes.sample(model, model.noisy_rows, rng=rng)
        seconds = time.perf_counter() - t0
        tvd = [privbayes.tvd_between(real[w], privbayes.marginal_tables(synth, sizes, w)) for w in (1, 2, 3)]
        out[name] = (tvd, seconds)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epsilons", type=float, nargs="+", default=[0.1, 0.4, 1.0, 1.6])
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()

    codes, sizes, names = load_adult()
    print(f"Adult: {codes.shape[0]} rows, {codes.shape[1]} attributes, domain sizes {sizes}")
    real = {w: privbayes.marginal_tables(codes, sizes, w) for w in (1, 2, 3)}
    print(f"average TVD of all 1- / 2- / 3-way marginals ({len(real[1])} / {len(real[2])} / {len(real[3])} tables), "
          f"mean over {args.runs} paired runs; seconds for fit + sample\n")  # fmt: skip
    header = f"{'ε':>5} | " + " | ".join(f"{name:^28}" for name in MECHANISMS)
    print(header)
    print("-" * len(header))
    for epsilon in args.epsilons:
        runs = [run_once(codes, sizes, epsilon, args.seed + r, real) for r in range(args.runs)]
        cells = []
        for name in MECHANISMS:
            tvd = np.mean([r[name][0] for r in runs], axis=0)
            seconds = statistics.median(r[name][1] for r in runs)
            cells.append(f"{tvd[0]:.3f} / {tvd[1]:.3f} / {tvd[2]:.3f} {seconds:5.2f}s")
        print(f"{epsilon:>5g} | " + " | ".join(f"{c:^28}" for c in cells))


if __name__ == "__main__":
    main()
