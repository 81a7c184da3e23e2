"""One statement, one analysis: the classes that ask about a statement share its Analysis."""

from __future__ import annotations

import pytest

from dpgate.frontend.classify import classify
from dpgate.frontend.dialect import parse_one
from dpgate.queries import analysis
from dpgate.queries.base import Context


@pytest.fixture
def reads(monkeypatch):
    """How many times the statement's shape is worked out (each run reads the catalog and public facts)."""
    count = []
    original = analysis.Analysis._read_syntax

    def counted(self):
        count.append(1)
        return original(self)

    monkeypatch.setattr(analysis.Analysis, "_read_syntax", counted)
    return count


@pytest.mark.parametrize("sql", [
    "SELECT education, COUNT(*) AS n FROM adult GROUP BY education ORDER BY n DESC LIMIT 3",  # top-k
    "SELECT education, COUNT(*) AS n FROM adult GROUP BY education ORDER BY education LIMIT 3",  # counting
    "SELECT sex, COUNT(*) FROM adult GROUP BY sex",
])  # fmt: skip
def test_a_statement_is_analysed_once(con, reads, sql):
    g = con.gateway
    cat = g.catalog()
    plan = g.plan(classify(parse_one(sql), cat), cat)
    assert plan is not None and len(reads) == 1


def test_the_analysis_is_not_shared_across_contexts_or_settings(con):
    g = con.gateway
    cat = g.catalog()
    classified = classify(parse_one("SELECT sex, COUNT(*) FROM adult GROUP BY sex"), cat)
    ctx = Context(cat, g.session, g.facts)
    first = analysis.analyse(classified, ctx)
    assert analysis.analyse(classified, Context(cat, g.session, g.facts)) is first  # the same objects
    assert analysis.analyse(classified, Context(g.catalog(), g.session, g.facts)) is not first  # another catalog
    other = classify(parse_one("SELECT sex, COUNT(*) FROM adult GROUP BY sex"), cat)
    assert analysis.analyse(other, ctx) is not first  # another statement
    g.session.values["epsilon"] = g.session.values["epsilon"] / 2  # as SET epsilon does
    assert analysis.analyse(other, ctx).settings.epsilon == g.session.values["epsilon"]


def test_a_statement_changed_in_place_is_analysed_again(con):
    g = con.gateway
    cat = g.catalog()
    classified = classify(parse_one("SELECT COUNT(*) FROM adult WHERE coalesce(age, 1) > 3"), cat)
    ctx = Context(cat, g.session, g.facts)
    first = analysis.analyse(classified, ctx)
    from dpgate.frontend.allowlist import rewrite_for_engine

    rewrite_for_engine(classified.statement)  # COALESCE becomes CASE
    assert analysis.analyse(classified, ctx) is not first
