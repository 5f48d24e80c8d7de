"""From pgoutput messages to change events, buffered per topic until they are published.

`ChangeDecoder` follows the transaction framing (Begin ... Commit), keeps the table shape each
Relation message announces (a new one after `ALTER TABLE` yields a new schema version), and turns
Insert/Update/Delete/Truncate into envelopes. Transactions that committed at or before the
resume position are skipped: the server may send them again after a restart.
"""

import json
import logging
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from connectors.postgres import pgoutput
from connectors.postgres.envelope import (
    UNCHANGED_HEADER,
    Origin,
    TableColumn,
    TableShape,
    convert_row,
    key_of,
    source_block,
    value_schema,
)
from connectors.postgres.errors import PgOutputError
from connectors.postgres.pgoutput import ReplicaIdentity
from connectors.postgres.typemap import PgType, column_type
from publish.publisher import NO_KEY, IncomingRecord

log = logging.getLogger(__name__)

# Key types whose values PostgreSQL never TOASTs (fixed width), so every change of a row sends
# its key: a table keyed by these alone is split among stream processes by key (`Shares`).
_FIXED_WIDTH_TYPES = frozenset(
    {
        16,
        20,
        21,
        23,
        26,
        700,
        701,
        790,
        1082,
        1083,
        1114,
        1184,
        1266,
        2950,
    }
)  # bool int8 int2 int4 oid float4 float8 money date time timestamp timestamptz timetz uuid
_NEITHER, _OLD, _NEW, _BOTH = 0, 1, 2, 3  # which of a change's events a process publishes
_EVERY_PROCESS = -1  # `ChangeDecoder.readers` of a message every process reads (all bits set)
_FIRST_COLUMN = (0,)  # the key positions of a table keyed by its first column alone
_ROW_CHANGES = frozenset(b"IUD")  # the tags of Insert, Update and Delete messages
_DELETE = 0x44
_UNKNOWN = ()  # the key positions of a relation no Relation message announced


@dataclass(frozen=True, slots=True)
class Shares:
    """This process's share of a stream read by `count` processes (`stream_processes`).

    Every process reads the stream's framing (transactions, Relation messages) and the row
    changes of its share, in order, and publishes the events of the rows whose key falls in its
    share (a hash of the key's texts), so a row's events keep their order. A table without such
    a key (no primary key, a key column that may be left unsent, a replica identity of its own
    index), and truncates, are the first process's (`index` 0).

    The shares are equal, though the first process (the connector's) also reads the stream and
    sends it on: measured with `bench/cdc.py` and 2 processes, giving it half a helper's share
    made no difference (71,001 against 70,097 changes/s, medians of 3), nor, once helpers were
    sent only their share, a half or a third of it (48,377 and 37,927-48,325 against
    48,905-53,327 changes/s, on a slower machine).
    """

    index: int
    count: int

    def owner(self, key: bytes) -> int:
        return zlib.crc32(key) % self.count if key else 0


@dataclass(slots=True)
class CapturedTable:
    """A captured table: its topic, current shape and the schema text of that shape."""

    topic: str
    shape: TableShape
    schema_text: str = ""
    identity: ReplicaIdentity = ReplicaIdentity.DEFAULT

    def __post_init__(self) -> None:
        if not self.schema_text:
            self.schema_text = json.dumps(value_schema(self.shape, self.topic))


@dataclass(slots=True)
class Pending:
    """Events waiting to be published, per (topic, schema) in arrival order."""

    batches: dict[tuple[str, str], list[IncomingRecord]] = field(default_factory=dict)
    count: int = 0
    since: float = 0.0
    # The table of the last event and its list: the next event is nearly always of that table.
    _table: CapturedTable | None = None
    _records: list[IncomingRecord] = field(default_factory=list)

    def add(self, table: CapturedTable, record: IncomingRecord) -> None:
        if table is not self._table:
            if not self.count:
                self.since = time.monotonic()
            self._records = self.batches.setdefault((table.topic, table.schema_text), [])
            self._table = table
        self._records.append(record)
        self.count += 1

    def clear(self) -> None:
        self.batches = {}
        self.count = 0
        self._table = None


def envelope(
    op: str, before: dict[str, Any] | None, after: dict[str, Any] | None, source: dict[str, Any]
) -> dict[str, Any]:
    return {
        "before": before,
        "after": after,
        "op": op,
        "ts_ms": int(time.time() * 1000),
        "source": source,
    }


class ChangeDecoder:
    """Decodes the stream of one slot into `Pending` events; see the module docstring."""

    def __init__(
        self,
        tables: dict[str, CapturedTable],
        *,
        origin: Origin,
        resume_lsn: int,
        describe: Callable[[str], TableShape],
        lookup_type: Callable[[int], PgType],
        shares: Shares | None = None,
    ) -> None:
        self._tables = tables  # by `schema.table`
        self._shares = shares
        # Per relation: the key's column positions to split its changes by, or None (the first
        # process's); and which events of the change at hand this process publishes.
        self._key_positions: dict[int, tuple[int, ...] | None] = {}
        self._sides = _BOTH
        # The processes the message last handled concerns, a bit per share index: a row change
        # its key's owners (old and new), anything else every process.
        self.readers = _EVERY_PROCESS
        self._origin = origin
        self._resume_lsn = resume_lsn
        self._describe = describe
        self._lookup_type = lookup_type
        self._relations: dict[int, CapturedTable | None] = {}
        self._xid: int | None = None
        self._commit_ms = 0
        self._skipping = False
        self._last_commit_lsn: int | None = None
        # The source block of each table in the current transaction, but for the change's own
        # `lsn` and `sequence`: built once per transaction and table, copied per change.
        self._sources: dict[str, tuple[dict[str, Any], str]] = {}
        self.in_transaction = False
        self.last_xid: int | None = None

    def handle(self, data: bytes, lsn: int, pending: Pending) -> pgoutput.Commit | None:
        """Decode one message into `pending`; returns the Commit that ends a transaction."""
        self.readers = _EVERY_PROCESS
        tag = data[0] if data else 0
        if tag in _ROW_CHANGES and not self._skipping:
            if self._shares is not None:
                self._route(data, self._shares)
                if self._sides == _NEITHER:
                    return None
            if tag != _DELETE and self._row_change(data, lsn, pending):
                return None
        message = pgoutput.decode(data)
        if isinstance(message, pgoutput.Begin):
            self.in_transaction = True
            self._skipping = message.final_lsn < self._resume_lsn
            self._xid = message.xid
            self._commit_ms = message.commit_ms
            self._sources = {}
        elif isinstance(message, pgoutput.Commit):
            self.in_transaction = False
            self._skipping = False
            self._last_commit_lsn = message.commit_lsn
            self.last_xid = self._xid
            return message
        elif isinstance(message, pgoutput.Relation):
            self._relation(message)
        elif self._skipping:
            pass
        elif isinstance(message, pgoutput.Insert):
            self._insert(message, lsn, pending)
        elif isinstance(message, pgoutput.Update):
            self._update(message, lsn, pending)
        elif isinstance(message, pgoutput.Delete):
            self._delete(message, lsn, pending)
        elif isinstance(message, pgoutput.Truncate):
            self._truncate(message, lsn, pending)
        return None

    def _route(self, data: bytes, shares: Shares) -> None:
        """Whose share an Insert, Update or Delete is (`readers`), and which of its events are
        this process's to publish (`_sides`): a key that changed is deleted by its old key's
        owner and created by its new key's."""
        positions = self._key_positions.get(pgoutput.relation_id_of(data), _UNKNOWN)
        if positions is _FIRST_COLUMN and (key := pgoutput.first_text_at(data)):
            # The commonest change: its key, read fast, is its only one.
            owner = shares.owner(key)
            self.readers = 1 << owner
            self._sides = _BOTH if owner == shares.index else _NEITHER
            return
        if positions is _UNKNOWN:
            self._sides = _BOTH  # an unknown relation: decoding it says what is wrong
            return
        if positions is None:  # not split: the first process's
            old_owner = new_owner = 0
        else:
            old, new = pgoutput.row_keys_at(data, positions)
            new_owner = shares.owner(new)
            old_owner = new_owner if old is None or old == new else shares.owner(old)
        self.readers = 1 << old_owner | 1 << new_owner
        self._sides = (_OLD if old_owner == shares.index else _NEITHER) | (
            _NEW if new_owner == shares.index else _NEITHER
        )

    def _relation(self, message: pgoutput.Relation) -> None:
        qualified = f"{message.schema}.{message.table}"
        table = self._tables.get(qualified)
        self._key_positions[message.relation_id] = None
        if table is None:  # in the publication, but not captured by this connector
            self._relations[message.relation_id] = None
            return
        current = self._describe(qualified)
        comments = {c.name: c.comment for c in current.columns}
        names = [c.name for c in message.columns]
        shape = TableShape(
            schema=message.schema,
            table=message.table,
            columns=tuple(
                TableColumn(
                    name=c.name,
                    type=column_type(c.type_oid, c.type_modifier, self._lookup_type),
                    comment=comments.get(c.name),
                    type_oid=c.type_oid,
                )
                for c in message.columns
            ),
            primary_key=tuple(k for k in current.primary_key if k in names),
            comment=current.comment,
        )
        updated = CapturedTable(topic=table.topic, shape=shape, identity=message.replica_identity)
        if updated.schema_text != table.schema_text:
            log.info("table %s changed shape: columns %s", qualified, ", ".join(names))
        self._tables[qualified] = updated
        self._relations[message.relation_id] = updated
        self._key_positions[message.relation_id] = _split_key(message, shape)

    def _table(self, relation_id: int) -> CapturedTable | None:
        if relation_id not in self._relations:
            raise PgOutputError(f"change for relation {relation_id} before its Relation message")
        return self._relations[relation_id]

    def _source(self, table: CapturedTable, lsn: int) -> dict[str, Any]:
        cached = self._sources.get(table.topic)
        if cached is None:
            base = source_block(
                self._origin,
                table.shape,
                commit_ms=self._commit_ms,
                snapshot="false",
                tx_id=self._xid,
                lsn=None,
                last_commit_lsn=self._last_commit_lsn,
            )
            last = "null" if self._last_commit_lsn is None else f'"{self._last_commit_lsn}"'
            cached = self._sources[table.topic] = (base, f"[{last},")
        base, sequence_start = cached
        source = base.copy()
        source["lsn"] = lsn
        source["sequence"] = f'{sequence_start}"{lsn}"]'  # as `source_block` writes it
        return source

    def _record(
        self, table: CapturedTable, key: Any, value: Any, unchanged: list[str] | None = None
    ) -> IncomingRecord:
        # The hub's own header, so not among the publisher's `headers`, which may not use it.
        own = {UNCHANGED_HEADER: ",".join(unchanged)} if unchanged else None
        # (value, key, headers, timestamp, hub_headers), by position: one is made per change
        return IncomingRecord(value, key, None, self._commit_ms or None, own)

    def _row_change(self, data: bytes, lsn: int, pending: Pending) -> bool:
        """An Insert, or an Update without an old tuple, of a known relation whose every column
        came as text or null, straight to its event (`pgoutput.row_change_at`): the events
        `_insert` and `_update` make of it. `data` is an Insert or an Update; False for any
        other (an Update with an old tuple, a column not sent), left to `decode`."""
        if len(data) < 5:
            return False
        table = self._table(pgoutput.relation_id_of(data))
        if table is None:
            return True
        after = pgoutput.row_change_at(data, table.shape.converters)
        if after is None:
            return False
        value = envelope("c" if data[0] == 0x49 else "u", None, after, self._source(table, lsn))
        pending.add(table, self._record(table, key_of(table.shape, after), value))
        return True

    def _insert(self, message: pgoutput.Insert, lsn: int, pending: Pending) -> None:
        table = self._table(message.relation_id)
        if table is None:
            return
        after = convert_row(table.shape, message.new).values
        value = envelope("c", None, after, self._source(table, lsn))
        pending.add(table, self._record(table, key_of(table.shape, after), value))

    def _update(self, message: pgoutput.Update, lsn: int, pending: Pending) -> None:
        table = self._table(message.relation_id)
        if table is None:
            return
        full_old = message.old if message.old is not None and not message.old_is_key_only else None
        after = convert_row(table.shape, message.new, fallback=full_old)
        before = None if message.old is None else convert_row(table.shape, message.old).values
        new_key = key_of(table.shape, after.values)
        old_key = None if before is None else key_of(table.shape, before)
        source = self._source(table, lsn)
        if old_key is not None and old_key != new_key:
            # The primary key changed: the old key is deleted, the new one created, as Debezium
            # does, so compaction by key stays right. With shares, each key's owner publishes
            # its events.
            if self._sides & _OLD:
                delete = envelope("d", before, None, source)
                pending.add(table, self._record(table, old_key, delete))
                pending.add(table, self._record(table, old_key, None))
            if self._sides & _NEW:
                value = envelope("c", None, after.values, source)
                pending.add(table, self._record(table, new_key, value, after.unchanged))
            return
        if self._sides & _NEW:
            value = envelope("u", before, after.values, source)
            pending.add(table, self._record(table, new_key, value, after.unchanged))

    def _delete(self, message: pgoutput.Delete, lsn: int, pending: Pending) -> None:
        table = self._table(message.relation_id)
        if table is None:
            return
        before = convert_row(table.shape, message.old).values
        key = key_of(table.shape, before)
        pending.add(
            table, self._record(table, key, envelope("d", before, None, self._source(table, lsn)))
        )
        if key is not None:
            pending.add(table, self._record(table, key, None))  # the tombstone

    def _truncate(self, message: pgoutput.Truncate, lsn: int, pending: Pending) -> None:
        if self._shares is not None and self._shares.index != 0:
            return  # the first process's
        for relation_id in message.relation_ids:
            table = self._table(relation_id)
            if table is None:
                continue
            value = envelope("t", None, None, self._source(table, lsn))
            pending.add(table, self._record(table, NO_KEY, value))


def _split_key(message: pgoutput.Relation, shape: TableShape) -> tuple[int, ...] | None:
    """The positions of the primary key's columns when every change of the table sends them
    (see `Shares`), else None."""
    if not shape.primary_key or message.replica_identity not in (
        ReplicaIdentity.DEFAULT,
        ReplicaIdentity.FULL,
    ):
        return None
    positions = {c.name: i for i, c in enumerate(message.columns)}
    if any(
        k not in positions or message.columns[positions[k]].type_oid not in _FIXED_WIDTH_TYPES
        for k in shape.primary_key
    ):
        return None
    split = tuple(sorted(positions[k] for k in shape.primary_key))
    return _FIRST_COLUMN if split == _FIRST_COLUMN else split
