"""How dpgate runs work on Spark: one session per process, a job group per piece of a statement's
work, and a progress line while Spark starts or a job runs.

- **One session per process.** Starting Spark from the policy's ``[backends.spark]`` settings takes
  tens of seconds (a JVM, a driver, executors). It is done once per process and settings
  (``started``), whichever connection asks first; later connections, and the owner's roster reads,
  share it. A caller's own ``SparkSession`` is used as given.
- **Job groups.** Each piece of Spark work a statement does (reading the source's schema, the
  exact statistics) runs under a job group of its own (``Jobs.group``), with ``interruptOnCancel``.
  ``Jobs.cancel`` cancels the group running now. The gateway calls it only while the statement is
  not yet charged, as it interrupts DuckDB: after the debit a statement runs to its end on every
  engine, so whether it beat a deadline cannot become its outcome. A cancelled group raises
  DP267 (nothing was charged).
- **Progress.** While Spark starts, and while a statement's Spark work has run longer than a
  second, the statement's ``progress(fraction, message)`` callback (the shell's and ``dpgate
  query``'s progress line) is told the seconds since the statement's first Spark work began, every
  second, in one line with the same words throughout, ended when the statement ends
  (``Jobs.end``). Only that: the pieces' own times, or the stages' task counts as they complete,
  would time the parts of the work after the debit separately, a finer view of how long the data
  took than the statement's own duration, which the analyst sees anyway.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from dpgate import errors
from dpgate.backends.spark.source import _first_line

Progress = Callable[[float, str], None]

#: Seconds a job group or Spark's start runs before the progress line appears, and between updates.
PROGRESS_DELAY = 1.0
PROGRESS_EVERY = 1.0

_groups = itertools.count(1)
_START_LOCK = threading.Lock()
_STARTED: dict[tuple[str, str], Any] = {}  # (master, conf) -> the session dpgate started


def _tell(progress: Progress, fraction: float, text: str) -> None:
    try:
        progress(fraction, text)
    except Exception:  # noqa: BLE001 - a progress callback's failure is not the statement's
        pass


@contextmanager
def ticking(progress: Progress | None, message: Callable[[float], str], done: Callable[[float], str] | None = None,
            *, delay: float | None = None, every: float | None = None, start: float | None = None,
            shown: threading.Event | None = None, final: bool = True) -> Iterator[None]:
    """Tell ``progress`` the elapsed seconds since ``start`` (default: now; ``message(seconds)``)
    every ``every`` seconds once ``delay`` has passed, from a thread of its own; at the end, if
    anything was shown and ``final``, ``done(seconds)`` at 100%. ``shown`` is set once a line was
    shown. A failing callback is ignored (it must not fail the work)."""
    if progress is None:
        yield
        return
    start = time.monotonic() if start is None else start
    delay = PROGRESS_DELAY if delay is None else delay
    every = PROGRESS_EVERY if every is None else every
    stop = threading.Event()
    shown = shown if shown is not None else threading.Event()
    tell = functools.partial(_tell, progress)

    def tick() -> None:
        wait = delay
        while not stop.wait(wait):
            shown.set()
            tell(0.0, message(time.monotonic() - start))
            wait = every

    ticker = threading.Thread(target=tick, name="dpgate-spark-progress", daemon=True)
    ticker.start()
    failed = False
    try:
        yield
    except BaseException:
        failed = True  # "done" would say it worked ("Spark started in 60 s" for a master never reached)
        raise
    finally:
        stop.set()
        ticker.join()
        if shown.is_set() and final:
            seconds = time.monotonic() - start
            tell(1.0, done(seconds) if done is not None and not failed else message(seconds))


def started(settings: dict[str, str], progress: Progress | None = None) -> Any:
    """The process's Spark session for the policy's ``[backends.spark]`` settings, started once.

    Refuses (DP263) without a master URL or without pyspark. While Spark starts, ``progress`` is
    told how long it has taken."""
    master = settings.get("spark_master")
    if not master:
        raise errors.InterfaceError(
            "This table lives in Spark, and no Spark session was given", code="DP263",
            hint="connect(..., spark=SparkSession) / Owner(..., spark=...), or set [backends.spark] "
            "master = \"spark://host:7077\" (or \"local[*]\") in the policy; nothing was charged",
        )  # fmt: skip
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise errors.InterfaceError(
            "This table lives in Spark, and pyspark is not installed", code="DP263",
            hint="pip install 'dpgate[spark]' (it needs Java 17 or later); nothing was charged",
        ) from None  # fmt: skip
    conf = settings.get("spark_conf") or "{}"
    key = (master, conf)
    with _START_LOCK:  # one start at a time: a second connection waits for the first's session
        session = _STARTED.get(key)
        if session is not None and not _stopped(session):
            return session
        if session is not None:  # its driver is gone: this process cannot start another one
            raise errors.InterfaceError(
                f"Spark ({master}) stopped in this process and cannot be started again in it", code="DP263",
                hint="restart the process (dpgate serve, the shell); nothing was charged",
            )  # fmt: skip
        # No ${...} substitution in the SQL dpgate sends (the statement builders refuse it anyway).
        builder = SparkSession.builder.master(master).appName("dpgate").config("spark.sql.variable.substitute", "false")
        # Spark's warnings (its host name, native libraries, task sizes) would interleave with the
        # shell's output; the policy's conf may set another level
        builder = builder.config("spark.log.level", "ERROR")
        # No cap on a statement's result at the driver: the rows a statement returns depend on the data
        # (distinct keys, edges), so a cap would fail some statements after the debit on the data's
        # say; what a statement may return is bounded from public sizes instead (the policy may set one)
        builder = builder.config("spark.driver.maxResultSize", "0")
        for name, value in json.loads(conf).items():
            builder = builder.config(name, value)
        with ticking(progress, lambda s: f"starting Spark ({master}): {s:.0f} s",
                     lambda s: f"Spark started in {s:.0f} s"):  # fmt: skip
            with warnings.catch_warnings():  # pyspark's note on pandas versions: dpgate hands Spark Arrow, not pandas
                warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas")
                try:
                    session = builder.getOrCreate()
                except Exception as e:  # noqa: BLE001 - pyspark's start-up errors (no Java, a bad master URL)
                    raise errors.InterfaceError(
                        f"Spark could not start ({master}): {_first_line(e)}", code="DP263",
                        hint="Spark needs Java 17 or later and a reachable master; nothing was charged",
                    ) from None  # fmt: skip
        _STARTED[key] = session
        return session


def cannot_run(e: BaseException) -> errors.InterfaceError:
    """The free refusal of a statement whose Spark session cannot run work (stopped, or its driver
    gone: ``e`` is py4j's error), before the debit."""
    return errors.InterfaceError(
        f"The Spark session cannot run work ({type(e).__name__})", code="DP263",
        hint="start Spark again (or restart the process); nothing was charged",
    )


def _stopped(session: Any) -> bool:
    """Whether a started session can no longer run work: stopped, or its driver's JVM is gone (asked)."""
    sc = getattr(session, "sparkContext", None)
    if sc is None or getattr(sc, "_jsc", None) is None:
        return True
    try:
        return bool(sc._jsc.sc().isStopped())
    except Exception:  # noqa: BLE001 - py4j cannot reach the JVM
        return True


class Jobs:
    """The job groups of one data plane's Spark work (one statement at a time per plane)."""

    def __init__(self, spark: Any):
        self.sc = spark.sparkContext
        self._lock = threading.Lock()
        self._active: str | None = None
        self._cancelled: str | None = None
        self.progress: Callable[[], Progress | None] = lambda: None
        self._clock: float | None = None  # when this statement's first job group began
        self._shown = threading.Event()  # whether this statement's progress line was shown

    def end(self) -> None:
        """The statement is over: end its progress line (at 100%, with its Spark time) if one was shown."""
        clock, self._clock = self._clock, None
        progress = self.progress()
        if self._shown.is_set() and progress is not None and clock is not None:
            _tell(progress, 1.0, f"Spark: {time.monotonic() - clock:.0f} s")
        self._shown = threading.Event()

    @contextmanager
    def group(self, what: str) -> Iterator[None]:
        """Run the body's Spark jobs under a new job group (this thread's), with the progress line."""
        gid = f"dpgate-{os.getpid()}-{next(_groups)}"
        self.sc.setJobGroup(gid, f"dpgate: {what}", interruptOnCancel=True)
        with self._lock:
            self._active = gid
        if self._clock is None:
            self._clock = time.monotonic()
        try:
            # One line per statement, counting from its first Spark work, the same words throughout:
            # how long each piece took (after the debit, data-dependent) is not shown apart
            with ticking(self.progress(), lambda s: f"Spark: working, {s:.0f} s", start=self._clock,
                         shown=self._shown, final=False):  # fmt: skip
                yield
        except errors.Error:
            raise
        except Exception:
            with self._lock:
                cancelled = self._cancelled == gid
            if cancelled:
                raise errors.OperationalError(
                    f"The statement was interrupted while Spark was {what}", code="DP267",
                    hint="nothing was charged; run it again (with a longer statement timeout if one stopped it)",
                ) from None  # fmt: skip
            raise
        finally:
            with self._lock:
                self._active = None
            for prop in ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel"):
                self.sc.setLocalProperty(prop, None)

    def cancel(self) -> bool:
        """Cancel the job group running now, if any (the gateway calls this before the debit only)."""
        with self._lock:
            gid = self._active
            if gid is None:
                return False
            self._cancelled = gid
        # The group's later jobs too (Spark 4): a query's stages can be jobs submitted one after the
        # other, and a cancel that lands between two must not let the next one run
        scala = getattr(getattr(self.sc, "_jsc", None), "sc", lambda: None)()
        if scala is not None and hasattr(scala, "cancelJobGroupAndFutureJobs"):
            scala.cancelJobGroupAndFutureJobs(gid)
        else:
            self.sc.cancelJobGroup(gid)
        return True
