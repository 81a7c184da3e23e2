"""How dpgate runs work on Spark: job groups an interrupt before the debit cancels, the progress
line, one session per process (``dpgate.backends.spark.runtime``)."""

from __future__ import annotations

import os
import threading
import time

import pytest

from dpgate import errors
from dpgate.backends.spark import runtime


def _calls():
    seen: list[tuple[float, str]] = []
    return seen, lambda fraction, message: seen.append((fraction, message))


def test_progress_is_told_the_elapsed_seconds_then_the_end():
    seen, progress = _calls()
    with runtime.ticking(progress, lambda s: f"working, {s:.1f} s", lambda s: "done", delay=0.1, every=0.1):
        time.sleep(0.65)
    assert len(seen) >= 3  # at 0.1, 0.2, ... (a busy machine may skip some ticks, never the first few)
    assert all(f == 0.0 and m.startswith("working, ") for f, m in seen[:-1])
    assert seen[-1] == (1.0, "done")


def test_short_work_shows_no_progress_and_a_failing_callback_is_ignored():
    seen, progress = _calls()
    with runtime.ticking(progress, lambda s: "x", delay=5.0):
        pass
    assert seen == []

    def broken(fraction, message):
        raise RuntimeError("a callback's own failure")

    with runtime.ticking(broken, lambda s: "x", delay=0.05, every=0.05):
        time.sleep(0.2)  # the work goes on; nothing is raised


def test_a_cancelled_group_stops_its_job_with_a_free_refusal(spark):
    """A Spark job of many seconds is cancelled within a few once ``cancel`` is called, and the
    statement gets DP267 (an interrupt before the debit), not Spark's text."""
    jobs = runtime.Jobs(spark)
    outcome: dict[str, object] = {}

    def work():
        try:
            with jobs.group("testing a cancel"):
                # about 10^11 rows: minutes on two cores; it runs in executor tasks, which a cancel interrupts.
                # No product of ids: past 3 * 10^9, id * id overflows, which Spark 4 (ANSI) raises at once
                # in the second partition, so the job could fail before the cancel reached it.
                spark.range(0, 10**11, 1, 2).selectExpr("sum(id % 7)").collect()
            outcome["finished"] = True
        except errors.Error as e:
            outcome["code"] = e.code

    worker = threading.Thread(target=work)
    worker.start()
    tracker = spark.sparkContext.statusTracker()
    deadline = time.monotonic() + 120  # a busy machine may take long to submit it; a cancel before that would miss it
    while time.monotonic() < deadline:
        group = jobs._active
        if group is not None and tracker.getJobIdsForGroup(group):
            break
        time.sleep(0.05)
    assert jobs.cancel()
    cancelled = time.monotonic()
    worker.join(120)
    assert outcome == {"code": "DP267"}
    assert time.monotonic() - cancelled < 30  # the job had minutes to go
    assert not jobs.cancel()  # nothing runs now
    assert spark.sparkContext.getLocalProperty("spark.jobGroup.id") is None  # the thread's later jobs are in no group
    assert spark.range(3).count() == 3


def test_the_session_from_settings_is_started_once(spark):
    settings = {"spark_master": "local[2]"}
    first = runtime.started(settings)
    seen, progress = _calls()
    assert runtime.started(settings, progress) is first
    assert seen == []  # nothing to wait for the second time


class _Plane:
    def __init__(self):
        self.interrupts = 0

    def interrupt(self) -> bool:
        self.interrupts += 1
        return True


def test_the_gateway_interrupts_engine_work_before_the_debit_only(con):
    """After the debit a statement runs to its end on every engine: whether it beat a deadline must
    not become its outcome. Before it, Spark's jobs are cancelled with the connection's."""
    gateway = con._gateway
    plane = _Plane()
    gateway._planes["spark"] = plane
    assert gateway.interrupt()
    assert plane.interrupts == 1
    with gateway._phase:
        gateway._charged = True
    try:
        assert not gateway.interrupt()
        assert plane.interrupts == 1
    finally:
        gateway._charged = False
        gateway._planes.pop("spark")


def test_a_statement_shows_one_progress_line_whatever_its_pieces(spark, monkeypatch):
    """Every piece of a statement's Spark work reports the seconds since the statement's first one,
    in the same words, and only the statement's end closes the line: how long each piece took
    (after the debit, data-dependent) is not shown apart."""
    monkeypatch.setattr(runtime, "PROGRESS_DELAY", 0.05)
    monkeypatch.setattr(runtime, "PROGRESS_EVERY", 0.05)
    jobs = runtime.Jobs(spark)
    seen, progress = _calls()
    jobs.progress = lambda: progress
    for what in ("reading the source's schema", "computing the exact statistics"):
        with jobs.group(what):
            time.sleep(0.3)
    assert seen and all(f == 0.0 and m.startswith("Spark: working, ") for f, m in seen)
    assert [m for _, m in seen] == sorted((m for _, m in seen), key=lambda m: float(m.split()[2]))  # one clock
    jobs.end()
    assert seen[-1][0] == 1.0 and seen[-1][1].startswith("Spark: ")
    shown = len(seen)
    jobs.end()  # a statement without Spark work shows nothing
    assert len(seen) == shown


def test_dpgates_session_keeps_sparks_parser_defaults_whatever_the_cluster_sets(spark):
    """A cluster-wide legacy setting reaches every new session (1e2 read as a DECIMAL); dpgate's own
    session pins Spark's defaults, so its text parses and types as the tests compare with DuckDB."""
    from dpgate.backends.spark import source

    conf = spark.sparkContext._jsc.sc().conf()
    flipped = {"spark.sql.legacy.exponentLiteralAsDecimal.enabled": "true", "spark.sql.parser.escapedStringLiterals": "true",
               "spark.sql.legacy.codingErrorAction": "true"}  # fmt: skip
    sql = "SELECT typeof(1e2), length('a\\\\b')"  # Spark SQL 'a\\b': a backslash escaped, 3 characters
    for key, value in flipped.items():
        conf.set(key, value)
    try:
        assert spark.newSession().sql(sql).first() == ("decimal(3,0)", 4)
        own = source.session_for(spark)
        assert own.sql(sql).first() == ("double", 3)
        # a legacy setting that makes Spark more lenient is the cluster's to keep: put back, a source
        # the owner's session reads would fail in dpgate's
        assert own.conf.get("spark.sql.legacy.codingErrorAction") == "true"
    finally:
        for key in flipped:
            conf.remove(key)
    defaults = source.sql_defaults(spark)
    assert "spark.sql.parser.escapedStringLiterals" in defaults and "spark.sql.ansi.doubleQuotedIdentifiers" in defaults
    own = source.session_for(spark)
    for name, value in {**defaults, **source.PINNED}.items():
        assert own.conf.get(name).lower() == value.lower(), name


def test_the_cores_a_statement_may_count_on():
    """Local threads from the master URL; on a cluster what the owner declared, else 1."""
    from dpgate.backends.spark.plane import cores_of

    machine = os.cpu_count() or 1
    assert cores_of("local[1]", None) == 1 and cores_of("local", None) == 1
    assert cores_of("local[2]", None) == min(2, machine) and cores_of("local[3, 2]", "64") == min(3, machine)
    assert cores_of("local[1000]", None) == machine  # threads beyond the machine's cores are no more cores
    assert cores_of("local[*]", None) >= 1
    assert cores_of("spark://h:7077", None) == 1 and cores_of("spark://h:7077", "64") == 64
    assert cores_of("yarn", "many") == 1 and cores_of("yarn", "0") == 1


def test_a_spark_that_cannot_start_is_a_dpgate_error(monkeypatch):
    """No Java, a bad master URL: pyspark's start-up error becomes DP263 (nothing was charged)."""
    SparkSession = pytest.importorskip("pyspark.sql").SparkSession

    def fail(self):
        raise RuntimeError("[JAVA_GATEWAY_EXITED] Java gateway process exited")

    monkeypatch.setattr(SparkSession.Builder, "getOrCreate", fail)
    with pytest.raises(errors.InterfaceError) as e:
        runtime.started({"spark_master": "local[1]", "spark_conf": '{"spark.app.id": "no-java-test"}'})
    assert e.value.code == "DP263" and "JAVA_GATEWAY_EXITED" in e.value.message


def test_a_session_that_cannot_run_work_is_refused_free(spark, monkeypatch):
    """A driver that is gone (py4j cannot reach it) or a stopped session: the statement's checks
    before the debit refuse it as DP263, and a started session found stopped is not handed out."""
    from dpgate.backends.spark import plane as spark_plane

    plane = spark_plane.SparkPlane(spark)

    def unreachable(*args, **kwargs):
        raise ConnectionRefusedError(111, "Connection refused")

    monkeypatch.setattr(plane.jobs.sc, "setJobGroup", unreachable)
    from types import SimpleNamespace

    plan = SimpleNamespace(table=SimpleNamespace(options={"spark": "parquet:/nowhere"}))
    with pytest.raises(errors.InterfaceError) as e:
        plane.check_graph(plan)
    assert e.value.code == "DP263"

    class Gone:
        def sc(self):
            raise ConnectionRefusedError(111, "Connection refused")

    dead = type("Session", (), {"sparkContext": type("Context", (), {"_jsc": Gone()})()})()
    assert runtime._stopped(dead) and not runtime._stopped(spark)
    monkeypatch.setitem(runtime._STARTED, ("local[9]", "{}"), dead)
    with pytest.raises(errors.InterfaceError) as e:
        runtime.started({"spark_master": "local[9]"})
    assert e.value.code == "DP263" and "restart" in e.value.hint
