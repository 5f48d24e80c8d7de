"""PostgreSQL types as Avro types, and column text as values the Avro encoder accepts."""

import base64
import io
import json
from collections.abc import Callable
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import fastavro
import pytest

from connectors.postgres.envelope import (
    UNAVAILABLE,
    Origin,
    TableColumn,
    TableShape,
    convert_row,
    key_schema,
    source_block,
    value_schema,
)
from connectors.postgres.pgoutput import UNCHANGED_TOAST
from connectors.postgres.typemap import PgType, column_type, numeric_precision_scale, parse_array
from hub_core.errors import HubError
from registry.avro import parse
from registry.binary import direct_writer
from registry.compiled import compiled
from registry.errors import InvalidRecord
from registry.serde import to_datum
from registry.types import SchemaId

pytestmark = pytest.mark.unit


def _numeric_modifier(precision: int, scale: int) -> int:
    return ((precision << 16) | scale) + 4


@pytest.mark.parametrize(
    ("oid", "modifier", "avro", "text", "value"),
    [
        (21, -1, "int", "-7", -7),
        (23, -1, "int", "42", 42),
        (20, -1, "long", "9000000000", 9_000_000_000),
        (16, -1, "boolean", "t", True),
        (700, -1, "float", "1.5", 1.5),
        (701, -1, "double", "-Infinity", float("-inf")),
        (25, -1, "string", "hello", "hello"),
        (1043, 24, "string", "varchar", "varchar"),
        (1042, 9, "string", "pad  ", "pad  "),
        (17, -1, "bytes", "\\x00ff", base64.b64encode(b"\x00\xff").decode()),
        (1082, -1, {"type": "int", "logicalType": "date"}, "2024-02-29", 19_782),
        (1082, -1, {"type": "int", "logicalType": "date"}, "1969-12-31", -1),
        (1083, -1, {"type": "long", "logicalType": "time-micros"}, "01:02:03.5", 3_723_500_000),
        (
            1114,
            -1,
            {"type": "long", "logicalType": "local-timestamp-micros"},
            "2024-01-01 10:00:00",
            1_704_103_200_000_000,
        ),
        (
            1184,
            -1,
            {"type": "long", "logicalType": "timestamp-micros"},
            "2024-01-01 10:00:00+00",
            1_704_103_200_000_000,
        ),
        (
            1184,
            -1,
            {"type": "long", "logicalType": "timestamp-micros"},
            "1969-12-31 23:59:59.5+00",
            -500_000,
        ),
        (
            2950,
            -1,
            {"type": "string", "logicalType": "uuid"},
            "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
            "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
        ),
        (
            3802,
            -1,
            {"type": "string", "connect.name": "io.debezium.data.Json"},
            '{"a": 1}',
            '{"a": 1}',
        ),
        (
            1700,
            _numeric_modifier(10, 2),
            {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2},
            "12.50",
            "12.50",
        ),
        (1700, -1, "string", "3.141592653589793238", "3.141592653589793238"),
        (1007, -1, {"type": "array", "items": ["null", "int"]}, "{1,NULL,3}", [1, None, 3]),
        (
            1009,
            -1,
            {"type": "array", "items": ["null", "string"]},
            '{a,"b,c","d\\"e"}',
            ["a", "b,c", 'd"e'],
        ),
    ],
)
def test_builtin_types(oid: int, modifier: int, avro: Any, text: str, value: Any) -> None:
    mapped = column_type(oid, modifier)
    assert mapped.avro == avro
    assert mapped.convert(text) == value
    to_datum(mapped.convert(text), mapped.avro)  # the encoder accepts it


def test_unconstrained_numeric_says_why_it_is_a_string() -> None:
    assert "numeric" in (column_type(1700, -1).doc or "")
    assert numeric_precision_scale(-1) is None
    assert numeric_precision_scale(_numeric_modifier(38, 0)) == (38, 0)


def test_a_numeric_wider_than_a_spark_decimal_is_carried_as_exact_text() -> None:
    mapped = column_type(1700, _numeric_modifier(40, 18))
    assert mapped.avro == "string"  # a decimal(40, 18) feed schema would be refused (42201)
    assert "38" in (mapped.doc or "") and mapped.pg_type == "numeric(40,18)"
    digits = "1234567890123456789012.345678901234567890"
    assert mapped.convert(digits) == digits
    assert column_type(1700, _numeric_modifier(38, 18)).avro == {
        "type": "bytes", "logicalType": "decimal", "precision": 38, "scale": 18,
    }  # fmt: skip


def _lookup(types: dict[int, PgType]) -> Any:
    return types.__getitem__


def test_enum_domain_and_unknown_types_use_the_catalog() -> None:
    types = {
        90001: PgType(90001, "public.mood", "e", 0, 0, -1),
        90002: PgType(90002, "public.positive", "d", 0, 23, -1),
        90003: PgType(90003, "public._mood", "b", 90001, 0, -1),
        90004: PgType(90004, "public.inet_like", "b", 0, 0, -1),
    }
    enum = column_type(90001, -1, _lookup(types))
    assert enum.avro == {"type": "string", "hub.pg.type": "public.mood"}
    assert column_type(90002, -1, _lookup(types)).avro == "int"
    array = column_type(90003, -1, _lookup(types))
    assert array.avro == {"type": "array", "items": ["null", enum.avro]}
    assert array.convert("{happy,sad}") == ["happy", "sad"]
    assert column_type(90004, -1, _lookup(types)).avro == "string"


def test_array_literals() -> None:
    assert parse_array("{}") == []
    assert parse_array('{"",NULL,"NULL"}') == ["", None, "NULL"]
    assert parse_array("[0:1]={7,8}") == ["7", "8"]
    with pytest.raises(ValueError, match="multi-dimensional"):
        parse_array("{{1,2},{3,4}}")


def test_a_timestamp_column_answers_each_text_even_when_texts_repeat_and_alternate() -> None:
    first, other = column_type(1184, -1), column_type(1184, -1)
    noon = "2024-05-01 12:00:00+00"
    texts = [noon, noon, "2024-05-01 12:00:00.5+02", "infinity", noon, "infinity",
             "1999-12-31 23:59:59.999999"]  # fmt: skip
    expected = [1714564800000000, 1714564800000000, 1714557600500000, "infinity",
                1714564800000000, "infinity", 946684799999999]  # fmt: skip
    assert [first.convert(text) for text in texts] == expected
    assert [other.convert(text) for text in reversed(texts)] == expected[::-1]


SHAPE = TableShape(
    schema="public",
    table="docs",
    columns=(
        TableColumn("id", column_type(23, -1), type_oid=23),
        TableColumn("body", column_type(25, -1), comment="The text", type_oid=25),
        TableColumn("score", column_type(1700, _numeric_modifier(5, 1)), type_oid=1700),
    ),
    primary_key=("id",),
)


def test_envelope_schema_encodes_a_change_event() -> None:
    topic = "cdc.shop.public.docs"
    schema = value_schema(SHAPE, topic)
    fields = {f["name"]: f for f in schema["fields"][0]["type"][1]["fields"]}
    assert fields["id"]["type"] == "int"  # key columns are never null
    assert fields["body"]["type"] == ["null", "string"] and fields["body"]["doc"] == "The text"
    assert key_schema(SHAPE, topic) == {
        "type": "record",
        "name": "Key",
        "namespace": topic,
        "fields": [{"name": "id", "type": "int"}],
    }
    row = convert_row(SHAPE, ("1", UNCHANGED_TOAST, "2.5"))
    assert row.values == {"id": 1, "body": UNAVAILABLE, "score": "2.5"}
    assert row.unchanged == ["body"]
    source = source_block(
        Origin("shop", "db"), SHAPE, commit_ms=1, snapshot="false", tx_id=9, lsn=20,
        last_commit_lsn=10,
    )  # fmt: skip
    assert json.loads(source["sequence"]) == ["10", "20"]
    event = {"before": None, "after": row.values, "op": "u", "ts_ms": 2, "source": source}
    avro = parse(json.dumps(schema))
    encoder = compiled(avro)
    framed = encoder.encode(encoder.to_datum(event), SchemaId(1))
    decoded = fastavro.schemaless_reader(io.BytesIO(framed[5:]), avro.parsed, None)
    assert decoded["after"]["body"] == UNAVAILABLE


def test_unchanged_toast_takes_the_old_row_when_it_was_sent() -> None:
    row = convert_row(SHAPE, ("1", UNCHANGED_TOAST, None), fallback=("1", "old body", None))
    assert row.values == {"id": 1, "body": "old body", "score": None}
    assert row.unchanged == []


# -- the connector's values are written directly, to the bytes the text used to give -----------

WIDE = TableShape(
    schema="public",
    table="orders",
    columns=(
        TableColumn("id", column_type(20, -1), type_oid=20),
        TableColumn("amount", column_type(1700, _numeric_modifier(12, 2)), type_oid=1700),
        TableColumn("wide", column_type(1700, _numeric_modifier(38, 10)), type_oid=1700),
        TableColumn("at", column_type(1184, -1), type_oid=1184),
        TableColumn("local", column_type(1114, -1), type_oid=1114),
        TableColumn("day", column_type(1082, -1), type_oid=1082),
        TableColumn("note", column_type(25, -1), type_oid=25),
    ),
    primary_key=("id", "at"),
)
TOPIC = "cdc.shop.public.orders"
_VALUES_SCHEMA = parse(json.dumps(value_schema(WIDE, TOPIC)))
_VALUES = compiled(_VALUES_SCHEMA)
_KEYS = compiled(parse(json.dumps(key_schema(WIDE, TOPIC))))


def _event(values: dict[str, Any]) -> dict[str, Any]:
    source = source_block(
        Origin("shop", "db"), WIDE, commit_ms=1, snapshot="false", tx_id=9, lsn=20
    )
    return {"before": None, "after": values, "op": "c", "ts_ms": 2, "source": source}


def _as_text(texts: tuple[str | None, ...]) -> dict[str, Any]:
    """The row as the connector passed it on before: every one of these columns as its text."""
    return {
        c.name: int(t) if c.name == "id" and t else t
        for c, t in zip(WIDE.columns, texts, strict=True)
    }


def _outcome(encode: Callable[[], bytes]) -> tuple[Any, ...]:
    try:
        return ("ok", encode())
    except HubError as exc:
        return ("error", exc.code, exc.message, getattr(exc, "path", None))


ROWS: list[tuple[str | None, ...]] = [
    ("1", "0.00", "0.0000000000", "2024-01-01 10:00:00+00", "2024-01-01 10:00:00", "2024-02-29",
     "x"),
    ("2", "-1.28", "-" + "9" * 28 + "." + "9" * 10, "1969-12-31 23:59:59.999999+00",
     "1900-01-01 00:00:00", "1969-12-31", None),
    ("3", "9999999999.99", "1" + "0" * 27 + ".0000000001", "0001-01-01 00:00:00+00",
     "9999-12-31 23:59:59.999999", "0001-01-01", ""),
    ("4", "-0.01", "-0.5000000000", "2024-05-01 12:00:00.5+05:30", "1970-01-01 00:00:00",
     "1970-01-01", "é"),
    ("5", "12.50", None, "1901-12-13 20:45:52.123+00", None, None, None),
    ("6", "-9999999999.99", "0.0000000001", "2024-05-01 12:00:00-08", "2000-02-29 00:00:00.1",
     "2000-02-29", "y"),
]  # fmt: skip
REFUSED: list[tuple[str | None, ...]] = [
    ("7", "NaN", None, "2024-01-01 10:00:00+00", None, None, None),
    ("8", "1.00", "Infinity", "2024-01-01 10:00:00+00", None, None, None),
    ("9", "1.00", "-Infinity", "2024-01-01 10:00:00+00", None, None, None),
    ("10", "1.00", None, "infinity", None, None, None),
    ("11", "1.00", None, "-infinity", None, None, None),
    ("12", "1.00", None, "0044-03-15 12:00:00+00 BC", None, None, None),
    ("13", "1.00", None, "2024-01-01 10:00:00+00", "infinity", "-infinity", None),
    ("14", "1.00", None, "2024-01-01 10:00:00+00", None, "0044-03-15 BC", None),
]  # fmt: skip


@pytest.mark.parametrize("texts", ROWS + REFUSED)
def test_converted_rows_encode_to_the_bytes_their_text_gave(texts: tuple[str | None, ...]) -> None:
    """A converted change, written directly, is the message its columns' text gave through the
    general path; a value that path refused (NaN, infinity, BC) is refused the same way."""
    row = convert_row(WIDE, texts).values
    before = _as_text(texts)
    written = _outcome(lambda: _VALUES.to_message(_event(row), SchemaId(1)))
    assert written == _outcome(
        lambda: _VALUES.encode(_VALUES.to_datum(_event(before)), SchemaId(1))
    )
    assert written[0] == ("ok" if texts in ROWS else "error")
    key = {k: row[k] for k in WIDE.primary_key}
    old_key = {k: before[k] for k in WIDE.primary_key}
    assert _outcome(lambda: _KEYS.to_message(key, SchemaId(2))) == _outcome(
        lambda: _KEYS.encode(_KEYS.to_datum(old_key), SchemaId(2))
    )


@pytest.mark.parametrize("texts", ROWS)
def test_converted_rows_take_the_direct_writer_and_decode_to_their_values(
    texts: tuple[str | None, ...],
) -> None:
    event = _event(convert_row(WIDE, texts).values)
    write = direct_writer(_VALUES_SCHEMA.resolved)
    assert write is not None
    out = bytearray()
    write(out, event)  # no NotDirect: the general path is not needed
    decoded: Any = fastavro.schemaless_reader(io.BytesIO(out), _VALUES_SCHEMA.parsed, None)
    after = decoded["after"]
    _id, amount, wide, at, local, day, note = texts
    assert after["amount"] == Decimal(amount or "")
    assert after["wide"] == (None if wide is None else Decimal(wide))
    assert after["at"] == datetime.fromisoformat(at or "")
    assert after["local"] == (None if local is None else datetime.fromisoformat(local))
    assert after["day"] == (None if day is None else date.fromisoformat(day))
    assert after["note"] == note


def test_values_the_general_path_refuses_stay_text() -> None:
    row = convert_row(WIDE, REFUSED[3]).values
    assert row["at"] == "infinity" and row["amount"] == "1.00"
    with pytest.raises(InvalidRecord, match="ISO-8601"):
        _VALUES.to_message(_event(row), SchemaId(1))
