"""The benchmarks' shared clock: one warm-up call, then the median of ``repeat`` timed calls."""

from __future__ import annotations

import statistics
import time


def timed(fn, repeat: int) -> float:
    fn()  # warm up
    samples = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t)
    return statistics.median(samples)
