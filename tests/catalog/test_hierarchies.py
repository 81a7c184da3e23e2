"""Value generalization hierarchies: building, validation, storage through the owner and policy files."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dpgate import errors
from dpgate.catalog import hierarchies
from dpgate.catalog.owner import Owner


def values(spec, domain=None):
    return hierarchies.build("t.c", "c", spec, sql_type="VARCHAR", numeric=False, integer=False, domain=domain,
                             bounds=None)  # fmt: skip


def numbers(spec, bounds=(17, 90), integer=True):
    return hierarchies.build("t.age", "age", spec, sql_type="INTEGER" if integer else "DOUBLE", numeric=True,
                             integer=integer, domain=None, bounds=bounds)  # fmt: skip


def test_nested_groups_make_a_tree_with_unbalanced_depths():
    h = values({"Europe": {"West": ["fr", "de"], "East": ["pl"]}, "Asia": ["jp"]})
    assert h.labels[0] == "*" and h.parent[0] == -1
    depth = dict(zip(h.labels, h.depth.tolist()))
    assert depth == {"*": 0, "Europe": 1, "West": 2, "fr": 3, "de": 3, "East": 2, "pl": 3, "Asia": 1, "jp": 2}
    anc = h.ancestors()
    jp = h.labels.index("jp")
    assert anc[jp].tolist() == [0, h.labels.index("Asia"), jp, -1]
    under = h.leaves_under()
    assert sorted(h.labels[i] for i in under[h.labels.index("Europe")]) == ["de", "fr", "pl"]
    # a list may mix values and groups (TOML arrays of strings and inline tables)
    mixed = values(["a", {"G": ["b", "c"]}])
    assert dict(zip(mixed.labels, mixed.depth.tolist())) == {"*": 0, "a": 1, "G": 1, "b": 2, "c": 2}


@pytest.mark.parametrize("spec, domain, words", [
    ({"Europe": ["England", "France"], "Europa": ["England"]}, None, "appears twice"),  # the ARX drift
    ({"A": ["x"], "B": {"A": ["y"]}}, None, "appears twice"),
    ({"*": ["x"]}, None, "root"),
    ({"A": []}, None, "empty"),
    ({"A": ["x", "y"]}, ["x", "y", "z"], "'z' is not a leaf"),
    ({"A": ["x", "w"]}, ["x", "w", "q"], "is not a leaf"),
    ({"A": ["x", "bogus"]}, ["x"], "not in the declared domain"),
    ("x", None, "must list its members"),
    ({"A": [None]}, None, "neither a value nor a group"),
])  # fmt: skip
def test_bad_trees_are_refused(spec, domain, words):
    with pytest.raises(errors.PolicyError) as e:
        values(spec, domain)
    assert e.value.code == "DP327" and words in e.value.message


def test_a_declared_null_gets_its_own_leaf():
    h = values({"G": ["a", "b"]}, domain=["a", "b", None])
    null = h.labels.index(None)
    assert h.parent[null] == 0 and (null, None) in h.leaf_values


def test_width_ladders_are_cut_at_the_bounds_and_nest():
    h = numbers({"widths": [5, 10, 20]})
    leaves = [h.labels[n] for n, _ in sorted(h.leaf_values, key=lambda p: p[1])]
    assert leaves[:3] == ["17-19", "20-24", "25-29"] and leaves[-2:] == ["85-89", "90"]
    assert [h.labels[i] for i in range(len(h.labels)) if h.parent[i] == 0] == ["17-19", "20-39", "40-59", "60-79",
                                                                                  "80-90"]  # fmt: skip
    # 17-19 is the same band at every level: one node, so its chain is shorter
    node = h.labels.index("17-19")
    assert h.depth[node] == 1 and h.height == 3
    got = hierarchies.leaf_of_numbers(h, np.array([17, 19, 20, 44, 90, 120, -3, np.nan]))
    assert [h.labels[x] for x in got] == ["17-19", "17-19", "20-24", "40-44", "90", "90", "17-19", "*"]


def test_breaks_for_real_columns():
    h = numbers({"breaks": [[0, 1, 2.5, 10], [0, 2.5, 10]]}, bounds=(0, 10), integer=False)
    assert sorted(x for x in h.labels if x != "*") == ["[0, 1)", "[0, 2.5)", "[1, 2.5)", "[2.5, 10]"]
    got = hierarchies.leaf_of_numbers(h, np.array([0.0, 0.99, 1.0, 9.99, 10.0]))
    assert [h.labels[x] for x in got] == ["[0, 1)", "[0, 1)", "[1, 2.5)", "[2.5, 10]", "[2.5, 10]"]


@pytest.mark.parametrize("spec, bounds, words", [
    ({"widths": [5, 7]}, (17, 90), "not a multiple"),
    ({"widths": [0]}, (17, 90), "positive"),
    ({"breaks": [[20, 50, 91]]}, (17, 90), "do not cover"),
    ({"breaks": [[17, 40, 91], [17, 50, 91]]}, (17, 90), "merge intervals"),
    ({"breaks": [[17, 10, 91]]}, (17, 90), "not increasing"),
    ({"widths": [5], "breaks": [[17, 91]]}, (17, 90), "either widths or breaks"),
    ({"widths": [5]}, None, "need the column's bounds"),
])  # fmt: skip
def test_bad_ladders_are_refused(spec, bounds, words):
    with pytest.raises(errors.PolicyError) as e:
        numbers(spec, bounds=bounds)
    assert e.value.code == "DP327" and words in e.value.message


def test_json_round_trip():
    for h in (numbers({"widths": [5, 10]}), values({"G": ["a", "b"], "H": ["c"]}, domain=["a", "b", "c", None])):
        back = hierarchies.Hierarchy.from_json(h.column, h.to_json())
        assert back == h


POLICY = """
[tables.people]
unit = "id"
public_roster = true
experimental = true
[tables.people.columns.age]
bounds = [0, 99]
hierarchy = { widths = [10, 50] }
[tables.people.columns.job]
domain = ["cook", "chef", "nurse", "doctor"]
[tables.people.columns.job.hierarchy]
Kitchen = ["cook", "chef"]
Clinic = ["nurse", "doctor"]
"""


def test_policy_files_declare_hierarchies_and_the_experimental_flag(make_db, tmp_path):
    db = make_db("CREATE TABLE people (id INTEGER, age INTEGER, job VARCHAR, day DATE); "
                 "INSERT INTO people VALUES (1, 30, 'cook', DATE '2024-01-01')")  # fmt: skip
    policy = tmp_path / "p.toml"
    policy.write_text(POLICY)
    with Owner(db) as o:
        o.apply_policy(policy)
        t = o.catalog().tables["people"]
        assert t.experimental and set(t.hierarchies()) == {"age", "job"}
        assert t.hierarchies()["job"].height == 2
        # re-protecting without repeating them keeps the declarations
        o.protect("people", unit="id", public_roster=True)
        t = o.catalog().tables["people"]
        assert t.experimental and set(t.hierarchies()) == {"age", "job"}
        o.protect("people", unit="id", public_roster=True, experimental=False)
        assert not o.catalog().tables["people"].experimental
        o.declare("people", "job", hierarchy=["cook", "chef", "nurse", "doctor"])
        assert o.catalog().tables["people"].hierarchies()["job"].height == 1
        with pytest.raises(errors.PolicyError, match="not supported"):
            o.declare("people", "day", hierarchy={"widths": [7]})
        with pytest.raises(errors.PolicyError, match="needs people.id's declared domain"):
            o.declare("people", "id", hierarchy=["1", "2"])
        with pytest.raises(errors.PolicyError, match="no column"):
            o.declare("people", "nope", hierarchy=["a"])
    bad = tmp_path / "bad.toml"
    bad.write_text(POLICY.replace('Clinic = ["nurse", "doctor"]', 'Clinic = ["nurse"]'))
    with Owner(db) as o, pytest.raises(errors.PolicyError, match="'doctor' is not a leaf"):
        o.apply_policy(bad)


def test_trees_follow_their_column_and_cannot_be_smuggled_in(make_db, tmp_path):
    db = make_db("CREATE TABLE people (id INTEGER, age INTEGER, job VARCHAR, day DATE)")
    policy = tmp_path / "p.toml"
    policy.write_text(POLICY)
    with Owner(db) as o:
        o.apply_policy(policy)
        # a new declared value must find its place in the tree: the stored tree is checked again
        with pytest.raises(errors.PolicyError, match="'vet' is not a leaf"):
            o.declare("people", "job", domain=["cook", "chef", "nurse", "doctor", "vet"])
        o.declare("people", "job", domain=["cook", "chef", "nurse", "doctor", "vet"],
                  hierarchy={"Kitchen": ["cook", "chef"], "Clinic": ["nurse", "doctor", "vet"]})
        assert o.catalog().tables["people"].hierarchies()["job"].labels[-1] == "vet"
        # new bounds rebuild the interval ladder from its declaration
        o.declare("people", "age", bounds=(0, 120))
        assert o.catalog().tables["people"].hierarchies()["age"].upper == 120
        # the tree and the switch are declared only through their own keys, never as raw options
        for key in ("hierarchies", "experimental"):
            with pytest.raises(errors.PolicyError, match="cannot be set through options"):
                o.protect("people", unit="id", options={key: {"job": {"parent": [-1, 2, 1]}}})
        # a policy re-applied without experimental = true closes the table again
        policy.write_text(POLICY.replace("experimental = true\n", ""))
        o.apply_policy(policy)
        assert not o.catalog().tables["people"].experimental
        for where, old, text in (("experimental", "experimental = true", 'experimental = "false"'),
                                 ("public_roster", "public_roster = true", 'public_roster = "yes"')):
            policy.write_text(POLICY.replace(old, text))
            with pytest.raises(errors.PolicyError, match=f"{where} must be true or false"):
                o.apply_policy(policy)
        with pytest.raises(errors.PolicyError, match="true or false"):
            o.allow_test_seed("alice", "false")


def test_a_malformed_stored_tree_is_refused_when_used():
    good = values({"G": ["a", "b"]})
    data = json.loads(good.to_json())
    data["parent"] = [-1, 2, 1, 1]  # a cycle would make every walk over it loop forever
    with pytest.raises(errors.PolicyError, match="malformed"):
        hierarchies.Hierarchy.from_json("c", data)
