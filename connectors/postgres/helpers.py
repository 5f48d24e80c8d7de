"""Helper processes of one connector: started together, watched, stopped together.

A connector's records go through one interpreter, whose lock keeps it under one core. A
snapshot (`snapshot_processes`) and a stream (`stream_processes`) can hand shares of their work
to helper processes, each with its own publish path wired from the connector process's settings
(`PublishSettings`). What the helpers share lives here:

- they run only while the connector is resumed: a shared event mirrors its pause;
- they stop when the connector's process is gone (`wait_for_connector`);
- they report on one queue: their log records (handled by the connector process's logging,
  with its redaction of secrets), each published batch (counted in the connector's task status
  and metrics), anything of the helper's own kind, and how they ended. A failure becomes the
  same kind of error in the connector (transient or terminal, with its code); a helper that
  ends without a report is a transient failure.
"""

import logging
import logging.handlers
import multiprocessing
import os
import queue
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from connectors.garbage_collection import settle_garbage_collector
from connectors.postgres.errors import CdcSourceUnavailable
from connectors.runtime import FeedSink, SourceContext
from connectors.settings import PublishSettings
from hub_core.errors import ErrorCode, HubError, TerminalError, TransientError

log = logging.getLogger(__name__)

SPAWN = multiprocessing.get_context("spawn")  # no fork: the parent runs librdkafka threads


class _Reports(logging.handlers.QueueHandler):
    """A helper's log records, tagged, on the queue its reports go to."""

    def enqueue(self, record: logging.LogRecord) -> None:
        self.queue.put_nowait(("log", record))


def allowed_processes(requested: int, most: int | None, *, setting: str, limit: str) -> int:
    """How many processes a connector uses for one kind of work: `requested` (its file's
    `setting`), cut to `most` (the worker's `limit`), so that no connector file takes the
    shared host from the others; 1 where the runtime cannot wire helper processes (`most`
    None)."""
    if requested == 1:
        return 1
    if most is None:
        log.warning("%s is %d, but this runtime cannot start helper processes; one process "
                    "does the work", setting, requested)  # fmt: skip
        return 1
    if requested > most:
        log.warning("%s is %d; this worker allows at most %d (%s)", setting, requested, most,
                    limit)  # fmt: skip
        return most
    return requested


def report_logs(reports: Any, level: int) -> None:
    """In a helper process: send every log record to the connector's process."""
    root = logging.getLogger()
    root.handlers[:] = [_Reports(reports)]
    root.setLevel(level)


def report_end(reports: Any, number: int, work: Callable[[], int]) -> None:
    """In a helper process: run `work`, then report how it ended (`done` with what it
    returned, or `failed` with the error's kind and code)."""
    try:
        result = work()
    except BaseException as exc:
        log.debug("helper %d failed", number, exc_info=True)
        retryable = isinstance(exc, HubError) and exc.retryable
        code = int(exc.code) if isinstance(exc, HubError) else None
        reports.put(("failed", number, retryable, code, f"{type(exc).__name__}: {exc}"))
        return
    reports.put(("done", number, result))


def publish_path(connector: str, settings: PublishSettings) -> tuple[Any, FeedSink]:
    """In a helper process: its own publish path, wired from the settings the connector process
    was wired with; the services (to close when done) and a sink that publishes without
    committing positions."""
    # Imported here: the connector process has it loaded already; a helper loads it once.
    from publish.services import publish_services

    services = publish_services(settings.registry, settings.kafka)
    settle_garbage_collector(settings.connect)
    sink = FeedSink(
        connector,
        feeds=services.feeds,
        registry=services.registry,
        publisher=services.batch_publisher(),
        offsets=None,
        settings=settings.connect,
    )
    return services, sink


def wait_for_connector(resumed: Any, parent: int, *, what: str) -> None:
    """Return once the connector is resumed; raise if its process is gone."""
    while True:
        if os.getppid() != parent:
            raise CdcSourceUnavailable(f"the connector process ended; {what}")
        if resumed.wait(0.5):
            return


class HelperProcesses:
    """The helper processes of one piece of work; see the module docstring.

    `target(job, reports, resumed, *extra)` is each helper's body; `on_report` takes reports
    of kinds other than log, batch, done and failed. `endless` helpers have no end of their own
    (a stream's): one that reports its end fails the work, as a failure would.
    """

    def __init__(
        self,
        kind: str,
        target: Callable[..., None],
        jobs: Sequence[tuple[Any, ...]],
        context: SourceContext,
        *,
        name: str,
        on_report: Callable[[tuple[Any, ...]], None] | None = None,
        endless: bool = False,
    ) -> None:
        self._kind = kind
        self._endless = endless
        self._on_report = on_report
        self.reports: Any = SPAWN.Queue()
        self.resumed: Any = SPAWN.Event()
        self._processes = [
            SPAWN.Process(
                target=target,
                args=(job[0], self.reports, self.resumed, *job[1:]),
                name=f"{name}-{kind}-{number}",
                daemon=True,
            )
            for number, job in enumerate(jobs, start=1)
        ]
        self.done: dict[int, Any] = {}
        for process in self._processes:
            process.start()
        log.info("%s: %d helper process(es) started", kind, len(self._processes))
        # The connector's pause, told to the helpers by a thread: the connector's own reading
        # may be waiting in a paused `emit`.
        self._closed = threading.Event()
        self._pauses = threading.Thread(
            target=self._follow_pauses, args=(context,), name=f"{kind}-pauses", daemon=True
        )
        self._pauses.start()

    def _follow_pauses(self, context: SourceContext) -> None:
        while True:
            if context.paused:
                self.resumed.clear()
            else:
                self.resumed.set()
            if self._closed.wait(0.2):
                return

    def collect(self, context: SourceContext) -> None:
        """Take in what the helpers reported; raise the first failure among them, or a
        helper's end without a report."""
        while True:
            try:
                report = self.reports.get_nowait()
            except queue.Empty:
                break
            self._take(report, context)
        for number, process in enumerate(self._processes, start=1):
            if number not in self.done and process.exitcode is not None:
                self._drain_after_exit(context)
                if number not in self.done:
                    raise CdcSourceUnavailable(
                        f"{self._kind} helper {number} ended (exit code {process.exitcode}) "
                        "before its share was published"
                    )

    def wait(self, context: SourceContext) -> None:
        """Until every helper reported its end; `context.sleep` raises on stop."""
        while len(self.done) < len(self._processes):
            self.collect(context)
            if len(self.done) < len(self._processes):
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
        self.reports.close()
        self.reports.cancel_join_thread()

    def _drain_after_exit(self, context: SourceContext) -> None:
        # A helper's last reports may still be in the queue's pipe when its exit is seen.
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            try:
                report = self.reports.get(timeout=0.1)
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
            _, number, result = report
            self.done[number] = result
            if self._endless:
                raise CdcSourceUnavailable(f"{self._kind} helper {number} ended; it starts again")
        elif kind == "failed":
            _, number, retryable, code, message = report
            self.done[number] = None
            error_code = ErrorCode(code) if code is not None else None
            if retryable:
                raise TransientError(f"{self._kind} helper {number}: {message}", code=error_code)
            raise TerminalError(f"{self._kind} helper {number}: {message}", code=error_code)
        elif self._on_report is not None:
            self._on_report(report)
