"""The lineage index: the loader's ledger entries, copied into the hub's database, and asked.

`LineageSync` reads the commit files (`_delta_log/<version>.json`) of the tables under the
warehouse folder with plain Python, or has the loader read them for it (`LedgerSource`, ADR
0048), and copies each commit's ledger entry
(`hub_core.ledger`) into the `lineage_*` tables, keyed on (table, version): it resumes after
the newest version it indexed, and a second copy of a commit (another API replica syncing at
the same time) is refused by the key, so every commit is indexed once. `LineageStore` answers
the two questions lineage asks: which commit holds a Kafka position, and every table version
downstream of one. See docs/lineage.md and ADR 0038.
"""

import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from sqlalchemy import ColumnElement, Engine, and_, delete, or_, select, true
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from catalog.tables import (
    LineageCommitRow,
    LineageOffsetRow,
    LineageReadRow,
    LineageRequestRow,
    LineageTableRow,
)
from hub_core.database import transaction
from hub_core.ledger import (
    RETIRED,
    Commit,
    LedgerKind,
    LocalFiles,
    LoggedTable,
    decode,
    log_commits,
    logged_tables,
)

log = logging.getLogger(__name__)

# A downstream walk stops after this many layers (bronze -> silver -> gold is three).
_MAX_DEPTH = 4


@dataclass(frozen=True, slots=True)
class Position:
    """A Kafka position (topic, partition, offset)."""

    topic: str
    partition: int
    offset: int


@dataclass(frozen=True, slots=True)
class TableVersion:
    """A version of a table, and what kind of commit made it."""

    table: str
    version: int
    kind: str
    committed_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class BronzeHit:
    """The bronze commit whose offsets include a position, with that partition's range."""

    table: str
    version: int
    topic: str
    partition: int
    first_offset: int
    last_offset: int
    lsn: tuple[int, int] | None
    tx: tuple[int, int] | None


class LineageStore:
    """Reads of the lineage index."""

    def __init__(self, engine: Engine) -> None:
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    def bronze_holding(
        self, *, partition: int, offset: int, table: str | None = None, topic: str | None = None
    ) -> list[BronzeHit]:
        """Bronze commits of `table` (or `topic`) whose offsets in `partition` hold `offset`.

        A stream batch's bronze ranges span every offset of the batch, the records it refused
        too; when a quarantine commit of that batch says it withheld `offset` (its entry's
        `withheld`), the batch's bronze commits are left out.
        """
        query = (
            select(LineageOffsetRow, LineageCommitRow)
            .join(
                LineageCommitRow,
                and_(
                    LineageCommitRow.table_name == LineageOffsetRow.table_name,
                    LineageCommitRow.version == LineageOffsetRow.version,
                ),
            )
            .where(
                LineageOffsetRow.partition == partition,
                LineageOffsetRow.first_offset <= offset,
                LineageOffsetRow.last_offset >= offset,
            )
        )
        if table is not None:
            query = query.where(LineageOffsetRow.table_name == table)
        if topic is not None:
            query = query.where(LineageOffsetRow.topic == topic)
        with transaction(self._sessions) as session:
            pairs = session.execute(query.order_by(LineageOffsetRow.version)).all()
        withheld = {
            (commit.topic, commit.batch_id)
            for _, commit in pairs
            if commit.kind == LedgerKind.QUARANTINE.value and _withheld(commit)
        }
        return [
            _hit(offsets)
            for offsets, commit in pairs
            if not (
                commit.kind == LedgerKind.BRONZE.value
                and commit.batch_id is not None
                and (commit.topic, commit.batch_id) in withheld
            )
        ]

    def bronze_by_lsn(self, lsn: int) -> list[BronzeHit]:
        """Bronze commits whose source LSN range holds `lsn`."""
        query = select(LineageOffsetRow).where(
            LineageOffsetRow.lsn_min <= lsn, LineageOffsetRow.lsn_max >= lsn
        )
        with transaction(self._sessions) as session:
            rows = session.scalars(query.order_by(LineageOffsetRow.version)).all()
        return [_hit(row) for row in rows]

    def bronze_by_request(self, request_id: str) -> list[BronzeHit]:
        """Bronze commits holding records of publish request `request_id`.

        A span names the commit whose offsets hold it, found by its offsets: it is usually
        recorded in that same commit, but may come in a commit of its own just after
        (`spark_loaders.bronze.loader`, "_record_requests"). A partition can have several offset
        ranges in a commit (a replay's); a span's first offset is in one of them.
        """
        query = (
            select(LineageRequestRow, LineageOffsetRow)
            .join(
                LineageOffsetRow,
                and_(
                    LineageOffsetRow.table_name == LineageRequestRow.table_name,
                    LineageOffsetRow.partition == LineageRequestRow.partition,
                    LineageOffsetRow.first_offset <= LineageRequestRow.first_offset,
                    LineageOffsetRow.last_offset >= LineageRequestRow.first_offset,
                ),
            )
            .where(LineageRequestRow.request_id == request_id)
            .order_by(LineageOffsetRow.version, LineageRequestRow.first_offset)
        )
        with transaction(self._sessions) as session:
            pairs = session.execute(query).all()
        # A span recorded with its records names its own commit; one recorded after them
        # (no offsets of its own) names the commit whose offsets hold it.
        own = {(r.table_name, r.version, r.partition, r.first_offset)
               for r, offsets in pairs if offsets.version == r.version}  # fmt: skip
        hits = {
            (offsets.version, request.partition, request.first_offset): BronzeHit(
                request.table_name,
                offsets.version,
                offsets.topic,
                request.partition,
                request.first_offset,
                request.last_offset,
                None,
                None,
            )
            for request, offsets in pairs
            if offsets.version == request.version
            or (request.table_name, request.version, request.partition, request.first_offset)
            not in own
        }
        return list(hits.values())

    def commit(self, table: str, version: int) -> TableVersion | None:
        with transaction(self._sessions) as session:
            row = session.get(LineageCommitRow, (table, version))
        return None if row is None else _version(row)

    def topic_of(self, table: str) -> str | None:
        """The topic a bronze table lands, from its newest indexed commit."""
        query = (
            select(LineageCommitRow.topic)
            .where(LineageCommitRow.table_name == table, LineageCommitRow.topic.is_not(None))
            .order_by(LineageCommitRow.version.desc())
            .limit(1)
        )
        with transaction(self._sessions) as session:
            return session.scalar(query)

    def sources_of(self, table: str) -> list[str]:
        """The tables the indexed ledger entries of `table` read, newest entry first."""
        query = (
            select(LineageReadRow.source_table)
            .where(LineageReadRow.table_name == table)
            .order_by(LineageReadRow.version.desc(), LineageReadRow.source_table)
        )
        with transaction(self._sessions) as session:
            return list(dict.fromkeys(session.scalars(query)))

    def downstream(self, sources: Iterable[tuple[str, int]]) -> list[TableVersion]:
        """Every indexed commit that read one of `sources` (table, version), directly or
        through others (silver from bronze, gold from silver), in table and version order."""
        found: dict[tuple[str, int], TableVersion] = {}
        frontier = set(sources)
        with transaction(self._sessions) as session:
            ids = {row.table_name: row.table_id for row in session.scalars(select(LineageTableRow))}
            for _ in range(_MAX_DEPTH):
                if not frontier:
                    break
                conditions = [
                    and_(
                        # A retired location's commits were read under the table's own name.
                        LineageReadRow.source_table == table.partition(RETIRED)[0],
                        LineageReadRow.first_version <= version,
                        LineageReadRow.last_version >= version,
                        _same_table(ids.get(table)),
                    )
                    for table, version in frontier
                ]
                reads = session.scalars(select(LineageReadRow).where(or_(*conditions))).all()
                frontier = set()
                for read in reads:
                    key = (read.table_name, read.version)
                    if key in found:
                        continue
                    row = session.get(LineageCommitRow, key)
                    if row is not None:
                        found[key] = _version(row)
                        frontier.add(key)
        return sorted(found.values(), key=lambda v: (v.table, v.version))

    def synced(self) -> dict[str, int]:
        """Each followed table and the newest version indexed."""
        with transaction(self._sessions) as session:
            rows = session.scalars(select(LineageTableRow)).all()
        return {row.table_name: row.synced_version for row in rows}


class LedgerSource(Protocol):
    """Where the index reads the loader's tables' commits from: the warehouse folder itself
    (`WarehouseFolder`), or the loader, which reads them for the API when the API cannot
    (`hub_api.loader_client.LoaderLedger`: tables on object storage, ADR 0048)."""

    def tables(self) -> dict[str, LoggedTable]:
        """Every table with ledger entries, by name."""
        ...

    def commits(self, table: str, location: str, after: int) -> list[Commit]:
        """The commits of `table` at `location` newer than version `after`, in order."""
        ...


class WarehouseFolder:
    """The loader's warehouse folder, on a file system the API reads (`LedgerSource`)."""

    def __init__(self, warehouse: Path) -> None:
        self.warehouse = warehouse
        self._files = LocalFiles()

    def tables(self) -> dict[str, LoggedTable]:
        return logged_tables(self._files, str(self.warehouse))

    def commits(self, table: str, location: str, after: int) -> list[Commit]:
        return log_commits(self._files, location, after=after)


class LineageSync:
    """Copies ledger entries of the loader's tables into the index (module docstring).

    `sync()` is cheap when nothing changed (a listing per table), and runs at most every
    `min_interval_s` per instance; callers ask before every lineage answer.
    """

    def __init__(
        self, engine: Engine, source: LedgerSource | Path, *, min_interval_s: float = 1.0
    ) -> None:
        self._sessions = sessionmaker(engine, expire_on_commit=False)
        self._source = WarehouseFolder(source) if isinstance(source, Path) else source
        self._min_interval_s = min_interval_s
        self._last = float("-inf")
        self._lock = threading.Lock()

    def tables(self) -> dict[str, str]:
        """The loader's tables with ledger entries, by name, where they live now."""
        return {name: table.location for name, table in self._source.tables().items()}

    def sync(self, *, force: bool = False) -> int:
        """Index the commits made since the last sync; returns how many entries were added."""
        with self._lock:
            now = time.monotonic()
            if not force and now - self._last < self._min_interval_s:
                return 0
            self._last = now
            with transaction(self._sessions) as session:
                synced = {
                    row.table_name: row for row in session.scalars(select(LineageTableRow)).all()
                }
            added = 0
            for name, table in self._source.tables().items():
                known = synced.get(name)
                after = -1
                if known is not None and known.location == table.location:
                    after = known.synced_version
                if table.newest is None or table.newest <= after:
                    continue
                added += self._sync_table(name, table.location, after)
            return added

    def _sync_table(self, name: str, location: str, after: int) -> int:
        commits = self._source.commits(name, location, after)
        if not commits:
            return 0
        newest = commits[-1].version
        try:
            with transaction(self._sessions) as session:
                row = session.get(LineageTableRow, name, with_for_update=True)
                if row is not None and row.location == location and row.synced_version >= newest:
                    return 0  # another sync got here first
                if row is None:
                    row = LineageTableRow(table_name=name, location=location,
                                          synced_version=newest)  # fmt: skip
                    session.add(row)
                else:
                    if row.location != location:
                        # Moved by a reprocessing swap: the versions of the table are now
                        # those of its new location, numbered from 0 again, under a new id.
                        # The old location's are indexed under its retired name (the source
                        # lists it as `<table>@<label>`, `hub_core.ledger.warehouse_tables`).
                        _forget(session, name)
                        row.table_id = None
                    row.location = location
                    row.synced_version = newest
                for commit in commits:
                    if commit.table_id is not None:
                        row.table_id = commit.table_id[:64]
                added = 0
                for commit in commits:
                    if commit.entry is not None and _add(session, name, commit):
                        added += 1
                return added
        except IntegrityError:
            # Another replica indexed these commits between our read and write: they are in.
            log.info("lineage of %s was indexed by another process meanwhile", name)
            return 0


def _forget(session: Session, table: str) -> None:
    """Drop what the index holds of `table`'s commits."""
    for row in (LineageCommitRow, LineageOffsetRow, LineageRequestRow, LineageReadRow):
        session.execute(delete(row).where(row.table_name == table))


def _add(session: Session, table: str, commit: Commit) -> bool:
    entry = commit.entry
    assert entry is not None
    session.add(
        LineageCommitRow(
            table_name=table,
            version=commit.version,
            kind=entry.kind.value,
            topic=entry.topic,
            batch_id=entry.batch,
            committed_at=datetime.fromtimestamp(commit.timestamp_ms / 1000, UTC),
            entry=entry.encode(),
        )
    )
    # A quarantine commit's offsets are indexed as a bronze commit's: a position's answer names
    # the quarantine version that set the record aside, beside any bronze version landing it.
    if entry.kind in (LedgerKind.BRONZE, LedgerKind.QUARANTINE) and entry.topic is not None:
        for r in entry.ranges:
            session.add(
                LineageOffsetRow(
                    table_name=table,
                    version=commit.version,
                    partition=r.partition,
                    topic=entry.topic,
                    first_offset=r.first,
                    last_offset=r.last,
                    lsn_min=r.lsn[0] if r.lsn else None,
                    lsn_max=r.lsn[1] if r.lsn else None,
                    tx_min=r.tx[0] if r.tx else None,
                    tx_max=r.tx[1] if r.tx else None,
                )
            )
        for s in entry.requests:
            session.add(
                LineageRequestRow(
                    request_id=s.request_id[:64],
                    table_name=table,
                    version=commit.version,
                    partition=s.partition,
                    first_offset=s.first,
                    last_offset=s.last,
                )
            )
    for read in entry.reads:
        session.add(
            LineageReadRow(
                table_name=table,
                version=commit.version,
                source_table=read.table,
                first_version=read.first,
                last_version=read.last,
                source_id=None if read.table_id is None else read.table_id[:64],
            )
        )
    return True


def _same_table(table_id: str | None) -> ColumnElement[bool]:
    """Reads of the table whose id is `table_id` (its current location): a read naming
    another id read the location a reprocessing swap replaced, whose versions had the same
    numbers. A read naming no id (an entry written before ids were recorded), or a table
    whose id the index never saw, is matched by name and version alone."""
    if table_id is None:
        return true()
    return or_(LineageReadRow.source_id.is_(None), LineageReadRow.source_id == table_id)


def _withheld(commit: LineageCommitRow) -> bool:
    """Whether a quarantine commit's ranges are records its batch's bronze commits lack."""
    entry = decode(commit.entry)
    return entry is not None and entry.withheld and commit.batch_id is not None


def _hit(row: LineageOffsetRow) -> BronzeHit:
    lsn = _range(row.lsn_min, row.lsn_max)
    tx = _range(row.tx_min, row.tx_max)
    return BronzeHit(
        row.table_name,
        row.version,
        row.topic,
        row.partition,
        row.first_offset,
        row.last_offset,
        lsn,
        tx,
    )


def _range(low: int | None, high: int | None) -> tuple[int, int] | None:
    return None if low is None or high is None else (low, high)


def _version(row: LineageCommitRow) -> TableVersion:
    committed = row.committed_at
    if committed.tzinfo is None:
        committed = committed.replace(tzinfo=UTC)
    return TableVersion(row.table_name, row.version, row.kind, committed)
