"""The neighbour harness on the experimental supermodular release (which the demo's δ caps refuse).

The release reads one record per subject as a tuple of hierarchy leaves; every count the mechanism
uses (``supermodular.cube_counts``) is a sum of those records, so the records' multiset moving by at
most one record (L1 ≤ 1) between neighbours is the statement's sensitivity.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import harness

ADULT = Path(__file__).resolve().parents[2] / "examples" / "data" / "adult.parquet"
SQL = ("CREATE SYNTHETIC TABLE g FROM adult USING supermodular WITH (epsilon = 1, delta = 0.3, theta0 = 0.5, "
       "columns = 'age, workclass, sex', max_rows_contributed = 1)")  # fmt: skip


@pytest.fixture
def base(make_db):
    return make_db(
        # 4,000 people; person 7 gets a second row (max_rows_contributed = 1 keeps one at random)
        f"CREATE TABLE adult AS SELECT * FROM read_parquet('{ADULT}') WHERE person_id <= 4000; "
        "INSERT INTO adult SELECT * REPLACE (age + 1 AS age) FROM adult WHERE person_id = 7",
        protect={"adult": {
            "unit": "person_id", "max_rows": 2, "epsilon": 10.0, "subject_delta": 0.9, "experimental": True,
            "domains": {"sex": ["Female", "Male"], "workclass": ["Federal-gov", "Local-gov", "Never-worked", "Private",
                        "Self-emp-inc", "Self-emp-not-inc", "State-gov", "Without-pay", None]},
            "bounds": {"age": (17, 90)},
            "hierarchies": {"age": {"widths": [10, 20]}, "sex": ["Female", "Male"],
                            "workclass": {"Gov": ["Federal-gov", "Local-gov", "State-gov"],
                                          "Other": ["Never-worked", "Private", "Self-emp-inc", "Self-emp-not-inc",
                                                    "Without-pay"]}},
        }},
        analysts={harness.ANALYST: {"epsilon": 1e6, "delta": 1.0, "epsilon_per_query": 100.0, "delta_per_query": 0.5}},
    )  # fmt: skip


@pytest.mark.parametrize("subject, values", [
    (7, None),                                                   # the subject with two rows (one kept at random)
    (11, None),
    (11, "age = NULL, workclass = NULL, sex = NULL"),            # NULLs: '*' or the declared NULL leaf
    (11, "age = 2000000000, workclass = 'Astronaut'"),           # outside the bounds and outside the tree
])  # fmt: skip
def test_the_records_move_by_at_most_one(base, subject, values):
    """D holds the subject (with the given values); D′ is D without them (add/remove neighbours)."""
    d = base if values is None else harness.mutate(harness.copy_db(base, base.with_name("d.duckdb")),
                                                   f"UPDATE adult SET {values} WHERE person_id = {subject}")
    neighbour = harness.mutate(harness.copy_db(d, base.with_name("n.duckdb")),
                               f"DELETE FROM adult WHERE person_id = {subject}")
    with harness.gateways(d, neighbour) as (gd, gn):
        before, after = harness.check_statement(gd, gn, SQL, context=f"subject {subject}: {values}")
    assert before.hints["rows"] == 4000 and after.hints["rows"] == 3999  # one record per subject
