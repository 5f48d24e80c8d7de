"""Schemas with cleaning rules, built small, for the cleaning tests (test_cleaning_*.py)."""

from typing import Any

from registry.cleaning import clean

STATUS = {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]}
TS_MILLIS = {"type": "long", "logicalType": "timestamp-millis"}
TS_MICROS = {"type": "long", "logicalType": "timestamp-micros"}


def field(name: str, type_: Any, *rules: str, **extra: Any) -> dict[str, Any]:
    declared = {"hub.clean": list(rules)} if rules else {}
    return {"name": name, "type": type_, **declared, **extra}


def record(*fields: dict[str, Any], name: str = "R") -> dict[str, Any]:
    return {"type": "record", "name": name, "fields": list(fields)}


def one(type_: Any, *rules: str) -> dict[str, Any]:
    """A record with one field `x` of `type_` declaring `rules`."""
    return record(field("x", type_, *rules))


def cleaned_x(value: Any, type_: Any, *rules: str) -> Any:
    return clean({"x": value}, one(type_, *rules)).value["x"]


# An order whose fields declare rules at several depths, and a raw value that needs cleaning.
ORDER = record(
    field("id", "string", "trim"),
    field(
        "customer",
        record(
            field("email", "string", "trim", "lowercase"),
            field("country", "string", "uppercase"),
            name="Customer",
        ),
    ),
    field(
        "lines",
        {
            "type": "array",
            "items": record(
                field("sku", "string", "trim", "uppercase"),
                field("quantity", "int", "parse_number"),
                name="Line",
            ),
        },
    ),
    field("tags", {"type": "array", "items": "string"}, "lowercase"),
    field("attributes", {"type": "map", "values": "string"}, "trim"),
    field("status", STATUS, "trim", "enum_case_insensitive"),
    field("placed_at", TS_MILLIS, "utc_timestamp"),
    field("note", ["null", "string"], "collapse_whitespace", default=None),
    name="Order",
)
RAW = {
    "id": " o-1 ",
    "customer": {"email": " Ada@Example.com", "country": "gb"},
    "lines": [{"sku": "a-1", "quantity": 1}, {"sku": " b-2", "quantity": "2"}],
    "tags": ["Gift", "fragile"],
    "attributes": {"channel": "web ", "source": "app"},
    "status": "paid ",
    "placed_at": "2024-05-01T14:00:00+02:00",
    "note": "leave  at\tdoor",
}
