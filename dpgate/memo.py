"""A bounded, thread-safe memo for facts about data that has not changed.

Three caches keep what a statement learned so that the next one need not ask DuckDB again: the
binds that succeeded (``queries.base``), the output columns of statements (``catalog.facts``) and
the per-table facts about the privacy unit (``catalog.unit_stats``). Each is keyed by everything
its value depends on (the schema, or a fingerprint of the rows), so an entry is never used for
data that has changed: none of them has to expire, they only need a bound on memory. When full,
the memo is emptied: a miss costs only the work the entry saved.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Iterator
from typing import Any


class Memo:
    """A dict of at most ``max_entries`` entries, emptied when full; safe to share between threads."""

    def __init__(self, max_entries: int):
        self.max_entries = max_entries
        self._entries: dict[Hashable, Any] = {}
        self._lock = threading.Lock()

    def get(self, key: Hashable, default: Any = None) -> Any:
        with self._lock:
            return self._entries.get(key, default)

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._entries

    def put(self, key: Hashable, value: Any = None) -> None:
        with self._lock:
            if key not in self._entries and len(self._entries) >= self.max_entries:
                self._entries.clear()
            self._entries[key] = value

    def pop(self, key: Hashable) -> None:
        with self._lock:
            self._entries.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def items(self) -> list[tuple[Hashable, Any]]:
        with self._lock:
            return list(self._entries.items())

    def __iter__(self) -> Iterator[Hashable]:
        return iter([k for k, _ in self.items()])

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)
