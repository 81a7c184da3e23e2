"""Release caps: what one analyst's releases may hold in the shared file, checked before the debit.

A release at ε = 1e-6 with ``rows = 9999999`` wrote ~80 MB into the database file and nothing capped
how many an analyst made. Each analyst now has caps on the rows of one release, the releases they hold
and their estimated bytes (the owner's defaults, or the analyst's own); a release past one is refused
free, with the cap and the analyst's usage in the hint.
"""

from __future__ import annotations

import re
import threading

import pytest

import dpgate
from dpgate import errors
from dpgate.catalog import caps
from dpgate.catalog.owner import Owner
from dpgate.interfaces import cli

SETUP = """
CREATE TABLE t AS SELECT i AS pid, i % 90 AS age, CASE WHEN i % 3 = 0 THEN 'F' ELSE 'M' END AS sex,
  (i % 50) * 1.5 AS x FROM range(2000) r(i);
"""
ANALYSTS = {"alice": {"epsilon": 1000.0, "delta": 1e-3}, "bob": {"epsilon": 1000.0, "delta": 1e-3}}


@pytest.fixture
def db(make_db):
    return make_db(SETUP, protect={"t": {"unit": "pid", "max_rows": 1, "epsilon": 1000.0, "domains": {"sex": ["F", "M"]},
                                         "bounds": {"age": (0, 89), "x": (0, 75)}}}, analysts=ANALYSTS)  # fmt: skip


def release(name: str, rows: int | None = None, columns: str = "age, sex, x") -> str:
    extra = f", rows = {rows}" if rows is not None else ""
    return f"CREATE SYNTHETIC TABLE {name} FROM t WITH (epsilon = 1, columns = '{columns}'{extra})"


def spent(db) -> tuple:
    with Owner(db, read_only=True) as o:
        return (o.con.execute("SELECT name, epsilon_spent FROM dpgate.analysts ORDER BY 1").fetchall(),
                o.con.execute("SELECT count(*) FROM dpgate.ledger").fetchone()[0],
                o.con.execute("SELECT sum(epsilon_spent) FROM dpgate.subjects_t").fetchone()[0])  # fmt: skip


def refused(db, sql: str, code: str, analyst: str = "alice") -> errors.Error:
    before = spent(db)
    with dpgate.connect(str(db), analyst=analyst) as con, pytest.raises(errors.PolicyError) as info:
        con.execute(sql)
    assert info.value.code == code, info.value
    assert "nothing was charged" in info.value.hint
    assert spent(db) == before  # free: no analyst, subject or ledger change
    return info.value


def test_the_rows_of_one_release_are_capped_before_the_debit(db):
    """rows = 9,999,999 wrote ~80 MB in ~9 s; by default a release may write 1,000,000 rows."""
    e = refused(db, release("big", 9_999_999), "DP343")
    assert "9,999,999 rows" in e.message and "1,000,000" in e.message and "rows = 1,000,000" in e.hint
    assert e.details["cap"] == 1_000_000
    with Owner(db) as o:
        o.set_release_caps("alice", release_rows=500)
    e = refused(db, release("r", 501), "DP343")
    assert "at most rows = 500" in e.hint
    with dpgate.connect(str(db), analyst="alice") as con:
        assert "500 rows" in con.execute(release("r", 500)).message
        # without rows = ..., the bound is the roster (2,000 subjects × 1 row each): past the cap
        with pytest.raises(errors.PolicyError, match="2,000 subjects on the roster") as info:
            con.execute(release("r2"))
        assert info.value.code == "DP343"
    with dpgate.connect(str(db), analyst="bob") as con:  # bob's caps are the database's defaults
        assert con.execute(release("b")).release is not None


def test_the_releases_an_analyst_holds_are_capped_and_dropping_one_frees_its_place(db):
    with Owner(db) as o:
        o.set_release_caps("alice", releases=2)
    with dpgate.connect(str(db), analyst="alice") as con:
        con.execute(release("r1", 10))
        con.execute(release("r2", 10))
    e = refused(db, release("r3", 10), "DP344")
    assert "You hold 2 release(s); your cap is 2" in e.message and "DROP SYNTHETIC TABLE" in e.hint
    with dpgate.connect(str(db), analyst="bob") as con:  # the cap is alice's: bob's releases are his own
        con.execute(release("b1", 10))
    with dpgate.connect(str(db), analyst="alice") as con:
        con.execute("DROP SYNTHETIC TABLE r1")
        con.execute(release("r3", 10))


def test_a_release_finishing_while_another_is_checked_still_counts(db, monkeypatch):
    """A reservation checks the caps in a transaction begun under the ledger lock; a release written
    (committed) after that transaction began, and settled before the check ran, was in neither the
    registry it could see nor the pending releases: two releases held under a cap of one. Settling
    under the lock keeps the pending entry until such a check is done."""
    from dpgate.catalog import releases as registry

    with Owner(db) as o:
        o.set_release_caps("alice", releases=1)
    inside, settling, outcome = threading.Event(), threading.Event(), {}
    check, settle, record = caps.check, caps.settle, registry.record

    def second() -> None:
        with dpgate.connect(str(db), analyst="alice") as con:
            try:
                con.execute(release("r2", 10))
                outcome["second"] = "made"
            except errors.PolicyError as e:
                outcome["second"] = e.code

    other = threading.Thread(target=second, name="second")

    def waiting_check(*args, **kwargs):  # the second reservation, its transaction begun: wait for the first's settle
        if threading.current_thread() is other:
            inside.set()
            settling.wait(3)  # with the lock held by this reservation, the settle waits for it instead
        return check(*args, **kwargs)

    def recording(*args, **kwargs):  # the first release, before its commit: let the second reservation begin
        if threading.current_thread() is not other and not other.is_alive() and "second" not in outcome:
            other.start()
            assert inside.wait(30)
        return record(*args, **kwargs)

    monkeypatch.setattr(caps, "check", waiting_check)
    monkeypatch.setattr(caps, "settle", lambda *a, **k: (settling.set(), settle(*a, **k))[1])
    monkeypatch.setattr(registry, "record", recording)
    with dpgate.connect(str(db), analyst="alice") as con:
        con.execute(release("r1", 10))
    other.join(30)
    assert outcome == {"second": "DP344"}
    with Owner(db) as o:
        assert caps.usage(o.con, "alice").releases == 1


def test_the_bytes_an_analyst_holds_are_capped_with_usage_in_the_hint(db):
    # age (BIGINT: 8 bytes) + sex (VARCHAR: 16) + x (DECIMAL(21, 1): 16): 40 bytes a row
    size = caps.release_size(_plan(db, release("r", 1000)))
    assert (size.rows, size.row_bytes, size.columns) == (1000, 40, 3)
    with Owner(db) as o:
        o.set_release_caps(None, release_bytes=100_000)  # the database's default
    with dpgate.connect(str(db), analyst="alice") as con:
        con.execute(release("r1", 2000))  # 80,000 bytes
    e = refused(db, release("r2", 2000), "DP345")
    assert "your releases hold about 80,000 bytes" in e.message and "cap is 100,000 bytes" in e.message
    assert "at most rows = 500" in e.hint  # (100,000 - 80,000) / 40
    with dpgate.connect(str(db), analyst="alice") as con:
        con.execute(release("r2", 500))
    with Owner(db) as o:
        assert caps.usage(o.con, "alice") == caps.Usage(2, 2500, 100_000)
        assert caps.usage(o.con, "bob") == caps.Usage(0, 0, 0)


def test_releases_in_the_making_count_against_the_caps(db):
    """Two statements of one analyst at once: the second sees the first's reservation (its registry row
    is written only when its table is)."""
    with Owner(db) as o:
        o.set_release_caps("alice", releases=1)
    started, finish = threading.Event(), threading.Event()

    def slow(fraction, message):
        started.set()
        finish.wait(30)

    with dpgate.connect(str(db), analyst="alice") as first:
        first.progress = slow
        thread = threading.Thread(target=lambda: first.execute(release("r1", 10)))
        thread.start()
        try:
            assert started.wait(30)
            refused(db, release("r2", 10), "DP344")
        finally:
            finish.set()
            thread.join(30)
    with Owner(db, read_only=True) as o:  # the first was written; its reservation ended
        assert caps.usage(o.con, "alice", None).releases == 1


def test_caps_from_a_policy_and_the_command_line(db, capsys):
    with Owner(db) as o:
        o.apply_policy({"release_caps": {"releases": 7},
                        "analysts": {"alice": {"epsilon": 10, "release_rows": 123}}})  # fmt: skip
        assert o.release_caps("alice") == {"release_rows": 123, "releases": 7, "release_bytes": 1 << 30}
        assert o.release_caps("bob")["releases"] == 7
        with pytest.raises(errors.PolicyError) as info:
            o.apply_policy({"release_caps": {"rows": 5}})
        assert info.value.code == "DP330" and "release_rows" in info.value.hint
    assert cli.main(["analyst", "set", str(db), "bob", "--release-rows", "5", "--release-bytes", "4096"]) == 0
    assert "release caps: 5 rows a release, 7 releases, 4,096 bytes" in capsys.readouterr().out
    with Owner(db) as o:
        assert o.release_caps("bob") == {"release_rows": 5, "releases": 7, "release_bytes": 4096}
        o.set_release_caps("bob", release_rows=None)  # back to the database's default
        assert o.release_caps("bob")["release_rows"] == 1_000_000


@pytest.mark.parametrize("value", [-1, 1.5, "10", True, 2**63, float("inf")])
def test_a_cap_is_a_whole_number(db, value):
    with Owner(db) as o, pytest.raises(errors.PolicyError) as info:
        o.set_release_caps("alice", releases=value)
    assert info.value.code == "DP346" and "whole number" in info.value.message


def test_unknown_caps_and_analysts_are_refused(db):
    with Owner(db) as o:
        with pytest.raises(errors.PolicyError) as info:
            o.set_release_caps("alice", rows=5)
        assert info.value.code == "DP346" and "release_rows" in info.value.hint
        with pytest.raises(errors.PolicyError) as info:
            o.set_release_caps("carol", releases=5)
        assert info.value.code == "DP302"


def _plan(db, sql: str):
    """The plan of a statement, as the gateway makes it before the debit."""
    from dpgate import database
    from dpgate.frontend.classify import classify
    from dpgate.frontend.dialect import parse_one

    with dpgate.connect(str(db), analyst="alice") as con, database.transaction(con.gateway._con):
        cat = con.gateway.catalog()
        return con.gateway.plan(classify(parse_one(sql), cat), cat)


def _demo_refused(demo_db, sql: str, code: str = "DP343", analyst: str = "demo") -> errors.Error:
    with dpgate.connect(str(demo_db), analyst=analyst) as con:
        before = con.budget()
        with pytest.raises(errors.PolicyError) as info:
            con.execute(sql)
        assert con.budget() == before
    assert info.value.code == code and "nothing was charged" in info.value.hint
    return info.value


def _made_at_its_estimate(db, sql: str, analyst: str = "demo") -> int:
    """Make the release ``sql.format(1)`` under a bytes cap of exactly its estimate (read from DP345 for
    ``sql.format(0)`` under a cap of 1 byte, refused free); return the estimate."""
    with Owner(db) as o:
        o.set_release_caps(analyst, release_bytes=1)
    estimate = _demo_refused(db, sql.format(0), code="DP345", analyst=analyst).details["bytes"]
    with Owner(db) as o:
        o.set_release_caps(analyst, release_bytes=estimate)
    with dpgate.connect(str(db), analyst=analyst, test_seed=1) as con:
        con.execute(sql.format(1))
    return estimate


def test_a_sequence_release_counts_every_symbol_it_may_write(demo_db):
    """``rows = N`` asks for N sequences of up to ``max_length`` rows each: counted as N rows, 500
    sequences of the careers passed a 1,000-row cap and wrote up to 36,500 rows."""
    with Owner(demo_db) as o:
        o.set_release_caps("demo", release_rows=1000)
    sql = "CREATE SYNTHETIC TABLE capped_c FROM careers USING privtree_markov WITH (epsilon = 1, rows = {})"
    e = _demo_refused(demo_db, sql.format(500))
    assert "36,500 rows (rows = 500 of up to 73 rows each)" in e.message and "at most rows = 13 in" in e.hint
    with dpgate.connect(str(demo_db), analyst="demo", test_seed=1) as con:
        con.execute(sql.format(13))
        (written,) = con.execute("SELECT count(*) FROM capped_c").fetchone()
    assert 0 < written <= 1000


def test_the_hint_of_a_release_without_rows_names_what_it_takes(demo_db):
    """DiffPart takes no ``rows = N`` (DP204): the hint asks for fewer rows per subject when that fits
    the cap, and says when nothing the analyst chooses would."""
    sql = "CREATE SYNTHETIC TABLE {} FROM baskets USING diffpart WITH (epsilon = 1{})"
    with Owner(demo_db) as o:
        o.set_release_caps("demo", release_rows=4627 * 10)  # the baskets' 4,627 subjects, 48 rows each
    e = _demo_refused(demo_db, sql.format("capped_b", ""))
    assert "max_rows_contributed = 10 or less" in e.hint and "rows = " not in e.hint.split("max_rows_contributed")[0]
    with dpgate.connect(str(demo_db), analyst="demo", test_seed=1) as con:
        assert con.execute(sql.format("capped_b", ", max_rows_contributed = 10")).release is not None
    with Owner(demo_db) as o:
        o.set_release_caps("demo", release_rows=1000)
    e = _demo_refused(demo_db, sql.format("capped_b2", ""))
    assert "takes no rows = ..., and even one row for each of the 4,627 subjects on the roster passes" in e.hint


def test_a_synopsis_fits_itself_to_the_caps(demo_db):
    """A synopsis writes one row a node, at most ``privtree.MAX_NODES`` whatever its roster: under a
    smaller cap its tree stops within the cap (a stop that reads only the tree released so far),
    where it was refused for a roster larger than the cap and passed it for a smaller one."""
    with Owner(demo_db) as o:
        o.set_release_caps("demo", release_rows=300)
    sql = "CREATE SYNTHETIC TABLE {} FROM cities USING privtree WITH (epsilon = 1, columns = 'lon, lat')"
    with dpgate.connect(str(demo_db), analyst="demo", test_seed=1) as con:
        done = con.execute(sql.format("t1"))
        (nodes,) = con.execute("SELECT count(*) FROM t1").fetchone()
        assert 100 < nodes <= 300
        assert any("stopped growing within 300 nodes (the rows your release caps allow)" in n for n in done.release.notes)
    with Owner(demo_db) as o:
        o.set_release_caps("demo", release_bytes=caps.usage(o.con, "demo").bytes + 150 * 64)
    with dpgate.connect(str(demo_db), analyst="demo", test_seed=1) as con:
        con.execute(sql.format("t2"))
        (nodes,) = con.execute("SELECT count(*) FROM t2").fetchone()
    with Owner(demo_db) as o:
        assert caps.usage(o.con, "demo").bytes <= caps.caps_of(o.con, "demo")["release_bytes"]
    assert 0 < nodes < 150
    with Owner(demo_db) as o:
        o.set_release_caps("demo", release_rows=0)
    e = _demo_refused(demo_db, sql.format("t3"))
    assert "your cap on the rows of one release is 0" in e.message


def test_a_diffpart_release_stays_within_the_rows_it_reserved(demo_db):
    """DiffPart's noisy itemset counts are not bounded by the roster, and a fake itemset may hold more
    items than a record keeps: under a cap of the roster × max_rows_contributed the partition path
    wrote up to 5,078 rows for a 4,627-row cap. The main table now stops within the reservation and
    the registry records its rows."""
    with Owner(demo_db) as o:
        o.set_release_caps("demo", release_rows=4627)
    sql = ("CREATE SYNTHETIC TABLE capped_k{} FROM baskets USING diffpart WITH (epsilon = 2, max_rows_contributed = 1, "
           "method = 'partition')")
    for seed in (1, 2, 3):
        with dpgate.connect(str(demo_db), analyst="demo", test_seed=seed) as con:
            con.execute(sql.format(seed))
            (rows,) = con.execute(f"SELECT count(*) FROM capped_k{seed}").fetchone()
        with Owner(demo_db) as o:
            (recorded,) = o.con.execute("SELECT row_count FROM dpgate.release_registry WHERE name = ?",
                                        [f"capped_k{seed}"]).fetchone()  # fmt: skip
        assert 0 < rows <= 4627 and recorded == rows


def test_hints_never_lead_into_a_refusal(demo_db):
    """Each hint, followed, is accepted: rows = 0 is no release (DP205); a sequence release whose cap
    holds less than one whole sequence is told a shorter max_length; a cap of 0 says no row fits."""
    with dpgate.connect(str(demo_db), analyst="demo") as con, pytest.raises(errors.ProgrammingError) as info:
        con.execute("CREATE SYNTHETIC TABLE z FROM adult USING independent WITH (epsilon = 1, rows = 0)")
    assert info.value.code == "DP205"
    with Owner(demo_db) as o:
        o.set_release_caps("demo", release_rows=50)
    e = _demo_refused(demo_db, "CREATE SYNTHETIC TABLE capped_s FROM careers USING privtree_markov WITH (epsilon = 1)")
    assert "ask for rows = 1 and max_length = 50 or less" in e.hint
    with dpgate.connect(str(demo_db), analyst="demo", test_seed=1) as con:
        con.execute("CREATE SYNTHETIC TABLE capped_s FROM careers USING privtree_markov WITH (epsilon = 1, rows = 1, "
                    "max_length = 50)")  # fmt: skip
        assert 0 < con.execute("SELECT count(*) FROM capped_s").fetchone()[0] <= 50
    with Owner(demo_db) as o:
        o.set_release_caps("demo", release_rows=0)
    e = _demo_refused(demo_db, "CREATE SYNTHETIC TABLE z FROM adult USING independent WITH (epsilon = 1, rows = 5)")
    assert "your caps leave room for no row" in e.hint


@pytest.mark.parametrize("sql", [
    "CREATE SYNTHETIC TABLE side{} FROM baskets USING diffpart WITH (epsilon = 1, max_rows_contributed = 2)",
    "CREATE SYNTHETIC TABLE side{} FROM careers USING privtree_markov WITH (epsilon = 2, rows = 1)",
    "CREATE SYNTHETIC TABLE side{} FROM careers USING privtree_markov WITH (epsilon = 2)",
])  # fmt: skip
def test_a_release_at_its_estimate_holds_no_more_than_the_cap_side_tables_included(demo_db, sql):
    """The bytes check counts a release's side tables as ``usage`` does afterwards: a DiffPart release
    accepted at exactly its estimate held 52% more (its itemsets and supports), a sequence release
    2.6 times (its model, which now stops within the rows its release reserved)."""
    estimate = _made_at_its_estimate(demo_db, sql)
    with Owner(demo_db) as o:
        held = caps.usage(o.con, "demo").bytes
    assert 0 < held <= estimate


def test_a_synopsis_that_could_not_split_its_root_is_refused_free(demo_db):
    """Under a cap below a root and its first split (1 + 2^d rows) the tree can only be the root: a
    whole charge for one noisy total. Refused free (DP343 for the rows cap, DP345 for the bytes)."""
    sql = "CREATE SYNTHETIC TABLE capped_t FROM cities USING privtree WITH (epsilon = 1, columns = 'lon, lat')"
    with Owner(demo_db) as o:
        o.set_release_caps("demo", release_rows=4)
    e = _demo_refused(demo_db, sql)
    assert "needs at least 5 rows" in e.message and "fewer than the 5 rows this release needs" in e.hint
    with Owner(demo_db) as o:
        o.set_release_caps("demo", release_rows=5)
    with dpgate.connect(str(demo_db), analyst="demo", test_seed=1) as con:
        con.execute(sql)
        assert con.execute("SELECT count(*) FROM capped_t").fetchone()[0] == 5
    with Owner(demo_db) as o:
        o.set_release_caps("demo", release_rows=None, release_bytes=caps.usage(o.con, "demo").bytes + 4 * 81)
    e = _demo_refused(demo_db, sql.replace("capped_t", "capped_t2"), code="DP345")
    assert "fewer than the 5 rows this release needs" in e.hint


def test_long_text_counts_in_the_bytes_held(demo_db):
    """The check counts a text column at 16 bytes plus its longest value; the bytes held counted every
    text value at 16, so each release left room the next one filled: two releases of long country
    names, each within the hint, held more than the cap. The registry now records the long text."""
    sql = "CREATE SYNTHETIC TABLE {} FROM adult USING independent WITH (epsilon = 1, columns = 'native_country', rows = {})"
    with Owner(demo_db) as o:
        o.set_release_caps("demo", release_bytes=100_000)
    with dpgate.connect(str(demo_db), analyst="demo", test_seed=1) as con:
        con.execute(sql.format("long1", 2000))
    fit = int(re.search(r"at most rows = ([\d,]+)", _demo_refused(demo_db, sql.format("long2", 2000), code="DP345").hint)
              .group(1).replace(",", ""))  # fmt: skip
    if fit:
        with dpgate.connect(str(demo_db), analyst="demo", test_seed=2) as con:
            con.execute(sql.format("long2", fit))
    with Owner(demo_db) as o:  # the text as DuckDB keeps it: 16 bytes a value, and a long one's characters beside
        stored = sum(o.con.execute(f"SELECT count(*) * 16 + coalesce(sum(CASE WHEN strlen(native_country) > 12 THEN "
                                   f"strlen(native_country) END), 0) FROM {t}").fetchone()[0]  # fmt: skip
                     for t in ("long1", "long2")[: 1 + (fit > 0)])
        assert stored <= 100_000 and caps.usage(o.con, "demo").bytes == stored


def test_a_release_made_before_long_text_was_recorded_is_measured(demo_db):
    """Releases made before 0.30.0 have no recorded long text in the registry: their bytes held are
    measured from their tables, as when a release is recorded, instead of counted at type widths."""
    import json

    with dpgate.connect(str(demo_db), analyst="demo", test_seed=1) as con:
        con.execute("CREATE SYNTHETIC TABLE older FROM adult USING independent WITH (epsilon = 1, "
                    "columns = 'native_country', rows = 500)")  # fmt: skip
    with Owner(demo_db) as o:
        recorded = caps.usage(o.con, "demo").bytes
        (parameters,) = o.con.execute("SELECT parameters FROM dpgate.release_registry WHERE name = 'older'").fetchone()
        old = json.loads(parameters)
        assert old.pop("string_bytes") > 0
        o.con.execute("UPDATE dpgate.release_registry SET parameters = ? WHERE name = 'older'", [json.dumps(old)])
        assert caps.usage(o.con, "demo").bytes == recorded


LONG = [("a-rather-long-declared-label-number-%02d-" % i) * 3 for i in range(4)]  # 120 bytes each


@pytest.mark.parametrize("sql", [
    "CREATE SYNTHETIC TABLE r{} FROM s USING privtree_markov WITH (epsilon = 2, symbol = 'state', position = 'pos', "
    "rows = 600, max_length = 2)",
    "CREATE SYNTHETIC TABLE r{} FROM b USING diffpart WITH (epsilon = 2)",
])  # fmt: skip
def test_long_declared_text_counts_in_the_estimate(make_db, sql):
    """A sequence release's symbols and a DiffPart release's items are text of the declared domain:
    counted at 16 bytes in the check (the source's type) and at their length in the bytes held, so a
    release accepted at its estimate held 2-2.2 times the cap. The estimate counts the longest
    declared value, as it does for a coded column."""
    labels = "['" + "', '".join(LONG) + "']"
    db = make_db(f"CREATE TABLE s AS SELECT (i // 3)::INTEGER AS pid, (i % 3)::INTEGER AS pos, "
                 f"({labels})[(i % 4)::INTEGER + 1] AS state FROM range(3000) r(i); "
                 f"CREATE TABLE b AS SELECT i::INTEGER AS bid, ({labels})[(i % 4)::INTEGER + 1] AS item FROM range(2000) r(i)",
                 protect={"s": {"unit": "pid", "max_rows": 3, "epsilon": 30.0, "domains": {"state": LONG}},
                          "b": {"unit": "bid", "max_rows": 1, "epsilon": 30.0, "domains": {"item": LONG}}})  # fmt: skip
    estimate = _made_at_its_estimate(db, sql, "alice")
    with Owner(db) as o:
        assert 0 < caps.usage(o.con, "alice").bytes <= estimate


def test_a_deep_sequence_model_counts_its_contexts(make_db):
    """A sequence model's rows carry their contexts, lists of symbols: counted as one 16-byte value
    each, a model 15 symbols deep held 9 times a 1 MB cap. Both the estimate and the bytes held count
    a list's elements now, and the model stops within the context symbols reserved for it."""
    long = ["alpha-" + "x" * 40, "beta-" + "x" * 40]
    db = make_db(f"CREATE TABLE s AS SELECT u AS pid, k AS pos, CASE WHEN (k + u) % 20 = 0 THEN '{long[1]}' ELSE "
                 f"'{long[0]}' END AS sym FROM range(2000) a(u), range(1, 41) b(k)",
                 protect={"s": {"unit": "pid", "max_rows": 40, "epsilon": 1e7, "domains": {"sym": long},
                                "bounds": {"pos": (1, 40)}}},
                 analysts={"alice": {"epsilon": 1e7, "delta": 0.5}})  # fmt: skip
    sql = "CREATE SYNTHETIC TABLE deep{} FROM s USING privtree_markov WITH (epsilon = 100000, position = 'pos', rows = 20)"
    estimate = _made_at_its_estimate(db, sql, "alice")
    with dpgate.connect(str(db), analyst="alice") as con:
        (rows, symbols, deepest) = con.execute("SELECT count(*), sum(len(context)), max(len(context)) FROM deep1_model").fetchone()
    with Owner(db) as o:
        held = caps.usage(o.con, "alice").bytes
    assert deepest >= 3 and held >= rows * 16 + symbols * (16 + len(long[1]))  # the contexts' text is counted
    assert held <= estimate


def test_refusals_say_what_the_analyst_can_do(db):
    """DROP advice only to an analyst who holds a release; a DP343 hint that fits the bytes cap too
    (a sequence of 3 rows asked for under a 300-byte cap was told max_length = 3, then refused by
    DP345: its model's root alone passes it)."""
    with Owner(db) as o:
        o.set_release_caps("alice", releases=0)
    e = refused(db, release("r", 10), "DP344")
    assert "DROP" not in e.hint and "ask the data owner for a larger cap (releases)" in e.hint
    with Owner(db) as o:
        o.set_release_caps("alice", releases=None, release_bytes=0)
    e = refused(db, release("r", 10), "DP345")
    assert "DROP" not in e.hint
    with Owner(db) as o:
        o.set_release_caps("alice", release_bytes=None)
    with dpgate.connect(str(db), analyst="alice") as con:
        con.execute(release("r1", 10))
    with Owner(db) as o:
        o.set_release_caps("alice", release_bytes=caps.usage(o.con, "alice").bytes + 200)
    e = refused(db, release("r2", 1000), "DP345")
    assert "at most rows = 5" in e.hint and "DROP SYNTHETIC TABLE a release of yours" in e.hint
    with Owner(db) as o:
        o.set_release_caps("alice", release_rows=100)
    e = refused(db, release("r2", 1000), "DP343")  # the rows cap says 100, the bytes leave 5
    assert "at most rows = 5 in" in e.hint
