import base64
import io
import json
from datetime import UTC, date, datetime
from decimal import Decimal

import fastavro
import pytest

from hub_core.errors import ErrorCode
from registry.avro import parse
from registry.errors import InvalidRecord
from registry.serde import decode, encode, to_datum
from registry.types import SchemaId

pytestmark = pytest.mark.unit

ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "sales",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "quantity", "type": "int"},
        {
            "name": "price",
            "type": {"type": "bytes", "logicalType": "decimal", "precision": 6, "scale": 2},
        },
        {"name": "placed_at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]}},
        {"name": "note", "type": ["null", "string"], "default": None},
        {
            "name": "lines",
            "type": {
                "type": "array",
                "items": {
                    "type": "record",
                    "name": "Line",
                    "fields": [{"name": "sku", "type": "string"}],
                },
            },
        },
        {"name": "attributes", "type": {"type": "map", "values": "string"}, "default": {}},
        {"name": "checksum", "type": "bytes", "default": ""},
    ],
}

VALUE = {
    "id": "o-1",
    "quantity": 3,
    "price": "12.50",
    "placed_at": "2024-05-01T12:00:00Z",
    "day": "2024-05-01",
    "status": "PAID",
    "note": "gift",
    "lines": [{"sku": "A"}, {"sku": "B"}],
    "attributes": {"channel": "web"},
    "checksum": base64.b64encode(b"\x01\x02").decode(),
}


def _read(message: bytes) -> dict:
    schema = fastavro.parse_schema(ORDER)
    return fastavro.schemaless_reader(io.BytesIO(message[5:]), schema, None)


def test_natural_json_encodes_to_framed_avro_that_avro_readers_decode() -> None:
    message = encode(VALUE, schema=parse(json.dumps(ORDER)), schema_id=SchemaId(7))
    assert message[:5] == b"\x00\x00\x00\x00\x07"
    record = _read(message)
    assert record["price"] == Decimal("12.50")
    assert record["placed_at"] == datetime(2024, 5, 1, 12, tzinfo=UTC)
    assert record["day"] == date(2024, 5, 1)
    assert record["status"] == "PAID"
    assert record["note"] == "gift"
    assert record["lines"] == [{"sku": "A"}, {"sku": "B"}]
    assert record["checksum"] == b"\x01\x02"


def test_decode_reads_back_what_encode_wrote() -> None:
    schema = parse(json.dumps(ORDER))
    message = encode(VALUE, schema=schema, schema_id=SchemaId(3))
    assert decode(message, writer_schema=lambda _id: schema)["lines"] == [
        {"sku": "A"},
        {"sku": "B"},
    ]


def test_missing_fields_with_defaults_take_the_default() -> None:
    value = {k: v for k, v in VALUE.items() if k not in ("note", "attributes", "checksum")}
    record = _read(encode(value, schema=parse(json.dumps(ORDER)), schema_id=SchemaId(1)))
    assert record["note"] is None
    assert record["attributes"] == {}


def test_epoch_millis_and_offset_timestamps_mean_the_same_instant() -> None:
    as_epoch = to_datum({**VALUE, "placed_at": 1714564800000}, ORDER)
    as_offset = to_datum({**VALUE, "placed_at": "2024-05-01T14:00:00+02:00"}, ORDER)
    assert as_epoch["placed_at"] == as_offset["placed_at"] == 1714564800000


@pytest.mark.parametrize(
    ("change", "path", "reason"),
    [
        ({"quantity": "three"}, "$.quantity", "expected an integer"),
        ({"quantity": 2**31}, "$.quantity", "out of range for int"),
        ({"price": "12.505"}, "$.price", "decimal places"),
        ({"price": 12.5}, "$.price", "decimal as a string"),
        ({"placed_at": "yesterday"}, "$.placed_at", "ISO-8601"),
        ({"status": "SHIPPED"}, "$.status", "valid symbols: NEW, PAID"),
        ({"note": 5}, "$.note", "none of the union"),
        ({"lines": [{"sku": "A"}, {"sku": 1}]}, "$.lines[1].sku", "expected a string"),
        ({"colour": "red"}, "$.colour", "unknown field"),
        ({"checksum": "***"}, "$.checksum", "base64"),
    ],
)
def test_invalid_values_name_the_field_path_and_reason(
    change: dict, path: str, reason: str
) -> None:
    with pytest.raises(InvalidRecord, match=reason) as caught:
        to_datum({**VALUE, **change}, ORDER)
    assert caught.value.path == path
    assert caught.value.code is ErrorCode.INVALID_RECORD


def test_a_missing_required_field_is_reported() -> None:
    value = {k: v for k, v in VALUE.items() if k != "id"}
    with pytest.raises(InvalidRecord, match="required field is missing") as caught:
        to_datum(value, ORDER)
    assert caught.value.path == "$.id"


def test_named_types_can_be_referenced_after_their_definition() -> None:
    schema = {
        "type": "record",
        "name": "Pair",
        "fields": [
            {
                "name": "a",
                "type": {"type": "record", "name": "P", "fields": [{"name": "x", "type": "int"}]},
            },
            {"name": "b", "type": "P"},
        ],
    }
    assert to_datum({"a": {"x": 1}, "b": {"x": 2}}, schema) == {"a": {"x": 1}, "b": {"x": 2}}


def test_a_number_too_large_for_a_double_is_an_invalid_record() -> None:
    with pytest.raises(InvalidRecord, match="too large") as caught:
        to_datum(
            {"x": 10**400},
            {"type": "record", "name": "R", "fields": [{"name": "x", "type": "double"}]},
        )
    assert caught.value.path == "$.x"
