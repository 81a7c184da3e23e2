"""The set-valued release's marginals path on neighbouring databases (``harness._set_marginals``).

D holds 400 baskets over 12 declared items (sizes 1 to 9, max_rows = 6, so the longest are
truncated to a keyed random 6), plus a basket holding every item and an undeclared one
(``pair_items = 12`` selects every item, so its 6 kept items make 15 measured pairs). Each
neighbour removes one basket: the heavy one, a one-item basket, a median one and one holding
the most frequent items. The four statistics the path perturbs must move within their declared
L1 bounds (record sizes and sizes within the selected items by 1, weighted item supports by
m1·2^20, weighted pair supports by C(m2, 2)·2^20), the route must be the same on D and D′ (it
reads only public facts), and the bounds must be reached (else the check proves nothing).
"""

from __future__ import annotations

import harness
import pytest

from dpgate.mechanisms import setmarginals as sm
from dpgate.queries.synthetic import setvalued

ITEMS = [f"i{k:02d}" for k in range(12)]
#: Basket b holds items b % 12, b*7 % 12, ... : 1 + b % 9 of them; basket 999 holds everything.
SETUP = (
    "CREATE TABLE baskets AS SELECT b, 'i' || lpad(CAST((b * (1 + 2 * k) + k) % 12 AS VARCHAR), 2, '0') AS item "
    "FROM range(400) r(b), range(9) s(k) WHERE k <= b % 9; "
    "INSERT INTO baskets SELECT 999, unnest(list_concat(" + repr(ITEMS) + ", ['other']))"
)
SPEC = {"baskets": {"unit": "b", "max_rows": 6, "public_roster": True, "domains": {"item": ITEMS}}}
SQL = "CREATE SYNTHETIC TABLE s FROM baskets USING diffpart WITH (epsilon = 1, method = 'marginals', pair_items = 12)"
#: heavy (all 12 items and an undeclared one), one item, median (5 items), a basket of 9 items.
REMOVED = {"heavy": 999, "one item": 9, "median": 13, "nine items": 17}


@pytest.fixture(scope="module")
def worlds(tmp_path_factory):
    import duckdb

    from dpgate.catalog.owner import Owner

    base = tmp_path_factory.mktemp("setvalued") / "d.duckdb"
    con = duckdb.connect(str(base))
    con.execute(SETUP)
    con.close()
    with Owner(base) as owner:
        owner.protect("baskets", **SPEC["baskets"])
    harness.add_harness_analyst(base)
    harness.sample_per_query(base)
    out = {}
    for label, b in REMOVED.items():
        out[label] = harness.mutate(harness.copy_db(base, base.with_name(f"n{b}.duckdb")),
                                    f"DELETE FROM baskets WHERE b = {b}")  # fmt: skip
    with harness.gateways(base, *out.values()) as gws:
        yield gws[0], dict(zip(out, gws[1:]))


def test_the_marginals_statistics_move_within_their_bounds(worlds):
    d, neighbours = worlds
    before = harness.statistics_of(d, SQL)
    names = set(before.stats)
    assert {"record sizes", "kept sizes", "items m1=6", "pairs m2=6"} <= names, names
    reached: dict[str, float] = {}
    for label, n in neighbours.items():
        b, a = harness.check_statement(d, n, SQL, context=label, before=before)
        for name, stat in b.stats.items():
            moved = sum(abs(a.stats[name].values.get(c, 0) - v) for c, v in stat.values.items())
            reached[name] = max(reached.get(name, 0.0), moved / stat.l1)
    # every statistic moved, and the truncated ones by (nearly) their whole bound for the heavy basket:
    # 6 kept items at w1 = 2^20 each, C(6, 2) pairs at w2 = 2^20 each
    assert min(reached.values()) > 0, reached
    assert reached["items m1=6"] == 1.0 and reached["pairs m2=6"] == 1.0 and reached["record sizes"] == 1.0
    assert reached["items m1=1"] > 0.99 and reached["pairs m2=2"] > 0.99


def test_a_halved_bound_is_caught(worlds):
    d, neighbours = worlds
    before = harness.statistics_of(d, SQL)
    after = harness.statistics_of(neighbours["heavy"], SQL, hints=before.hints)
    for stat in before.stats.values():
        stat.l1 = stat.l1 / 2
    with pytest.raises(harness.NeighbourViolation) as info:
        harness.assert_neighbours(before, after)
    caught = {v.statistic for v in info.value.violations}
    assert {"items m1=6", "pairs m2=6", "record sizes"} <= caught, caught


def test_the_route_reads_public_facts_only(worlds):
    """Planning and the route agree on D and D′: the records that pay come from the public roster."""
    d, neighbours = worlds
    auto = SQL.replace(", method = 'marginals'", "")
    _, plan_d = harness.plan_statement(d, auto)
    for n in neighbours.values():
        _, plan_n = harness.plan_statement(n, auto)
        for records in (401, 10**9):
            assert setvalued.route(plan_d, records, 1.0) == setvalued.route(plan_n, records, 1.0)
    assert setvalued.route(plan_d, 401, 1.0)[0] == "marginals"
    assert setvalued.route(plan_d, 10**9, 1.0)[0] == "partition"


def test_the_weights_keep_a_record_within_its_bound():
    """``item_weight`` and ``pair_weight`` at every size up to 60 and every truncation: a record's
    total weight never passes m·2^20 (items) or C(m, 2)·2^20 (pairs), and is exactly that when the
    record is at least as long as m [items] [pairs]."""
    import numpy as np

    sizes = np.arange(1, 61)
    for m in range(1, 61):
        total = sizes * sm.item_weight(sizes, m)
        assert total.max() <= m << sm.GRID_BITS
        assert (total[sizes <= m] == sizes[sizes <= m] << sm.GRID_BITS).all()
        if m >= 2:
            pairs = sizes * (sizes - 1) // 2 * sm.pair_weight(sizes, m)
            assert pairs.max() <= sm.pair_count(m) << sm.GRID_BITS


#: Adversarial subjects beside 300 ordinary baskets: 777 holds 6,000 rows (every declared item 400
#: times, 600 NULLs, 600 rows of an undeclared item); 778 holds only NULLs and undeclared items (no
#: record); 779 holds one declared item 50 times and two others once (a record of 3 items, not 6).
ADVERSARIAL = (
    "CREATE TABLE baskets AS SELECT b, 'i' || lpad(CAST((b * (1 + 2 * k) + k) % 12 AS VARCHAR), 2, '0') AS item "
    "FROM range(300) r(b), range(9) s(k) WHERE k <= b % 9; "
    "INSERT INTO baskets SELECT 777, unnest(" + repr(ITEMS) + ") FROM range(400); "
    "INSERT INTO baskets SELECT 777, CASE WHEN r % 2 = 0 THEN NULL ELSE 'other' END FROM range(1200) x(r); "
    "INSERT INTO baskets SELECT 778, CASE WHEN r % 2 = 0 THEN NULL ELSE 'zz' END FROM range(500) x(r); "
    "INSERT INTO baskets SELECT 779, 'i03' FROM range(50); INSERT INTO baskets VALUES (779, 'i07'), (779, 'i11')"
)


@pytest.fixture(scope="module")
def adversarial(tmp_path_factory):
    import duckdb

    from dpgate.catalog.owner import Owner

    base = tmp_path_factory.mktemp("setvalued_adv") / "d.duckdb"
    con = duckdb.connect(str(base))
    con.execute(ADVERSARIAL)
    con.close()
    with Owner(base) as owner:
        owner.protect("baskets", **SPEC["baskets"])
    harness.add_harness_analyst(base)
    harness.sample_per_query(base)
    out = {b: harness.mutate(harness.copy_db(base, base.with_name(f"n{b}.duckdb")), f"DELETE FROM baskets WHERE b = {b}")
           for b in (777, 778, 779)}  # fmt: skip
    with harness.gateways(base, *out.values()) as gws:
        yield gws[0], dict(zip(out, gws[1:]))


def test_thousands_of_rows_nulls_duplicates_and_undeclared_items_stay_within_the_bounds(adversarial):
    """A subject's rows are one record of at most max_rows distinct declared items, whatever else they
    hold: removing the 6,000-row subject moves every statistic within its bound (by the whole bound
    for the truncated ones: its record holds 6 items), the subject of NULLs and undeclared items
    moves nothing at all (it has no record), and repeated rows of one item take one place (the
    subject of 52 rows has a record of 3 items: sizes and kept sizes move by 1 in the bin of 3)."""
    d, neighbours = adversarial
    before = harness.statistics_of(d, SQL)
    moved = {}
    for b, n in neighbours.items():
        _, after = harness.check_statement(d, n, SQL, context=f"subject {b}", before=before)
        moved[b] = {name: sum(abs(after.stats[name].values.get(c, 0) - v) for c, v in stat.values.items()) / stat.l1
                    for name, stat in before.stats.items()}  # fmt: skip
    assert moved[777]["items m1=6"] == 1.0 and moved[777]["pairs m2=6"] == 1.0
    assert all(v == 0 for v in moved[778].values()), moved[778]
    three = sm.size_counts([3], sm.longest(6, 12))
    assert before.stats["record sizes"].values[int(three.argmax())] >= 1 and moved[779]["record sizes"] == 1.0
    assert moved[779]["items m1=6"] == 3 / 6  # three items at full weight, of a bound of 6
