"""A full disk never loses a debit and never releases an answer without one.

The gateway runs in a subprocess whose files may not grow past a limit (``RLIMIT_FSIZE``, with
SIGXFSZ ignored: a write past it fails with EFBIG, as on a full disk). It answers DP queries and
makes synthetic releases until writes fail; afterwards, with no limit, the database must open and:
every answer that was released has its debit (and its release log row) committed, every error was a
dpgate error with a code, nothing was released without a debit, and the analyst's, the subjects'
and the ledger's totals agree.

What DuckDB 1.5 does, and what each case exercises:

- ``log``: the write-ahead log cannot grow. DuckDB undoes the commit that could not be written:
  a debit (DP605, nothing charged), a release's table (DP608, its debit stands), the release log
  (DP609, the answer is withheld, its debit stands). An ``UPDATE ... RETURNING`` in the undone
  commit aborted the whole process (DuckDB re-inserted the row into its primary key index).
- ``checkpoint``: the log can grow, the database file cannot: the first checkpoint fails, and DuckDB
  stops the database until it is opened again (DP606 at a debit's commit, DP607 for every statement
  after it); the client reconnects, DuckDB replays the log, and what was committed stands.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from decimal import Decimal

import duckdb
import pytest

import dpgate
from dpgate.catalog.owner import Owner

SETUP = """
CREATE TABLE t AS SELECT i // 2 AS pid, i % 90 AS age, CASE WHEN i % 3 = 0 THEN 'F' ELSE 'M' END AS sex,
  (i % 50) * 1.5 AS x FROM range(2000) r(i);
"""
QUERY = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5) sex, COUNT(*), SUM(x) FROM t GROUP BY sex"
RELEASE = "CREATE SYNTHETIC TABLE r{i} FROM t WITH (epsilon = 1, columns = 'age, sex, x', rows = {rows})"

CHILD = textwrap.dedent('''
    import json, resource, signal, sys, traceback
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG) instead of killing us
    path, limit, threshold, pattern, count, rows = sys.argv[1:7]
    resource.setrlimit(resource.RLIMIT_FSIZE, (int(limit), int(limit)))
    import dpgate
    from dpgate import database

    def connect():
        con = dpgate.connect(path, analyst="alice")
        if threshold != "default":  # DuckDB checkpoints when its log passes this size
            inst = database.acquire(path)
            inst.root.execute(f"SET checkpoint_threshold = '{threshold}'")
            database.release(inst)
        return con

    con = None
    for i in range(int(count)):
        kind = pattern[i % len(pattern)]
        sql = QUERY if kind == "q" else RELEASE.format(i=i, rows=rows)
        out = {"i": i, "kind": kind}
        try:
            if con is None:
                con = connect()
            cur = con.cursor().execute(sql)
            out.update(ok=True, entry=cur.release.entry_id, rows=len(cur.fetchall()) if cur.description else 0)
        except dpgate.Error as e:
            out.update(ok=False, code=e.code, hint=bool(e.hint), message=str(e)[:400])
            if e.code in ("DP606", "DP607") and con is not None:  # stopped: reconnect, as a client would
                con.close()
                con = None
        except BaseException as e:
            out.update(ok=False, raw=type(e).__name__, message=traceback.format_exc()[-2000:])
        print(json.dumps(out), flush=True)
''')


def _child(path, *, limit: int, threshold: str, pattern: str, count: int, rows: int = 20000) -> list[dict]:
    script = f"QUERY = {QUERY!r}\nRELEASE = {RELEASE!r}\n" + CHILD
    proc = subprocess.run(
        [sys.executable, "-c", script, str(path), str(limit), threshold, pattern, str(count), str(rows)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]  # never aborted (DuckDB's undo of a failed commit could)
    return [json.loads(line) for line in proc.stdout.splitlines()]


@pytest.fixture
def db(make_db):
    path = make_db(SETUP, protect={"t": {"unit": "pid", "max_rows": 2, "epsilon": 1e6, "domains": {"sex": ["F", "M"]},
                                         "bounds": {"age": (0, 89), "x": (0, 75)}}},
                   analysts={"alice": {"epsilon": 1e6, "delta": 1e-3}}, allow_seed=False)  # fmt: skip
    con = duckdb.connect(str(path))
    con.execute("CHECKPOINT")  # everything in the file: the log starts empty
    con.close()
    return path


def _consistent(path, records: list[dict]) -> dict:
    """The database opens with no limit, and its ledger accounts for every answer; returns its totals."""
    errors_seen = [r for r in records if not r["ok"]]
    raw = [r for r in errors_seen if "raw" in r]
    assert not raw, raw[0]["message"]  # every failure a dpgate error, never a traceback
    for r in errors_seen:
        assert r["code"] not in ("DP500", "DP000") and r["hint"], r
    with Owner(path) as owner:  # opens the file: DuckDB replays its log
        con = owner.con
        ledger = dict(con.execute("SELECT entry_id, epsilon FROM dpgate.ledger").fetchall())
        logged = {e for (e,) in con.execute("SELECT entry_id FROM dpgate.releases").fetchall()}
        registry = dict(con.execute("SELECT entry_id, name FROM dpgate.release_registry").fetchall())
        tables = {n for (n,) in con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main' AND table_name LIKE 'r%'").fetchall()}
        for r in records:
            if r["ok"]:  # released: its debit is committed, and the release with it
                assert r["entry"] in ledger and r["entry"] in logged, r
                if r["kind"] == "r":
                    assert registry[r["entry"]] == f"r{r['i']}", r
        assert logged <= set(ledger) and set(registry) <= set(ledger)  # nothing released without a debit
        assert tables == set(registry.values())  # no release table without its registry row
        spent = con.execute("SELECT epsilon_spent FROM dpgate.analysts WHERE name = 'alice'").fetchone()[0]
        assert spent == sum(ledger.values(), Decimal(0))
        subjects = con.execute("SELECT sum(epsilon_spent) FROM dpgate.subjects_t").fetchone()[0]
        charged = con.execute("SELECT coalesce(sum(subject_epsilon), 0) FROM dpgate.ledger").fetchone()[0]
        assert subjects == charged
    with dpgate.connect(str(path), analyst="alice") as con:  # and it answers again
        assert len(con.execute(QUERY).fetchall()) == 2
    return {"ledger": len(ledger), "logged": len(logged), "releases": len(registry)}


def test_a_log_that_cannot_grow_charges_nothing_it_cannot_write(db):
    """30 KB of file: the log fills after some 20 debits; the release tables never fit."""
    records = _child(db, limit=30_000, threshold="default", pattern="qqqr", count=40, rows=2000)
    codes = {r.get("code") for r in records if not r["ok"]}
    assert any(r["ok"] for r in records) and "DP605" in codes, codes  # answers, then debits refused
    assert codes <= {"DP605", "DP608", "DP609"}, codes
    totals = _consistent(db, records)
    answered = sum(r["ok"] for r in records)
    # every answer has its debit; a debit without an answer is a release whose table did not fit (DP608),
    # or an answer withheld because its release log did not (DP609)
    assert totals["logged"] == answered
    assert totals["ledger"] == answered + sum(r.get("code") in ("DP608", "DP609") for r in records)


def test_a_checkpoint_that_cannot_be_written_stops_the_database_until_it_is_opened_again(db):
    size = os.path.getsize(db)
    records = _child(db, limit=size + 400_000, threshold="200KB", pattern="qqr", count=12)
    codes = [r.get("code") for r in records if not r["ok"]]
    assert {"DP606", "DP607"} & set(codes), codes
    assert set(codes) <= {"DP605", "DP606", "DP607", "DP608", "DP609"}, codes
    _consistent(db, records)


class _Failing:
    """A connection whose statements starting with ``prefix`` fail as DuckDB fails a write to a full disk
    (``after``: the statement runs first, as a commit that reached the log before its checkpoint failed)."""

    def __init__(self, con, prefix: str, error: Exception, *, after: bool = False):
        self._con, self._prefix, self._error, self._after = con, prefix, error, after

    def execute(self, sql, *args):
        if sql.startswith(self._prefix):
            if self._after:
                self._con.execute(sql, *args)
            raise self._error
        return self._con.execute(sql, *args)

    def __getattr__(self, name):
        return getattr(self._con, name)


def _ledger(path) -> tuple[int, int]:
    with Owner(path, read_only=True) as o:
        return (o.con.execute("SELECT count(*) FROM dpgate.ledger").fetchone()[0],
                o.con.execute("SELECT count(*) FROM dpgate.releases").fetchone()[0])  # fmt: skip


def test_an_answer_whose_release_log_cannot_be_written_is_withheld_and_its_debit_stands(db):
    with dpgate.connect(str(db), analyst="alice") as con:
        ledger = con.gateway.ledger
        ledger._con = _Failing(ledger._con, "INSERT INTO dpgate.releases",
                               duckdb.IOException('Could not write file "x.wal": No space left on device'))
        with pytest.raises(dpgate.OperationalError) as info:
            con.execute(QUERY)
    assert info.value.code == "DP609" and "withheld" in info.value.message and "debit stands" in info.value.hint
    assert _ledger(db) == (1, 0)  # charged, and logged as not released


@pytest.mark.parametrize("durable", [True, False])
def test_a_debit_whose_commit_stopped_the_database_says_whether_it_stands(db, durable):
    said = ("Transaction COMMIT succeeded and is durable, but the autocheckpoint failed" if durable
            else "Failed to create checkpoint because of error: Could not write file")
    with dpgate.connect(str(db), analyst="alice") as con:
        ledger = con.gateway.ledger
        ledger._con = _Failing(ledger._con, "COMMIT", duckdb.FatalException(f"FATAL Error: {said}"), after=durable)
        with pytest.raises(dpgate.OperationalError) as info:
            con.execute(QUERY)
        if not durable:
            ledger._con._con.execute("ROLLBACK")
    assert info.value.code == "DP606" and info.value.details["durable"] is durable
    assert ("the debit is recorded" if durable else "the debit may be recorded") in info.value.message
    assert _ledger(db) == ((1, 0) if durable else (0, 0))  # nothing computed either way
