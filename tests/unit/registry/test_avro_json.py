import base64
import io
import json
from decimal import Decimal
from typing import Any

import fastavro
import pytest

from hub_core.errors import ErrorCode
from registry.avro import parse
from registry.avro_json import from_avro_json
from registry.errors import InvalidRecord
from registry.serde import encode
from registry.types import SchemaId
from registry.wire import unframe

pytestmark = pytest.mark.unit

PRICE = {"type": "bytes", "logicalType": "decimal", "precision": 8, "scale": 2}
ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "sales",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "quantity", "type": "int"},
        {"name": "price", "type": PRICE},
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
                    "fields": [
                        {"name": "sku", "type": "string"},
                        {"name": "discount", "type": ["null", PRICE], "default": None},
                    ],
                },
            },
        },
        {"name": "attributes", "type": {"type": "map", "values": "string"}, "default": {}},
        {"name": "checksum", "type": "bytes", "default": ""},
        {"name": "digest", "type": {"type": "fixed", "name": "Digest", "size": 4}},
        {"name": "gift_line", "type": ["null", "Line"], "default": None},
    ],
}


def _decimal_bytes(unscaled: int) -> str:
    """A decimal as Avro JSON carries it: its unscaled two's-complement bytes as code points."""
    size = max(1, (unscaled.bit_length() + 8) // 8)
    return unscaled.to_bytes(size, "big", signed=True).decode("latin-1")


AVRO_JSON = {
    "id": "o-1",
    "quantity": 3,
    "price": _decimal_bytes(1250),
    "placed_at": 1714564800000,
    "day": 19844,
    "status": "PAID",
    "note": {"string": "gift"},
    "lines": [
        {"sku": "A", "discount": None},
        {"sku": "B", "discount": {"bytes": _decimal_bytes(-5)}},
    ],
    "attributes": {"channel": "web"},
    "checksum": "\x00\x01\xff",
    "digest": "\xde\xad\xbe\xef",
    "gift_line": {"sales.Line": {"sku": "G"}},
}


def _read_back(value: Any, schema: dict[str, Any]) -> Any:
    """Natural JSON through the publish path's encoder, then decoded as a consumer would."""
    parsed = parse(json.dumps(schema))
    _id, payload = unframe(encode(value, schema=parsed, schema_id=SchemaId(1)))
    return fastavro.schemaless_reader(io.BytesIO(payload), parsed.parsed, None)


def _convert(value: Any, schema: Any, **kwargs: Any) -> Any:
    return from_avro_json(value, parse(json.dumps(schema)).resolved, **kwargs)


def _error(value: Any, schema: Any, **kwargs: Any) -> InvalidRecord:
    with pytest.raises(InvalidRecord) as caught:
        _convert(value, schema, **kwargs)
    assert caught.value.code is ErrorCode.INVALID_RECORD
    return caught.value


def test_a_full_avro_json_record_becomes_natural_json_the_encoder_takes() -> None:
    natural = _convert(AVRO_JSON, ORDER)
    assert natural == {
        "id": "o-1",
        "quantity": 3,
        "price": "12.50",
        "placed_at": 1714564800000,
        "day": 19844,
        "status": "PAID",
        "note": "gift",
        "lines": [{"sku": "A", "discount": None}, {"sku": "B", "discount": "-0.05"}],
        "attributes": {"channel": "web"},
        "checksum": base64.b64encode(b"\x00\x01\xff").decode(),
        "digest": base64.b64encode(b"\xde\xad\xbe\xef").decode(),
        "gift_line": {"sku": "G"},
    }
    decoded = _read_back(natural, ORDER)
    assert decoded["price"] == Decimal("12.50")
    assert decoded["lines"][1]["discount"] == Decimal("-0.05")
    assert decoded["checksum"] == b"\x00\x01\xff"
    assert decoded["digest"] == b"\xde\xad\xbe\xef"
    assert decoded["placed_at"].timestamp() == 1714564800


@pytest.mark.parametrize(
    ("unscaled", "scale", "text"),
    [
        (0, 2, "0.00"),
        (1, 2, "0.01"),
        (-1, 2, "-0.01"),
        (127, 0, "127"),
        (128, 0, "128"),  # needs a leading zero byte to stay positive
        (-128, 0, "-128"),
        (123456789012345678, 4, "12345678901234.5678"),
        (5, 9, "0.000000005"),  # never in exponent notation
    ],
)
def test_decimal_bytes_are_read_with_the_schema_scale(unscaled: int, scale: int, text: str) -> None:
    schema = {"type": "bytes", "logicalType": "decimal", "precision": 20, "scale": scale}
    assert _convert(_decimal_bytes(unscaled), schema) == text


def test_unions_are_unwrapped_by_branch_name() -> None:
    schema = ["null", "long", {"type": "map", "values": "int"}, {"type": "array", "items": "int"}]
    assert _convert(None, schema) is None
    assert _convert({"long": 7}, schema) == 7
    assert _convert({"map": {"a": 1}}, schema) == {"a": 1}
    assert _convert({"array": [1, 2]}, schema) == [1, 2]


def test_logical_types_in_unions_go_by_their_underlying_type() -> None:
    schema = {
        "type": "record",
        "name": "Event",
        "fields": [
            {
                "name": "at",
                "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}],
            },
            {"name": "amount", "type": ["null", PRICE]},
        ],
    }
    natural = _convert({"at": {"long": 1000}, "amount": {"bytes": _decimal_bytes(250)}}, schema)
    assert natural == {"at": 1000, "amount": "2.50"}


def test_named_branches_take_the_full_or_the_short_name() -> None:
    schema = {
        "type": "record",
        "name": "Payment",
        "namespace": "shop",
        "fields": [
            {
                "name": "method",
                "type": [
                    "null",
                    {
                        "type": "record",
                        "name": "Card",
                        "fields": [{"name": "last4", "type": "string"}],
                    },
                    {
                        "type": "record",
                        "name": "Transfer",
                        "namespace": "bank",
                        "fields": [{"name": "iban", "type": "string"}],
                    },
                ],
            }
        ],
    }
    assert _convert({"method": {"shop.Card": {"last4": "4242"}}}, schema) == {
        "method": {"last4": "4242"}
    }
    assert _convert({"method": {"Card": {"last4": "4242"}}}, schema) == {
        "method": {"last4": "4242"}
    }
    assert _convert({"method": {"bank.Transfer": {"iban": "DE00"}}}, schema) == {
        "method": {"iban": "DE00"}
    }


def test_a_record_branch_is_kept_when_an_earlier_branch_does_not_accept_it() -> None:
    card = {"type": "record", "name": "Card", "fields": [{"name": "last4", "type": "string"}]}
    cash = {"type": "record", "name": "Cash", "fields": [{"name": "currency", "type": "string"}]}
    schema = {"type": "record", "name": "P", "fields": [{"name": "m", "type": [card, cash]}]}
    natural = _convert({"m": {"Cash": {"currency": "EUR"}}}, schema)
    assert _read_back(natural, schema) == {"m": {"currency": "EUR"}}


def test_a_branch_the_encoder_would_swap_for_an_earlier_one_is_refused() -> None:
    schema = {"type": "record", "name": "R", "fields": [{"name": "b", "type": ["string", "bytes"]}]}
    error = _error({"b": {"bytes": "\x01"}}, schema)
    assert error.path == "$.b"
    assert "'string' accepts it too" in error.message
    # A value only the later branch accepts is fine.
    two_ints = {"type": "record", "name": "S", "fields": [{"name": "n", "type": ["int", "long"]}]}
    assert _convert({"n": {"long": 2**40}}, two_ints) == {"n": 2**40}
    # int and long carry the same number whichever branch the encoder picks.
    assert _convert({"n": {"long": 5}}, two_ints) == {"n": 5}


def test_named_types_defined_in_a_field_the_value_leaves_out_are_still_known() -> None:
    schema = {
        "type": "record",
        "name": "Trip",
        "namespace": "travel",
        "fields": [
            {
                "name": "start",
                "type": [
                    "null",
                    {
                        "type": "record",
                        "name": "Place",
                        "fields": [{"name": "city", "type": "string"}],
                    },
                ],
                "default": None,
            },
            {"name": "end", "type": ["null", "Place"]},
        ],
    }
    assert _convert({"end": {"travel.Place": {"city": "Oslo"}}}, schema) == {
        "end": {"city": "Oslo"}
    }


def test_recursive_types_convert() -> None:
    schema = {
        "type": "record",
        "name": "Node",
        "fields": [
            {"name": "value", "type": "int"},
            {"name": "next", "type": ["null", "Node"], "default": None},
        ],
    }
    value = {"value": 1, "next": {"Node": {"value": 2, "next": None}}}
    assert _convert(value, schema) == {"value": 1, "next": {"value": 2, "next": None}}


def test_fields_left_out_stay_out_for_the_encoder_to_default() -> None:
    assert _convert({"id": "x"}, ORDER) == {"id": "x"}


@pytest.mark.parametrize(
    ("value", "path", "fragment"),
    [
        ({**AVRO_JSON, "note": "gift"}, "$.note", 'wrapped as {"<type>": value}'),
        ({**AVRO_JSON, "note": {"int": 1}}, "$.note", "'int' is not a type of this union"),
        ({**AVRO_JSON, "note": {"string": 1}}, "$.note", "expected a string"),
        ({**AVRO_JSON, "quantity": "3"}, "$.quantity", "expected a number (int)"),
        ({**AVRO_JSON, "status": "LOST"}, "$.status", "valid symbols: NEW, PAID"),
        ({**AVRO_JSON, "checksum": "caf\u00e9\u20ac"}, "$.checksum", "code points 0-255"),
        ({**AVRO_JSON, "digest": "\x00\x01"}, "$.digest", "expected 4 bytes for fixed 'Digest'"),
        ({**AVRO_JSON, "price": "12.50\u20ac"}, "$.price", "code points 0-255"),
        ({**AVRO_JSON, "price": 12.5}, "$.price", "unscaled two's-complement bytes"),
        ({**AVRO_JSON, "price": ""}, "$.price", "at least one byte"),
        ({**AVRO_JSON, "lines": [{"sku": 5}]}, "$.lines[0].sku", "expected a string"),
        (
            {**AVRO_JSON, "lines": [{"sku": "A", "discount": {"bytes": "\u0100"}}]},
            "$.lines[0].discount",
            "code points 0-255",
        ),
        ({**AVRO_JSON, "attributes": {"channel": 1}}, "$.attributes.channel", "a string"),
        ({**AVRO_JSON, "lines": {"sku": "A"}}, "$.lines", "expected an array"),
        ({**AVRO_JSON, "colour": "red"}, "$.colour", "unknown field(s) colour"),
        ({**AVRO_JSON, "gift_line": {"sales.Line": {}, "x": 1}}, "$.gift_line", "wrapped"),
        ("not a record", "$", "an object (record 'Order')"),
    ],
)
def test_mismatches_name_the_path_at_fault(value: Any, path: str, fragment: str) -> None:
    error = _error(value, ORDER)
    assert error.path == path
    assert path.startswith(error.message.split(":", 1)[0])  # the field, or its record
    assert fragment in error.message


def test_null_outside_a_nullable_union_is_refused() -> None:
    schema = {"type": "record", "name": "R", "fields": [{"name": "u", "type": ["int", "string"]}]}
    error = _error({"u": None}, schema)
    assert error.path == "$.u"
    assert "int, string" in error.message


def test_paths_start_where_the_caller_says() -> None:
    key = {"type": "record", "name": "OrderKey", "fields": [{"name": "id", "type": "string"}]}
    assert _error({"id": 1}, key, path="$.key").path == "$.key.id"
