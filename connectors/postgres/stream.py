"""The replication connection: slot creation with an exported snapshot, and the pgoutput stream.

psycopg (v3) does not speak the streaming replication protocol, so this module uses psycopg2's
`LogicalReplicationConnection` (see ADR "PostgreSQL CDC: replication client and TOAST").
"""

import logging
import select
from dataclasses import dataclass
from typing import Any

import psycopg2
import psycopg2.errors
from psycopg2.extras import LogicalReplicationConnection, ReplicationCursor

from connectors.postgres.catalog import SESSION_OPTIONS
from connectors.postgres.errors import (
    CONNECTION_ERRORS,
    CdcSetupError,
    CdcSourceUnavailable,
    connection_failure,
)
from connectors.postgres.pgoutput import format_lsn, parse_lsn

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class CreatedSlot:
    consistent_point: int  # the first LSN the slot streams; the snapshot sees everything before
    snapshot_name: str | None  # valid until the replication connection runs another command


# One message of the stream: its payload and the WAL position of the change (XLogData's start).
# A plain tuple: one is made per change, and a named tuple's constructor is a Python function
# (about 3% of the connector process's CPU in a `bench/cdc.py` profile).
WalMessage = tuple[bytes, int]


class ReplicationStream:
    """One replication connection to the slot's database."""

    def __init__(self, dsn: str) -> None:
        try:
            self._conn = psycopg2.connect(
                dsn, connection_factory=LogicalReplicationConnection, options=SESSION_OPTIONS
            )
        except psycopg2.OperationalError as exc:
            raise connection_failure(
                exc,
                "cannot open a replication connection (the role needs the REPLICATION "
                "attribute and pg_hba.conf must allow it)",
            ) from exc
        self._cursor: ReplicationCursor = self._conn.cursor()
        self._confirmed = 0

    def create_slot(self, name: str, *, export_snapshot: bool) -> CreatedSlot:
        """Create a pgoutput slot; with `export_snapshot`, also a snapshot of the same moment."""
        mode = "EXPORT_SNAPSHOT" if export_snapshot else "NOEXPORT_SNAPSHOT"
        try:
            self._cursor.execute(f'CREATE_REPLICATION_SLOT "{name}" LOGICAL pgoutput {mode}')
        except psycopg2.errors.DuplicateObject as exc:
            raise CdcSetupError(f"replication slot {name} already exists") from exc
        except CONNECTION_ERRORS as exc:
            raise connection_failure(exc, f"cannot create replication slot {name}") from exc
        except psycopg2.Error as exc:
            raise CdcSetupError(
                f"cannot create replication slot {name}: {str(exc).strip()}. Check "
                "max_replication_slots and the role's REPLICATION attribute."
            ) from exc
        row: Any = self._cursor.fetchone()
        _, consistent_point, snapshot_name, _ = row
        log.info("created replication slot %s at %s", name, consistent_point)
        return CreatedSlot(
            consistent_point=parse_lsn(consistent_point), snapshot_name=snapshot_name
        )

    def start(self, slot: str, publication: str, *, start_lsn: int, status_seconds: float) -> None:
        """Start streaming pgoutput (protocol 1) from `start_lsn` (0: the slot's position)."""
        self._confirmed = start_lsn
        try:
            self._cursor.start_replication(
                slot_name=slot,
                decode=False,
                start_lsn=start_lsn,
                options={"proto_version": "1", "publication_names": publication},
                status_interval=max(1, int(status_seconds)),
            )
        except CONNECTION_ERRORS as exc:
            # Also a slot still active for a walsender that has not noticed its client left.
            raise connection_failure(exc, f"cannot stream from replication slot {slot}") from exc
        except psycopg2.Error as exc:
            raise CdcSetupError(
                f"cannot stream from replication slot {slot}: {str(exc).strip()}"
            ) from exc
        log.info("streaming slot %s from %s", slot, format_lsn(start_lsn))

    def read(self) -> WalMessage | None:
        """The next message, `(payload, lsn)`, or None when none is waiting."""
        try:
            message = self._cursor.read_message()
        except psycopg2.Error as exc:
            raise CdcSourceUnavailable(f"replication stream broke: {str(exc).strip()}") from exc
        if message is None:
            return None
        return (message.payload, message.data_start)

    def wait(self, seconds: float) -> None:
        """Block until data arrives or `seconds` pass."""
        try:
            select.select([self._cursor], [], [], seconds)
        except (OSError, ValueError) as exc:  # the socket is gone: the next read says why
            raise CdcSourceUnavailable(f"replication stream broke: {exc}") from exc

    @property
    def server_wal_end(self) -> int:
        """How far the server has read WAL for this stream (from its keepalives)."""
        return int(self._cursor.wal_end or 0)

    def confirm(self, lsn: int) -> None:
        """Tell the server everything up to `lsn` is safely in Kafka (standby status update)."""
        if lsn > self._confirmed:
            self._confirmed = lsn
        try:
            self._cursor.send_feedback(
                write_lsn=self._confirmed,
                flush_lsn=self._confirmed,
                apply_lsn=self._confirmed,
                force=True,
            )
        except psycopg2.Error as exc:
            raise CdcSourceUnavailable(f"replication stream broke: {str(exc).strip()}") from exc

    def close(self) -> None:
        self._conn.close()
