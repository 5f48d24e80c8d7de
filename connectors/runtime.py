"""What every source plugs into: batches with positions, the sink that publishes them, tasks.

A source reads its system and hands the runtime `Batch`es: records for one topic and the source
position they reach. The sink publishes a batch through the hub's one publish path (`Publisher`,
invalid records to `<topic>.dlq`) and commits the position only after Kafka acknowledged every
record, so a crash replays a batch at worst and never skips one.

Failures are handled by their kind (ADR 0019). A batch Kafka did not take is published again
with backoff; a transient failure that remains (the source's database or Kafka unavailable) makes
the task build its source again and resume from the stored position, with backoff, while it
stays RUNNING and its status says it is retrying. A terminal failure, or transient ones lasting
longer than `retry_limit_seconds` without progress, leave it FAILED.
"""

import datetime as dt
import json
import logging
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from connectors.control import State
from connectors.errors import Stopped
from connectors.metrics import ConnectorMetrics, SourceLag
from connectors.offsets import OffsetStore, SourceOffset, SourcePartition, StoredOffset
from connectors.settings import ConnectSettings, PublishSettings
from hub_core.errors import ErrorCode, HubError, TerminalError
from hub_core.naming import topic_name, value_subject
from hub_core.retries import Backoff, RetryNotice, is_transient, retry_transient_interruptibly
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
        lag: SourceLag | None = None,
        on_progress: Callable[[], None] | None = None,
        publishing: PublishSettings | None = None,
        count: Callable[[str, int, int], None] | None = None,
    ) -> None:
        self.name = name
        # How a helper process of this source wires its own publish path (None: it cannot).
        self.publishing = publishing
        self._count = count
        self.stored = offsets
        # Figures the source reports in its task's status (e.g. a CDC slot's lag in bytes).
        self.metrics: dict[str, Any] = metrics if metrics is not None else {}
        # Where the source sets its lag for `/metrics`, as often as it looks at its system.
        self.lag = lag if lag is not None else ConnectorMetrics().source(name)
        self._emit = emit
        self._stop = stop
        self._resumed = resumed
        # Told when the source shows it works: a batch is in Kafka, or it is idle between reads.
        self._on_progress = on_progress
        self.log = logging.getLogger(f"connectors.{name}")

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    @property
    def paused(self) -> bool:
        return not self._resumed.is_set()

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
        self._progress()

    def published_elsewhere(self, topic: str, *, records: int, dead_lettered: int) -> None:
        """Count a batch a helper process published itself (its position is not committed)."""
        if self._count is not None:
            self._count(topic, records, dead_lettered)
        self._progress()

    def sleep(self, seconds: float) -> None:
        """Wait between polls; returns early on stop (raising `Stopped`), waits while paused."""
        self._progress()
        if self._stop.wait(seconds):
            raise Stopped()
        self._wait_resumed()

    def _progress(self) -> None:
        if self._on_progress is not None:
            self._on_progress()

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
        offsets: OffsetStore | None,
        settings: ConnectSettings,
        metrics: ConnectorMetrics | None = None,
        publishing: PublishSettings | None = None,
    ) -> None:
        """`offsets` is None for a sink that only publishes (a snapshot helper process's);
        `publishing` is how this sink's services were built, for a source's helper processes."""
        self._connector = connector
        self.publishing = publishing
        self._metrics = metrics if metrics is not None else ConnectorMetrics()
        self._feeds = feeds
        self._registry = registry
        self._publisher = publisher
        self._offsets = offsets
        # A batch Kafka did not take is published again `publish_retries` times, then the task
        # takes over (it rebuilds the source, within `retry_limit_seconds`).
        self._backoff = Backoff(
            initial_s=settings.retry_backoff_seconds,
            max_s=settings.retry_backoff_max_seconds,
            attempts=settings.publish_retries + 1,
            timeout_s=settings.retry_limit_seconds,
        )

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
                    f"connector's owner '{spec.owner}'. Change `owner` or the topic.",
                    code=ErrorCode.INVALID_CONNECTOR_CONFIG,
                )
            self._registry.register(
                subject=Subject(value_subject(topic_name(spec.topic))),
                schema_text=spec.value_schema,
            )

    def write(
        self,
        batch: Batch,
        *,
        stop: threading.Event,
        on_retry: Callable[[RetryNotice], None] | None = None,
    ) -> None:
        """Publish the batch, then commit its offset; what Kafka did not take is retried with
        backoff (`publish_retries` times), then raised as `KafkaUnavailable` for the task."""
        self.publish(batch, stop=stop, on_retry=on_retry)
        offsets = self._offsets
        assert offsets is not None, "a sink without an offset store only publishes"
        retry_transient_interruptibly(
            lambda: offsets.commit(self._connector, batch.partition, batch.offset),
            backoff=self._backoff,
            sleep=_stoppable(stop),
            on_retry=on_retry,
        )

    def publish(
        self,
        batch: Batch,
        *,
        stop: threading.Event,
        on_retry: Callable[[RetryNotice], None] | None = None,
    ) -> int:
        """Publish the batch's records, retrying what Kafka did not take; commit nothing.
        Returns how many records went to the DLQ (the batch's `rejected` not included)."""
        return retry_transient_interruptibly(
            lambda: self._publish_all(batch),
            backoff=self._backoff,
            sleep=_stoppable(stop),
            on_retry=on_retry,
        )

    def count(self, topic: str, *, records: int, dead_lettered: int) -> None:
        """Count records another process published for this connector."""
        self._metrics.published(
            self._connector, topic, records=records, dead_lettered=dead_lettered
        )

    def _publish_all(self, batch: Batch) -> int:
        """Publish every record; raise `KafkaUnavailable` (transient) when Kafka did not take
        some, or a terminal error with the code of the first record that failed otherwise.
        Returns how many of the batch's records went to the DLQ."""
        failures, dead_lettered = self._publish(batch)
        if not failures:
            self._metrics.published(
                self._connector,
                batch.topic,
                records=len(batch.records) - dead_lettered,
                dead_lettered=dead_lettered + len(batch.rejected),
            )
            return dead_lettered
        code, message = failures[0]
        if all(c is ErrorCode.KAFKA_UNAVAILABLE for c, _ in failures):
            raise KafkaUnavailable(
                f"{len(failures)} record(s) to {batch.topic} not acknowledged: {message}"
            )
        raise TerminalError(message, code=code)

    def _publish(self, batch: Batch) -> tuple[list[tuple[ErrorCode, str]], int]:
        """The records that failed, (code, message), and how many records `Publisher` put in
        the DLQ (the batch's `rejected` not included)."""
        failures: list[tuple[ErrorCode, str]] = []
        dead_lettered = 0
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
            # One pass over every result; only the few that failed are looked at again.
            failed = [r for r in outcome.results if r.error_code is not None]
            dead_lettered = sum(r.dead_lettered for r in failed)
            failures += [
                (r.error_code, r.message or "")
                for r in failed
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
        return failures, dead_lettered


def _stoppable(stop: threading.Event) -> Callable[[float], None]:
    """A backoff wait that ends at once, raising `Stopped`, when `stop` is set."""

    def wait(seconds: float) -> None:
        if stop.wait(seconds):
            raise Stopped()

    return wait


@dataclass
class TaskStatus:
    state: State = State.UNASSIGNED
    trace: str | None = None
    error_code: int | None = None  # the hub's code of the failure (FAILED), when it has one
    records: int = 0
    batches: int = 0
    metrics: dict[str, Any] = field(default_factory=dict)
    # While the task retries a transient failure: attempts, since, next wait, last error.
    retry: dict[str, Any] | None = None


def task_backoff(settings: ConnectSettings) -> Backoff:
    """How a task retries its source: jittered exponential waits, for `retry_limit_seconds`."""
    return Backoff(
        initial_s=settings.retry_backoff_seconds,
        max_s=settings.retry_backoff_max_seconds,
        attempts=None,
        timeout_s=settings.retry_limit_seconds,
    )


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
        backoff: Backoff,
        metrics: ConnectorMetrics | None = None,
    ) -> None:
        self.name = name
        self._metrics = metrics if metrics is not None else ConnectorMetrics()
        # Shared by every source the task builds: a rebuilt one drops the figures of files it
        # no longer follows.
        self._lag = self._metrics.source(name)
        self._build = build
        self._sink = sink
        self._offsets = offsets
        self._on_change = on_change
        self._redact = redact
        self._backoff = backoff
        self.status = TaskStatus()
        self._stop = threading.Event()
        self._resumed = threading.Event()
        self._resumed.set()
        self._thread: threading.Thread | None = None
        self._progressed = False  # by the source built last
        self._failures = 0  # transient failures since the source last made progress
        self._failing_since = 0.0  # time.monotonic() of the first of them
        self._failing_since_text = ""  # the same moment in UTC, for the status

    def start(self, *, paused: bool = False) -> None:
        self._stop = threading.Event()
        if paused:
            self._resumed.clear()
        self.status = TaskStatus()
        self._failures = 0
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
            self._supervise()
        except Stopped:
            pass
        except Exception as exc:
            self._fail(exc)

    def _supervise(self) -> None:
        """Run the source; after a transient failure, build it again from the stored position.

        One run of retries lasts until the source makes progress (a batch in Kafka, or idle
        between reads) and is bounded by the backoff's time limit; a transient failure after
        progress starts a new run, at once, with its own bound.
        """
        while True:
            try:
                retry_transient_interruptibly(
                    self._attempt,
                    backoff=self._backoff,
                    sleep=self._wait,
                    on_retry=self._retrying,
                    also=lambda _: not self._progressed,
                )
                return
            except Exception as exc:
                if not (is_transient(exc) and self._progressed):
                    raise
                if self._stop.is_set():
                    raise Stopped() from exc
                self._retrying(RetryNotice(attempt=1, wait_s=0.0, elapsed_s=0.0, error=exc))

    def _attempt(self) -> None:
        """Build the source, prepare its feeds and run it from the stored positions."""
        self._progressed = False
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
            lag=self._lag,
            on_progress=self._progress,
            publishing=self._sink.publishing,
            count=self._count_elsewhere,
        )
        source.run(context)
        if not self._stop.is_set():
            log.info("%s: the source has finished", self.name)
            self.status.retry = None
            self._set(State.STOPPED, trace="the source finished")

    def _emit(self, batch: Batch) -> None:
        self._sink.write(batch, stop=self._stop, on_retry=self._retrying)
        self.status.records += len(batch.records) + len(batch.rejected)
        self.status.batches += 1
        if batch.records or batch.rejected:
            log.info(
                "%s: %d record(s) to %s%s, position %s",
                self.name, len(batch.records), batch.topic,
                f" and {len(batch.rejected)} to its DLQ" if batch.rejected else "",
                self._redact(json.dumps(dict(batch.offset), default=str)),
            )  # fmt: skip

    def _count_elsewhere(self, topic: str, records: int, dead_lettered: int) -> None:
        self._sink.count(topic, records=records, dead_lettered=dead_lettered)
        self.status.records += records + dead_lettered
        self.status.batches += 1

    def _wait(self, seconds: float) -> None:
        """A backoff wait that ends at once, raising `Stopped`, when the task is stopped."""
        if self._stop.wait(seconds):
            raise Stopped()

    def _retrying(self, notice: RetryNotice) -> None:
        """Show a transient failure about to be retried: the state stays, the status says so."""
        if self._failures == 0:
            self._failing_since = time.monotonic()
            self._failing_since_text = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        self._failures += 1
        self._metrics.failed(self.name, notice.error)
        error = self._describe(notice.error)
        limit_s = self._backoff.timeout_s
        self.status.retry = {
            "attempts": self._failures,
            "since": self._failing_since_text,
            "next_in_seconds": round(notice.wait_s, 1),
            "last_error": error,
            "last_error_code": int(notice.error.code)
            if isinstance(notice.error, HubError)
            else None,
            "gives_up_after_seconds": limit_s,
        }
        log.warning("%s: transient failure %d, retrying in %.1fs: %s", self.name,
                    self._failures, notice.wait_s, error)  # fmt: skip
        state = self.status.state
        if state not in (State.RUNNING, State.PAUSED):
            state = State.RUNNING if self._resumed.is_set() else State.PAUSED
        self._set(
            state,
            trace=f"retrying after {self._failures} transient failure(s), next attempt in "
            f"{notice.wait_s:.1f}s; FAILED if this lasts {limit_s:.0f}s without progress. "
            f"Last error: {error}",
        )

    def _progress(self) -> None:
        """The source works again: end the current run of retries."""
        self._progressed = True
        if self.status.retry is not None:
            log.info("%s: recovered after %d transient failure(s)", self.name, self._failures)
            self._failures = 0
            self.status.retry = None
            self._set(self.status.state)

    def _fail(self, exc: Exception) -> None:
        trace = self._redact("".join(traceback.format_exception(exc)))
        if is_transient(exc) and self._failures:
            waited = time.monotonic() - self._failing_since
            trace = (
                f"gave up after {self._failures + 1} transient failure(s) in {waited:.0f}s "
                "without progress (HUB_CONNECT_RETRY_LIMIT_SECONDS); restart the connector "
                f"once the cause is fixed.\n{trace}"
            )
        log.error("%s: failed: %s", self.name, self._describe(exc))
        self._metrics.failed(self.name, exc)
        self.status.retry = None
        self.status.error_code = int(exc.code) if isinstance(exc, HubError) else None
        self._set(State.FAILED, trace=trace)

    def _describe(self, error: BaseException) -> str:
        """`<type> (<code>): <message>`, with the connector's secrets masked."""
        code = f" ({int(error.code)})" if isinstance(error, HubError) else ""
        return self._redact(f"{type(error).__name__}{code}: {error}")

    def _set(self, state: State, *, trace: str | None = None) -> None:
        """Record and report a state; while retrying, the trace keeps saying why."""
        self.status.state = state
        self._metrics.state(self.name, state)
        if trace is not None or self.status.retry is None:
            self.status.trace = trace
        self._on_change(self)
