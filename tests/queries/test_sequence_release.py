"""CREATE SYNTHETIC TABLE ... USING privtree_markov: sequences and their model as public tables."""

from __future__ import annotations

import pytest

import dpgate

MAKE = "CREATE SYNTHETIC TABLE careers_syn FROM careers USING privtree_markov WITH (epsilon = 2)"


def test_the_release_writes_sequences_and_the_model(demo_db):
    with dpgate.connect(str(demo_db), analyst="demo", test_seed=5) as con:
        explain = "\n".join(str(r) for r in con.execute("EXPLAIN PRIVACY " + MAKE).fetchall())
        assert "fan-out β = 7" in explain and "sensitivity l⊤ = 73" in explain
        cur = con.execute(MAKE)
        assert cur.release.epsilon == 2.0 and "sequences (PrivTree Markov model)" in cur.message
        cols = [d[0] for d in con.execute("SELECT * FROM careers_syn LIMIT 1").description]
        assert cols == ["person_id", "month", "state"]
        n, longest, states = con.execute(
            "SELECT count(DISTINCT person_id), max(month), count(DISTINCT state) FROM careers_syn").fetchone()
        assert 300 < n < 1500 and longest <= 73 and states == 6  # about the 712 people, never past l⊤
        model = con.execute("SELECT context, from_start, next, count FROM careers_syn_model WHERE depth = 0").fetchall()
        assert len(model) == 7 and {r[2] for r in model} == {"employment", "FE", "HE", "joblessness", "school",
                                                               "training", None}  # fmt: skip
        assert all(r[3] >= 0 for r in model)
        (rel,) = [r for r in con.execute("SHOW RELEASES").fetchall() if r[0] == "careers_syn"]
        assert rel[3] == "privtree_markov"
        con.execute("DROP SYNTHETIC TABLE careers_syn")
        names = {r[0] for r in con.execute("SHOW TABLES").fetchall()}
        assert "careers_syn" not in names and "careers_syn_model" not in names


@pytest.mark.parametrize("options, code", [
    ("symbol = 'month'", "DP312"),  # no domain
    ("position = 'person_id'", "DP286"),
    ("rows = 10, bins = 3", "DP204"),
    ("personalization = 'partition'", "DP274"),
])  # fmt: skip
def test_refusals_charge_nothing(demo_db, options, code):
    with dpgate.connect(str(demo_db), analyst="demo") as con:
        before = con.budget()
        with pytest.raises(dpgate.Error) as e:
            con.execute(f"CREATE SYNTHETIC TABLE s FROM careers USING privtree_markov WITH ({options})")
        assert e.value.code == code, e.value
        assert con.budget() == before


def test_rows_sets_the_number_of_sequences(demo_db):
    with dpgate.connect(str(demo_db), analyst="demo", test_seed=6) as con:
        con.execute("CREATE SYNTHETIC TABLE s FROM careers USING privtree_markov WITH (epsilon = 1, rows = 50, "
                    "max_length = 24)")  # fmt: skip
        n, longest = con.execute("SELECT count(DISTINCT person_id), max(month) FROM s").fetchone()
        assert n <= 50 and longest <= 24


def test_a_taken_model_name_is_refused_before_the_debit(demo_db):
    """NAME_model was checked only when the release was written, after the debit."""
    with dpgate.connect(str(demo_db), analyst="demo", test_seed=7) as con:
        con.execute("CREATE SYNTHETIC TABLE s2_model FROM careers USING privtree_markov WITH (epsilon = 0.1, rows = 3)")
        before = con.budget()
        with pytest.raises(dpgate.Error) as e:
            con.execute("CREATE SYNTHETIC TABLE s2 FROM careers USING privtree_markov WITH (epsilon = 0.1)")
        assert e.value.code == "DP226" and "s2_model" in str(e.value)
        assert con.budget() == before


def test_rows_past_the_symbol_cap_are_refused_free(demo_db):
    """rows = 1,000,000 sampled in Python for hours after the debit."""
    from dpgate.queries.synthetic.sequences import MAX_SYMBOLS

    with dpgate.connect(str(demo_db), analyst="demo") as con:
        before = con.budget()
        with pytest.raises(dpgate.Error) as e:
            con.execute("CREATE SYNTHETIC TABLE big FROM careers USING privtree_markov WITH (epsilon = 2, rows = 1000000)")
        assert e.value.code == "DP266" and f"{MAX_SYMBOLS:,}" in str(e.value)
        assert con.budget() == before


def test_the_default_number_of_sequences_is_capped_with_a_note(demo_db, monkeypatch):
    from dpgate.queries.synthetic import sequences

    monkeypatch.setattr(sequences, "MAX_SYMBOLS", 73 * 10)  # careers: l⊤ = 73, so 10 sequences
    with dpgate.connect(str(demo_db), analyst="demo", test_seed=8) as con:
        cur = con.execute("CREATE SYNTHETIC TABLE capped FROM careers USING privtree_markov WITH (epsilon = 2)")
        assert any("10 were sampled" in n for n in cur.release.notes), cur.release.notes
        assert con.execute("SELECT count(DISTINCT person_id) FROM capped").fetchone()[0] <= 10


def test_dropping_a_release_leaves_a_side_table_the_owner_protected_since(demo_db):
    """DROP SYNTHETIC TABLE dropped every side table, a protected one included."""
    from dpgate.catalog.owner import Owner

    with dpgate.connect(str(demo_db), analyst="demo", test_seed=9) as con:
        con.execute("CREATE SYNTHETIC TABLE cs FROM careers USING privtree_markov WITH (epsilon = 0.5, rows = 20)")
    with Owner(demo_db) as owner:
        owner.protect("cs_model", unit="count", max_rows=1, public_roster=True)
    with dpgate.connect(str(demo_db), analyst="demo") as con:
        con.execute("DROP SYNTHETIC TABLE cs")
    import duckdb

    raw = duckdb.connect(str(demo_db), read_only=True)
    names = {r[0] for r in raw.execute("SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main'").fetchall()}
    raw.close()
    assert "cs" not in names and "cs_model" in names


def test_at_a_small_epsilon_the_sample_is_no_larger_than_the_roster(demo_db):
    """At ε = 10^-4 the model's noisy count of sequences is off by millions, and sampling it (up to
    5,000,000 symbols, about 30 s in Python after the debit) described people who cannot exist:
    one sequence a subject, so no more are drawn than the roster's 712."""
    with dpgate.connect(str(demo_db), analyst="demo", test_seed=5) as con:
        con.execute(MAKE.replace("epsilon = 2", "epsilon = 0.0001"))
        n = con.execute("SELECT count(DISTINCT person_id) FROM careers_syn").fetchone()[0]
    assert n <= 712


@pytest.mark.parametrize("symbols", [256, 257])
def test_alphabets_of_up_to_256_symbols(make_db, symbols):
    """256 symbols are modelled; one more is refused before the debit (each split makes |I| + 1
    children of |I| + 1 cells)."""
    airports = [f"a{i:03d}" for i in range(symbols)]
    db = make_db(
        "CREATE TABLE trips AS SELECT i // 6 AS pid, i % 6 AS leg, 'a' || lpad(CAST((i * 7919) % 256 AS VARCHAR), 3, '0') "
        "AS airport FROM range(3000) r(i)",
        {"trips": {"unit": "pid", "max_rows": 6, "epsilon": 10.0, "domains": {"airport": airports}}},
    )  # fmt: skip
    make = ("CREATE SYNTHETIC TABLE s FROM trips USING privtree_markov WITH (epsilon = 1, symbol = 'airport', "
            "position = 'leg')")  # fmt: skip
    with dpgate.connect(str(db), analyst="alice", test_seed=3) as con:
        before = con.budget()
        if symbols == 257:
            with pytest.raises(dpgate.Error) as e:
                con.execute(make)
            assert e.value.code == "DP284" and "at most 256" in e.value.hint
            assert con.budget() == before
            return
        con.execute(make)
        (contexts,) = con.execute("SELECT count(DISTINCT node) FROM s_model").fetchone()
        assert contexts >= 1
        (n,) = con.execute("SELECT count(*) FROM s_model WHERE node = 0").fetchone()
        assert n == 257  # the root's histogram: every airport and the end
