"""A declared domain whose values are not of the column's type: one subject's unconvertible value
must not decide between an answer and an error after the debit.

DiffPart and PrivTree Markov joined the item / symbol column with the declared values by a bare
``=``; with a numeric domain on a VARCHAR column DuckDB cast the column, so one row holding 'X9'
failed the release after the debit, while its neighbour without that row got a release. The
values are now cast to the column's type (``coding.domain_lookup``): the column is never cast.
"""

from __future__ import annotations

import pytest

import dpgate

SETUP = """
CREATE TABLE ev AS SELECT i // 3 AS pid, i % 3 AS pos, CAST(1 + (i * 7) % 3 AS VARCHAR) AS code FROM range(600) r(i);
"""
ODD_ROW = "UPDATE ev SET code = 'X9' WHERE pid = 7 AND pos = 1;"
PROTECT = {"ev": {"unit": "pid", "max_rows": 3, "epsilon": 100.0, "domains": {"code": [1, 2, 3]}}}

STATEMENTS = [
    "CREATE SYNTHETIC TABLE s1 FROM ev USING diffpart WITH (epsilon = 0.5, item = 'code')",
    "CREATE SYNTHETIC TABLE s2 FROM ev USING privtree_markov WITH (epsilon = 0.5, symbol = 'code', position = 'pos')",
]


@pytest.mark.parametrize("sql", STATEMENTS)
def test_one_subjects_unconvertible_value_changes_no_outcome(make_db, sql):
    for setup in (SETUP, SETUP + ODD_ROW):  # neighbours: subject 7's row differs
        path = make_db(setup, protect=PROTECT)
        with dpgate.connect(str(path), analyst="alice", test_seed=3) as con:
            cur = con.execute(sql)
            assert cur.release is not None and cur.release.epsilon == 0.5
            name = sql.split()[3]
            items = {r[0] for r in con.execute(f"SELECT DISTINCT code FROM {name}").fetchall()}
            assert items <= {"1", "2", "3"}, items  # the declared values, as the column's type
