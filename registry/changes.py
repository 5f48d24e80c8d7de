"""Noticing that another process changed the registry's database, without asking it each time.

A registry answer that can change (is this schema still under that subject? is this id still in
use?) may be cached only while nothing was written since it was read. Each process keeps a
generation number that moves whenever the database may have changed; a cached answer carries
the generation it was read at and is used only while that is still the current one (ADR 0032).

- SQLite: `PRAGMA data_version` on a connection of its own changes whenever any other
  connection, in any process, committed to the file. Asking starts a read transaction (a shared
  lock on the file, a check for a hot journal, a read of its header): about 6 µs, 10 in a busy
  server, so the API's cached reads share one asking per turn of the event loop (ADR 0052).
- PostgreSQL: every registry write sends `NOTIFY hub_registry` in its transaction (delivered on
  commit) and a thread of each process `LISTEN`s. Delivery takes a moment after the commit, as
  a Confluent follower reads the leader's writes a moment late. While the listening connection
  is down, the generation is unknown and nothing cached is trusted; once it is back, everything
  cached before is dropped, since notifications may have been missed meanwhile.
"""

import logging
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

from sqlalchemy import Connection, Engine, text

log = logging.getLogger(__name__)

K = TypeVar("K")
V = TypeVar("V")

CHANNEL = "hub_registry"
_RECONNECT_S = (0.5, 5.0)  # first and longest wait before listening again


class ChangeSignal(Protocol):
    """Where a process learns that the registry's database may have changed."""

    def generation(self) -> int | None:
        """A number that moves when the database may have changed; None when unknown (then
        nothing cached may be trusted)."""
        ...

    def written(self, connection: Connection) -> None:
        """Tell the other processes, within the writing transaction, that it changes things."""
        ...

    def changed_here(self) -> None:
        """This process committed a change: move the generation at once."""
        ...

    def close(self) -> None: ...


class NoSignal:
    """No way to tell: every generation is unknown, so nothing mutable is cached."""

    def generation(self) -> int | None:
        return None

    def written(self, connection: Connection) -> None:
        pass

    def changed_here(self) -> None:
        pass

    def close(self) -> None:
        pass


class SqliteDataVersion:
    """SQLite's own change counter, read on a connection that never writes."""

    def __init__(self, path: str) -> None:
        self._connection = sqlite3.connect(path, check_same_thread=False, timeout=5)
        self._lock = threading.Lock()
        self._local = 0  # changes this process made, in case its own commit is not seen yet

    def generation(self) -> int | None:
        try:
            with self._lock:
                row = self._connection.execute("PRAGMA data_version").fetchone()
        except sqlite3.Error:
            return None
        return int(row[0]) * 1_000_003 + self._local

    def written(self, connection: Connection) -> None:
        pass  # the commit itself moves every other connection's data_version

    def changed_here(self) -> None:
        with self._lock:
            self._local += 1

    def close(self) -> None:
        with self._lock:
            self._connection.close()


class PostgresNotifications:
    """LISTEN on `hub_registry` in a thread; each notification moves the generation."""

    def __init__(self, connect: Callable[[], object]) -> None:
        self._connect = connect
        self._lock = threading.Lock()
        self._generation = 0
        self._listening = False
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._listen_forever, name="registry-changes", daemon=True
        )
        self._thread.start()

    def generation(self) -> int | None:
        with self._lock:
            return self._generation if self._listening else None

    def written(self, connection: Connection) -> None:
        connection.execute(text(f"NOTIFY {CHANNEL}"))

    def changed_here(self) -> None:
        self._bump()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _bump(self, *, listening: bool | None = None) -> None:
        with self._lock:
            self._generation += 1
            if listening is not None:
                self._listening = listening

    def _listen_forever(self) -> None:
        wait = _RECONNECT_S[0]
        while not self._stop.is_set():
            try:
                self._listen()
                wait = _RECONNECT_S[0]
            except Exception as exc:  # whatever failed, nothing is heard until listening again
                self._bump(listening=False)
                log.warning("registry change notifications lost (%s); retrying", type(exc).__name__)
                self._stop.wait(wait)
                wait = min(wait * 2, _RECONNECT_S[1])

    def _listen(self) -> None:
        import psycopg

        connection = self._connect()
        assert isinstance(connection, psycopg.Connection)
        with connection:
            connection.execute(f"LISTEN {CHANNEL}")
            # Listening from now on; whatever was cached before may have missed a change.
            self._bump(listening=True)
            while not self._stop.is_set():
                for _ in connection.notifies(timeout=1.0, stop_after=1):
                    self._bump()
                # An idle connection that the server dropped shows only when used.
                connection.execute("SELECT 1")
        self._bump(listening=False)


class AsOf(Generic[K, V]):
    """Answers remembered with the generation they were read at, used only at that generation;
    the least recently used go first past `max_bytes` (each entry's `size`)."""

    def __init__(self, max_bytes: int, size: Callable[[V], int]) -> None:
        self._max_bytes = max_bytes
        self._size = size
        self._entries: OrderedDict[K, tuple[int, V, int]] = OrderedDict()
        self._total = 0
        self._lock = threading.Lock()

    def get(self, key: K, generation: int | None) -> V | None:
        if generation is None:
            return None
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry[0] != generation:
                return None
            self._entries.move_to_end(key)
            return entry[1]

    def put(self, key: K, generation: int | None, value: V) -> None:
        """Remember `value` as read at `generation`: taken before the read, so that a change
        committed during the read leaves the entry outdated, not wrong."""
        if generation is None:
            return
        cost = self._size(value)
        if cost > self._max_bytes:
            return
        with self._lock:
            previous = self._entries.pop(key, None)
            if previous is not None:
                self._total -= previous[2]
            self._entries[key] = (generation, value, cost)
            self._total += cost
            while self._total > self._max_bytes:
                _, (_, _, evicted) = self._entries.popitem(last=False)
                self._total -= evicted


def change_signal(engine: Engine) -> ChangeSignal:
    """The way to notice changes for this engine's database."""
    url = engine.url
    if url.get_backend_name() == "sqlite" and url.database and url.database != ":memory:":
        return SqliteDataVersion(url.database)
    if url.get_backend_name() == "postgresql":
        import psycopg

        conninfo = url.set(drivername="postgresql").render_as_string(hide_password=False)

        def connect() -> object:
            return psycopg.connect(conninfo, autocommit=True, connect_timeout=10)

        return PostgresNotifications(connect)
    return NoSignal()


def wait_listening(signal: ChangeSignal, timeout_s: float = 10.0) -> bool:
    """Whether `signal` knows its generation within `timeout_s` (a listener starts in a thread)."""
    deadline = time.monotonic() + timeout_s
    while signal.generation() is None:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True
