"""Change events in the Debezium-style envelope, and the Avro schemas of a table's topic.

Value schema (record `Envelope`, namespace = the topic): `before` and `after` are unions of null
and the table's `Value` record, `op` is c/u/d/r/t, `ts_ms` the processing time and `source` where
the change came from (LSN, transaction, commit time). Every `Value` field is nullable except the
primary key columns, because a delete under REPLICA IDENTITY DEFAULT only knows the key. The Kafka
key is the `Key` record of the primary key columns.
"""

import base64
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from connectors.postgres.pgoutput import UNCHANGED_TOAST, TupleValue
from connectors.postgres.typemap import ColumnType, Converter

CONNECTOR = "postgresql"
CONNECTOR_VERSION = "hub-0.1.0"
# The value of a column whose unchanged TOASTed value the server did not send (Debezium's idea,
# the hub's marker: silver keeps the previous value of a column holding it).
UNAVAILABLE = "__hub_unavailable_value"
_UNAVAILABLE_BASE64 = base64.b64encode(UNAVAILABLE.encode()).decode("ascii")
# Header naming the columns of an update whose value was not sent (comma-separated).
UNCHANGED_HEADER = "hub.cdc.unchanged-columns"


@dataclass(frozen=True, slots=True)
class TableColumn:
    name: str
    type: ColumnType
    comment: str | None = None
    type_oid: int = 0


@dataclass(frozen=True, slots=True)
class TableShape:
    """A table's columns (in replication order) and primary key, as the connector maps them."""

    schema: str
    table: str
    columns: tuple[TableColumn, ...]
    primary_key: tuple[str, ...]
    comment: str | None = None
    key_positions: tuple[int, ...] = field(init=False)
    # (name, converter) of each column, in order: what `convert_row` walks for every change.
    converters: tuple[tuple[str, Converter], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        names = [c.name for c in self.columns]
        object.__setattr__(self, "key_positions", tuple(names.index(k) for k in self.primary_key))
        converters = tuple((c.name, c.type.convert) for c in self.columns)
        object.__setattr__(self, "converters", converters)

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.table}"


def value_schema(shape: TableShape, topic: str) -> dict[str, Any]:
    """The Avro schema of the topic's values: the envelope around the table's rows."""
    key_columns = set(shape.primary_key)
    fields = []
    for column in shape.columns:
        entry: dict[str, Any] = {"name": column.name}
        if column.name in key_columns:
            entry["type"] = column.type.avro
        else:
            entry["type"] = ["null", column.type.avro]
            entry["default"] = None
        doc = "; ".join(d for d in (column.comment, column.type.doc) if d)
        if doc:
            entry["doc"] = doc
        if column.type.pg_type:
            entry["hub.pg.type"] = column.type.pg_type
        fields.append(entry)
    row: dict[str, Any] = {"type": "record", "name": "Value", "fields": fields}
    if shape.comment:
        row["doc"] = shape.comment
    return {
        "type": "record",
        "name": "Envelope",
        "namespace": topic,
        "doc": f"Row changes of PostgreSQL table {shape.qualified}.",
        "fields": [
            {"name": "before", "type": ["null", row], "default": None},
            {"name": "after", "type": ["null", "Value"], "default": None},
            {
                "name": "op",
                "type": "string",
                "doc": "c create, u update, d delete, r read, t truncate",
            },
            {"name": "ts_ms", "type": "long", "doc": "When the connector processed the change."},
            {"name": "source", "type": _SOURCE},
        ],
    }


def key_schema(shape: TableShape, topic: str) -> dict[str, Any] | None:
    """The Avro schema of the topic's keys, or None for a table without a primary key."""
    if not shape.primary_key:
        return None
    by_name = {c.name: c for c in shape.columns}
    return {
        "type": "record",
        "name": "Key",
        "namespace": topic,
        "fields": [{"name": k, "type": by_name[k].type.avro} for k in shape.primary_key],
    }


_SOURCE = {
    "type": "record",
    "name": "Source",
    "fields": [
        {"name": "version", "type": "string"},
        {"name": "connector", "type": "string"},
        {"name": "name", "type": "string"},
        {"name": "ts_ms", "type": "long", "doc": "Commit time of the change."},
        {"name": "snapshot", "type": "string", "doc": "true, last (last snapshot read), false"},
        {"name": "db", "type": "string"},
        {"name": "schema", "type": "string"},
        {"name": "table", "type": "string"},
        {"name": "txId", "type": ["null", "long"], "default": None},
        {"name": "lsn", "type": ["null", "long"], "default": None},
        {"name": "sequence", "type": ["null", "string"], "default": None},
    ],
}


@dataclass(frozen=True, slots=True)
class Origin:
    """Where changes come from: the connector's name and the database."""

    name: str
    db: str


@dataclass(slots=True)
class Row:
    """A converted row image, and the columns whose value the server did not send."""

    values: dict[str, Any]
    unchanged: list[str]


def convert_row(
    shape: TableShape, values: Sequence[TupleValue], fallback: Sequence[TupleValue] | None = None
) -> Row:
    """Column text to Avro-ready values; unchanged TOAST columns take `fallback` (the old row
    under REPLICA IDENTITY FULL) or else the unavailable marker where the type can hold it."""
    out: dict[str, Any] = {}
    # Text and null are every column of almost every change: one loop for them, and the
    # careful one below as soon as a column's value was not sent.
    for (name, convert), text in zip(shape.converters, values, strict=True):
        if type(text) is str:
            out[name] = convert(text)
        elif text is None:
            out[name] = None
        else:
            return _convert_with_unchanged(shape, values, fallback)
    return Row(values=out, unchanged=[])


def _convert_with_unchanged(
    shape: TableShape, values: Sequence[TupleValue], fallback: Sequence[TupleValue] | None
) -> Row:
    out: dict[str, Any] = {}
    unchanged: list[str] = []
    for position, (column, text) in enumerate(zip(shape.columns, values, strict=True)):
        if text is UNCHANGED_TOAST and fallback is not None:
            text = fallback[position]
        if text is None:
            out[column.name] = None
        elif text is UNCHANGED_TOAST:
            unchanged.append(column.name)
            out[column.name] = unavailable_value(column.type.avro)
        else:
            assert isinstance(text, str)
            out[column.name] = column.type.convert(text)
    return Row(values=out, unchanged=unchanged)


def unavailable_value(avro: Any) -> Any:
    """The unavailable marker in the form of the column's type; None where it has none."""
    kind = avro if isinstance(avro, str) else avro.get("type")
    logical = None if isinstance(avro, str) else avro.get("logicalType")
    if kind == "string" and logical is None:
        return UNAVAILABLE
    if kind == "bytes" and logical is None:
        return _UNAVAILABLE_BASE64  # the marker's UTF-8 bytes
    if kind == "array":
        items = avro["items"]
        inner = unavailable_value(items[1] if isinstance(items, list) else items)
        return [inner] if inner is not None else None
    return None


def key_of(shape: TableShape, row: dict[str, Any]) -> dict[str, Any] | None:
    key = shape.primary_key
    if not key:
        return None
    if len(key) == 1:  # the commonest key, made without a comprehension's frame
        return {key[0]: row[key[0]]}
    return {k: row[k] for k in key}


def source_block(
    origin: Origin,
    shape: TableShape,
    *,
    commit_ms: int,
    snapshot: str,
    tx_id: int | None,
    lsn: int | None,
    last_commit_lsn: int | None = None,
) -> dict[str, Any]:
    # Debezium's `sequence`: the last commit LSN and this change's LSN, as JSON text.
    sequence: str | None = None
    if lsn is not None:
        last = "null" if last_commit_lsn is None else f'"{last_commit_lsn}"'
        sequence = f'[{last},"{lsn}"]'
    return {
        "version": CONNECTOR_VERSION,
        "connector": CONNECTOR,
        "name": origin.name,
        "ts_ms": commit_ms,
        "snapshot": snapshot,
        "db": origin.db,
        "schema": shape.schema,
        "table": shape.table,
        "txId": tx_id,
        "lsn": lsn,
        "sequence": sequence,
    }
