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
import threading
from dataclasses import dataclass
from typing import Any

from connectors.postgres.catalog import Catalog, connect
from connectors.postgres.changes import CapturedTable
from connectors.postgres.envelope import Origin, source_block
from connectors.postgres.errors import CONNECTION_ERRORS, connection_failure
from connectors.postgres.helpers import (
    HelperProcesses,
    allowed_processes,
    publish_path,
    report_end,
    report_logs,
    wait_for_connector,
)
from connectors.postgres.snapshot import PageRange, begin_snapshot, read_table, snapshot_records
from connectors.runtime import Batch, SourceContext
from connectors.settings import PublishSettings
from hub_core.errors import ErrorCode, TerminalError

log = logging.getLogger(__name__)

# A killed connector's next run takes the snapshot again, so a helper's share is not needed.
_ABANDONED = "its snapshot is abandoned"


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


def snapshot_processes(requested: int, publishing: PublishSettings | None) -> int:
    """How many processes a snapshot uses: the connector file's `snapshot_processes`, cut to
    the worker's `max_snapshot_processes`."""
    most = None if publishing is None else publishing.connect.max_snapshot_processes
    return allowed_processes(requested, most, setting="snapshot_processes",
                             limit="HUB_CONNECT_MAX_SNAPSHOT_PROCESSES")  # fmt: skip


def start_helpers(jobs: list[HelperJob], context: SourceContext) -> HelperProcesses:
    """One helper process per job, publishing its shares of the snapshot."""
    return HelperProcesses("snapshot", run_helper, [(job,) for job in jobs], context,
                           name=jobs[0].connector)  # fmt: skip


def run_helper(job: HelperJob, reports: Any, resumed: Any) -> None:
    """A helper process's body: publish every share of `job` while `resumed` is set, then say
    how it ended."""
    report_logs(reports, job.log_level)
    report_end(reports, job.number, lambda: _publish_shares(job, reports, resumed))


def _publish_shares(job: HelperJob, reports: Any, resumed: Any) -> int:
    services, sink = publish_path(job.connector, job.publishing)
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
                    wait_for_connector(resumed, job.parent, what=_ABANDONED)
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


def _pages_text(pages: PageRange) -> str:
    first, end = pages
    return f"{first}-{end - 1}" if end is not None else f"{first} to the end"
