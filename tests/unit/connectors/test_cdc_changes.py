"""The change decoder: pgoutput messages of one transaction to the events the connector publishes.

Inserts and updates without an old tuple are read straight into their rows
(`pgoutput.row_change_at`); every other message through `pgoutput.decode`. Both must give the
same events, which these tests check against messages of both kinds.
"""

import struct
from typing import Any

import pytest

from connectors.postgres.changes import CapturedTable, ChangeDecoder, Pending
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


def _decode(*messages: bytes) -> list[IncomingRecord]:
    table = CapturedTable(topic="cdc.shop.public.orders", shape=SHAPE)
    decoder = ChangeDecoder(
        {"public.orders": table},
        origin=Origin(name="shop", db="shop"),
        resume_lsn=0,
        describe=lambda _qualified: SHAPE,
        lookup_type=lambda oid: pytest.fail(f"type {oid} looked up"),
    )
    pending = Pending()
    for position, message in enumerate(messages, start=1000):
        decoder.handle(message, position, pending)
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
    assert record.headers == {UNCHANGED_HEADER: "status"}


def test_an_update_of_the_key_deletes_the_old_key_and_creates_the_new_one() -> None:
    records = _decode(
        _begin(2000, 7),
        _relation(),
        _change(
            b"U",
            b"K",
            pg_tuple("1", None, None, None, None),
            b"N",
            pg_tuple("3", "42", "13.50", "paid", NOON),
        ),
        _commit(2000),
    )
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
