"""Helper processes that publish shares of the replication stream, for `stream_processes` > 1.

A slot streams to one connection, and the connector's records go through one interpreter,
whose lock keeps the stream under one core (about 14 µs of CPU a change: decoding, converting,
validating, encoding, producing). With `stream_processes` n, the connector still reads the
stream, and sends the messages it reads, unchanged and in order, to n - 1 helper processes, in
chunks over a pipe each. Each row change goes to the process whose share of the rows it is in:
a hash of the row's key (`changes.Shares`), read from the message without decoding the rest.
The transaction framing and the Relation messages go to every process. A row's events all come
from one process, in the stream's order; a key that changes goes to both keys' processes, and
is deleted by its old key's and created by its new key's. A table whose key cannot be read from
every change, and truncates, are the connector's own.

Positions: a helper reports the end of the last transaction whose events of its share Kafka
acknowledged. The connector commits, and confirms to the server, the lowest of its own and every
helper's, so a restart replays from there: what the other processes had published already comes
again (at-least-once, as after any restart), and nothing is skipped.

Helpers publish only while the connector is resumed, stop when its process or its pipe is gone,
and report their batches, log records and failures as snapshot helpers do (`helpers`). A
helper's failure, or its end without a report, fails the connector's stream, which the task
starts again from the committed position.
"""

import fcntl
import logging
import os
import pickle
import queue
import threading
import time
from contextlib import suppress
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from connectors.postgres.catalog import Catalog, connect
from connectors.postgres.changes import CapturedTable, ChangeDecoder, Pending, Shares
from connectors.postgres.envelope import Origin
from connectors.postgres.errors import CONNECTION_ERRORS, CdcSourceUnavailable, connection_failure
from connectors.postgres.helpers import (
    SPAWN,
    HelperProcesses,
    allowed_processes,
    publish_path,
    report_end,
    report_logs,
    wait_for_connector,
)
from connectors.postgres.publishing import BatchPublisher
from connectors.postgres.stream import WalMessage
from connectors.runtime import Batch, FeedSink, SourceContext
from connectors.settings import PublishSettings

log = logging.getLogger(__name__)

CHUNK_MESSAGES = 1000  # messages read between sends to the helpers (fewer when the stream pauses)
_QUEUED_CHUNKS = 8  # chunks waiting for a helper's pipe, per helper
_PIPE_BYTES = 1 << 20  # Linux's most for an unprivileged process (`/proc/sys/fs/pipe-max-size`)
_ABANDONED = "its share of the stream is read again from the committed position"


@dataclass(frozen=True)
class StreamJob:
    """Everything a stream helper needs, sent to it once (pickled; never on a command line)."""

    number: int  # its share's index (the connector's is 0)
    processes: int
    connector: str
    dsn: str
    origin: Origin
    topics: dict[str, str]  # captured table (`schema.table`) -> topic
    resume_lsn: int
    max_batch_events: int
    max_batch_seconds: float
    partition: dict[str, Any]
    publishing: PublishSettings
    log_level: int  # the connector process's
    parent: int  # the connector process's id


def stream_processes(requested: int, publishing: PublishSettings | None) -> int:
    """How many processes a stream uses: the connector file's `stream_processes`, cut to the
    worker's `max_stream_processes`."""
    most = None if publishing is None else publishing.connect.max_stream_processes
    return allowed_processes(requested, most, setting="stream_processes",
                             limit="HUB_CONNECT_MAX_STREAM_PROCESSES")  # fmt: skip


class StreamHelpers:
    """The connector's side: the helpers, the messages sent on to them, their positions.

    Each helper's pipe is written by a thread of its own, through a short queue, so that the
    connector's loop never blocks on a helper that is behind, paused or gone: it waits for room
    in the queue a moment at a time, taking in the helpers' reports (a failure raises) and
    seeing a stop.
    """

    def __init__(self, jobs: list[StreamJob], context: SourceContext) -> None:
        self._context = context
        pipes = [SPAWN.Pipe(duplex=False) for _ in jobs]  # (receiving end, sending end)
        self._positions = {job.number: job.resume_lsn for job in jobs}
        self._processes = HelperProcesses(
            "stream",
            run_stream_helper,
            [(job, receiving) for job, (receiving, _) in zip(jobs, pipes, strict=True)],
            context,
            name=jobs[0].connector,
            on_report=self._position,
            endless=True,
        )
        for receiving, _ in pipes:
            receiving.close()  # the helper holds its own
        self._outboxes = [
            _Outbox(job.number, sending) for job, (_, sending) in zip(jobs, pipes, strict=True)
        ]
        self._added = 0  # messages read since the last send

    def add(self, message: WalMessage, readers: int) -> None:
        """One message read from the stream, for the helpers among `readers` (a bit per share
        index, `ChangeDecoder.readers`)."""
        for outbox in self._outboxes:
            if readers & outbox.bit:
                outbox.chunk.append(message)
        self._added += 1
        if self._added >= CHUNK_MESSAGES:
            self.send(drained=False)

    def send(self, *, drained: bool) -> None:
        """Send the messages added since the last time (waits while a helper is behind);
        `drained`: nothing more was waiting on the socket, so a helper publishes what it holds,
        as the connector does."""
        self._added = 0
        for outbox in self._outboxes:
            blob = outbox.take(drained=drained)
            if blob is None:
                continue
            while True:
                try:
                    outbox.queue.put(blob, timeout=0.2)
                    break
                except queue.Full:
                    self.collect()  # a helper that failed or ended raises here
                    self._context.sleep(0)  # and a stop, here

    def collect(self) -> None:
        """Take in the helpers' reports; raise the first failure among them, or the end of
        one (a stream has no end a helper could reach while the connector streams)."""
        self._processes.collect(self._context)

    @property
    def lowest(self) -> int:
        """The lowest position every helper's share reached in Kafka."""
        return min(self._positions.values())

    def close(self) -> None:
        """Stop the helpers (what they had not published is read again after a restart)."""
        self._processes.close()
        for outbox in self._outboxes:
            outbox.close()

    def _position(self, report: tuple[Any, ...]) -> None:
        if report[0] == "position":
            _, number, lsn = report
            self._positions[number] = max(self._positions[number], lsn)


class _Outbox:
    """One helper's side of the connector: the messages of its share since the last send, and
    the pipe they go through, written by a thread of its own from a short queue."""

    __slots__ = ("_pipe", "_sender", "_told_drained", "bit", "chunk", "queue")

    def __init__(self, number: int, pipe: Connection) -> None:
        self.bit = 1 << number  # its bit in `ChangeDecoder.readers`
        self.chunk: list[WalMessage] = []
        self.queue: queue.Queue[bytes | None] = queue.Queue(maxsize=_QUEUED_CHUNKS)
        self._told_drained = True  # whether its last chunk said the stream was drained
        self._pipe = pipe
        _widen(pipe)
        self._sender = threading.Thread(
            target=_send_all, args=(pipe, self.queue), name=f"stream-send-{number}", daemon=True
        )
        self._sender.start()

    def take(self, *, drained: bool) -> bytes | None:
        """The chunk to send, pickled with `drained`, and emptied; None when there is nothing
        new to tell (an empty chunk is sent once to tell of a drain)."""
        if not self.chunk and (not drained or self._told_drained):
            return None
        blob = pickle.dumps((drained, self.chunk), protocol=pickle.HIGHEST_PROTOCOL)
        self.chunk.clear()
        self._told_drained = drained
        return blob

    def close(self) -> None:
        with suppress(queue.Full):
            self.queue.put_nowait(None)
        self._sender.join(timeout=5)  # the helper's end breaks its pipe, ending a blocked send
        self._pipe.close()


def _widen(pipe: Connection) -> None:
    """Let a pipe hold a whole chunk (Linux's default is 64 KiB, half a chunk of 1,000).

    A chunk written and read in pieces takes each process's interpreter lock again after every
    piece, behind its busy threads. Measured with `bench/cdc.py` (2 processes, medians of 3,
    taking turns): 74,907 and 71,438 changes/s with the wider pipe, 68,886 and 66,898 without.
    """
    with suppress(OSError, AttributeError):  # a system limit lower than this: pieces, then
        fcntl.fcntl(pipe.fileno(), fcntl.F_SETPIPE_SZ, _PIPE_BYTES)


def _send_all(pipe: Connection, chunks: "queue.Queue[bytes | None]") -> None:
    """A sender thread: write each chunk to a helper's pipe, until told to stop or the helper
    is gone (its end is seen by `StreamHelpers.collect`)."""
    while (blob := chunks.get()) is not None:
        try:
            pipe.send_bytes(blob)
        except OSError:
            return


def run_stream_helper(job: StreamJob, reports: Any, resumed: Any, messages: Connection) -> None:
    """A helper process's body: publish its share of every message the connector sends, until
    the connector closes the pipe; then say how it ended."""
    report_logs(reports, job.log_level)
    report_end(reports, job.number, lambda: _publish_share(job, reports, resumed, messages))


class _HelperEmitter:
    """A helper's publish path: publish a batch (no position committed), then report it and
    the position it reached."""

    def __init__(self, job: StreamJob, sink: FeedSink, reports: Any, resumed: Any) -> None:
        self._job = job
        self._sink = sink
        self._reports = reports
        self._resumed = resumed
        self._never = threading.Event()
        self.published = 0

    def emit(self, batch: Batch) -> None:
        job = self._job
        wait_for_connector(self._resumed, job.parent, what=_ABANDONED)
        if batch.records:
            dead_lettered = self._sink.publish(batch, stop=self._never)
            self.published += len(batch.records)
            self._reports.put(("batch", job.number, batch.topic, len(batch.records), dead_lettered))
        self._reports.put(("position", job.number, int(batch.offset["lsn"])))


def _publish_share(job: StreamJob, reports: Any, resumed: Any, messages: Connection) -> int:
    services, sink = publish_path(job.connector, job.publishing)
    emitter = _HelperEmitter(job, sink, reports, resumed)
    try:
        with connect(job.dsn) as conn:
            catalog = Catalog(conn)
            tables = {
                qualified: CapturedTable(topic=topic, shape=catalog.table(qualified))
                for qualified, topic in job.topics.items()
            }
            decoder = ChangeDecoder(
                tables,
                origin=job.origin,
                resume_lsn=job.resume_lsn,
                describe=catalog.table,
                lookup_type=catalog.pg_type,
                shares=Shares(job.number, job.processes),
            )
            publisher = BatchPublisher(emitter, name=f"{job.connector}-stream-{job.number}")
            try:
                _ShareLoop(job, decoder, publisher, messages).run()
                publisher.drain()
            finally:
                publisher.close()
    except CONNECTION_ERRORS as exc:
        raise connection_failure(exc, "PostgreSQL connection lost") from exc
    finally:
        services.close()
    return emitter.published


class _ShareLoop:
    """A helper's loop: decode the messages the connector sends, publish this share's events
    in batches as the connector does (`_Streamer`), move the position on when idle."""

    def __init__(
        self, job: StreamJob, decoder: ChangeDecoder, publisher: BatchPublisher, messages: Any
    ) -> None:
        self._job = job
        self._decoder = decoder
        self._publisher = publisher
        self._messages = messages
        self._pending = Pending()
        self._done = job.resume_lsn  # the last transaction read completely
        self._submitted = job.resume_lsn
        self._any_topic = next(iter(job.topics.values()))

    def run(self) -> None:
        job = self._job
        pending = self._pending
        while True:
            if os.getppid() != job.parent:
                raise CdcSourceUnavailable(f"the connector process ended; {_ABANDONED}")
            self._publisher.check()
            if not self._messages.poll(0.2):
                if pending.count or self._done > self._submitted:
                    self._flush()  # the stream is idle: publish, or move the position on
                continue
            try:
                blob = self._messages.recv_bytes()
            except EOFError:  # the connector closed the stream
                return
            drained, messages = pickle.loads(blob)
            for payload, lsn in messages:
                commit = self._decoder.handle(payload, lsn, pending)
                if commit is not None:
                    self._done = commit.end_lsn
                if pending.count >= job.max_batch_events:
                    self._flush()
            # `drained`: the connector found nothing more waiting on its socket, where it
            # publishes what it holds too.
            waited = pending.count and time.monotonic() - pending.since >= job.max_batch_seconds
            if waited or (drained and (pending.count or self._done > self._submitted)):
                self._flush()

    def _flush(self) -> None:
        """Hand the buffered events to the publisher, one batch per topic."""
        target = self._done
        self._publisher.submit_pending(
            self._pending,
            partition=self._job.partition,
            position={"lsn": target},
            previous={"lsn": self._submitted},
            any_topic=self._any_topic,
        )
        self._submitted = target
