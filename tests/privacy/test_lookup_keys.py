"""A lookup join never repeats a row (docs/sql/beyond-counts.md, "Joins"): its key must compare exactly.

A public table joins a protected one only on columns whose values are unique in it. Two comparisons
broke that promise: a DOUBLE column against unique BIGINT keys compares as doubles
(the keys 2^60 + i all equal 2^60: one protected row met 50 lookup rows), and a protected text column
with a collation against keys unique as bytes ('x' met 'x' and 'X': 101 rows counted 301). Rows were
still bounded per subject after the join, so no privacy break; both joins are now refused (DP215, free).
"""

from __future__ import annotations

import pytest

import dpgate
from dpgate import errors

DP = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) "


@pytest.mark.parametrize("protected, key, values", [
    ("DOUBLE", "BIGINT", "SELECT 1152921504606846976 + i FROM range(50) r(i)"),  # 2^60 + i
    ("VARCHAR COLLATE NOCASE", "VARCHAR", "SELECT unnest(['x', 'X'])"),
])  # fmt: skip
def test_a_lookup_key_that_does_not_compare_exactly_is_refused(make_db, protected, key, values):
    one = "1152921504606846976" if protected == "DOUBLE" else "'x'"
    path = make_db(f"CREATE TABLE t (uid INTEGER, k {protected}); INSERT INTO t SELECT i, {one} FROM range(100) r(i);"
                   f"CREATE TABLE lookup (k {key}, label VARCHAR); INSERT INTO lookup SELECT v, 'a' FROM ({values}) s(v)",
                   protect={"t": {"unit": "uid", "epsilon": 10.0}})  # fmt: skip
    with dpgate.connect(str(path), analyst="alice") as con:
        before = con.budget()
        with pytest.raises(errors.UnsupportedQueryError) as e:
            con.execute(DP + "COUNT(*) FROM t JOIN lookup USING (k)")
        assert e.value.code == "DP215" and con.budget() == before
        if protected == "DOUBLE":  # the message names the reason that applies
            assert "compared as doubles" in e.value.message and "converted" not in e.value.message


@pytest.mark.parametrize("protected, key", [("INTEGER", "BIGINT"), ("VARCHAR", "VARCHAR"), ("FLOAT", "DOUBLE")])
def test_exact_lookup_keys_stay_accepted(make_db, protected, key):
    path = make_db(f"CREATE TABLE t (uid INTEGER, k {protected}); INSERT INTO t SELECT i, CAST(i % 2 AS {protected}) "
                   f"FROM range(100) r(i); CREATE TABLE lookup (k {key}, label VARCHAR); "
                   f"INSERT INTO lookup VALUES (CAST(0 AS {key}), 'a'), (CAST(1 AS {key}), 'b')",
                   protect={"t": {"unit": "uid", "epsilon": 10.0}})  # fmt: skip
    with dpgate.connect(str(path), analyst="alice") as con:
        assert len(con.execute(DP + "COUNT(*) FROM t JOIN lookup USING (k)").fetchall()) == 1
