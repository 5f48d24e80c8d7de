"""A small thread-safe cache whose entries are trusted for a fixed number of seconds."""

import threading
import time
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class TtlCache(Generic[K, V]):
    """Entries expire `seconds` after they were put; at most `max_entries` are kept."""

    def __init__(self, seconds: float, *, max_entries: int = 10_000) -> None:
        self._seconds = seconds
        self._max_entries = max_entries
        self._entries: dict[K, tuple[float, V]] = {}
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            entry = self._entries.get(key)
        if entry is None or entry[0] < time.monotonic():
            return None
        return entry[1]

    def put(self, key: K, value: V) -> None:
        if self._seconds <= 0:
            return
        with self._lock:
            if len(self._entries) >= self._max_entries:
                self._entries.clear()
            self._entries[key] = (time.monotonic() + self._seconds, value)

    def pop(self, key: K) -> None:
        with self._lock:
            self._entries.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
