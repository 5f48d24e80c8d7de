"""API keys verified against the catalog, the answers remembered for a few seconds."""

import threading

from cachetools import TTLCache

from catalog.teams import TeamStore, well_formed
from catalog.types import Principal

# Answers remembered per worker, for known and for unknown keys apart: made-up keys, however
# many, never push out the keys in use, and cost at most this many entries (past it, the least
# recently used go first).
MAX_REMEMBERED_KEYS = 10_000


class KeyVerifier:
    """Verifies API keys against the catalog, remembering answers for a few seconds.

    A token without a key's shape is refused before any lookup and never remembered, so a
    caller cannot make the hub read the database or hold memory with arbitrary text; only
    well-formed tokens are looked up, and each answer is kept in a bounded cache.

    The event loop reads the caches and the thread pool fills them; cachetools caches are not
    safe for threads (even a read reorders entries), so one lock guards both, held for a
    dictionary operation and never while the database is read.
    """

    def __init__(
        self, teams: TeamStore, *, cache_seconds: float, max_entries: int = MAX_REMEMBERED_KEYS
    ) -> None:
        self._teams = teams
        self._known: TTLCache[str, Principal] = TTLCache(maxsize=max_entries, ttl=cache_seconds)
        self._unknown: TTLCache[str, bool] = TTLCache(maxsize=max_entries, ttl=cache_seconds)
        self._lock = threading.Lock()

    def cached(self, token: str) -> tuple[bool, Principal | None]:
        """Whether the answer for `token` is known without the database, and that answer;
        never waits on the database, so the event loop may call it."""
        if not well_formed(token):
            return True, None
        with self._lock:
            principal = self._known.get(token)
            if principal is not None:
                return True, principal
            return self._unknown.get(token, False), None

    def verify(self, token: str) -> Principal | None:
        known, principal = self.cached(token)
        if known:
            return principal
        principal = self._teams.verify(token)
        with self._lock:
            if principal is None:
                self._unknown[token] = True
            else:
                self._known[token] = principal
        return principal
