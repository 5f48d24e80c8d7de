"""The schemas the registry benchmark registers: realistic records of about 15 fields."""

import json
from dataclasses import dataclass
from typing import Any

# Fields each later version adds, all optional: every version stays BACKWARD compatible.
_EVOLUTION = (
    {"name": "channel", "type": ["null", "string"], "default": None},
    {"name": "priority", "type": "int", "default": 0},
)


def _base_fields(index: int) -> list[dict[str, Any]]:
    status = {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID", "SHIPPED", "CLOSED"]}
    address = {
        "type": "record",
        "name": "Address",
        "fields": [
            {"name": "street", "type": "string"},
            {"name": "city", "type": "string"},
            {"name": "postcode", "type": "string"},
            {"name": "country", "type": "string", "default": "FR"},
        ],
    }
    return [
        {"name": "id", "type": {"type": "string", "logicalType": "uuid"}, "doc": f"Event {index}"},
        {"name": "tenant", "type": "string"},
        {"name": "created_at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {
            "name": "updated_at",
            "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}],
            "default": None,
        },
        {"name": "status", "type": status},
        {"name": "amount", "type": "double"},
        {"name": "quantity", "type": "int"},
        {"name": "currency", "type": "string", "default": "EUR"},
        {"name": "tags", "type": {"type": "array", "items": "string"}, "default": []},
        {"name": "attributes", "type": {"type": "map", "values": "string"}, "default": {}},
        {"name": "active", "type": "boolean", "default": True},
        {"name": "shipping", "type": ["null", address], "default": None},
        {"name": "notes", "type": ["null", "string"], "default": None},
    ]


def record_schema(index: int, *, version: int, extra_fields: int = 0) -> dict[str, Any]:
    """Version `version` (1-3) of record `index`, plus `extra_fields` optional string fields."""
    fields = _base_fields(index) + list(_EVOLUTION[: version - 1])
    fields += [
        {"name": f"ext_{k}", "type": ["null", "string"], "default": None}
        for k in range(extra_fields)
    ]
    return {
        "type": "record",
        "name": f"Order{index:03d}",
        "namespace": "bench.sales",
        "doc": "An order event, as a team would publish it.",
        "fields": fields,
    }


def schema_body(schema: dict[str, Any]) -> bytes:
    """A registry request body: the schema as JSON text inside JSON, as Confluent clients send."""
    return json.dumps({"schema": json.dumps(schema)}).encode()


@dataclass(frozen=True, slots=True)
class Registered:
    """A subject version the benchmark registered, with the id the registry gave it."""

    subject: str
    version: int
    schema_id: int
    body: bytes


def lookup_subject(index: int) -> str:
    return f"bench.orders-{index:03d}-value"


def registration_subject(run: str, index: int) -> str:
    return f"bench.new-{run}-{index:03d}-value"
