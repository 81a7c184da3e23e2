"""The memo shared by the bind, DESCRIBE and unit-facts caches: bounded, emptied when full."""

from __future__ import annotations

import threading

from dpgate.memo import Memo


def test_bounded_and_emptied_when_full():
    m = Memo(3)
    for k in "abc":
        m.put(k, k.upper())
    assert len(m) == 3 and m.get("b") == "B" and "c" in m
    m.put("a", "again")  # replacing a key does not empty it
    assert len(m) == 3 and m.get("a") == "again"
    m.put("d", "D")  # a fourth key: emptied first, then stored
    assert len(m) == 1 and m.get("d") == "D" and "a" not in m and m.get("a", 0) == 0
    m.pop("d")
    m.pop("never")
    assert len(m) == 0


def test_threads_never_exceed_the_bound():
    m = Memo(50)
    sizes: list[int] = []

    def work(base: int) -> None:  # (an assert in a thread would not fail the test: sizes are checked after)
        for i in range(2000):
            m.put((base, i), i)
            sizes.append(len(m))

    threads = [threading.Thread(target=work, args=(b,)) for b in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(sizes) == 8000 and max(sizes) <= 50
    assert 1 <= len(m) <= 50 and all(isinstance(k, tuple) for k in m)
