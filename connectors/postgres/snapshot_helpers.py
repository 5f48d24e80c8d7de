"""Helper processes that read and publish shares of a snapshot, for `snapshot_processes` > 1.

The connector's records go through one interpreter, whose lock keeps a snapshot under one core
(about 18 µs of CPU a row: converting, validating, encoding, producing). A table's pages are
split into `snapshot_processes` ranges (`snapshot.page_ranges`); the connector reads the last
range of each table itself, and each helper, a process of its own, one of the others. A helper
adopts the connector's exported snapshot, wires its own publish path from the connector
process's settings (`PublishSettings`: the registry and Kafka as the worker wired them) and
publishes its rows as the connector would, with the same validation, dead-lettering and
retries.

Helpers publish only while the connector is resumed: a paused connector pauses them before
their next batch, and a helper whose connector process is gone stops there. They commit no
position. They report each published batch (counted in the connector's task status and
metrics), their log records (handled by the connector process's logging) and how they ended,
on one queue. The connector commits `snapshot_done` only after every helper reported its whole
share, and publishes the snapshot's last event (`snapshot: last`) after them. A failed or
killed helper fails the snapshot, which is taken again from the start, as an interrupted
one-process snapshot is (overlap, never a gap).
"""

import logging
import logging.handlers
import multiprocessing
import os
import queue
import threading
import time
from dataclasses import dataclass
from typing import Any

from connectors.postgres.catalog import Catalog, connect
from connectors.postgres.changes import CapturedTable
from connectors.postgres.envelope import Origin, source_block
from connectors.postgres.errors import CONNECTION_ERRORS, CdcSourceUnavailable, connection_failure
from connectors.postgres.snapshot import PageRange, begin_snapshot, read_table, snapshot_records
from connectors.runtime import Batch, FeedSink, SourceContext
from connectors.settings import PublishSettings
from hub_core.errors import ErrorCode, HubError, TerminalError, TransientError

log = logging.getLogger(__name__)

_SPAWN = multiprocessing.get_context("spawn")  # no fork: the parent runs librdkafka threads


@dataclass(frozen=True)
class Share:
    """One table's pages that one helper reads, and where its rows go."""

    qualified: str
    topic: str
    schema_text: str
    pages: PageRange


@dataclass(frozen=True)
class HelperJob:
    """Everything a helper process needs, sent to it once (pickled; never on a command line)."""

    number: int
    connector: str
    dsn: str
    snapshot: str  # `pg_export_snapshot()` of the connector's snapshot transaction
    origin: Origin
    commit_ms: int
    lsn: int
    batch_rows: int
    partition: dict[str, Any]
    shares: tuple[Share, ...]
    publishing: PublishSettings
    log_level: int  # the connector process's
    parent: int  # the connector process's id


class _Reports(logging.handlers.QueueHandler):
    """A helper's log records, tagged, on the queue its reports go to."""

    def enqueue(self, record: logging.LogRecord) -> None:
        self.queue.put_nowait(("log", record))


def allowed_processes(requested: int, publishing: PublishSettings | None) -> int:
    """How many processes a snapshot uses: `requested` (the connector file's
    `snapshot_processes`), cut to the worker's `max_snapshot_processes`; 1 where the runtime
    cannot wire helper processes."""
    if requested == 1:
        return 1
    if publishing is None:
        log.warning("snapshot_processes is %d, but this runtime cannot start helper "
                    "processes; the snapshot is read by one", requested)  # fmt: skip
        return 1
    most = publishing.connect.max_snapshot_processes
    if requested > most:
        log.warning("snapshot_processes is %d; this worker allows at most %d "
                    "(HUB_CONNECT_MAX_SNAPSHOT_PROCESSES)", requested, most)  # fmt: skip
        return most
    return requested


def run_helper(job: HelperJob, reports: Any, resumed: Any) -> None:
    """A helper process's body: publish every share of `job` while `resumed` is set, then say
    how it ended."""
    root = logging.getLogger()
    root.handlers[:] = [_Reports(reports)]
    root.setLevel(job.log_level)
    try:
        published = _publish_shares(job, reports, resumed)
    except BaseException as exc:
        log.debug("snapshot helper %d failed", job.number, exc_info=True)
        retryable = isinstance(exc, HubError) and exc.retryable
        code = int(exc.code) if isinstance(exc, HubError) else None
        reports.put(("failed", job.number, retryable, code, f"{type(exc).__name__}: {exc}"))
        return
    reports.put(("done", job.number, published))


def _publish_shares(job: HelperJob, reports: Any, resumed: Any) -> int:
    # Imported here: the connector process has these loaded already; a helper loads them once.
    from connectors.worker import settle_garbage_collector
    from publish.services import publish_services

    settings = job.publishing
    services = publish_services(settings.registry, settings.kafka)
    settle_garbage_collector(settings.connect)
    sink = FeedSink(
        job.connector,
        feeds=services.feeds,
        registry=services.registry,
        publisher=services.publisher,
        offsets=None,
        settings=settings.connect,
    )
    never = threading.Event()
    published = 0
    try:
        with connect(job.dsn) as conn:
            begin_snapshot(conn, job.snapshot)
            catalog = Catalog(conn)
            for share in job.shares:
                first, end = share.pages
                if end is not None and end <= first:
                    continue  # a table of fewer pages than processes: the connector reads it
                shape = catalog.table(share.qualified)
                if CapturedTable(topic=share.topic, shape=shape).schema_text != share.schema_text:
                    raise TerminalError(
                        f"snapshot helper {job.number} sees table {share.qualified} with "
                        "another shape than the connector does",
                        code=ErrorCode.CDC_SETUP_FAILED,
                    )
                source = source_block(
                    job.origin, shape, commit_ms=job.commit_ms, snapshot="true", tx_id=None,
                    lsn=job.lsn,
                )  # fmt: skip
                for rows in read_table(conn, shape, batch_rows=job.batch_rows, pages=share.pages):
                    records = snapshot_records(shape, rows, source)
                    batch = Batch(
                        topic=share.topic,
                        partition=job.partition,
                        offset={},
                        records=records,
                        value_schema=share.schema_text,
                    )
                    _wait_for_connector(resumed, job.parent)
                    dead_lettered = sink.publish(batch, stop=never)
                    published += len(records)
                    reports.put(("batch", job.number, share.topic, len(records), dead_lettered))
                log.info("snapshot helper %d: %s pages %s read", job.number, share.qualified,
                         _pages_text(share.pages))  # fmt: skip
            conn.execute("COMMIT")
    except CONNECTION_ERRORS as exc:
        raise connection_failure(exc, "PostgreSQL connection lost") from exc
    finally:
        services.close()
    return published


def _wait_for_connector(resumed: Any, parent: int) -> None:
    """Return once the connector is resumed; raise if its process is gone (killed: the next
    run takes the snapshot again, so this share's rows are not needed)."""
    while True:
        if os.getppid() != parent:
            raise CdcSourceUnavailable("the connector process ended; its snapshot is abandoned")
        if resumed.wait(0.5):
            return


def _pages_text(pages: PageRange) -> str:
    first, end = pages
    return f"{first}-{end - 1}" if end is not None else f"{first} to the end"


class SnapshotHelpers:
    """The helper processes of one snapshot: started together, watched, stopped together."""

    def __init__(self, jobs: list[HelperJob], context: SourceContext) -> None:
        self._reports: Any = _SPAWN.Queue()
        self._resumed: Any = _SPAWN.Event()
        self._processes = [
            _SPAWN.Process(
                target=run_helper,
                args=(job, self._reports, self._resumed),
                name=f"{job.connector}-snapshot-{job.number}",
                daemon=True,
            )
            for job in jobs
        ]
        self._done: set[int] = set()
        for process in self._processes:
            process.start()
        log.info("snapshot: %d helper process(es) started", len(self._processes))
        # The connector's pause, told to the helpers by a thread: the connector's own reading
        # may be waiting in a paused `emit`.
        self._closed = threading.Event()
        self._pauses = threading.Thread(
            target=self._follow_pauses, args=(context,), name="snapshot-pauses", daemon=True
        )
        self._pauses.start()

    def _follow_pauses(self, context: SourceContext) -> None:
        while True:
            if context.paused:
                self._resumed.clear()
            else:
                self._resumed.set()
            if self._closed.wait(0.2):
                return

    def collect(self, context: SourceContext) -> None:
        """Take in what the helpers reported; raise the first failure among them."""
        while True:
            try:
                report = self._reports.get_nowait()
            except queue.Empty:
                break
            self._take(report, context)
        for number, process in enumerate(self._processes, start=1):
            if number not in self._done and process.exitcode is not None:
                self._drain_after_exit(context)
                if number not in self._done:
                    raise CdcSourceUnavailable(
                        f"snapshot helper {number} ended (exit code {process.exitcode}) before "
                        "its share was published; the snapshot is taken again"
                    )

    def wait(self, context: SourceContext) -> None:
        """Until every helper published its share; `context.sleep` raises on stop."""
        while len(self._done) < len(self._processes):
            self.collect(context)
            if len(self._done) < len(self._processes):
                context.sleep(0.1)

    def close(self) -> None:
        """Stop helpers that are still running (after a failure or a stop); wait for them."""
        self._closed.set()
        self._pauses.join()
        for process in self._processes:
            if process.is_alive():
                process.terminate()
        for process in self._processes:
            process.join(timeout=10)
        self._reports.close()
        self._reports.cancel_join_thread()

    def _drain_after_exit(self, context: SourceContext) -> None:
        # A helper's last reports may still be in the queue's pipe when its exit is seen.
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            try:
                report = self._reports.get(timeout=0.1)
            except queue.Empty:
                return
            self._take(report, context)

    def _take(self, report: tuple[Any, ...], context: SourceContext) -> None:
        kind = report[0]
        if kind == "log":
            record: logging.LogRecord = report[1]
            logging.getLogger(record.name).handle(record)
        elif kind == "batch":
            _, _, topic, records, dead_lettered = report
            context.published_elsewhere(
                topic, records=records - dead_lettered, dead_lettered=dead_lettered
            )
        elif kind == "done":
            _, number, published = report
            self._done.add(number)
            log.info("snapshot helper %d published %d row(s)", number, published)
        elif kind == "failed":
            _, number, retryable, code, message = report
            self._done.add(number)
            error_code = ErrorCode(code) if code is not None else None
            if retryable:
                raise TransientError(f"snapshot helper {number}: {message}", code=error_code)
            raise TerminalError(f"snapshot helper {number}: {message}", code=error_code)
