"""The change decoder: pgoutput messages of one transaction to the events the connector publishes.

Inserts and updates without an old tuple are read straight into their rows
(`pgoutput.row_change_at`); every other message through `pgoutput.decode`. Both must give the
same events, which these tests check against messages of both kinds.
"""

import struct
from collections.abc import Sequence
from typing import Any

import pytest

from connectors.postgres.changes import CapturedTable, ChangeDecoder, Pending, Shares
from connectors.postgres.envelope import (
    UNAVAILABLE,
    UNCHANGED_HEADER,
    Origin,
    TableColumn,
    TableShape,
)
from connectors.postgres.pgoutput import UNCHANGED_TOAST
from connectors.postgres.typemap import column_type
from publish.publisher import IncomingRecord
from tests.support.pgoutput import pg_string, pg_tuple

pytestmark = pytest.mark.unit

RELATION_ID = 16384
# (name, type oid, type modifier): bigint key, integer, numeric(12,2), text, timestamptz
COLUMNS = [("id", 20, -1), ("customer", 23, -1), ("amount", 1700, (12 << 16 | 2) + 4),
           ("status", 25, -1), ("updated_at", 1184, -1)]  # fmt: skip
SHAPE = TableShape(
    schema="public",
    table="orders",
    columns=tuple(TableColumn(name=n, type=column_type(o, m), type_oid=o) for n, o, m in COLUMNS),
    primary_key=("id",),
)

NOON = "2026-11-25 12:00:00.123456+00"
NOON_MICROS = 1_795_608_000_123_456


def _relation() -> bytes:
    out = b"R" + struct.pack(">I", RELATION_ID) + pg_string("public") + pg_string("orders") + b"d"
    out += struct.pack(">h", len(COLUMNS))
    for name, oid, modifier in COLUMNS:
        out += bytes([name == "id"]) + pg_string(name) + struct.pack(">Ii", oid, modifier)
    return out


def _begin(final_lsn: int, xid: int) -> bytes:
    return b"B" + struct.pack(">QqI", final_lsn, 0, xid)


def _commit(lsn: int) -> bytes:
    return b"C" + struct.pack(">BQQq", 0, lsn, lsn + 8, 0)


def _change(tag: bytes, *parts: bytes) -> bytes:
    return tag + struct.pack(">I", RELATION_ID) + b"".join(parts)


def _pending(
    messages: Sequence[bytes],
    *,
    shares: Shares | None = None,
    shape: TableShape = SHAPE,
    positions: Sequence[int] | None = None,
) -> Pending:
    """The events a decoder of `shape`'s table (with `shares`, of its share) makes of
    `messages`, at `positions` (or the first at position 1000, the next at 1001, ...)."""
    qualified = f"{shape.schema}.{shape.table}"
    decoder = ChangeDecoder(
        {qualified: CapturedTable(topic=f"cdc.shop.{qualified}", shape=shape)},
        origin=Origin(name="shop", db="shop"),
        resume_lsn=0,
        describe=lambda _qualified: shape,
        lookup_type=lambda oid: pytest.fail(f"type {oid} looked up"),
        shares=shares,
    )
    pending = Pending()
    at = positions or range(1000, 1000 + len(messages))
    for position, message in zip(at, messages, strict=True):
        decoder.handle(message, position, pending)
    return pending


def _decode(
    *messages: bytes, shares: Shares | None = None, positions: Sequence[int] | None = None
) -> list[IncomingRecord]:
    pending = _pending(messages, shares=shares, positions=positions)
    return [record for records in pending.batches.values() for record in records]


def _row(id_: int, customer: int | None, amount: str, status: str) -> dict[str, Any]:
    return {"id": id_, "customer": customer, "amount": amount, "status": status,
            "updated_at": NOON_MICROS}  # fmt: skip


def test_inserts_and_updates_become_create_and_update_events_with_their_rows() -> None:
    records = _decode(
        _begin(2000, 7),
        _relation(),
        _change(b"I", b"N", pg_tuple("1", "42", "12.50", "new", NOON)),
        _change(b"I", b"N", pg_tuple("2", None, "-0.01", "n\u00e9w", NOON)),
        _change(b"U", b"N", pg_tuple("1", "42", "13.50", "paid", NOON)),
        _commit(2000),
    )
    assert [(r.key, r.value["op"], r.value["before"], r.value["after"]) for r in records] == [
        ({"id": 1}, "c", None, _row(1, 42, "12.50", "new")),
        ({"id": 2}, "c", None, _row(2, None, "-0.01", "n\u00e9w")),
        ({"id": 1}, "u", None, _row(1, 42, "13.50", "paid")),
    ]
    assert [r.value["source"]["lsn"] for r in records] == [1002, 1003, 1004]
    assert [r.value["source"]["sequence"] for r in records] == [
        '[null,"1002"]',
        '[null,"1003"]',
        '[null,"1004"]',
    ]
    assert all(r.value["source"]["txId"] == 7 and r.headers is None for r in records)


def test_an_update_with_a_value_not_sent_carries_the_marker_and_names_the_column() -> None:
    (record,) = _decode(
        _begin(2000, 7),
        _relation(),
        _change(b"U", b"N", pg_tuple("1", "42", "13.50", UNCHANGED_TOAST, NOON)),
        _commit(2000),
    )
    assert record.value["after"] == _row(1, 42, "13.50", UNAVAILABLE)
    # The hub's own header: apart from a publisher's, which may not use `hub.` names.
    assert (record.headers, record.hub_headers) == (None, {UNCHANGED_HEADER: "status"})


def _key_changed() -> list[bytes]:
    """A transaction that changes the key of row 1 to 3."""
    old_key = pg_tuple("1", None, None, None, None)
    new_row = pg_tuple("3", "42", "13.50", "paid", NOON)
    return [
        _begin(2000, 7),
        _relation(),
        _change(b"U", b"K", old_key, b"N", new_row),
        _commit(2000),
    ]


def test_an_update_of_the_key_deletes_the_old_key_and_creates_the_new_one() -> None:
    records = _decode(*_key_changed())
    assert [(r.key, r.value and r.value["op"]) for r in records] == [
        ({"id": 1}, "d"),
        ({"id": 1}, None),
        ({"id": 3}, "c"),
    ]
    assert records[2].value["after"] == _row(3, 42, "13.50", "paid")


def test_changes_of_a_transaction_before_the_resume_position_are_skipped() -> None:
    table = CapturedTable(topic="cdc.shop.public.orders", shape=SHAPE)
    decoder = ChangeDecoder(
        {"public.orders": table},
        origin=Origin(name="shop", db="shop"),
        resume_lsn=5000,
        describe=lambda _qualified: SHAPE,
        lookup_type=lambda oid: pytest.fail(f"type {oid} looked up"),
    )
    pending = Pending()
    for message in (_begin(2000, 7), _relation(),
                    _change(b"I", b"N", pg_tuple("1", "42", "12.50", "new", NOON)),
                    _commit(2000)):  # fmt: skip
        decoder.handle(message, 1000, pending)
    assert pending.count == 0


# -- shares of a stream read by several processes (`stream_processes`) ------------------------


def _shared_stream() -> list[bytes]:
    """A transaction touching many keys: inserts, updates with and without an old tuple, a key
    change, a delete, and a truncate."""
    messages = [_begin(9000, 8), _relation()]
    for id_ in range(1, 41):
        messages.append(_change(b"I", b"N", pg_tuple(str(id_), "1", "1.00", "new", NOON)))
    for id_ in range(1, 41):
        messages.append(_change(b"U", b"N", pg_tuple(str(id_), "2", "2.00", "paid", NOON)))
    for id_ in range(1, 11):  # keys change: 1 -> 101, ...
        messages.append(
            _change(
                b"U",
                b"K",
                pg_tuple(str(id_), None, None, None, None),
                b"N",
                pg_tuple(str(id_ + 100), "2", "2.00", "paid", NOON),
            )
        )
    for id_ in range(11, 16):
        messages.append(_change(b"D", b"K", pg_tuple(str(id_), None, None, None, None)))
    messages.append(b"T" + struct.pack(">iBI", 1, 0, RELATION_ID))
    messages.append(_commit(9000))
    return messages


def _events(records: list[IncomingRecord]) -> list[tuple[Any, str | None, int]]:
    """(key, op or None for a tombstone, the change's LSN) per record, in order."""
    return [(r.key, r.value and r.value["op"], r.value and r.value["source"]["lsn"])
            for r in records]  # fmt: skip


def _routed(messages: Sequence[bytes], count: int) -> list[tuple[list[int], list[bytes]]]:
    """What each of `count` processes is sent, as the connector (share 0) sends it on: the
    messages whose `readers` name that process, and their positions (as `_decode` gives)."""
    first = ChangeDecoder(
        {"public.orders": CapturedTable(topic="cdc.shop.public.orders", shape=SHAPE)},
        origin=Origin(name="shop", db="shop"),
        resume_lsn=0,
        describe=lambda _qualified: SHAPE,
        lookup_type=lambda oid: pytest.fail(f"type {oid} looked up"),
        shares=Shares(0, count),
    )
    sent: list[tuple[list[int], list[bytes]]] = [([], []) for _ in range(count)]
    for position, message in enumerate(messages, start=1000):
        first.handle(message, position, Pending())
        for index in range(count):
            if first.readers & 1 << index:
                sent[index][0].append(position)
                sent[index][1].append(message)
    return sent


def test_shares_of_a_stream_publish_every_event_once_each_rows_in_order() -> None:
    messages = _shared_stream()
    whole = _events(_decode(*messages))
    routed = _routed(messages, 3)
    shares = [
        _events(_decode(*sent, shares=Shares(index, 3), positions=positions))
        for index, (positions, sent) in enumerate(routed)
    ]

    # Each process is sent the framing and its own rows' changes, not the whole stream.
    assert all(len(sent) < len(messages) * 2 / 3 for _, sent in routed[1:])
    assert all(sent[:2] == messages[:2] and sent[-1] == messages[-1] for _, sent in routed)
    assert sorted(map(repr, whole)) == sorted(repr(e) for share in shares for e in share)
    assert all(len(share) > 10 for share in shares)  # the keys spread over the processes
    for share in shares:  # a row's events in one share, in the stream's order
        for event in share:
            assert [e for e in whole if e[0] == event[0]] == [e for e in share if e[0] == event[0]]
    truncates = [[e for e in share if e[1] == "t"] for share in shares]
    assert [len(t) for t in truncates] == [1, 0, 0]  # the first process's


def test_a_changed_key_is_deleted_by_its_old_keys_share_and_created_by_its_new_keys() -> None:
    messages = _key_changed()
    owner_old, owner_new = Shares(0, 64).owner(b"1"), Shares(0, 64).owner(b"3")
    assert owner_old != owner_new  # the two keys fall in different shares of 64
    routed = _routed(messages, 64)
    old = _events(_decode(*routed[owner_old][1], shares=Shares(owner_old, 64)))
    new = _events(_decode(*routed[owner_new][1], shares=Shares(owner_new, 64)))
    assert [len(sent) for _, sent in routed].count(len(messages)) == 2  # both keys' owners
    assert [(k, op) for k, op, _ in old] == [({"id": 1}, "d"), ({"id": 1}, None)]
    assert [(k, op) for k, op, _ in new] == [({"id": 3}, "c")]


def test_a_table_keyed_by_text_is_the_first_processs_alone() -> None:
    columns = [("code", 25, -1), ("qty", 23, -1)]
    shape = TableShape(
        schema="public",
        table="stock",
        columns=tuple(
            TableColumn(name=n, type=column_type(o, m), type_oid=o) for n, o, m in columns
        ),
        primary_key=("code",),
    )
    relation = b"R" + struct.pack(">I", RELATION_ID) + pg_string("public") + pg_string("stock")
    relation += b"d" + struct.pack(">h", 2)
    for name, oid, modifier in columns:
        relation += bytes([name == "code"]) + pg_string(name) + struct.pack(">Ii", oid, modifier)
    messages = [_begin(9000, 8), relation]
    messages += [_change(b"I", b"N", pg_tuple(f"k{i}", "1")) for i in range(20)]
    messages.append(_commit(9000))

    counts = [_pending(messages, shares=Shares(i, 2), shape=shape).count for i in range(2)]
    assert counts == [20, 0]
