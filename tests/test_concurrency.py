"""Many threads, one database: concurrent queries never overspend a quota or a subject budget."""

from __future__ import annotations

import threading
from decimal import Decimal

import dpgate
from dpgate import errors
from dpgate.catalog.owner import Owner


def test_threads_never_overspend(make_db):
    db = make_db(
        "CREATE TABLE t (uid INTEGER, x INTEGER); INSERT INTO t SELECT i, i % 3 FROM range(1, 201) r(i);"
        "CREATE TABLE b (uid INTEGER, epsilon DOUBLE); INSERT INTO b SELECT i, CASE WHEN i % 2 = 0 THEN 0.7 ELSE 5 END FROM range(1, 201) r(i)",
        {"t": dict(unit="uid", budget_table="b", domains={"x": [0, 1, 2]})},
        analysts={"alice": {"epsilon": 2.0, "delta": 1e-6}},
    )
    pool = [dpgate.connect(str(db), analyst="alice") for _ in range(8)]
    successes: list[int] = []
    failures: list[BaseException] = []
    lock = threading.Lock()

    def worker(con):
        done = 0
        while True:
            try:
                con.cursor().execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1, personalization = 'threshold') x, COUNT(*) FROM t GROUP BY x")
                done += 1
            except errors.BudgetExceededError:
                break
            except BaseException as e:  # anything else is a bug
                with lock:
                    failures.append(e)
                break
        with lock:
            successes.append(done)

    threads = [threading.Thread(target=worker, args=(c,)) for c in pool]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=300)
    for c in pool:
        c.close()
    assert not failures, failures
    assert sum(successes) == 20  # exactly 2.0 / 0.1 answers, no more
    with Owner(db, create=False) as o:
        spent = o.con.execute("SELECT epsilon_spent FROM dpgate.analysts WHERE name = 'alice'").fetchone()[0]
        ledger_total = o.con.execute("SELECT sum(epsilon), count(*) FROM dpgate.ledger").fetchone()
        over = o.con.execute("SELECT count(*) FROM dpgate.subjects_t WHERE epsilon_spent > epsilon_budget").fetchone()[0]
        low = o.con.execute("SELECT max(epsilon_spent) FROM dpgate.subjects_t WHERE epsilon_budget = 0.7").fetchone()[0]
    assert spent == Decimal(2)
    assert ledger_total == (Decimal(2), 20)
    assert over == 0
    assert low == Decimal("0.7")  # the 0.7-subjects were used 7 times, then left out
