"""A hung test stops the run with every thread's Python traceback, instead of spinning until the
CI's own time limit, which says nothing about where (CI once stopped after 90 minutes without a
word). The slowest test takes about 40 s on two cores; ``DPGATE_TEST_HANG_SECONDS`` (default 300)
sets the limit.
"""

from __future__ import annotations

import faulthandler
import os

import pytest

_stderr_copy: int | None = None


def hang_seconds() -> float:
    return float(os.environ.get("DPGATE_TEST_HANG_SECONDS", "300"))


def pytest_configure(config):
    global _stderr_copy
    _stderr_copy = os.dup(2)  # the real stderr: fd 2 is captured while a test runs


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    # faulthandler's own watchdog thread needs no GIL: it also reports a hang inside C code
    # (DuckDB spinning in its instance cache, a lock) and exits the process with status 1
    # (under pytest-xdist: the worker, which xdist reports as a crashed test).
    faulthandler.dump_traceback_later(hang_seconds(), exit=True, file=_stderr_copy)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()
