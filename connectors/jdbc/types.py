"""Avro types for SQL columns, from SQLAlchemy's reflected types (or a driver's type codes)."""

import base64
import datetime as dt
import json
import re
import uuid
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from sqlalchemy import types as sa

from hub_core.errors import ErrorCode, TerminalError
from registry.schema_rules import SPARK_MAX_DECIMAL_PRECISION

_AVRO_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# PostgreSQL type OIDs, as psycopg describes a query's columns when no view can be made.
_PG_OIDS: dict[int, sa.TypeEngine[Any]] = {
    16: sa.Boolean(),
    20: sa.BigInteger(),
    21: sa.SmallInteger(),
    23: sa.Integer(),
    700: sa.Float(),
    701: sa.Float(),
    1082: sa.Date(),
    1114: sa.DateTime(),
    1184: sa.DateTime(timezone=True),
    17: sa.LargeBinary(),
}


def avro_type(column_type: sa.TypeEngine[Any]) -> Any:
    """The Avro type of a reflected column type; unknown types travel as text."""
    if isinstance(column_type, sa.Boolean):
        return "boolean"
    if isinstance(column_type, sa.SmallInteger):
        return "int"
    if isinstance(column_type, sa.Integer):
        # SQLite and most databases allow 64-bit values in INTEGER columns: never truncate.
        return "long"
    if isinstance(column_type, sa.Float):
        return "double"
    if isinstance(column_type, sa.Numeric):
        precision, scale = column_type.precision, column_type.scale
        if precision is None or precision > SPARK_MAX_DECIMAL_PRECISION or (scale or 0) > precision:
            # Unbounded NUMERIC has no Avro decimal, and one wider than Spark's (or with more
            # places than digits) cannot land: text keeps every digit.
            return "string"
        return {
            "type": "bytes",
            "logicalType": "decimal",
            "precision": precision,
            "scale": scale or 0,
        }
    if isinstance(column_type, sa.DateTime):
        return {"type": "long", "logicalType": "timestamp-micros"}
    if isinstance(column_type, sa.Date):
        return {"type": "int", "logicalType": "date"}
    if isinstance(column_type, sa._Binary):
        return "bytes"
    return "string"


def sql_type_of_code(type_code: Any) -> sa.TypeEngine[Any]:
    """The SQLAlchemy type of a query column from the driver's type code; text when unknown."""
    known = _PG_OIDS.get(type_code) if isinstance(type_code, int) else None
    return known if known is not None else sa.String()


def avro_field(name: str, avro: Any, *, nullable: bool, doc: str | None = None) -> dict[str, Any]:
    if not _AVRO_NAME.match(name):
        raise TerminalError(
            f"Column '{name}' is not a valid Avro field name (letters, digits, `_`, not "
            'starting with a digit); rename it in a `query` (SELECT "{name}" AS ...).',
            code=ErrorCode.CONNECTOR_SOURCE_MISMATCH,
        )
    field: dict[str, Any] = {"name": name, "type": ["null", avro] if nullable else avro}
    if nullable:
        field["default"] = None
    if doc:
        field["doc"] = doc
    return field


def record_name(text: str) -> str:
    """An Avro record name from a table name: invalid characters become `_`."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", text)
    return name if _AVRO_NAME.match(name) else f"_{name}"


def natural(row: Mapping[str, Any], schema_types: Mapping[str, Any]) -> dict[str, Any]:
    """A row's values as the natural JSON the publish path takes, per their Avro types."""
    return {name: _natural(value, schema_types.get(name)) for name, value in row.items()}


def _natural(value: Any, avro: Any) -> Any:
    if value is None:
        return None
    if avro == "string" and not isinstance(value, str):
        if isinstance(value, dict | list):
            return json.dumps(value, default=str, sort_keys=True)
        if isinstance(value, bytes | memoryview):
            return bytes(value).hex()
        return value.isoformat() if isinstance(value, dt.date | dt.time) else str(value)
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)
        return value.isoformat()
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bytes | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")  # the publish path's bytes form
    if isinstance(value, uuid.UUID):
        return str(value)
    if avro == "double" and isinstance(value, int):
        return float(value)
    return value
