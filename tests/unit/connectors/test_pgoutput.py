"""The pgoutput decoder against messages laid out as the PostgreSQL documentation describes."""

import struct

import pytest

from connectors.postgres import pgoutput
from connectors.postgres.errors import PgOutputError
from connectors.postgres.pgoutput import (
    UNCHANGED_TOAST,
    Begin,
    Commit,
    Delete,
    Insert,
    Relation,
    ReplicaIdentity,
    Truncate,
    TypeInfo,
    Update,
    format_lsn,
    parse_lsn,
)
from tests.support.pgoutput import pg_string, pg_tuple

pytestmark = pytest.mark.unit

# 2024-01-01T00:00:00Z in microseconds since 2000-01-01.
JAN_2024_PG_MICROS = 757_382_400_000_000
JAN_2024_UNIX_MS = 1_704_067_200_000


def test_begin_and_commit() -> None:
    begin = pgoutput.decode(b"B" + struct.pack(">QqI", 0x1_0000_0010, JAN_2024_PG_MICROS, 742))
    assert begin == Begin(final_lsn=0x1_0000_0010, commit_ms=JAN_2024_UNIX_MS, xid=742)
    commit = pgoutput.decode(b"C" + struct.pack(">BQQq", 0, 100, 130, JAN_2024_PG_MICROS))
    assert commit == Commit(commit_lsn=100, end_lsn=130, commit_ms=JAN_2024_UNIX_MS)


def test_relation_with_key_flags_and_identity() -> None:
    data = (
        b"R"
        + struct.pack(">I", 16384)
        + pg_string("public")
        + pg_string("orders")
        + b"f"
        + struct.pack(">h", 2)
        + b"\x01"
        + pg_string("id")
        + struct.pack(">Ii", 20, -1)
        + b"\x00"
        + pg_string("amount")
        + struct.pack(">Ii", 1700, (10 << 16 | 2) + 4)
    )
    relation = pgoutput.decode(data)
    assert isinstance(relation, Relation)
    assert (relation.relation_id, relation.schema, relation.table) == (16384, "public", "orders")
    assert relation.replica_identity is ReplicaIdentity.FULL
    assert [(c.name, c.type_oid, c.in_identity) for c in relation.columns] == [
        ("id", 20, True),
        ("amount", 1700, False),
    ]
    assert relation.columns[1].type_modifier == (10 << 16 | 2) + 4


def test_type_message() -> None:
    data = b"Y" + struct.pack(">I", 90001) + pg_string("public") + pg_string("mood")
    assert pgoutput.decode(data) == TypeInfo(type_oid=90001, schema="public", name="mood")


def test_insert_with_null_and_utf8_text() -> None:
    data = b"I" + struct.pack(">I", 7) + b"N" + pg_tuple("1", None, "grüße")
    assert pgoutput.decode(data) == Insert(relation_id=7, new=("1", None, "grüße"))


def test_update_without_old_tuple_keeps_unchanged_toast_marker() -> None:
    data = b"U" + struct.pack(">I", 7) + b"N" + pg_tuple("1", UNCHANGED_TOAST, "3")
    update = pgoutput.decode(data)
    assert update == Update(
        relation_id=7, old=None, old_is_key_only=False, new=("1", UNCHANGED_TOAST, "3")
    )


@pytest.mark.parametrize(("marker", "key_only"), [(b"K", True), (b"O", False)])
def test_update_with_old_key_or_old_row(marker: bytes, key_only: bool) -> None:
    data = b"U" + struct.pack(">I", 7) + marker + pg_tuple("1", None) + b"N" + pg_tuple("2", "x")
    update = pgoutput.decode(data)
    assert isinstance(update, Update)
    assert update.old == ("1", None) and update.old_is_key_only is key_only
    assert update.new == ("2", "x")


def test_delete_with_key() -> None:
    data = b"D" + struct.pack(">I", 7) + b"K" + pg_tuple("5", None)
    assert pgoutput.decode(data) == Delete(relation_id=7, old=("5", None), old_is_key_only=True)


def test_truncate_of_several_tables() -> None:
    data = b"T" + struct.pack(">iB", 2, 3) + struct.pack(">II", 7, 8)
    assert pgoutput.decode(data) == Truncate(
        relation_ids=(7, 8), cascade=True, restart_identity=True
    )


def test_binary_column_values_are_refused_with_the_reason() -> None:
    data = b"I" + struct.pack(">I", 7) + b"N" + struct.pack(">h", 1) + b"b"
    with pytest.raises(PgOutputError, match="binary"):
        pgoutput.decode(data)


def test_unknown_message_type_is_refused() -> None:
    with pytest.raises(PgOutputError, match="'S'"):
        pgoutput.decode(b"S\x00\x00\x00\x01")


def test_lsn_text_form_round_trips() -> None:
    assert parse_lsn("16/B374D848") == 0x16_B374D848
    assert format_lsn(0x16_B374D848) == "16/B374D848"
    assert format_lsn(parse_lsn("0/0")) == "0/0"


def test_row_keys_are_read_from_each_kind_of_change_without_decoding_it() -> None:
    relation = struct.pack(">I", 7)
    keys = pgoutput.row_keys_at
    assert keys(b"I" + relation + b"N" + pg_tuple("5", "x", "9"), (0, 2)) == (None, b"5\x009")
    assert keys(b"U" + relation + b"N" + pg_tuple("5", "y", "9"), (0, 2)) == (None, b"5\x009")
    changed = b"U" + relation + b"K" + pg_tuple("5", None, "9") + b"N" + pg_tuple("6", "y", "9")
    assert keys(changed, (0, 2)) == (b"5\x009", b"6\x009")
    full = b"U" + relation + b"O" + pg_tuple("5", "old", "9") + b"N" + pg_tuple("5", "y", "9")
    assert keys(full, (0, 2)) == (b"5\x009", b"5\x009")
    deleted = b"D" + relation + b"K" + pg_tuple("5", None, "9")
    assert keys(deleted, (0, 2)) == (b"5\x009", b"5\x009")
    # A key column null or not sent: no key to tell the row by.
    assert keys(b"I" + relation + b"N" + pg_tuple(None, "x", "9"), (0,)) == (
        None,
        pgoutput.UNKNOWN_KEY,
    )
    unsent = b"U" + relation + b"N" + pg_tuple(UNCHANGED_TOAST, "x", "9")
    assert keys(unsent, (0,)) == (None, pgoutput.UNKNOWN_KEY)
    with pytest.raises(PgOutputError):
        keys(b"U" + relation + b"X", (0,))


def test_the_first_columns_text_is_read_where_it_is_a_changes_only_key() -> None:
    relation = struct.pack(">I", 7)
    first, keys = pgoutput.first_text_at, pgoutput.row_keys_at
    inserted = b"I" + relation + b"N" + pg_tuple("5", "x")
    updated = b"U" + relation + b"N" + pg_tuple("5", "y")
    # The key `row_keys_at` reads from the same changes.
    assert first(inserted) == keys(inserted, (0,))[1] == b"5"
    assert first(updated) == keys(updated, (0,))[1] == b"5"
    assert first(b"I" + relation + b"N" + pg_tuple("", "x")) == b""
    # Changes with an old key, or no text in the first column, are left to `row_keys_at`.
    assert first(b"U" + relation + b"K" + pg_tuple("5", None) + b"N" + pg_tuple("6", "y")) is None
    assert first(b"D" + relation + b"K" + pg_tuple("5", None)) is None
    assert first(b"I" + relation + b"N" + pg_tuple(None, "x")) is None
    assert first(b"U" + relation + b"N" + pg_tuple(UNCHANGED_TOAST, "x")) is None
    assert first(b"I" + relation + b"N") is None  # cut short
