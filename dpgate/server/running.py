"""A statement in flight on the server: its worker, its time limits, its cancel, and its rows.

**Time.** A statement is stopped when its client cancels it, goes away, or runs past
``statement_timeout`` — unless it is past its debit: a charged statement runs to its end
(``Session.interrupt`` refuses), so whether it beats a deadline never becomes its outcome; its
work was bounded before the debit. A cancel that arrives after the debit is ignored, as
PostgreSQL ignores a cancel that arrives too late. A public statement is free, so it has a
shorter limit of its own, ``public_timeout``, from when it starts to run. A stop is repeated
until it takes (an interrupt between two DuckDB calls is lost).

**Rows.** A public statement's rows go from the worker thread to the connection a batch at a
time (``RowStream``: ``fetchmany``, about 256 KB a batch, through a window of two batches), so a
result is never held whole and a client that does not read holds the worker, not the rows,
until its timeouts end it. A result may have at most ``max_rows`` rows and ``max_bytes`` bytes
as sent; the next row is refused free (DP714).

**Slots.** One login runs at most ``per_login`` statements at once over all its sessions
(``Slots``); more wait for a slot (within their time limit; DP715 after it).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from typing import Any

from dpgate import errors
from dpgate.server import wire

#: A batch of rows sent at once: about this many bytes, at most MAX_BATCH_ROWS rows.
BATCH_BYTES = 256 * 1024
MAX_BATCH_ROWS = 1000
FIRST_BATCH_ROWS = 16


def canceled(reason: str, hint: str = "") -> errors.OperationalError:
    return errors.OperationalError(f"canceling statement due to {reason}", code="DP708", hint=hint)


class RowStream:
    """A public statement's rows on their way from the worker thread to the connection
    (``Gateway.public_reader``): the worker blocks while ``window`` batches wait unsent."""

    def __init__(self, loop: asyncio.AbstractEventLoop, max_rows: int, max_bytes: int, window: int = 2):
        self.loop, self.max_rows, self.max_bytes = loop, max_rows, max_bytes
        self.queue: asyncio.Queue = asyncio.Queue(window)
        self.started: float | None = None  # when the public statement began to run
        self.columns: tuple[list[str], list[str]] | None = None
        self.rows = 0
        self.bytes = 0
        self.stopped: errors.Error | None = None  # set by the connection: the worker raises it

    # -- the worker's side ----------------------------------------------------------------------
    def start(self) -> None:
        self.started = time.monotonic()

    def read(self, cur: Any, names: list[str], types: list[str], convert: Any) -> list[tuple]:
        self.columns = (names, types)
        self._put(("columns", names, types))
        n = FIRST_BATCH_ROWS  # the width of a row is unknown until one is read: start small
        while True:
            self._check()
            batch = cur.fetchmany(n)
            if not batch:
                return []
            encoded = [self.encode(convert(r) if convert is not None else r) for r in batch]
            data = [item for item, _ in encoded]
            size = sum(n for _, n in encoded)
            if self.rows + len(data) > self.max_rows or self.bytes + size > self.max_bytes:
                raise errors.OperationalError(
                    f"The result is larger than this server sends for one statement (at most {self.max_rows:,} "
                    f"rows and {self.max_bytes / 2**20:,.0f} MB); it was stopped after {self.rows:,} rows",
                    code="DP714",
                    hint="add a LIMIT, filter or aggregate (GROUP BY); the data owner sets the caps "
                    "(dpgate serve --max-result-rows / --max-result-mb)",
                )  # fmt: skip
            self.rows += len(data)
            self.bytes += size
            self._put(("rows", data))
            n = max(1, min(MAX_BATCH_ROWS, BATCH_BYTES * len(data) // max(size, 1)))

    def encode(self, row: tuple) -> tuple[Any, int]:
        """A row as it is sent, and its size in bytes (what the caps count): a DataRow here;
        ``dpgate web`` sends JSON."""
        data = wire.data_row(row)
        return data, len(data)

    def _check(self) -> None:
        if self.stopped is not None:
            raise self.stopped

    def _put(self, item: tuple) -> None:
        fut = asyncio.run_coroutine_threadsafe(self.queue.put(item), self.loop)
        while True:
            try:
                fut.result(timeout=0.2)
                return
            except concurrent.futures.TimeoutError:
                if self.stopped is not None:
                    fut.cancel()
                    raise self.stopped from None
            except concurrent.futures.CancelledError:
                raise self.stopped or canceled("the server stopping") from None

    # -- the connection's side ------------------------------------------------------------------
    async def next(self, worker: asyncio.Future) -> tuple | None:
        """The next item (``("columns", names, types)`` or ``("rows", [encoded rows])``), or None
        once the worker has finished and everything it sent was taken."""
        while True:
            if not self.queue.empty():
                return self.queue.get_nowait()
            if worker.done():
                return None
            getter = asyncio.ensure_future(self.queue.get())
            done, _ = await asyncio.wait({getter, worker}, return_when=asyncio.FIRST_COMPLETED)
            if getter in done:
                return getter.result()
            getter.cancel()  # the item, if any, stays in the queue


class Slots:
    """At most ``per_login`` statements of one login run at once; more wait in arrival order."""

    def __init__(self, per_login: int):
        self.per_login = per_login
        self._busy: dict[str, int] = {}
        self._waiters: dict[str, list[asyncio.Future]] = {}

    def running(self, login: str) -> int:
        return self._busy.get(login, 0)

    async def acquire(self, login: str, stop: Any) -> None:
        """Wait for a slot; ``stop()`` (checked every 0.25 s) returns an error to give up with."""
        if self._busy.get(login, 0) < self.per_login and not self._waiters.get(login):
            self._busy[login] = self._busy.get(login, 0) + 1
            return
        fut = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(login, []).append(fut)
        try:
            while True:
                done, _ = await asyncio.wait({fut}, timeout=0.25)
                if done:
                    return
                error = stop()
                if error is not None:
                    raise error
        except BaseException:
            if fut.done() and not fut.cancelled():
                self.release(login)  # handed a slot just as it gave up: hand it on
            else:
                fut.cancel()
                waiters = self._waiters.get(login, [])
                if fut in waiters:
                    waiters.remove(fut)
                if not waiters:
                    self._waiters.pop(login, None)
            raise

    def release(self, login: str) -> None:
        waiters = self._waiters.get(login)
        while waiters:
            fut = waiters.pop(0)
            if not waiters:
                del self._waiters[login]
            if not fut.done():
                fut.set_result(None)  # the slot passes to it
                return
        n = self._busy.get(login, 0) - 1
        if n > 0:
            self._busy[login] = n
        else:
            self._busy.pop(login, None)


class Running:
    """One statement in flight on a connection (see the module's docstring)."""

    #: How its public rows travel (``dpgate web`` streams them as JSON)
    stream_type: type[RowStream] = RowStream

    def __init__(self, session: Any, sql: str, params: list[Any] | None, *, statement_timeout: float,
                 public_timeout: float, max_rows: int, max_bytes: int, gone: Any):  # fmt: skip
        self.session, self.sql, self.params = session, sql, params
        self.statement_timeout, self.public_timeout = statement_timeout, public_timeout
        self.gone = gone  # () -> bool: the client closed its side
        self.loop = asyncio.get_running_loop()
        self.stream = self.stream_type(self.loop, max_rows, max_bytes)
        self.begun = time.monotonic()
        self.reason: str | None = None  # why it was stopped, once a stop took
        self.requested: str | None = None  # a cancel asked for while it waits for its slot
        self.worker: asyncio.Future | None = None
        self._watch: asyncio.Task | None = None

    # -- limits ----------------------------------------------------------------------------------
    def why_stop(self) -> str | None:
        """Why the statement should stop now, or None."""
        if self.requested is not None:
            return self.requested
        if self.gone():
            return "the client going away"
        now = time.monotonic()
        if now > self.begun + self.statement_timeout:
            return "statement timeout"
        if self.stream.started is not None and now > self.stream.started + self.public_timeout:
            return "statement timeout (public statements)"
        return None

    def hint(self, reason: str | None) -> str:
        if reason == "statement timeout (public statements)":
            return (f"a public statement may run {self.public_timeout:g} s on this server (dpgate serve "
                    "--public-timeout); filter or aggregate more, or add a LIMIT")  # fmt: skip
        if reason == "statement timeout":
            return (f"a statement may run {self.statement_timeout:g} s before its debit on this server "
                    "(dpgate serve --statement-timeout); nothing was charged")  # fmt: skip
        return "nothing was charged"

    def cancel(self) -> None:
        """A CancelRequest: stops the statement unless it is past its debit (then it is ignored)."""
        if self.worker is None:
            self.requested = "user request"  # still waiting for its slot
        else:
            self.stop("user request")

    def stop(self, reason: str) -> bool:
        """Stop the statement unless it is past its debit; returns whether it was stopped."""
        if not self.session.interrupt():
            return False
        if self.reason is None:
            self.reason = reason
            self.stream.stopped = canceled(reason, self.hint(reason))
        return True

    # -- running ---------------------------------------------------------------------------------
    def start(self, pool: concurrent.futures.Executor) -> asyncio.Future:
        self.worker = self.loop.run_in_executor(pool, self._work)
        # its error is read by whoever waits for it; a statement nobody waits for any more (its client
        # went away mid-stream) must not have its error logged as never retrieved
        self.worker.add_done_callback(lambda f: f.cancelled() or f.exception())
        self._watch = asyncio.ensure_future(self._watchdog())
        return self.worker

    def _work(self) -> Any:
        gateway = self.session.gateway
        if gateway is not None:
            gateway.public_reader = self.stream
        try:
            return self.session.run(self.sql, self.params)
        finally:
            if gateway is not None:
                gateway.public_reader = None

    async def _watchdog(self) -> None:
        while not self.worker.done():
            await asyncio.wait({self.worker}, timeout=0.25)
            if self.worker.done():
                return
            if self.reason is not None:  # stopped before: again, until it takes or the debit is made
                self.session.interrupt()
                continue
            reason = self.why_stop()
            if reason is not None:
                self.stop(reason)

    async def result(self) -> Any:
        """The worker's Outcome, or its error as the client should see it."""
        try:
            return await self.worker
        except errors.Error as e:
            if e.code == "DP708" or "interrupted" not in e.message.lower():
                raise
            reason = self.reason or "user request"
            raise canceled(reason, self.hint(reason)) from e
        except Exception as e:
            if "interrupt" in str(e).lower():
                raise canceled(self.reason or "user request", self.hint(self.reason)) from e
            raise
