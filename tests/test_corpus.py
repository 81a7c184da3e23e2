"""Every file in sql/queries/ runs against the demo database with its declared outcome.

Rejected queries (the bad-input corpus: malformed SQL, unsupported shapes, escape attempts)
must raise the declared exception class and code, and must not move any budget.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import dpgate
from dpgate import errors
from dpgate.catalog.owner import Owner

from conftest import TEST_SEED

CORPUS = Path(__file__).resolve().parent.parent / "sql" / "queries"
REJECTED = sorted((CORPUS / "rejected").glob("*.sql"))
ACCEPTED = sorted((CORPUS / "accepted").glob("*.sql"))


def _header(path: Path, key: str) -> str:
    m = re.search(rf"^-- {key}: (.*)$", path.read_text(), re.M)
    assert m, f"{path.name} has no '-- {key}:' header"
    return m.group(1).strip()


def snapshot(db) -> tuple:
    with Owner(db, create=False) as owner:
        c = owner.con
        return (
            c.execute("SELECT epsilon_spent, delta_spent FROM dpgate.analysts ORDER BY name").fetchall(),
            c.execute("SELECT count(*) FROM dpgate.ledger").fetchone(),
            c.execute("SELECT sum(epsilon_spent), sum(delta_spent) FROM dpgate.subjects_adult").fetchone(),
            c.execute("SELECT count(*), sum(age) FROM adult").fetchone(),
            c.execute("SELECT count(*) FROM duckdb_tables() WHERE NOT temporary").fetchone(),
        )


def test_corpus_is_big_enough():
    assert len(REJECTED) >= 50
    assert len(ACCEPTED) >= 10


@pytest.mark.parametrize("path", REJECTED, ids=lambda p: p.stem)
def test_rejected(path, demo_db):
    code, cls_name = _header(path, "expect-error").split()
    cls = getattr(errors, cls_name)
    sql = path.read_text()
    before = snapshot(demo_db)
    with dpgate.connect(str(demo_db), analyst="demo") as con:
        with pytest.raises(cls) as info:
            con.cursor().execute(sql)
        assert info.value.code == code, f"{info.value.code}: {info.value}"
        assert info.value.hint or info.value.code.startswith("DP20"), "every refusal says what would be accepted"
        assert con.budget() == (10.0, 1e-5)
    assert snapshot(demo_db) == before


@pytest.mark.parametrize("path", ACCEPTED, ids=lambda p: p.stem)
def test_accepted(path, demo_db):
    expect = dict(item.split("=", 1) for item in _header(path, "expect").split())
    with dpgate.connect(str(demo_db), analyst="demo", test_seed=TEST_SEED) as con:
        cur = con.cursor()
        cur.execute(path.read_text())
        rows = cur.fetchall()
        if "rows" in expect:
            assert len(rows) == int(expect["rows"])
        names = [d[0] for d in cur.description] if cur.description else []
        assert names == [c for c in expect["columns"].split(",") if c]
        if expect["class"] not in ("public", "explain", "show_budget", "show_releases"):
            assert cur.release is not None and cur.release.query_class == expect["class"]
        else:
            assert cur.release is None
