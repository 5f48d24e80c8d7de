"""A thread-safe least-recently-used cache bounded by the total size of what it holds."""

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class SizedLruCache(Generic[K, V]):
    """Keeps values while the sum of their sizes is at most `max_bytes`, evicting the least
    recently used first. A value larger than the whole budget is returned but not kept."""

    def __init__(self, max_bytes: int, size: Callable[[V], int]) -> None:
        self._max_bytes = max_bytes
        self._size = size
        self._entries: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._total = 0
        self._lock = threading.Lock()

    @property
    def total_bytes(self) -> int:
        """The summed size of the values held now."""
        return self._total

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: K) -> V | None:
        """The cached value of `key`, if any; never loads."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            self._entries.move_to_end(key)
            return entry[0]

    def get_or_load(self, key: K, load: Callable[[], V]) -> V:
        """The cached value of `key`, or `load()`'s, kept for next time if it fits."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
                return entry[0]
        # Loaded outside the lock: two threads may both load a missing key, never block.
        value = load()
        cost = self._size(value)
        if cost > self._max_bytes:
            return value
        with self._lock:
            previous = self._entries.pop(key, None)
            if previous is not None:
                self._total -= previous[1]
            self._entries[key] = (value, cost)
            self._total += cost
            while self._total > self._max_bytes:
                _, (_, evicted) = self._entries.popitem(last=False)
                self._total -= evicted
        return value

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._total = 0
