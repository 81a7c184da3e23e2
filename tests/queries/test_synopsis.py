"""PrivTree synopses through SQL: the release, free range counts from it, EXPLAIN, refusals."""

from __future__ import annotations

import json

import duckdb
import pytest

import dpgate

MAKE = "CREATE SYNTHETIC TABLE cities_tree FROM cities USING privtree WITH (epsilon = 1, columns = 'lon, lat')"
EUROPE = ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (from_synopsis = 'cities_tree') COUNT(*) AS n FROM cities "
          "WHERE lon BETWEEN -10 AND 30 AND lat BETWEEN 35 AND 70")  # fmt: skip


def _truth(db, where: str) -> int:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(f"SELECT count(*) FROM cities WHERE {where}").fetchone()[0]
    finally:
        con.close()


def test_a_synopsis_is_released_once_and_then_answers_for_free(demo_db):
    true = _truth(demo_db, "lon BETWEEN -10 AND 30 AND lat BETWEEN 35 AND 70")
    with dpgate.connect(str(demo_db), analyst="demo", test_seed=3) as con:
        cur = con.execute(MAKE)
        assert cur.release.epsilon == 1.0 and "leaves (PrivTree synopsis)" in cur.message
        cols = [d[0] for d in con.execute("SELECT * FROM cities_tree LIMIT 1").description]
        assert cols == ["node_id", "parent_id", "depth", "is_leaf", "lon_lo", "lon_hi", "lat_lo", "lat_hi", "count",
                        "count_ci_low", "count_ci_high"]  # fmt: skip
        # the leaves tile the declared domain exactly, the root is the whole domain
        area = con.execute("SELECT sum((lon_hi - lon_lo) * (lat_hi - lat_lo)) FROM cities_tree WHERE is_leaf").fetchone()[0]
        assert area == pytest.approx(360 * 180)
        assert con.execute("SELECT lon_lo, lon_hi, lat_lo, lat_hi FROM cities_tree WHERE parent_id IS NULL").fetchall() \
            == [(-180.0, 180.0, -90.0, 90.0)]  # fmt: skip
        # consistent: every internal node's count is the sum of its children's, within its interval
        worst, inside = con.execute(
            "SELECT max(abs(p.count - k.s)), bool_and(p.count_ci_low <= p.count AND p.count <= p.count_ci_high) "
            "FROM cities_tree p JOIN (SELECT parent_id, sum(count) AS s FROM cities_tree GROUP BY parent_id) k "
            "ON k.parent_id = p.node_id").fetchone()  # fmt: skip
        assert worst < 1e-6 and inside
        before = con.budget()
        assert con.gateway.cost(EUROPE) is None  # priced as it runs: free (the shell asks nothing)
        cur = con.execute(EUROPE)
        (n,) = cur.fetchone()
        assert abs(n - true) < 0.02 * true and cur.release is None and con.budget() == before
        assert any("answered from synopsis cities_tree" in m for m in cur.messages)
        explain = con.execute("EXPLAIN PRIVACY " + EUROPE).fetchall()
        assert explain[0][1] == "release" and "answered from synopsis cities_tree" in explain[0][6] and "free" in explain[0][6]
        (rel,) = [r for r in con.execute("SHOW RELEASES").fetchall() if r[0] == "cities_tree"]
        assert rel[1] == "synopsis" and rel[3] == "privtree"


def test_the_session_setting_answers_what_fits_and_charges_the_rest(demo_db):
    with dpgate.connect(str(demo_db), analyst="demo", test_seed=4) as con:
        con.execute(MAKE)
        con.execute("SET dp_from_synopsis = 'cities_tree'")
        before = con.budget()
        cur = con.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS () COUNT(*) FROM cities WHERE lat > 0")
        assert cur.release is None and con.budget() == before
        cur = con.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1) COUNT(*) FROM cities WHERE population > 100000")
        assert cur.release is not None and con.budget()[0] == pytest.approx(before[0] - 0.1)


@pytest.mark.parametrize("where, words", [
    ("population > 100000", "conjunction of ranges"),  # not a synopsis column
    ("lon > -10 OR lat > 35", "conjunction of ranges"),
    ("lon > lat", "conjunction of ranges"),
])  # fmt: skip
def test_a_query_the_synopsis_cannot_answer_is_refused_free(demo_db, where, words):
    with dpgate.connect(str(demo_db), analyst="demo") as con:
        con.execute(MAKE)
        before = con.budget()
        with pytest.raises(dpgate.UnsupportedQueryError) as e:
            con.execute(f"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (from_synopsis = 'cities_tree') COUNT(*) FROM cities WHERE {where}")
        assert e.value.code == "DP227" and words in e.value.message and con.budget() == before
        for sql, code in (
            ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (from_synopsis = 'nope') COUNT(*) FROM cities", "DP227"),
            ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (from_synopsis = 'cities_tree') SUM(lon) FROM cities", "DP227"),
            ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (from_synopsis = 'cities_tree') country, COUNT(*) FROM cities "
             "GROUP BY country", "DP227"),
            ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (from_synopsis = 'cities_tree') COUNT(*) FROM adult", "DP227"),
            # an infinite bin width (1e999) is no bin width (it reached the SQL as a bare `inf`)
            ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (from_synopsis = 'cities_tree') FLOOR(lon / 1e999) AS x, "
             "COUNT(*) FROM cities GROUP BY x", "DP227"),
        ):  # fmt: skip
            with pytest.raises(dpgate.Error) as e:
                con.execute(sql)
            assert e.value.code == code
        assert con.budget() == before


def test_integer_columns_use_unit_cells(make_db):
    db = make_db("CREATE TABLE t AS SELECT i AS u, i % 10 AS x FROM range(20000) r(i)",
                 protect={"t": {"unit": "u", "epsilon": 1000.0, "bounds": {"x": (0, 9)}}},
                 analysts={"alice": {"epsilon": 1000.0}})  # fmt: skip
    with dpgate.connect(str(db), analyst="alice", test_seed=1) as con:
        con.execute("CREATE SYNTHETIC TABLE t_tree FROM t USING privtree WITH (epsilon = 50, columns = 'x')")
        assert con.execute("SELECT min(x_lo), max(x_hi) FROM t_tree").fetchone() == (0.0, 10.0)
        for where, true in (("x BETWEEN 2 AND 4", 6000), ("x = 7", 2000), ("x > 7", 4000), ("x < 3", 6000),
                            ("x >= 9 AND x <= 9", 2000), ("x = 2.5", 0), ("x > 2.5 AND x < 4.5", 4000)):  # fmt: skip
            (n,) = con.execute(f"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (from_synopsis = 't_tree') COUNT(*) FROM t WHERE {where}").fetchone()
            assert abs(n - true) < 60, where  # x = 2.5 answered half of two cells
        rows = con.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (from_synopsis = 't_tree') FLOOR(x / 5) AS b, "
                           "COUNT(*) AS n FROM t GROUP BY b").fetchall()  # fmt: skip
        assert [b for b, _ in rows] == [0.0, 1.0] and all(abs(n - 10000) < 60 for _, n in rows)
        for where in ("x <= 1e999", "x BETWEEN -1e999 AND 3"):  # raised an OverflowError
            with pytest.raises(dpgate.Error) as e:
                con.execute(f"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (from_synopsis = 't_tree') COUNT(*) FROM t WHERE {where}")
            assert e.value.code == "DP227"
        before = con.budget()
        with pytest.raises(dpgate.Error) as e:  # bins of 2.5 cut unit cells: 5,000 / 15,000 for 10,000 each
            con.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (from_synopsis = 't_tree') FLOOR(x / 2.5) AS b, "
                        "COUNT(*) AS n FROM t GROUP BY b")  # fmt: skip
        assert e.value.code == "DP227" and "whole width" in e.value.message and con.budget() == before


@pytest.mark.parametrize("options, code", [
    ("epsilon = 1", "DP286"),  # no columns
    ("columns = 'nope'", "DP218"),
    ("columns = 'country'", "DP284"),
    ("columns = 'lon, lat, lon'", "DP286"),
    ("columns = 'lon', tree_share = 1", "DP205"),
    ("columns = 'lon', bins = 3", "DP204"),
])  # fmt: skip
def test_refusals_charge_nothing(demo_db, options, code):
    with dpgate.connect(str(demo_db), analyst="demo") as con:
        before = con.budget()
        with pytest.raises(dpgate.Error) as e:
            con.execute(f"CREATE SYNTHETIC TABLE s FROM cities USING privtree WITH ({options})")
        assert e.value.code == code, e.value
        assert con.budget() == before


def test_a_heat_map_of_bins_lists_every_bin_and_adds_up(demo_db):
    heat = ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (from_synopsis = 'cities_tree') FLOOR(lon / 30) AS x, "
            "FLOOR((lat + 90) / 30) AS y, COUNT(*) AS n FROM cities WHERE lat > 0 GROUP BY x, y")  # fmt: skip
    con_raw = duckdb.connect(str(demo_db), read_only=True)
    truth = {(x, y): n for x, y, n in con_raw.execute(
        "SELECT FLOOR(lon / 30), FLOOR((lat + 90) / 30), count(*) FROM cities WHERE lat > 0 GROUP BY ALL").fetchall()}
    con_raw.close()
    with dpgate.connect(str(demo_db), analyst="demo", test_seed=8) as con:
        con.execute(MAKE)
        before = con.budget()
        cur = con.execute(heat)
        rows = cur.fetchall()
        assert [d[0] for d in cur.description] == ["x", "y", "n"] and con.budget() == before
        assert len(rows) == 12 * 3  # every 30° bin north of the equator, empty ones included
        (total,) = con.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (from_synopsis = 'cities_tree') COUNT(*) "
                               "FROM cities WHERE lat > 0").fetchone()  # fmt: skip
        assert sum(n for *_, n in rows) == pytest.approx(total, abs=1)
        big = [(x, y) for (x, y), n in truth.items() if n > 5000]
        got = {(x, y): n for x, y, n in rows}
        assert big and all(abs(got[k] - truth[k]) < 0.05 * truth[k] for k in big)
        for bad in (heat + " ORDER BY n DESC", heat.replace("FLOOR(lon / 30)", "ROUND(lon / 30)"),
                    heat.replace("FLOOR((lat + 90) / 30)", "FLOOR(lon / 10)"), heat.replace("GROUP BY x, y", "GROUP BY x")):  # fmt: skip
            with pytest.raises(dpgate.UnsupportedQueryError) as e:
                con.execute(bad)
            assert e.value.code == "DP227"
        assert con.budget() == before


def test_csv_output_keeps_a_free_answers_notes_on_the_side(demo_db):
    import io

    from dpgate.interfaces.cli import print_result

    with dpgate.connect(str(demo_db), analyst="demo", test_seed=9) as con:
        con.execute(MAKE)
        result = con.execute(EUROPE).result
    out, err = io.StringIO(), io.StringIO()
    print_result(result, mode="csv", out=out, err=err)
    assert out.getvalue().startswith("n\n") and "# answered from synopsis cities_tree" in err.getvalue()
    assert "# no interval" in err.getvalue()


def test_a_synopsis_never_describes_a_random_part_of_the_subjects_unsaid(make_db):
    """Half of 10,000 subjects have 0.01 ε left. Under the default 'sample' rule a PrivTree synopsis counted
    the random ~half that took part, unscaled and unlabelled: its free COUNT(*) answered 4,972 for 10,000.
    That rule is refused for releases that cannot scale (free); under 'threshold'
    the synopsis counts the 5,000 with the whole ε, and every free answer from it says so."""
    db = make_db("CREATE TABLE t AS SELECT i AS pid, (i % 100) * 1.0 AS x, CASE WHEN i % 2 = 0 THEN 10 ELSE 0.01 END "
                 "AS budget FROM range(10000) r(i)",
                 protect={"t": {"unit": "pid", "max_rows": 1, "budget_column": "budget", "bounds": {"x": (0, 100)}}},
                 analysts={"alice": {"epsilon": 100.0, "epsilon_per_query": 10.0}})  # fmt: skip
    make = "CREATE SYNTHETIC TABLE tree FROM t USING privtree WITH (epsilon = 1, columns = 'x'{})"
    with dpgate.connect(str(db), analyst="alice", test_seed=5) as con:
        before = con.budget()
        with pytest.raises(dpgate.Error) as e:
            con.execute(make.format(""))
        assert e.value.code == "DP274" and "5,000 of the 10,000" in e.value.message and con.budget() == before
        con.execute(make.format(", personalization = 'threshold'"))
        cur = con.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (from_synopsis = 'tree') COUNT(*) AS n FROM t")
        (n,) = cur.fetchone()
        assert abs(n - 5000) < 250  # the subjects it describes (the root's estimate: standard deviation ~ 10)
        assert any("5,000 subjects that took part" in m and "5,000 others" in m for m in cur.messages)


def test_a_point_with_a_nan_coordinate_is_not_counted(make_db):
    """A NaN coordinate was counted in the domain's lower corner (MST reads NaN as NULL):
    it is dropped like a NULL."""
    db = make_db("CREATE TABLE t AS SELECT i AS u, CASE WHEN i < 300 THEN 'nan'::DOUBLE ELSE (i % 100) * 1.0 END AS x "
                 "FROM range(3000) r(i)",
                 protect={"t": {"unit": "u", "epsilon": 1e4, "bounds": {"x": (0, 100)}}},
                 analysts={"alice": {"epsilon": 1e4, "epsilon_per_query": 1e4}})  # fmt: skip
    with dpgate.connect(str(db), analyst="alice", test_seed=2) as con:
        con.execute("CREATE SYNTHETIC TABLE tr FROM t USING privtree WITH (epsilon = 1000, columns = 'x')")
        (n,) = con.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (from_synopsis = 'tr') COUNT(*) FROM t "
                           "WHERE x < 50").fetchone()  # fmt: skip
    # 1,350 of the 2,700 finite points (50 is the first split, so no leaf straddles it); the 300 NaN
    # points were counted here too
    assert abs(n - 1350) < 30


def test_a_release_of_leaves_only_still_answers_from_every_row(demo_db):
    """Releases written before the nodes were (``leaf_id``, integer counts, no ``is_leaf``) are public
    tables that analysts may still name: they answer from all their rows, as they did."""
    with dpgate.connect(str(demo_db), analyst="demo", test_seed=3) as con:
        con.execute(MAKE)
    raw = duckdb.connect(str(demo_db))
    try:  # the earlier format: the leaves of this release, integer counts, and its registry entry without "rows"
        raw.execute("CREATE TABLE old_leaves AS SELECT row_number() OVER (ORDER BY node_id) AS leaf_id, depth, lon_lo, "
                    "lon_hi, lat_lo, lat_hi, round(count)::BIGINT AS count, round(count_ci_low)::BIGINT AS count_ci_low, "
                    "round(count_ci_high)::BIGINT AS count_ci_high FROM cities_tree WHERE is_leaf")  # fmt: skip
        raw.execute("DROP TABLE cities_tree")
        raw.execute("ALTER TABLE old_leaves RENAME TO cities_tree")
        # edited here, not with DuckDB's json_remove: DuckDB 1.x has none
        (parameters,) = raw.execute("SELECT parameters FROM dpgate.release_registry WHERE name = 'cities_tree'").fetchone()
        parameters = json.loads(parameters)
        parameters.pop("rows")
        raw.execute("UPDATE dpgate.release_registry SET parameters = ? WHERE name = 'cities_tree'", [json.dumps(parameters)])
        expected = raw.execute("SELECT sum(count * greatest(0, least(lon_hi, 30) - greatest(lon_lo, -10)) / (lon_hi - lon_lo) "
                               "* greatest(0, least(lat_hi, 70) - greatest(lat_lo, 35)) / (lat_hi - lat_lo)) "
                               "FROM cities_tree").fetchone()[0]  # fmt: skip
    finally:
        raw.close()
    with dpgate.connect(str(demo_db), analyst="demo") as con:
        (n,) = con.execute(EUROPE).fetchone()
    assert n == pytest.approx(expected, abs=0.1)


def test_the_owner_page_draws_a_synopsis_s_leaves_only(demo_db):
    """A synopsis holds every node of its tree; the owner page's map draws each leaf once, not the
    internal nodes over them."""
    pytest.importorskip("starlette")
    from dpgate.catalog.owner import Owner
    from dpgate.web import views

    with dpgate.connect(str(demo_db), analyst="demo", test_seed=3) as con:
        con.execute(MAKE.replace("epsilon = 1", "epsilon = 0.1"))  # fewer leaves than the page draws at most
        leaves = con.execute("SELECT count(*) FROM cities_tree WHERE is_leaf").fetchone()[0]
        nodes = con.execute("SELECT count(*) FROM cities_tree").fetchone()[0]
    assert nodes > leaves
    with Owner(demo_db, create=False) as owner:
        drawn = views.leaves(owner, "cities_tree")
    assert len(drawn["leaves"]) == leaves and not drawn["truncated"]
    area = sum((b["hi"][0] - b["lo"][0]) * (b["hi"][1] - b["lo"][1]) for b in drawn["leaves"])
    assert area == pytest.approx(360 * 180)  # they tile the domain: no node drawn over its children
