"""CREATE SYNTHETIC TABLE ... USING supermodular through SQL: the experimental flag, labels, refusals."""

from __future__ import annotations

import json
import math
from pathlib import Path

import duckdb
import pytest

import dpgate
from dpgate.catalog.owner import Owner
from dpgate.mechanisms import supermodular

ADULT = Path(__file__).resolve().parents[2] / "examples" / "data" / "adult.parquet"
EDUCATION = {"No diploma": ["Preschool", "1st-4th", "5th-6th", "7th-8th", "9th", "10th", "11th", "12th"],
             "Diploma": {"School": ["HS-grad"], "College": ["Some-college", "Assoc-voc", "Assoc-acdm"],
                         "Degree": ["Bachelors", "Masters", "Prof-school", "Doctorate"]}}  # fmt: skip
STATEMENT = ("CREATE SYNTHETIC TABLE gen FROM adult USING supermodular WITH (epsilon = 1, delta = 0.05, "
             "columns = 'age, sex, income')")  # fmt: skip


@pytest.fixture
def adult(make_db):
    """Adult with generalization hierarchies and a δ budget this mechanism can honestly be charged."""
    domain = [v for group in (EDUCATION["No diploma"], *EDUCATION["Diploma"].values()) for v in group]
    return make_db(
        f"CREATE TABLE adult AS SELECT * FROM read_parquet('{ADULT}')",
        protect={"adult": {
            "unit": "person_id", "epsilon": 10.0, "subject_delta": 0.5, "experimental": True,
            "domains": {"sex": ["Female", "Male"], "income": ["<=50K", ">50K"], "education": domain},
            "bounds": {"age": (17, 90)},
            "hierarchies": {"age": {"widths": [5, 10, 20]}, "education": EDUCATION, "sex": ["Female", "Male"]},
        }},
        analysts={"alice": {"epsilon": 100.0, "delta": 1.0, "delta_per_query": 0.5}},
    )  # fmt: skip


def test_a_release_writes_labels_of_the_declared_trees_and_says_it_is_experimental(adult):
    with dpgate.connect(str(adult), analyst="alice", test_seed=3) as con:
        before = con.budget()
        cur = con.execute(STATEMENT)
        assert "EXPERIMENTAL" in cur.message
        assert any(supermodular.CLAIM in m for m in cur.messages), cur.messages
        assert cur.release.epsilon == 1.0 and cur.release.delta == 0.05
        labels = {}
        for column, label in con.execute("SELECT column_name, label FROM gen_hierarchy").fetchall():
            labels.setdefault(column, set()).add(label)
        assert labels["age"] >= {"*", "17-19", "20-39", "90"} and labels["income"] == {"*", "<=50K", ">50K"}
        rows = con.execute("SELECT age, sex, income FROM gen").fetchall()
        for row in rows:
            for column, value in zip(("age", "sex", "income"), row):
                assert value in labels[column]
        assert ("*", "*", "*") in rows
        # Binomial(|D|, 1 − β) kept records plus the '*' row, |D| = 32,561, β = e^(−0.98/2)
        keep = 1 - math.exp(-0.49)
        assert abs(len(rows) - 1 - 32_561 * keep) < 5 * math.sqrt(32_561 * keep * (1 - keep))
        (rel,) = [r for r in con.execute("SHOW RELEASES").fetchall() if r[0] == "gen"]
        assert rel[3] == "supermodular" and rel[5] == 0.05 and supermodular.CLAIM in rel[10]
        after = con.budget()
        assert after[1] == pytest.approx(before[1] - 0.05) and after[0] == pytest.approx(before[0] - 1)
        con.execute("DROP SYNTHETIC TABLE gen")
        names = {r[0] for r in con.execute("SHOW TABLES").fetchall()}
        assert "gen" not in names and "gen_hierarchy" not in names
    with Owner(adult, create=False) as o:  # every subject paid the δ as well as the ε
        (spent,) = o.con.execute(f"SELECT DISTINCT delta_spent FROM {o.catalog().tables['adult'].roster_sql}").fetchall()[0]
        assert float(spent) == pytest.approx(0.05)


def test_explain_shows_the_claim_the_conditions_and_the_trees(adult):
    with dpgate.connect(str(adult), analyst="alice") as con:
        text = "\n".join(str(r) for r in con.execute("EXPLAIN PRIVACY " + STATEMENT).fetchall())
    assert supermodular.CLAIM in text and "needs a noisy row count ≥" in text and "personalization: threshold" in text
    assert "hierarchy: 16 leaf intervals in 28 nodes, height 3" in text  # age


def test_the_demo_refuses_it_at_its_delta_and_says_which_delta_it_needs(demo_db):
    """The random threshold leaks with probability ~max|a⁺|/(θ0(1−θ0)|D|): no δ of 1e-6 covers it on Adult."""
    with dpgate.connect(str(demo_db), analyst="demo") as con:
        before = con.budget()
        rows = con.execute("EXPLAIN PRIVACY CREATE SYNTHETIC TABLE g FROM adult USING supermodular "
                           "WITH (epsilon = 1, columns = 'sex, income')").fetchall()  # fmt: skip
        (refused,) = [r for r in rows if r[0] == "refused"]  # EXPLAIN says so, and plans it all the same
        assert "would be refused" in refused[6] and "δ must be at least" in refused[6]
        with pytest.raises(dpgate.Error) as e:
            con.execute("CREATE SYNTHETIC TABLE g FROM adult USING supermodular WITH (epsilon = 1, columns = 'sex, income')")
        assert e.value.code == "DP287" and "random threshold" in str(e.value) and "δ must be at least" in e.value.hint
        assert con.budget() == before


@pytest.mark.parametrize("options, code, words", [
    ("epsilon = 1, delta = 0.05, theta0 = 0.01", "DP287", "random threshold"),  # age, education, sex
    ("epsilon = 1, delta = 0.05, columns = 'sex, income', beta = 0.3", "DP287", "must lie in"),
    ("epsilon = 1, delta = 0.05, columns = 'sex, income', max_rows_contributed = 2", "DP281", "one record"),
    ("epsilon = 1, delta = 0.05, columns = 'sex, income', personalization = 'sample'", "DP274", "threshold"),
    ("epsilon = 1, delta = 0.05, columns = 'sex, income', personalization = 'minimum'", "DP274", "threshold"),
    ("epsilon = 1, columns = 'sex, income', delta = 0", "DP287", "δ > 0"),
    ("epsilon = 1, delta = 0.05, columns = 'sex, income', lambda = 1e7", "DP205", "lambda"),
    ("epsilon = 1, delta = 0.05, columns = 'fnlwgt'", "DP328", "neither a generalization hierarchy"),
    ("epsilon = 1, delta = 0.05, columns = 'person_id'", "DP211", "privacy unit"),
    ("epsilon = 1, delta = 0.05, columns = 'sex', degree = 2", "DP204", "not an option"),
    ("epsilon = 1, delta = 0.0001, columns = 'sex, income'", "DP287", "δ must be at least"),
])  # fmt: skip
def test_refusals_charge_nothing(adult, options, code, words):
    with dpgate.connect(str(adult), analyst="alice") as con:
        before = con.budget()
        with pytest.raises(dpgate.Error) as e:
            con.execute(f"CREATE SYNTHETIC TABLE gen FROM adult USING supermodular WITH ({options})")
        assert e.value.code == code and words in str(e.value), str(e.value)
        assert con.budget() == before


SETUP = """
CREATE TABLE t (id INTEGER, g VARCHAR, budget DOUBLE);
INSERT INTO t SELECT i, CASE WHEN i % 3 = 0 THEN 'a' ELSE 'b' END, CASE WHEN i < 100 THEN 10 ELSE 0.1 END
FROM range(5000) r(i);
INSERT INTO t SELECT i, 'a', CASE WHEN i < 100 THEN 10 ELSE 0.1 END FROM range(5000) r(i);
"""


def test_only_tables_the_owner_opened_to_experiments(make_db):
    db = make_db(SETUP, protect={"t": {"unit": "id", "max_rows": 2, "budget_column": "budget",
                                       "domains": {"g": ["a", "b"]}}})  # fmt: skip
    with dpgate.connect(str(db), analyst="alice") as con:
        with pytest.raises(dpgate.Error) as e:
            con.execute("CREATE SYNTHETIC TABLE x FROM t USING supermodular WITH (epsilon = 1, columns = 'g')")
        assert e.value.code == "DP328" and "experimental = true" in e.value.hint
    with Owner(db) as o:  # a string is not a switch: "false" would be truthy
        with pytest.raises(dpgate.Error, match="true or false"):
            o.protect("t", unit="id", max_rows=2, budget_column="budget", experimental="false")
        with pytest.raises(dpgate.Error, match="cannot be set through options"):
            o.protect("t", unit="id", max_rows=2, budget_column="budget", options={"experimental": True})


def test_below_the_size_conditions_only_the_suppressed_row_is_released(make_db, monkeypatch):
    """5,000 subjects on the roster, but only 100 have ε = 1 left: under the threshold rule the
    release reads those 100, far below the rows the conditions need at δ = 0.3. That is public
    (who pays), so the statement is refused free. When the payers are just enough and the noisy
    row count falls below (here: the check taken away), only the '*' row is released, and the
    noisy count was paid for: that decision is post-processing of it."""
    import dataclasses

    from dpgate.queries import synthetic
    from dpgate.queries.synthetic import generalized

    db = make_db(SETUP, protect={"t": {"unit": "id", "max_rows": 2, "budget_column": "budget", "subject_delta": 0.9,
                                       "domains": {"g": ["a", "b"]}, "experimental": True}},
                 analysts={"alice": {"epsilon": 100.0, "delta": 1.0, "delta_per_query": 0.5}})  # fmt: skip
    make = ("CREATE SYNTHETIC TABLE x FROM t USING supermodular WITH (epsilon = 1, delta = 0.3, columns = 'g', "
            "max_rows_contributed = 1, theta0 = 0.5)")  # fmt: skip
    with dpgate.connect(str(db), analyst="alice", test_seed=4) as con:
        before = con.budget()
        with pytest.raises(dpgate.Error) as e:
            con.execute(make)
        assert e.value.code == "DP287" and "100 subjects" in e.value.message and con.budget() == before
        monkeypatch.setitem(synthetic.SYNTHESIZERS, "supermodular", dataclasses.replace(generalized.RELEASE, check_size=None))
        cur = con.execute(make)
        assert any("only the '*' row is released" in m for m in cur.messages), cur.messages
        assert con.execute("SELECT * FROM x").fetchall() == [("*",)]
    with Owner(db, create=False) as o:
        (entry,) = [r for r in o.ledger() if r[4] == "supermodular"]
        assert float(entry[6]) == 1.0


def test_a_flat_tree_from_a_declared_domain_and_one_row_per_subject(make_db):
    db = make_db(SETUP.replace("THEN 10 ELSE 0.1", "THEN 10 ELSE 10"),
                 protect={"t": {"unit": "id", "max_rows": 2, "budget_column": "budget", "domains": {"g": ["a", "b"]},
                                "experimental": True, "subject_delta": 0.9}},
                 analysts={"alice": {"epsilon": 100.0, "delta": 1.0, "delta_per_query": 0.5}})  # fmt: skip
    with dpgate.connect(str(db), analyst="alice", test_seed=5) as con:
        con.execute("CREATE SYNTHETIC TABLE x FROM t USING supermodular WITH (epsilon = 2, delta = 0.3, columns = 'g', "
                    "max_rows_contributed = 1, theta0 = 0.5)")  # fmt: skip
        got = dict(con.execute("SELECT g, count(*) FROM x GROUP BY g").fetchall())
        assert set(got) <= {"a", "b", "*"} and sum(got.values()) <= 5_001  # one record per subject at most
        assert con.execute("SELECT label, parent, level FROM x_hierarchy ORDER BY level, label").fetchall() == [
            ("*", None, 0), ("a", "*", 1), ("b", "*", 1)]


def test_a_column_whose_type_changed_under_its_tree_never_fails_on_a_row(make_db):
    """With a domain value that no longer casts to the column's type, the CASE's cast was
    evaluated only for rows reaching it, so one subject's value decided success or DP404 after the debit.
    Since 0.17.1 the catalog finds the declared domain no longer fits its column and refuses every
    statement over the table alike, before the debit (DP316)."""
    setup = "CREATE TABLE t AS SELECT i AS id, '1' AS g FROM range(20000) r(i); UPDATE t SET g = '{first}' WHERE id = 0"
    outcomes = []
    for first in ("1", "3"):
        db = make_db(setup.format(first=first),
                     protect={"t": {"unit": "id", "epsilon": 10.0, "subject_delta": 0.9, "experimental": True,
                                    "domains": {"g": ["1", "x"]}, "hierarchies": {"g": ["1", "x"]}}},
                     analysts={"alice": {"epsilon": 100.0, "delta": 1.0, "delta_per_query": 0.9}})  # fmt: skip
        raw = duckdb.connect(str(db))
        raw.execute("ALTER TABLE t ALTER g TYPE INTEGER")  # the declared 'x' no longer casts
        raw.close()
        with dpgate.connect(str(db), analyst="alice", test_seed=6) as con:
            try:
                con.execute("CREATE SYNTHETIC TABLE s FROM t USING supermodular WITH (epsilon = 1, delta = 0.5, "
                            "theta0 = 0.5, columns = 'g')")  # fmt: skip
                outcomes.append("ok")
            except dpgate.Error as e:
                outcomes.append(e.code)
                assert con.budget()[0] == 100.0
    assert outcomes == ["DP316", "DP316"]


def test_stored_switches_and_trees_must_be_what_the_owner_declared(adult):
    with Owner(adult, create=False) as o:
        for options, words in (({"experimental": "false"}, "experimental"),
                               ({"hierarchies": {"sex": {"kind": "values"}}}, "declaration")):
            o.con.execute("UPDATE dpgate.protected_tables SET options = ? WHERE table_name = 'adult'",
                          [json.dumps({**o.catalog().tables["adult"].options, **options})])
            with dpgate.connect(str(adult), analyst="alice") as con, pytest.raises(dpgate.Error) as e:
                con.execute(STATEMENT)
            assert e.value.code in ("DP327", "DP328") and (words in str(e.value) or e.value.code == "DP328")


def test_the_release_and_owner_quality_report_its_information_loss(adult, capsys):
    """The share of '*' per column, the normalized certainty penalty and the discernibility, from the
    public release tables: in the release's notes and from Owner.quality (which refused it before)."""
    with dpgate.connect(str(adult), analyst="alice", test_seed=6) as con:
        # θ0 = 0.1 (and the δ it needs): a generalization needs only 10% of the records under it; at the
        # default θ0, and at this θ0 for many draws of the secret threshold, every row is all '*'. This seed
        # draws a release with some values kept, where the measures are not all 1.
        cur = con.execute(STATEMENT.replace("delta = 0.05, columns =", "delta = 0.2, theta0 = 0.1, columns ="))
        (note,) = [m for m in cur.messages if "information loss" in m]
        rows = con.execute("SELECT age, sex, income FROM gen").fetchall()
        tree = con.execute("SELECT column_name, label, parent, len(covers) FROM gen_hierarchy").fetchall()
    with Owner(adult, create=False) as o:
        q = o.quality("gen")
    # The same measures computed here from the rows, independently of the SQL that made them.
    covers = {(c, lab): k for c, lab, _, k in tree}
    leaves = {c: k for c, _, parent, k in tree if parent is None}
    for j, c in enumerate(("age", "sex", "income")):
        stars = sum(r[j] == "*" for r in rows) / len(rows)
        ncp = sum((covers[(c, r[j])] - 1) / max(leaves[c] - 1, 1) for r in rows) / len(rows)
        assert q["suppressed"][c] == pytest.approx(stars) and q["certainty_penalty"][c] == pytest.approx(ncp)
        assert f"{c} {stars:.0%}" in note
    classes = {}
    for r in rows:
        classes[r] = classes.get(r, 0) + 1
    assert q["discernibility"] == pytest.approx(sum(k * k for k in classes.values()) / len(rows) ** 2)
    assert q["rows"] == len(rows) and 0 < q["mean_certainty_penalty"] < 1
    assert f"certainty penalty {q['mean_certainty_penalty']:.2f}" in note
    from dpgate.interfaces import cli

    assert cli.main(["quality", str(adult), "gen"]) == 0
    out = capsys.readouterr().out
    assert f"mean certainty penalty {q['mean_certainty_penalty']:.3f}" in out and "sex: '*' in" in out


@pytest.mark.parametrize("rest", ["0.0001", "0.5"])
def test_a_release_too_few_subjects_can_pay_for_is_refused_free(make_db, rest):
    """The roster (32,561) meets the size condition, the subjects who pay (a quarter) do not: the
    release would be the '*' row alone, charged. It is refused inside the debit's transaction. The
    others have no budget left (0.0001 rounds to 0) or less than the ε asked (0.5: the threshold
    rule leaves them out, so they are not read either)."""
    domain = [v for group in (EDUCATION["No diploma"], *EDUCATION["Diploma"].values()) for v in group]
    db = make_db(
        f"CREATE TABLE adult AS SELECT *, CASE WHEN person_id % 4 = 0 THEN 10.0 ELSE {rest} END AS budget "
        f"FROM read_parquet('{ADULT}')",
        protect={"adult": {
            "unit": "person_id", "budget_column": "budget", "subject_delta": 0.5, "experimental": True,
            "domains": {"sex": ["Female", "Male"], "income": ["<=50K", ">50K"], "education": domain},
            "bounds": {"age": (17, 90)},
            "hierarchies": {"age": {"widths": [5, 10, 20]}, "sex": ["Female", "Male"]},
        }},
        analysts={"alice": {"epsilon": 100.0, "delta": 1.0, "delta_per_query": 0.5}},
    )  # fmt: skip
    with dpgate.connect(str(db), analyst="alice") as con:
        before = con.budget()
        with pytest.raises(dpgate.Error) as e:
            con.execute(STATEMENT.replace("epsilon = 1,", "epsilon = 1, personalization = 'threshold',"))
        assert e.value.code == "DP287" and "8,140 subjects" in e.value.message and "'*' row" in e.value.message
        assert "nothing was charged" in e.value.hint and con.budget() == before
