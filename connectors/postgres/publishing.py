"""Publishing on a thread of its own, so that reading the next changes overlaps Kafka.

`SourceContext.emit` returns once Kafka acknowledged every record of a batch and its position
is committed: two round trips to the broker during which the connector would otherwise read
nothing. `BatchPublisher` emits batches in the order they were submitted, on one thread, while
the connector goes on reading and decoding; at most `depth` batches wait, so memory stays
bounded and a slow Kafka slows the reading down. The connector learns which position Kafka
holds from `committed` and confirms it to the server only then, so a crash still replays and
never skips.
"""

import logging
import threading
from collections import deque
from collections.abc import Mapping
from typing import Any, Protocol

from connectors.postgres.changes import Pending
from connectors.runtime import Batch

log = logging.getLogger(__name__)


class Emitter(Protocol):
    """What publishes a batch and commits its position: the task's `SourceContext`, or a
    stream helper's own publish path."""

    def emit(self, batch: Batch) -> None: ...


class BatchPublisher:
    """Emits submitted batches in order on one thread; see the module docstring."""

    def __init__(self, context: Emitter, *, name: str, depth: int = 2) -> None:
        self._context = context
        self._depth = depth
        self._waiting: deque[Batch] = deque()
        self._busy = False  # a batch is being emitted
        self._closed = False
        self._error: BaseException | None = None
        self._committed: Mapping[str, Any] | None = None
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._run, name=f"{name}-publish", daemon=True)
        self._thread.start()

    @property
    def committed(self) -> Mapping[str, Any] | None:
        """The position of the last batch Kafka holds and the offset store committed."""
        self.check()
        return self._committed

    def submit(self, batch: Batch) -> None:
        """Queue `batch` to be emitted after those before it; waits while `depth` are waiting."""
        with self._changed:
            while len(self._waiting) >= self._depth and self._error is None:
                self._changed.wait(0.5)
            self.check()
            self._waiting.append(batch)
            self._changed.notify_all()

    def submit_pending(
        self,
        pending: Pending,
        *,
        partition: dict[str, Any],
        position: Mapping[str, Any],
        previous: Mapping[str, Any],
        any_topic: str,
    ) -> None:
        """Submit the buffered events, one batch per (topic, schema), and clear `pending`.

        Only the last batch carries `position` (the one reached); the others carry `previous`
        (the last submitted), so a crash between batches never stores a position whose earlier
        events are not all in Kafka. With nothing buffered, an empty batch to `any_topic` moves
        the position on.
        """
        batches = list(pending.batches.items())
        pending.clear()
        if not batches:
            self.submit(Batch(topic=any_topic, partition=partition, offset=dict(position)))
        for index, ((topic, schema_text), records) in enumerate(batches):
            offset = position if index == len(batches) - 1 else previous
            self.submit(
                Batch(
                    topic=topic,
                    partition=partition,
                    offset=dict(offset),
                    records=records,
                    value_schema=schema_text,
                )
            )

    def drain(self) -> None:
        """Wait until every submitted batch is emitted (or raise why one could not be)."""
        with self._changed:
            while (self._waiting or self._busy) and self._error is None:
                self._changed.wait(0.5)
            self.check()

    def check(self) -> None:
        """Raise the failure that stopped the publishing thread, if any, on the caller's."""
        if self._error is not None:
            raise self._error

    def close(self) -> None:
        """Stop the thread; batches still waiting are dropped (their positions were never
        committed, so the next run reads them again). Waits for the batch being emitted, so
        that the publisher of a rebuilt source never emits beside this one."""
        with self._changed:
            self._closed = True
            self._waiting.clear()
            self._changed.notify_all()
        self._thread.join()

    def _run(self) -> None:
        while True:
            with self._changed:
                while not self._waiting and not self._closed:
                    self._changed.wait()
                if self._closed:
                    return
                batch = self._waiting.popleft()
                self._busy = True
                self._changed.notify_all()
            try:
                self._context.emit(batch)
            except BaseException as exc:  # Stopped, or a failure the task must see
                with self._changed:
                    self._error = exc
                    self._busy = False
                    self._changed.notify_all()
                return
            with self._changed:
                self._committed = batch.offset
                self._busy = False
                self._changed.notify_all()
