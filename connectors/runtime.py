"""What every source plugs into: batches with positions, the sink that publishes them, tasks.

A source reads its system and hands the runtime `Batch`es: records for one topic and the source
position they reach. The sink publishes a batch through the hub's one publish path (`Publisher`,
invalid records to `<topic>.dlq`) and commits the position only after Kafka acknowledged every
record, so a crash replays a batch at worst and never skips one.
"""

import json
import logging
import threading
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from connectors.control import State
from connectors.errors import Stopped
from connectors.offsets import OffsetStore, SourceOffset, SourcePartition, StoredOffset
from connectors.settings import ConnectSettings
from hub_core.errors import ErrorCode, HubError, TerminalError
from hub_core.naming import topic_name, value_subject
from hub_kafka.errors import KafkaUnavailable
from publish.feeds import FeedService, FeedSpec
from publish.publisher import IncomingRecord, OnError, Publisher, Unparsed
from registry.service import RegistryService
from registry.types import Subject

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Batch:
    """Records for one topic, and the position of `partition` once they are all in Kafka."""

    topic: str
    partition: SourcePartition
    offset: SourceOffset
    records: Sequence[IncomingRecord] = ()
    rejected: Sequence[Unparsed] = ()  # dead-lettered by `Publisher`, with the partition
    # A schema the records follow (registered if new, e.g. after ALTER TABLE); default: latest.
    value_schema: str | None = None


class SourceContext:
    """What a running source may use: its stored positions, `emit`, and a pausable `sleep`."""

    def __init__(
        self,
        name: str,
        *,
        offsets: list[StoredOffset],
        emit: Callable[[Batch], None],
        stop: threading.Event,
        resumed: threading.Event,
        metrics: dict[str, Any] | None = None,
    ) -> None:
        self.name = name
        self.stored = offsets
        # Figures the source reports in its task's status (e.g. a CDC slot's lag in bytes).
        self.metrics: dict[str, Any] = metrics if metrics is not None else {}
        self._emit = emit
        self._stop = stop
        self._resumed = resumed
        self.log = logging.getLogger(f"connectors.{name}")

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def offset(self, partition: SourcePartition) -> dict[str, Any] | None:
        """The stored position of `partition`, or None when it was never committed."""
        wanted = json.dumps(dict(partition), sort_keys=True)
        for stored in self.stored:
            if json.dumps(stored.partition, sort_keys=True) == wanted:
                return stored.offset
        return None

    def emit(self, batch: Batch) -> None:
        """Publish `batch` and commit its position; waits while paused, raises `Stopped`."""
        self._wait_resumed()
        self._emit(batch)
        self.stored = [s for s in self.stored if s.partition != dict(batch.partition)]
        self.stored.append(StoredOffset(partition=dict(batch.partition), offset=dict(batch.offset)))

    def sleep(self, seconds: float) -> None:
        """Wait between polls; returns early on stop (raising `Stopped`), waits while paused."""
        if self._stop.wait(seconds):
            raise Stopped()
        self._wait_resumed()

    def _wait_resumed(self) -> None:
        while not self._resumed.wait(0.5):
            if self._stop.is_set():
                raise Stopped()
        if self._stop.is_set():
            raise Stopped()


class Source(Protocol):
    """A source of records: the feeds it writes to, and a loop that emits batches."""

    def feeds(self) -> Sequence[FeedSpec]:
        """The feeds this source writes to, with their schemas (created when missing)."""
        ...

    def run(self, context: SourceContext) -> None:
        """Read and `context.emit` batches until `context.stopped` (or the source is done)."""
        ...


class FeedSink:
    """Publishes batches of one connector through `Publisher`, then commits their positions."""

    def __init__(
        self,
        connector: str,
        *,
        feeds: FeedService,
        registry: RegistryService,
        publisher: Publisher,
        offsets: OffsetStore,
        settings: ConnectSettings,
    ) -> None:
        self._connector = connector
        self._feeds = feeds
        self._registry = registry
        self._publisher = publisher
        self._offsets = offsets
        self._settings = settings

    def prepare(self, specs: Sequence[FeedSpec]) -> None:
        """Create missing feeds; register the current schema of existing ones (if compatible)."""
        for spec in specs:
            existing = self._feeds.find(spec.topic)
            if existing is None:
                self._feeds.create(spec)
                continue
            if existing.owner != spec.owner:
                raise TerminalError(
                    f"Feed '{spec.topic}' belongs to team '{existing.owner}', not to the "
                    f"connector's owner '{spec.owner}'. Change `owner` or the topic."
                )
            self._registry.register(
                subject=Subject(value_subject(topic_name(spec.topic))),
                schema_text=spec.value_schema,
            )

    def write(self, batch: Batch, *, stop: threading.Event) -> None:
        """Publish the batch (retrying what Kafka did not acknowledge), then commit its offset."""
        attempt = 0
        while True:
            failures = self._publish(batch)
            if not failures:
                break
            retriable = all(code is ErrorCode.KAFKA_UNAVAILABLE for code, _ in failures)
            if not retriable or attempt >= self._settings.publish_retries:
                code, message = failures[0]
                error: HubError = (
                    KafkaUnavailable(message) if retriable else TerminalError(message, code=code)
                )
                raise error
            backoff = self._settings.retry_backoff_seconds * 2**attempt
            attempt += 1
            log.warning(
                "%s: %d record(s) to %s not acknowledged (%s); retry %d in %.0fs",
                self._connector, len(failures), batch.topic, failures[0][1], attempt, backoff,
            )  # fmt: skip
            if stop.wait(backoff):
                raise Stopped()
        self._offsets.commit(self._connector, batch.partition, batch.offset)

    def _publish(self, batch: Batch) -> list[tuple[ErrorCode, str]]:
        failures: list[tuple[ErrorCode, str]] = []
        if batch.records:
            feed = self._feeds.current(batch.topic)
            version = None
            if batch.value_schema is not None:
                subject = Subject(value_subject(topic_name(batch.topic)))
                version = self._registry.register(
                    subject=subject, schema_text=batch.value_schema
                ).version
            outcome = self._publisher.publish(
                feed, batch.records, schema_version=version, on_error=OnError.DLQ
            )
            failures += [
                (r.error_code, r.message or "")
                for r in outcome.results
                if r.error_code is not None and not r.dead_lettered
            ]
        if batch.rejected:
            feed = self._feeds.current(batch.topic)
            source = dict(batch.partition)
            unparsed = [replace(r, source=source) for r in batch.rejected]
            failures += [
                (r.error_code, r.message or "")
                for r in self._publisher.dead_letter(feed, unparsed)
                if not r.dead_lettered and r.error_code is not None
            ]
        return failures


@dataclass
class TaskStatus:
    state: State = State.UNASSIGNED
    trace: str | None = None
    records: int = 0
    batches: int = 0
    metrics: dict[str, Any] = field(default_factory=dict)


class Task:
    """Runs one source in a thread; pausable, restartable, reporting its state on every change."""

    def __init__(
        self,
        name: str,
        *,
        build: Callable[[], Source],
        sink: FeedSink,
        offsets: OffsetStore,
        on_change: Callable[["Task"], None],
        redact: Callable[[str], str],
    ) -> None:
        self.name = name
        self._build = build
        self._sink = sink
        self._offsets = offsets
        self._on_change = on_change
        self._redact = redact
        self.status = TaskStatus()
        self._stop = threading.Event()
        self._resumed = threading.Event()
        self._resumed.set()
        self._thread: threading.Thread | None = None

    def start(self, *, paused: bool = False) -> None:
        self._stop = threading.Event()
        if paused:
            self._resumed.clear()
        self.status = TaskStatus()
        self._thread = threading.Thread(target=self._run, name=f"connector-{self.name}")
        self._thread.start()

    def pause(self) -> None:
        self._resumed.clear()
        if self.status.state is State.RUNNING:
            self._set(State.PAUSED)
            log.info("%s: paused", self.name)

    def resume(self) -> None:
        self._resumed.set()
        if self.status.state is State.PAUSED:
            self._set(State.RUNNING)
            log.info("%s: resumed", self.name)

    def restart(self) -> None:
        """Stop the source and start a fresh one from the stored position."""
        log.info("%s: restarting", self.name)
        self.stop()
        self.start(paused=not self._resumed.is_set())

    def stop(self, timeout_s: float = 30.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                log.warning("%s: the source did not stop within %.0fs", self.name, timeout_s)
            else:
                log.info("%s: stopped after %d record(s) in %d batch(es)", self.name,
                         self.status.records, self.status.batches)  # fmt: skip

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _run(self) -> None:
        try:
            source = self._build()
            self._sink.prepare(source.feeds())
            stored = self._offsets.load(self.name)
            log.info("%s: starting from %d stored position(s)", self.name, len(stored))
            self._set(State.RUNNING if self._resumed.is_set() else State.PAUSED)
            context = SourceContext(
                self.name,
                offsets=stored,
                emit=self._emit,
                stop=self._stop,
                resumed=self._resumed,
                metrics=self.status.metrics,
            )
            source.run(context)
            if not self._stop.is_set():
                log.info("%s: the source has finished", self.name)
                self._set(State.STOPPED, trace="the source finished")
        except Stopped:
            pass
        except Exception as exc:
            trace = self._redact("".join(traceback.format_exception(exc)))
            log.error("%s: failed: %s", self.name, self._redact(str(exc)))
            self._set(State.FAILED, trace=trace)

    def _emit(self, batch: Batch) -> None:
        self._sink.write(batch, stop=self._stop)
        self.status.records += len(batch.records) + len(batch.rejected)
        self.status.batches += 1
        if batch.records or batch.rejected:
            log.info(
                "%s: %d record(s) to %s%s, position %s",
                self.name, len(batch.records), batch.topic,
                f" and {len(batch.rejected)} to its DLQ" if batch.rejected else "",
                self._redact(json.dumps(dict(batch.offset), default=str)),
            )  # fmt: skip

    def _set(self, state: State, *, trace: str | None = None) -> None:
        self.status.state = state
        self.status.trace = trace
        self._on_change(self)
