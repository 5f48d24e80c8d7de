"""The `postgres-cdc` source: snapshot, then stream a logical replication slot into Kafka.

Position: one source partition per slot. Its offset is the end LSN of the last transaction whose
every event Kafka acknowledged (`lsn`, `txId`) and whether the snapshot finished. The slot's
confirmed flush LSN is moved to that offset only after the runtime committed it, so a crash
replays (at-least-once; duplicates carry the same `source.lsn`) and never skips. With
`stream_processes` above 1, the offset is the lowest every process reached (`stream_helpers`).

A lost connection (the server restarting, the network gone) is `CdcSourceUnavailable`, a
transient failure: the task builds a new source, which reconnects and resumes from the stored
position, so the retry replays what was not confirmed and skips nothing.
"""

import json
import logging
import os
import time
from collections.abc import Sequence
from typing import Any

from catalog.types import FeedKind, TeamName
from connectors.postgres.catalog import Catalog, connect
from connectors.postgres.changes import CapturedTable, ChangeDecoder, Pending, Shares
from connectors.postgres.config import PostgresCdcConnector, PostgresCdcSource
from connectors.postgres.envelope import Origin, key_schema, source_block
from connectors.postgres.errors import CONNECTION_ERRORS, CdcSetupError, connection_failure
from connectors.postgres.helpers import HelperProcesses
from connectors.postgres.pgoutput import format_lsn
from connectors.postgres.publishing import BatchPublisher
from connectors.postgres.snapshot import (
    PageRange,
    begin_snapshot,
    export_snapshot,
    page_ranges,
    read_table,
    snapshot_records,
    table_pages,
)
from connectors.postgres.snapshot_helpers import (
    HelperJob,
    Share,
    snapshot_processes,
    start_helpers,
)
from connectors.postgres.stream import ReplicationStream
from connectors.postgres.stream_helpers import StreamHelpers, StreamJob, stream_processes
from connectors.runtime import Batch, SourceContext
from hub_core.naming import topic_name
from publish.feeds import FeedSpec

log = logging.getLogger(__name__)


def create(config: PostgresCdcConnector) -> "PostgresCdc":
    return PostgresCdc(config)


class PostgresCdc:
    """One connector's tables, captured through one slot and one publication."""

    def __init__(self, config: PostgresCdcConnector) -> None:
        self._config = config
        self._source = config.source
        self._dsn = config.source.dsn.get_secret_value()
        self._partition = {"slot": config.source.slot}

    def topic(self, qualified: str) -> str:
        return str(topic_name(f"{self._config.topic_prefix}.{qualified}"))

    def _captured(self, catalog: Catalog) -> dict[str, CapturedTable]:
        return {
            t: CapturedTable(topic=self.topic(t), shape=catalog.table(t))
            for t in self._source.tables
        }

    def feeds(self) -> Sequence[FeedSpec]:
        """A changelog feed per table with a primary key; an event feed for one without."""
        try:
            with connect(self._dsn) as conn:
                catalog = Catalog(conn)
                catalog.check_server()
                captured = self._captured(catalog)
        except CONNECTION_ERRORS as exc:
            raise connection_failure(exc, "PostgreSQL connection lost") from exc
        specs = []
        for qualified, table in captured.items():
            key = key_schema(table.shape, table.topic)
            specs.append(
                FeedSpec(
                    topic=table.topic,
                    owner=TeamName(self._config.owner),
                    kind=FeedKind.CHANGELOG if key is not None else FeedKind.EVENT,
                    value_schema=table.schema_text,
                    partitions=self._config.partitions,
                    key_fields=table.shape.primary_key,
                    description=f"Row changes of PostgreSQL table {qualified} (CDC).",
                    key_schema=json.dumps(key) if key is not None else None,
                )
            )
        return specs

    def run(self, context: SourceContext) -> None:
        """Snapshot if needed, then stream until stopped."""
        try:
            self._connected(context)
        except CONNECTION_ERRORS as exc:
            raise connection_failure(exc, "PostgreSQL connection lost") from exc

    def _connected(self, context: SourceContext) -> None:
        config = self._source
        with connect(self._dsn) as conn:
            catalog = Catalog(conn)
            catalog.check_server()
            catalog.ensure_publication(
                config.publication, config.tables, create=config.create_publication
            )
            stored = context.offset(self._partition)
            stream = ReplicationStream(self._dsn)
            try:
                self._run(context, catalog, stream, stored)
            finally:
                stream.close()

    def _run(
        self,
        context: SourceContext,
        catalog: Catalog,
        stream: ReplicationStream,
        stored: dict[str, Any] | None,
    ) -> None:
        config = self._source
        snapshot_done = bool(stored and stored.get("snapshot_done"))
        wants_snapshot = config.snapshot_mode != "never" and not snapshot_done
        slot = catalog.slot(config.slot)
        exported: str | None = None
        if slot is None:
            if not config.create_slot:
                raise CdcSetupError(
                    f"replication slot {config.slot} does not exist; create it with "
                    f"`SELECT pg_create_logical_replication_slot('{config.slot}', 'pgoutput')` "
                    "or set `create_slot: true`."
                )
            if stored is not None:
                log.warning(
                    "replication slot %s is gone although a position was stored; changes made "
                    "while it was missing are not in the stream%s",
                    config.slot,
                    "; taking a new snapshot" if config.snapshot_mode != "never" else "",
                )
                wants_snapshot = config.snapshot_mode != "never"
                stored = None
            created = stream.create_slot(config.slot, export_snapshot=wants_snapshot)
            point, exported = created.consistent_point, created.snapshot_name
        else:
            if slot.plugin != "pgoutput" or slot.database != catalog.database:
                raise CdcSetupError(
                    f"replication slot {config.slot} uses plugin {slot.plugin} on database "
                    f"{slot.database}; the connector needs a pgoutput slot on "
                    f"{catalog.database}. Choose another `slot` name."
                )
            point = slot.confirmed_flush_lsn or 0
        origin = Origin(name=self._config.name, db=catalog.database)
        tables = self._captured(catalog)
        if wants_snapshot:
            self._snapshot(context, tables, origin, exported=exported, point=point)
            stored = {"lsn": point, "txId": None, "snapshot_done": True}
        if config.snapshot_mode == "initial_only":
            log.info("snapshot finished; snapshot_mode initial_only stops here")
            return
        resume = int(stored["lsn"]) if stored and stored.get("lsn") is not None else point
        offset = dict(stored) if stored else {"lsn": resume, "txId": None, "snapshot_done": False}
        processes = stream_processes(config.stream_processes, context.publishing)
        decoder = ChangeDecoder(
            tables,
            origin=origin,
            resume_lsn=resume,
            describe=catalog.table,
            lookup_type=catalog.pg_type,
            shares=Shares(0, processes) if processes > 1 else None,
        )
        stream.start(
            config.slot,
            config.publication,
            start_lsn=resume,
            status_seconds=config.heartbeat_seconds,
        )
        helpers = None
        if processes > 1:
            helpers = StreamHelpers(self._stream_jobs(context, origin, resume, processes), context)
        try:
            _Streamer(self, context, catalog, stream, decoder, offset, helpers).loop()
        finally:
            if helpers is not None:
                helpers.close()

    def _stream_jobs(
        self, context: SourceContext, origin: Origin, resume: int, processes: int
    ) -> list[StreamJob]:
        assert context.publishing is not None
        return [
            StreamJob(
                number=number,
                processes=processes,
                connector=context.name,
                dsn=self._dsn,
                origin=origin,
                topics={qualified: self.topic(qualified) for qualified in self._source.tables},
                resume_lsn=resume,
                max_batch_events=self._source.max_batch_events,
                max_batch_seconds=self._source.max_batch_seconds,
                partition=self._partition,
                publishing=context.publishing,
                log_level=logging.getLogger().getEffectiveLevel(),
                parent=os.getpid(),
            )
            for number in range(1, processes)
        ]

    def _snapshot(
        self,
        context: SourceContext,
        tables: dict[str, CapturedTable],
        origin: Origin,
        *,
        exported: str | None,
        point: int,
    ) -> None:
        """Publish every row as an `r` event; the last one says `snapshot: last`."""
        config = self._source
        started_ms = int(time.time() * 1000)
        log.info(
            "snapshot of %s at %s (%s)",
            ", ".join(tables),
            format_lsn(point),
            "exported by the new slot" if exported else "a new transaction; overlap is replayed",
        )
        running = {"lsn": point, "txId": None, "snapshot_done": False}
        publisher = BatchPublisher(context, name=config.slot)
        helpers: HelperProcesses | None = None
        try:
            with connect(self._dsn) as conn:
                begin_snapshot(conn, exported)
                shares = self._shares(context, conn, tables)
                if len(shares) > 1:
                    helpers = start_helpers(
                        self._helper_jobs(
                            context,
                            export_snapshot(conn),
                            origin,
                            started_ms,
                            point,
                            tables,
                            shares[:-1],
                        ),
                        context,
                    )
                held: Batch | None = None
                for qualified, table in tables.items():
                    # One source block serves every row of the table: they share it as they
                    # share the snapshot's moment (the last row gets its own, saying `last`).
                    source = source_block(
                        origin, table.shape, commit_ms=started_ms, snapshot="true", tx_id=None,
                        lsn=point,
                    )  # fmt: skip
                    shape = table.shape
                    pages = shares[-1][qualified] if helpers is not None else None
                    for rows in read_table(
                        conn, shape, batch_rows=config.snapshot_batch_rows, pages=pages
                    ):
                        records = snapshot_records(shape, rows, source)
                        if held is not None:
                            publisher.submit(held)  # published while the next rows are read
                        held = Batch(
                            topic=table.topic,
                            partition=self._partition,
                            offset=running,
                            records=records,
                            value_schema=table.schema_text,
                        )
                        if helpers is not None:
                            helpers.collect(context)
                    log.info("snapshot of %s read", qualified)
                if helpers is not None:
                    helpers.wait(context)  # the last event comes after every helper's rows
                    for number, published in sorted(helpers.done.items()):
                        log.info("snapshot helper %d published %d row(s)", number, published)
                conn.execute("COMMIT")
            done = {"lsn": point, "txId": None, "snapshot_done": True}
            if held is None:
                first = next(iter(tables.values()))
                publisher.submit(Batch(topic=first.topic, partition=self._partition, offset=done))
            else:
                last = held.records[-1]
                assert isinstance(last.value, dict)
                last.value["source"] = {**last.value["source"], "snapshot": "last"}
                publisher.submit(
                    Batch(
                        topic=held.topic,
                        partition=self._partition,
                        offset=done,
                        records=held.records,
                        value_schema=held.value_schema,
                    )
                )
            publisher.drain()
        finally:
            publisher.close()
            if helpers is not None:
                helpers.close()

    def _shares(
        self, context: SourceContext, conn: Any, tables: dict[str, CapturedTable]
    ) -> list[dict[str, PageRange]]:
        """Each process's pages of each table: one share (the whole of every table) unless
        `snapshot_processes` asks for more and the task can wire helper processes. The last
        share, open at its end, is the connector's own: a table of fewer pages than processes
        is read by the connector alone, and its last row is the snapshot's last event."""
        processes = snapshot_processes(self._source.snapshot_processes, context.publishing)
        if processes == 1:
            return [{}]
        ranges = {
            qualified: page_ranges(table_pages(conn, table.shape), processes)
            for qualified, table in tables.items()
        }
        return [{q: r[k] for q, r in ranges.items()} for k in range(processes)]

    def _helper_jobs(
        self,
        context: SourceContext,
        snapshot: str,
        origin: Origin,
        commit_ms: int,
        point: int,
        tables: dict[str, CapturedTable],
        shares: list[dict[str, PageRange]],
    ) -> list[HelperJob]:
        assert context.publishing is not None
        return [
            HelperJob(
                number=number,
                connector=context.name,
                dsn=self._dsn,
                snapshot=snapshot,
                origin=origin,
                commit_ms=commit_ms,
                lsn=point,
                batch_rows=self._source.snapshot_batch_rows,
                partition=self._partition,
                shares=tuple(
                    Share(
                        qualified=q,
                        topic=tables[q].topic,
                        schema_text=tables[q].schema_text,
                        pages=pages,
                    )
                    for q, pages in share.items()
                ),
                publishing=context.publishing,
                log_level=logging.getLogger().getEffectiveLevel(),
                parent=os.getpid(),
            )
            for number, share in enumerate(shares, start=1)
        ]

    @property
    def partition(self) -> dict[str, Any]:
        return self._partition

    @property
    def source_config(self) -> PostgresCdcSource:
        return self._source


class _Streamer:
    """The streaming loop: read, decode, publish in batches (on the publisher's thread, while
    the next changes are read), confirm what Kafka holds, heartbeat. With stream helpers, every
    message read goes on to them too, and the position committed is the lowest of this
    process's and theirs (`stream_helpers`)."""

    def __init__(
        self,
        owner: PostgresCdc,
        context: SourceContext,
        catalog: Catalog,
        stream: ReplicationStream,
        decoder: ChangeDecoder,
        offset: dict[str, Any],
        helpers: StreamHelpers | None = None,
    ) -> None:
        self._config = owner.source_config
        self._helpers = helpers
        self._partition = owner.partition
        self._any_topic = owner.topic(self._config.tables[0])
        self._context = context
        self._catalog = catalog
        self._stream = stream
        self._decoder = decoder
        self._committed = offset  # what the offset store holds
        self._seen: Any = None  # the publisher's last answer, as given
        self._submitted = dict(offset)  # the position of the last batch handed to the publisher
        self._done = dict(offset)  # the last transaction read completely (maybe unpublished)
        self._pending = Pending()
        self._next_beat = time.monotonic() + self._config.heartbeat_seconds

    def loop(self) -> None:
        publisher = BatchPublisher(self._context, name=self._config.slot)
        try:
            self._loop(publisher)
        finally:
            publisher.close()

    def _loop(self, publisher: BatchPublisher) -> None:
        config = self._config
        helpers = self._helpers
        while True:
            message = self._stream.read()
            if message is not None:
                commit = self._decoder.handle(message[0], message[1], self._pending)
                if helpers is not None:
                    helpers.add(message, self._decoder.readers)
                if commit is not None:
                    self._done = {
                        "lsn": commit.end_lsn,
                        "txId": self._decoder.last_xid,
                        "snapshot_done": self._committed.get("snapshot_done", False),
                    }
                    self._confirm_published(publisher)
                if self._pending.count >= config.max_batch_events or (
                    self._pending.count
                    and time.monotonic() - self._pending.since >= config.max_batch_seconds
                ):
                    self._flush(publisher)
                continue
            # Nothing waiting on the socket: publish what is buffered, then idle briefly.
            if helpers is not None:
                helpers.send(drained=True)
                helpers.collect()
            if self._pending.count:
                self._flush(publisher)
            elif self._target()["lsn"] > self._submitted["lsn"] and (
                time.monotonic() >= self._next_beat
            ):
                self._flush(publisher)  # transactions that touched no captured table move on
            self._confirm_published(publisher)
            if time.monotonic() >= self._next_beat:
                self._heartbeat()
            self._context.sleep(0)
            self._stream.wait(0.2)

    def _flush(self, publisher: BatchPublisher) -> None:
        """Hand the buffered events to the publisher, one batch per topic."""
        if self._helpers is not None:
            self._helpers.collect()
        target = self._target()
        publisher.submit_pending(
            self._pending,
            partition=self._partition,
            position=target,
            previous=self._submitted,
            any_topic=self._any_topic,
        )
        self._submitted = target

    def _target(self) -> dict[str, Any]:
        """The position every event before it is in Kafka once this process's buffered events
        are: the last transaction read, or the lowest a helper's share reached."""
        if self._helpers is None or self._helpers.lowest >= self._done["lsn"]:
            return dict(self._done)
        return {**self._done, "lsn": self._helpers.lowest, "txId": None}

    def _confirm_published(self, publisher: BatchPublisher) -> None:
        """Confirm to the server the position the offset store now holds, once it moved."""
        committed = publisher.committed
        if committed is None or committed is self._seen:
            return
        self._seen = committed
        self._committed = dict(committed)
        self._stream.confirm(int(self._committed["lsn"]))
        if time.monotonic() >= self._next_beat:
            self._heartbeat()

    def _heartbeat(self) -> None:
        self._next_beat = time.monotonic() + self._config.heartbeat_seconds
        self._stream.confirm(int(self._committed["lsn"]))
        if self._config.heartbeat_write:
            self._catalog.heartbeat()
        lag = self._catalog.slot_lag_bytes(self._config.slot)
        self._context.metrics["slot_lag_bytes"] = lag
        self._context.lag.slot_bytes(self._config.slot, lag)
        self._context.metrics["confirmed_lsn"] = format_lsn(int(self._committed["lsn"]))
        log.info(
            "slot %s: confirmed %s, lag %s bytes",
            self._config.slot,
            format_lsn(int(self._committed["lsn"])),
            lag,
        )
