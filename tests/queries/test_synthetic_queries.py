"""Synthetic releases and marginals through SQL: CREATE / DROP SYNTHETIC TABLE, SHOW RELEASES,
the registry, progress, the owner's quality report, and consistent contingency tables.

PrivBayes itself (exact privacy of each step, θ-usefulness, utility against the independent
baseline at ε ∈ {0.1, 0.4, 1.6}) is tested in ``tests/mechanisms/test_privbayes.py``.
"""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dpgate
from dpgate import errors
from dpgate.interfaces import cli
from dpgate.catalog.owner import Owner
from dpgate.release import norm_sub

from conftest import TEST_SEED, fetch

SETUP = """
CREATE TABLE people (pid INTEGER, colour VARCHAR, size INTEGER, score DOUBLE, note VARCHAR);
INSERT INTO people
SELECT i, CASE WHEN i % 3 = 0 THEN 'red' WHEN i % 3 = 1 THEN 'green' ELSE 'blue' END,
       i % 7, (i % 100) / 10.0, 'free text ' || i
FROM range(3000) t(i);
CREATE TABLE visits (pid INTEGER, place VARCHAR);
INSERT INTO visits SELECT i % 500, CASE WHEN i % 2 = 0 THEN 'a' ELSE 'b' END FROM range(1500) t(i);
"""
PEOPLE = {
    "unit": "pid", "epsilon": 1e6,
    "domains": {"colour": ["red", "green", "blue"]}, "bounds": {"size": (0, 6), "score": (0, 10)},
}  # fmt: skip
ANALYSTS = {
    "alice": {"epsilon": 1e6, "delta": 1e-3, "epsilon_per_query": 1e5},
    "bob": {"epsilon": 100.0, "delta": 1e-3, "epsilon_per_query": 10},
}
CREATE = "CREATE SYNTHETIC TABLE {name} FROM people USING privbayes WITH ({opts})"


@pytest.fixture
def db(make_db):
    return make_db(
        SETUP,
        protect={
            "people": PEOPLE,
            "visits": {"unit": "pid", "max_rows": 3, "max_groups": 2, "epsilon": 1e6, "domains": {"place": ["a", "b"]}},
        },
        analysts=ANALYSTS,
    )


@pytest.fixture
def alice(db):
    c = dpgate.connect(str(db), analyst="alice", test_seed=TEST_SEED)
    yield c
    c.close()


def ledger(db):
    with Owner(db, create=False) as owner:  # shares the open instance
        return owner.con.execute("SELECT query_class, mechanism, epsilon FROM dpgate.ledger ORDER BY entry_id").fetchall()


# -- the release ---------------------------------------------------------------------------------
def test_a_release_is_charged_once_and_then_public(alice, db):
    before = alice.budget()[0]
    _, cur = fetch(alice, CREATE.format(name="syn", opts="epsilon = 2, columns = 'colour, size, score'"))
    assert cur.message.startswith("CREATE SYNTHETIC TABLE syn:") and cur.description is None
    assert cur.release.query_class == "synthetic" and cur.release.epsilon == 2
    assert alice.budget()[0] == before - 2
    rows, cur = fetch(alice, "SELECT * FROM syn")
    assert cur.release is None, "a release is public: reading it is free"
    assert [d[0] for d in cur.description] == ["colour", "size", "score"]
    assert [d[1] for d in cur.description] == ["VARCHAR", "INTEGER", "DOUBLE"]
    assert abs(len(rows) - 3000) < 200
    assert {r[0] for r in rows} <= {"red", "green", "blue"}
    # size and score may be NULL (no NOT NULL constraint: NULL has a code); none are in the data
    assert all((r[1] is None or 0 <= r[1] <= 6) and (r[2] is None or 0 <= r[2] <= 10) for r in rows)
    assert sum(r[1] is None for r in rows) < 0.02 * len(rows)
    assert alice.budget()[0] == before - 2
    assert ledger(db)[-1][:2] == ("synthetic", "privbayes")


def test_show_releases_and_show_tables_list_it(alice):
    fetch(alice, CREATE.format(name="syn", opts="epsilon = 1, columns = 'colour, size', rows = 50, bins = 4"))
    rows, cur = fetch(alice, "SHOW RELEASES")
    by = dict(zip([d[0] for d in cur.description], rows[0]))
    assert by["name"] == "syn" and by["source"] == "people" and by["mechanism"] == "privbayes"
    assert by["epsilon"] == 1.0 and by["analyst"] == "alice" and by["rows"] == 50
    # alice's test seed made its noise reproducible: every analyst sees that
    assert by["status"] == "active; NOT PRIVATE (made with a fixed test seed)"
    rows, _ = fetch(alice, "SHOW TABLES")
    assert ("syn", "release", None, None, None) in rows
    rows, _ = fetch(alice, "SELECT count(*) FROM syn")
    assert rows == [(50,)], "rows = 50 writes exactly 50 rows"


def test_a_release_made_without_a_test_seed_is_shown_active(db):
    with dpgate.connect(str(db), analyst="bob") as bob:
        fetch(bob, CREATE.format(name="private_syn", opts="epsilon = 1, columns = 'colour, size', rows = 50, bins = 4"))
        rows, cur = fetch(bob, "SHOW RELEASES")
    by = dict(zip([d[0] for d in cur.description], rows[0]))
    assert by["name"] == "private_syn" and by["status"] == "active"


def test_the_registry_keeps_the_lineage(alice, db):
    fetch(alice, CREATE.format(name="syn", opts="epsilon = 1, columns = 'colour, size', degree = 1, score = 'r'"))
    alice.close()
    with Owner(db) as owner:
        from dpgate.catalog import releases as registry

        (rec,) = registry.records(owner.con)
    assert rec.sources == ["people"] and rec.kind == "synthetic table"
    assert rec.parameters["options"]["degree"] == 1 and rec.parameters["bins"] == 16
    assert [c["name"] for c in rec.parameters["codings"]] == ["colour", "size"]
    assert math.isclose(sum(e for _, e in rec.parameters["charges"]), 1.0)
    assert rec.parameters["network"][0].startswith("PrivBayes: 2 attributes")
    assert rec.entry_id == 1, "the ledger debit that paid for it"


def test_group_privacy_for_subjects_with_several_rows(alice, db):
    _, cur = fetch(alice, "CREATE SYNTHETIC TABLE v FROM visits USING privbayes WITH (epsilon = 1.5)")
    assert any("ε/3" in n for n in cur.release.notes) or any("ε 0.5 for the model" in n for n in cur.release.notes)
    alice.close()
    with Owner(db) as owner:
        from dpgate.catalog import releases as registry

        (rec,) = registry.records(owner.con)
    assert rec.parameters["epsilon_model"] == pytest.approx(0.5), "3 rows per subject: ε / 3 per row"


def test_explain_shows_the_columns_and_spends_nothing(alice):
    rows, _ = fetch(alice, "EXPLAIN PRIVACY " + CREATE.format(name="syn", opts="epsilon = 1, bins = 8, columns = 'colour, size, score'"))
    by = {r[0]: r for r in rows}
    assert by["query"][1] == "privbayes" and by["query"][2] == 1.0
    assert "3 declared values" in by["column colour"][6]
    assert "7 integers 0..6" in by["column size"][6]
    assert "8 equi-width bins on [0, 10]" in by["column score"][6]
    assert "column note" not in by
    assert alice.budget()[0] == 1e6
    rows, _ = fetch(alice, "SHOW TABLES")
    assert "syn" not in {r[0] for r in rows}


def test_progress_is_reported(db):
    seen = []
    with dpgate.connect(str(db), analyst="alice", progress=lambda f, m: seen.append((f, m))) as c:
        fetch(c, CREATE.format(name="syn", opts="epsilon = 1, columns = 'colour, size'"))
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions) and fractions[0] == 0.0 and fractions[-1] == 1.0
    assert any("network" in m for _, m in seen) and any("writing syn" in m for _, m in seen)


def test_a_statement_from_a_progress_callback_is_refused_and_the_release_completes(db):
    """A DP statement run from the progress callback on the same connection
    began a ledger transaction inside the release's and failed the release after its debit."""
    inner = []

    def callback(fraction, message):
        if not inner:
            try:
                c.cursor().execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1) COUNT(*) FROM people")
            except dpgate.Error as e:
                inner.append(e.code)

    with dpgate.connect(str(db), analyst="alice", progress=callback) as c:
        fetch(c, CREATE.format(name="syn", opts="epsilon = 1, columns = 'colour, size'"))
        assert inner == ["DP107"]
        assert fetch(c, "SELECT count(*) FROM syn")[0][0][0] > 0


def test_exhausted_subjects_are_not_read(make_db):
    """Subjects with no budget left are excluded: a colour only they have never appears."""
    setup = SETUP + (
        "INSERT INTO people SELECT 10000 + i, 'black', 1, 1.0, '' FROM range(600) t(i);"
        "CREATE TABLE budgets AS SELECT pid, CASE WHEN pid >= 10000 THEN 0.0 ELSE 1e6 END AS epsilon FROM people;"
    )
    spec = {**PEOPLE, "domains": {"colour": ["red", "green", "blue", "black"]}, "budget_table": "budgets"}
    spec.pop("epsilon")
    db = make_db(setup, protect={"people": spec}, analysts=ANALYSTS)
    with dpgate.connect(str(db), analyst="alice", test_seed=TEST_SEED) as c:
        _, cur = fetch(c, CREATE.format(name="syn", opts="epsilon = 50, columns = 'colour, size'"))
        assert cur.release.subjects_excluded == 600
        rows, _ = fetch(c, "SELECT count(*) FILTER (WHERE colour = 'black'), count(*) FROM syn")
    assert rows[0][0] <= 0.01 * rows[0][1]


# -- refusals ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "sql, code",
    [
        (CREATE.format(name="syn", opts="epsilon = 1"), "DP213"),  # note has no domain
        (CREATE.format(name="people", opts="epsilon = 1, columns = 'colour'"), "DP226"),
        (CREATE.format(name="main.x.y", opts="epsilon = 1, columns = 'colour'"), "DP226"),
        (CREATE.format(name="syn", opts="epsilon = 1, columns = 'pid, colour'"), "DP211"),
        (CREATE.format(name="syn", opts="epsilon = 1, columns = 'colour, nope'"), "DP218"),
        (CREATE.format(name="syn", opts="epsilon = 1, columns = 'colour', delta = 1e-6"), "DP204"),
        (CREATE.format(name="syn", opts="epsilon = 1, columns = 'colour', bins = 1"), "DP205"),
        (CREATE.format(name="syn", opts="epsilon = 1, columns = 'colour, size', score = 'f'"), "DP287"),
        (CREATE.format(name="syn", opts="epsilon = 1, columns = 'colour', personalization = 'partition'"), "DP274"),
        ("CREATE SYNTHETIC TABLE syn FROM people USING gan WITH (epsilon = 1)", "DP221"),
        ("CREATE SYNTHETIC TABLE syn FROM nowhere USING privbayes", "DP225"),
        ("DROP SYNTHETIC TABLE nothing", "DP225"),
    ],
)
def test_refusals_are_specific_and_free(alice, db, sql, code):
    before = alice.budget()
    with pytest.raises(errors.Error) as e:
        fetch(alice, sql)
    assert e.value.code == code, e.value
    assert e.value.hint
    assert alice.budget() == before and ledger(db) == []


def test_only_the_creator_or_the_owner_drops_a_release(db):
    with dpgate.connect(str(db), analyst="alice") as a:
        fetch(a, CREATE.format(name="syn", opts="epsilon = 1, columns = 'colour'"))
        fetch(a, CREATE.format(name="syn2", opts="epsilon = 1, columns = 'colour'"))
    with dpgate.connect(str(db), analyst="bob") as b:
        rows, _ = fetch(b, "SELECT count(*) FROM syn")  # public to every analyst
        assert rows[0][0] > 0
        with pytest.raises(errors.PolicyError) as e:
            fetch(b, "DROP SYNTHETIC TABLE syn")
        assert e.value.code == "DP320"
        _, cur = fetch(b, "DROP SYNTHETIC TABLE IF EXISTS nothing")
        assert "no release named nothing" in cur.message
    with dpgate.connect(str(db), analyst="alice") as a:
        _, cur = fetch(a, "DROP SYNTHETIC TABLE syn")
        assert "lineage stays" in cur.message
        with pytest.raises(errors.ProgrammingError):
            fetch(a, "SELECT * FROM syn")
        rows, _ = fetch(a, "SHOW RELEASES")
        status = {r[0]: r[9] for r in rows}
        assert status["syn"].startswith("dropped") and status["syn2"] == "active"
        fetch(a, CREATE.format(name="syn", opts="epsilon = 1, columns = 'colour'"))  # the name is free again
    with Owner(db) as owner:
        from dpgate.catalog import releases as registry

        registry.drop(owner.con, "syn2", by="owner", owner=True)
        assert [r.name for r in registry.records(owner.con, include_dropped=False)] == ["syn"]


# -- the owner's quality report ------------------------------------------------------------------
def test_quality_report_compares_with_the_source(alice, db, capsys):
    fetch(alice, CREATE.format(name="syn", opts="epsilon = 50, columns = 'colour, size, score'"))
    alice.close()
    with Owner(db) as owner:
        report = owner.quality("syn")
    assert report["source"] == "people" and report["columns"] == 3 and report["rows_source"] == 3000
    assert 0 <= report["tvd_1way"] <= report["tvd_2way"] <= report["tvd_3way"] <= 1
    assert report["tvd_2way"] < 0.05, "ε = 50 on a simple table: the marginals are close"
    assert cli.main(["quality", str(db), "syn"]) == 0
    out = capsys.readouterr().out
    assert "2-way marginals" in out and "release syn" in out


def test_adult_release_meets_the_quality_target(demo_db):
    """The issue's target on Adult at ε = 1: average 2-way TVD under 0.06 (PrivBayes measures
    0.048 ± 0.002 over runs; the independent baseline 0.080)."""
    with dpgate.connect(str(demo_db), analyst="demo", test_seed=TEST_SEED) as c:
        fetch(c, "CREATE SYNTHETIC TABLE adult_syn FROM adult USING privbayes WITH (epsilon = 1)")
    with Owner(demo_db) as owner:
        report = owner.quality("adult_syn")
    assert report["columns"] == 15
    assert report["tvd_2way"] < 0.06


def test_cli_shows_a_progress_bar(capsys, db):
    code = cli.main(["query", str(db), "--analyst", "alice", CREATE.format(name="syn", opts="epsilon = 1, columns = 'colour'")])
    out = capsys.readouterr()
    assert code == 0 and "CREATE SYNTHETIC TABLE syn" in out.out
    assert "100% done" in out.err and "[#" in out.err


def test_the_shell_shows_progress_and_the_message(db, tmp_path):
    from dpgate.interfaces.shell import Shell

    out, err = io.StringIO(), io.StringIO()
    with dpgate.connect(str(db), analyst="alice") as con:
        sh = Shell(con, interactive=False, stdout=out, stderr=err, color=False)
        sh.run_script(CREATE.format(name="syn", opts="epsilon = 1, columns = 'colour'") + ";\nSELECT count(*) FROM syn;\n")
    assert "CREATE SYNTHETIC TABLE syn" in out.getvalue() and "ε charged 1" in out.getvalue()
    assert "100% done" in err.getvalue()


# -- consistent marginals ------------------------------------------------------------------------
def test_consistent_tables_are_non_negative_with_the_noisy_total(alice):
    sql = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.05{}) colour, size, COUNT(*) AS n FROM people GROUP BY colour, size"
    rows, cur = fetch(alice, sql.format(", consistent = true"))
    assert len(rows) == 21 and all(isinstance(r[2], int) and r[2] >= 0 for r in rows)
    assert abs(sum(r[2] for r in rows) - 3000) < 3000 * 0.1
    assert all(iv["n"] == (None, None) for iv in cur.release.intervals)
    assert any("Norm-Sub" in n for n in cur.release.notes)
    with pytest.raises(errors.UnsupportedQueryError):
        fetch(alice, "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (consistent = true, delta = 1e-6) note, COUNT(*) FROM people GROUP BY note")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(-50, 500, allow_nan=False), min_size=1, max_size=30), st.floats(-100, 3000, allow_nan=False))
def test_norm_sub_is_a_non_negative_integer_projection(values, total):
    x = norm_sub(np.array(values), total)
    assert all(isinstance(v, int) and v >= 0 for v in x)
    assert sum(x) == round(max(0.0, total))
    y = np.array(values)
    for i in range(len(y)):  # order is kept, up to the rounding of one unit
        for j in range(len(y)):
            if y[i] > y[j]:
                assert x[i] >= x[j] - 1


def test_norm_sub_leaves_a_consistent_table_alone():
    assert list(norm_sub(np.array([3.0, 0.0, 7.0, 5.0]), 15)) == [3, 0, 7, 5]
    assert list(norm_sub(np.array([4.0, -2.0, 6.0]), 8)) == [3, 0, 5]


def test_a_release_the_owner_later_protects_cannot_be_dropped_by_an_analyst(db):
    with dpgate.connect(str(db), analyst="alice") as a:
        fetch(a, CREATE.format(name="syn", opts="epsilon = 1, columns = 'colour'"))
    with Owner(db) as owner:
        with pytest.raises(errors.PolicyError) as e:
            owner.protect("syn", unit="colour")
        assert e.value.code == "DP314", "a published release is public: protecting it would not take it back"
        owner.drop_release("syn")
        owner.con.execute("CREATE TABLE syn AS SELECT 1 AS pid")
        owner.protect("syn", unit="pid")
    with dpgate.connect(str(db), analyst="alice") as a, pytest.raises(errors.PolicyError) as e:
        fetch(a, "DROP SYNTHETIC TABLE syn")
    assert e.value.code in ("DP320", "DP225")


# -- the default synthesizer (MST) and the independent baseline ---------------------------------
def test_without_using_the_release_is_mst(alice, db):
    cur = alice.cursor()
    cur.execute("EXPLAIN PRIVACY CREATE SYNTHETIC TABLE syn FROM people WITH (epsilon = 2, columns = 'colour, size, score')")
    by = {r[0]: r for r in cur.fetchall()}
    assert by["model"][1] == "mst" and "noisy row count" in by["model"][6] and "tree" in by["model"][6]
    cur.execute("CREATE SYNTHETIC TABLE syn FROM people WITH (epsilon = 2, columns = 'colour, size, score')")
    assert any("(MST)" in m for m in cur.messages) and any("measured pair(s) of columns" in m for m in cur.messages)
    assert ledger(db)[-1] == ("synthetic", "mst", 2.0)
    rows, _ = fetch(alice, "SELECT colour, count(*) FROM syn GROUP BY colour ORDER BY colour")
    assert {r[0] for r in rows} <= {"red", "green", "blue"} and 2000 < sum(r[1] for r in rows) < 4000
    rows, _ = fetch(alice, "SHOW RELEASES")
    assert [r[3] for r in rows if r[0] == "syn"] == ["mst"]


def test_the_independent_baseline_and_option_checks(alice, db):
    fetch(alice, "CREATE SYNTHETIC TABLE ind FROM people USING independent WITH (epsilon = 1, columns = 'colour, size')")
    assert ledger(db)[-1] == ("synthetic", "independent", 1.0)
    before = alice.budget()
    for sql in ["CREATE SYNTHETIC TABLE x FROM people USING mst WITH (epsilon = 1, degree = 2)",
                "CREATE SYNTHETIC TABLE x FROM people USING independent WITH (epsilon = 1, theta = 4)"]:  # fmt: skip
        with pytest.raises(dpgate.Error) as e:
            alice.execute(sql)
        assert e.value.code == "DP204" and "not an option" in str(e.value)
    assert alice.budget() == before


def test_mst_release_of_adult_beats_independent_columns_on_2_way(demo_db):
    """Through SQL at ε = 1 (one run each; the paired utility tests with margins are in
    tests/mechanisms/test_mst.py): MST's 2-way TVD about 0.045, independent columns about 0.080."""
    with dpgate.connect(str(demo_db), analyst="demo", test_seed=TEST_SEED) as c:
        fetch(c, "CREATE SYNTHETIC TABLE adult_tree FROM adult WITH (epsilon = 1)")
    with Owner(demo_db) as owner:
        report = owner.quality("adult_tree")
    assert report["columns"] == 15 and report["tvd_2way"] < 0.06


def test_rows_past_ten_million_are_refused_free(demo_db):
    """rows = 10^12 was accepted and would be sampled after the debit."""
    with dpgate.connect(str(demo_db), analyst="demo") as con:
        before = con.budget()
        for method in ("mst", "privbayes"):
            with pytest.raises(dpgate.Error) as e:
                con.execute(f"CREATE SYNTHETIC TABLE z FROM adult USING {method} WITH (epsilon = 1, rows = 1000000000000)")
            assert e.value.code == "DP205" and "rows" in str(e.value)
        assert con.budget() == before


def test_a_release_cannot_take_a_name_a_views_sql_mentions(make_db):
    """Every statement depends on the tables a view's SQL may name: an analyst creating and dropping a
    release named like a word of a view restarted other analysts' statements, or failed them after
    their debit (41 of 267 charged and failed)."""
    db = make_db(SETUP + "CREATE TABLE pub AS SELECT 1 AS k; CREATE VIEW v AS SELECT k AS region FROM pub;",
                 protect={"people": PEOPLE}, analysts=ANALYSTS)  # fmt: skip
    with dpgate.connect(str(db), analyst="alice", test_seed=TEST_SEED) as c:
        before = c.budget()
        with pytest.raises(errors.Error) as e:
            fetch(c, CREATE.format(name="region", opts="epsilon = 1, columns = 'colour'"))
        assert e.value.code == "DP226" and "view v" in e.value.message and c.budget() == before
        fetch(c, CREATE.format(name="regions", opts="epsilon = 1, columns = 'colour'"))  # a word no view has


def test_a_model_too_large_for_its_public_cell_cap_is_refused_before_the_debit(make_db):
    """MST's conditionals are full-domain tables: two columns of 50,001 and 2,001 declared values
    took 40 s and 2.5 GB after the debit. Declared domains are public, so a model that could pass
    MODEL_CELLS is refused at planning (DP266, nothing charged); leaving a column out is served."""
    big = [f"v{i}" for i in range(6000)]
    setup = ("CREATE TABLE t (pid INTEGER, a VARCHAR, b VARCHAR, c VARCHAR); "
             "INSERT INTO t SELECT i, 'v' || (i % 6000), 'v' || (i % 5000), 'x' FROM range(300) r(i);")  # fmt: skip
    db = make_db(setup, protect={"t": {"unit": "pid", "epsilon": 1e6, "domains": {"a": big, "b": big, "c": ["x"]}}},
                 analysts=ANALYSTS)  # fmt: skip
    with dpgate.connect(str(db), analyst="alice", test_seed=TEST_SEED) as c:
        before = c.budget()
        with pytest.raises(errors.UnsupportedQueryError) as e:
            c.execute("CREATE SYNTHETIC TABLE s FROM t USING mst WITH (epsilon = 1)")
        assert e.value.code == "DP266" and "columns option" in e.value.hint
        assert c.budget() == before and ledger(db) == []
        c.execute("CREATE SYNTHETIC TABLE s FROM t USING mst WITH (epsilon = 1, columns = 'a, c')")
        assert c.execute("SELECT count(*) FROM s").fetchone()[0] > 0


def test_at_a_small_epsilon_a_release_has_no_more_rows_than_the_roster_holds(alice):
    """The model's noisy row count at ε = 10^-4 is off by tens of thousands (millions on larger
    rosters), and those rows were sampled after the debit; the roster's size times max_rows is
    public and bounds what a release describes."""
    alice.execute("CREATE SYNTHETIC TABLE tiny FROM people USING independent WITH (epsilon = 0.0001, columns = 'colour')")
    assert alice.execute("SELECT count(*) FROM tiny").fetchone()[0] <= 3000


def test_a_release_whose_cells_get_an_epsilon_below_the_samplers_floor_is_refused_free(demo_db):
    """ε = 1e-6 over 15 marginals with max_rows_contributed = 1,000,000 leaves each cell ε ≈ 7e-14, below
    the discrete Laplace sampler's floor: its ValueError escaped the dry run as a raw exception."""
    with dpgate.connect(str(demo_db), analyst="demo") as con:
        before = con.budget()
        with pytest.raises(errors.ProgrammingError) as e:
            con.execute("CREATE SYNTHETIC TABLE tiny FROM adult USING independent "
                        "WITH (epsilon = 0.000001, max_rows_contributed = 1000000)")  # fmt: skip
        assert e.value.code == "DP275" and con.budget() == before
