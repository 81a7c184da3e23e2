"""Shapes the allowlist refuses before the query analysis sees them.

The analysis (``dpgate.queries.analysis``) runs only on statements that passed
``allowlist.check`` (the gateway checks first, in ``Gateway._plan``), so its own checks of these
shapes cannot fire; they remain as internal assertions. Each case here is the shape one of those
assertions guards, refused with the allowlist's code, before anything is charged.
"""

from __future__ import annotations

import pytest

from dpgate import errors
from dpgate.frontend import allowlist
from dpgate.frontend.dialect import parse_one

PER_SUBJECT = "SELECT COUNT(*) FROM (SELECT person_id, COUNT(*) AS n FROM adult GROUP BY person_id {}) s"

CASES = [
    # scope._check_shape: clauses, windows, nested queries, column sets
    ("SELECT DISTINCT sex FROM adult", "DP252"),
    ("SELECT sex, COUNT(*) FROM adult GROUP BY sex QUALIFY COUNT(*) > 1", "DP252"),
    ("SELECT COUNT(*) FROM adult WINDOW w AS (PARTITION BY sex)", "DP252"),
    ("SELECT COUNT(*) FROM adult USING SAMPLE 10%", "DP250"),
    ("SELECT COUNT(*) FROM adult TABLESAMPLE 10%", "DP250"),
    ("SELECT SUM(COUNT(*)) OVER () FROM adult", "DP252"),
    ("SELECT COUNT(*) OVER (PARTITION BY sex) FROM adult", "DP252"),
    ("SELECT COUNT(*) FROM adult WHERE native_country IN (SELECT country FROM country_regions)", "DP252"),
    ("SELECT COUNT(*), (SELECT 1) FROM adult", "DP252"),
    ("SELECT COUNT(*) FROM adult WHERE EXISTS (SELECT 1)", "DP252"),
    ("SELECT COUNT(*) FROM adult, LATERAL (SELECT 1) t", "DP250"),
    ("SELECT COUNT(*) FROM adult JOIN (SELECT * FROM country_regions) r ON adult.native_country = r.country", "DP250"),
    ("SELECT COUNT(COLUMNS('a.*')) FROM adult", "DP252"),
    ("SELECT COUNT(#1) FROM adult", "DP252"),
    # scope._scope: join kinds
    ("SELECT COUNT(*) FROM adult NATURAL JOIN country_regions", "DP251"),
    ("SELECT COUNT(*) FROM adult POSITIONAL JOIN country_regions", "DP251"),
    # keys._group_keys: grouping sets
    ("SELECT sex, COUNT(*) FROM adult GROUP BY ROLLUP (sex)", "DP252"),
    ("SELECT sex, COUNT(*) FROM adult GROUP BY CUBE (sex)", "DP252"),
    ("SELECT sex, COUNT(*) FROM adult GROUP BY GROUPING SETS ((sex), ())", "DP252"),
    # aggregates._agg_input: aggregate forms
    ("SELECT COUNT() FROM adult", "DP252"),
    ("SELECT COUNT(DISTINCT age, sex) FROM adult", "DP252"),
    ("SELECT SUM(DISTINCT age) FROM adult", "DP252"),
    ("SELECT AVG(DISTINCT age) FROM adult", "DP252"),
    ("SELECT VAR_POP(DISTINCT age) FROM adult", "DP252"),
    ("SELECT MEDIAN(DISTINCT age) FROM adult", "DP252"),
    ("SELECT MIN(age) FROM adult", "DP253"),
    ("SELECT MAX(age) FROM adult", "DP253"),
    ("SELECT MODE(age) FROM adult", "DP253"),
    ("SELECT STRING_AGG(sex, ',') FROM adult", "DP253"),
    # per_subject._per_subject: the subquery's clauses
    *[(PER_SUBJECT.format(tail), "DP250") for tail in (
        "HAVING COUNT(*) > 1", "ORDER BY person_id", "LIMIT 10", "OFFSET 1",
    )],
    ("SELECT COUNT(*) FROM (SELECT DISTINCT person_id, COUNT(*) AS n FROM adult GROUP BY person_id) s", "DP250"),
]  # fmt: skip


@pytest.mark.parametrize("sql,code", CASES)
def test_the_allowlist_refuses_it_first(con, sql, code):
    with pytest.raises(errors.UnsupportedQueryError) as e:
        allowlist.check(parse_one(sql))
    assert e.value.code == code, e.value
    with pytest.raises(errors.Error) as e:  # and so does the whole pipeline, with the same code
        con.execute(sql)
    assert e.value.code == code, e.value
