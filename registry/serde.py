"""Natural JSON to Avro and back: the encoding half of the one publish path.

Publishers send values as natural JSON (a union value given plainly, timestamps as ISO-8601 or
epoch numbers, decimals as strings, bytes as base64). `to_datum` checks a value against its
schema, naming the field path at fault, and turns it into what the Avro writer expects.
"""

import base64
import io
import math
from collections.abc import Callable, Mapping
from datetime import UTC, date, datetime, timedelta
from decimal import Context, Decimal, InvalidOperation
from typing import Any
from uuid import UUID

import fastavro

from registry.avro import AvroSchema, find_named, remember_named
from registry.errors import InvalidRecord
from registry.types import SchemaId
from registry.wire import frame, unframe

_INT_RANGE = (-(2**31), 2**31 - 1)
_LONG_RANGE = (-(2**63), 2**63 - 1)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_EPOCH_DATE = date(1970, 1, 1)
_MICROSECOND = timedelta(microseconds=1)


def encode(value: Any, *, schema: AvroSchema, schema_id: SchemaId) -> bytes:
    """Validate a natural-JSON value and return it as a Confluent-framed Avro message."""
    datum = to_datum(value, schema.resolved)
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, schema.parsed, datum)
    return frame(schema_id, buffer.getvalue())


def decode(message: bytes, *, writer_schema: Callable[[SchemaId], AvroSchema]) -> Any:
    """Decode a Confluent-framed message, looking its writer schema up by id."""
    schema_id, payload = unframe(message)
    return fastavro.schemaless_reader(io.BytesIO(payload), writer_schema(schema_id).parsed, None)


def to_datum(value: Any, schema: Any, path: str = "$") -> Any:
    """Convert a natural-JSON `value` for the Avro `schema`; raise `InvalidRecord` at `path`."""
    return Converter({}).convert(value, schema, path, namespace=None)


class Converter:
    """Walks a schema and a value together; remembers named types as it meets them.

    `convert` raises `InvalidRecord` at the first mismatch, so it also tells which branch of
    a union a value belongs to (cleaning uses it for that).
    """

    def __init__(self, named: dict[str, Any]) -> None:
        self._named = named

    def convert(self, value: Any, schema: Any, path: str, *, namespace: str | None) -> Any:
        if isinstance(schema, list):
            return self._union(value, schema, path, namespace)
        if isinstance(schema, str):
            if schema in PRIMITIVE_CONVERTERS:
                return PRIMITIVE_CONVERTERS[schema](value, path)
            named = find_named(self._named, schema, namespace)
            if named is None:
                raise InvalidRecord(f"Unknown type '{schema}' at {path}.", path=path)
            return self.convert(value, named, path, namespace=namespace)
        kind = schema["type"]
        logical = schema.get("logicalType")
        if logical in LOGICAL_CONVERTERS and kind in LOGICAL_CONVERTERS[logical][0]:
            return LOGICAL_CONVERTERS[logical][1](value, path, schema)
        if kind in PRIMITIVE_CONVERTERS:
            return PRIMITIVE_CONVERTERS[kind](value, path)
        if kind in ("record", "error", "enum", "fixed"):
            namespace = self._remember(schema, namespace)
        if kind in ("record", "error"):
            return self._record(value, schema, path, namespace)
        if kind == "enum":
            return convert_enum(value, schema, path)
        if kind == "fixed":
            raw = convert_bytes(value, path)
            if len(raw) != schema["size"]:
                raise InvalidRecord(
                    f"{path}: expected {schema['size']} bytes for fixed "
                    f"'{schema['name']}', got {len(raw)}.",
                    path=path,
                )
            return raw
        if kind == "array":
            if not isinstance(value, list):
                raise type_error(path, "an array", value)
            return [
                self.convert(v, schema["items"], f"{path}[{i}]", namespace=namespace)
                for i, v in enumerate(value)
            ]
        if kind == "map":
            if not isinstance(value, Mapping):
                raise type_error(path, "an object (map)", value)
            return {
                k: self.convert(v, schema["values"], f"{path}.{k}", namespace=namespace)
                for k, v in value.items()
            }
        return self.convert(value, kind, path, namespace=namespace)

    def _remember(self, schema: Mapping[str, Any], namespace: str | None) -> str | None:
        return remember_named(self._named, schema, namespace)

    def _record(
        self, value: Any, schema: Mapping[str, Any], path: str, namespace: str | None
    ) -> dict[str, Any]:
        if not isinstance(value, Mapping):
            raise type_error(path, f"an object (record '{schema['name']}')", value)
        fields = schema["fields"]
        known = {f["name"] for f in fields}
        unknown = sorted(set(value) - known)
        if unknown:
            raise InvalidRecord(
                f"{path}: unknown field(s) {', '.join(unknown)}; record '{schema['name']}' has "
                f"{', '.join(sorted(known))}.",
                path=f"{path}.{unknown[0]}",
            )
        out: dict[str, Any] = {}
        for field in fields:
            name = field["name"]
            field_path = f"{path}.{name}"
            if name in value:
                out[name] = self.convert(
                    value[name], field["type"], field_path, namespace=namespace
                )
            elif "default" in field:
                out[name] = self._default(field, field_path, namespace)
            else:
                raise InvalidRecord(
                    f"{field_path}: required field is missing and has no default.",
                    path=field_path,
                )
        return out

    def _default(self, field: Mapping[str, Any], path: str, namespace: str | None) -> Any:
        # An Avro default for a union is given for its first branch.
        field_type = field["type"]
        branch = field_type[0] if isinstance(field_type, list) else field_type
        return self.convert(field["default"], branch, path, namespace=namespace)

    def _union(self, value: Any, branches: list[Any], path: str, namespace: str | None) -> Any:
        if value is None and "null" in branches:
            return None
        errors: list[str] = []
        for branch in branches:
            if branch == "null":
                continue
            try:
                return self.convert(value, branch, path, namespace=namespace)
            except InvalidRecord as exc:
                errors.append(exc.message)
        names = ", ".join(type_name(b) for b in branches)
        raise InvalidRecord(
            f"{path}: value matches none of the union's types ({names}): {'; '.join(errors)}",
            path=path,
        )


def type_name(schema: Any) -> str:
    if isinstance(schema, str):
        return schema
    if isinstance(schema, Mapping):
        return str(schema.get("name") or schema.get("logicalType") or schema["type"])
    return "union"


def type_error(path: str, expected: str, value: Any) -> InvalidRecord:
    shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
    return InvalidRecord(
        f"{path}: expected {expected}, got {type(value).__name__} {shown}.", path=path
    )


def _null(value: Any, path: str) -> None:
    if value is not None:
        raise type_error(path, "null", value)


def _boolean(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise type_error(path, "a boolean", value)
    return value


def _integer(bounds: tuple[int, int], name: str) -> Callable[[Any, str], int]:
    def convert(value: Any, path: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            else:
                raise type_error(path, f"an integer ({name})", value)
        if not bounds[0] <= value <= bounds[1]:
            raise InvalidRecord(f"{path}: {value} is out of range for {name}.", path=path)
        return value

    return convert


def _floating(value: Any, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        if value in ("NaN", "Infinity", "-Infinity"):
            return float(value.replace("Infinity", "inf"))
        raise type_error(path, "a number", value)
    try:
        return float(value)
    except OverflowError:
        raise InvalidRecord(f"{path}: {value} is too large for a double.", path=path) from None


def _string(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise type_error(path, "a string", value)
    return value


def convert_bytes(value: Any, path: str) -> bytes:
    if not isinstance(value, str):
        raise type_error(path, "base64-encoded bytes as a string", value)
    try:
        return base64.b64decode(value, validate=True)
    except ValueError as exc:  # binascii.Error, or text that is not ASCII
        raise InvalidRecord(f"{path}: not valid base64 ({exc}).", path=path) from exc


def convert_enum(value: Any, schema: Mapping[str, Any], path: str) -> str:
    symbols: list[str] = schema["symbols"]
    if value not in symbols:
        raise InvalidRecord(
            f"{path}: {value!r} is not a symbol of enum '{schema['name']}'; "
            f"valid symbols: {', '.join(symbols)}.",
            path=path,
        )
    return str(value)


def _timestamp(unit: int) -> Callable[[Any, str, Mapping[str, Any]], int]:
    """Timestamps as ISO-8601 text or epoch numbers (in the schema's unit), to epoch units."""

    def convert(value: Any, path: str, _schema: Mapping[str, Any]) -> int:
        if isinstance(value, str):
            try:
                micros = epoch_micros(value)
            except ValueError as exc:
                raise InvalidRecord(
                    f"{path}: {value!r} is not an ISO-8601 timestamp "
                    "(e.g. 2024-05-01T12:00:00Z) or an epoch number.",
                    path=path,
                ) from exc
            return micros * unit // 1_000_000
        return _integer(_LONG_RANGE, "long")(value, path)

    return convert


def epoch_micros(text: str) -> int:
    """Microseconds since the epoch of ISO-8601 timestamp text (UTC if it names no offset), as
    the timestamp types read it; `ValueError` if it is not such text."""
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // _MICROSECOND


def epoch_days(text: str) -> int:
    """Days since the epoch of ISO-8601 date text, as the date type reads it; `ValueError` if
    it is not such text."""
    return (date.fromisoformat(text) - _EPOCH_DATE).days


def _date(value: Any, path: str, _schema: Mapping[str, Any]) -> int:
    if isinstance(value, str):
        try:
            return epoch_days(value)
        except ValueError as exc:
            raise InvalidRecord(f"{path}: {value!r} is not an ISO-8601 date.", path=path) from exc
    return _integer(_INT_RANGE, "int")(value, path)


def _decimal(value: Any, path: str, schema: Mapping[str, Any]) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise type_error(path, 'a decimal as a string (e.g. "12.50")', value)
    try:
        number = Decimal(value)
    except InvalidOperation as exc:
        raise InvalidRecord(f"{path}: {value!r} is not a decimal number.", path=path) from exc
    scale = int(schema.get("scale", 0))
    precision = int(schema["precision"])
    exponent = number.as_tuple().exponent
    if not isinstance(exponent, int) or not math.isfinite(number) or -exponent > scale:
        raise InvalidRecord(
            f"{path}: {value!r} has more than the {scale} decimal places the schema allows.",
            path=path,
        )
    # Checked before quantizing: Python's default context holds 28 digits, fewer than a
    # decimal(38, s) may have, and a huge exponent must not become a huge coefficient.
    if number and number.adjusted() + 1 > precision - scale:
        raise InvalidRecord(
            f"{path}: {value!r} has more than the {precision} digits the schema allows "
            f"(decimal({precision}, {scale}): at most {precision - scale} before the point).",
            path=path,
        )
    return number.quantize(Decimal(1).scaleb(-scale), context=Context(prec=max(precision, 1)))


def _uuid(value: Any, path: str, _schema: Mapping[str, Any]) -> str:
    try:
        return str(UUID(_string(value, path)))
    except ValueError as exc:
        raise InvalidRecord(f"{path}: {value!r} is not a UUID.", path=path) from exc


PRIMITIVE_CONVERTERS: dict[str, Callable[[Any, str], Any]] = {
    "null": _null,
    "boolean": _boolean,
    "int": _integer(_INT_RANGE, "int"),
    "long": _integer(_LONG_RANGE, "long"),
    "float": _floating,
    "double": _floating,
    "bytes": convert_bytes,
    "string": _string,
}

# logicalType -> (underlying types it applies to, converter)
LOGICAL_CONVERTERS: dict[
    str, tuple[frozenset[str], Callable[[Any, str, Mapping[str, Any]], Any]]
] = {
    "timestamp-millis": (frozenset({"long"}), _timestamp(1_000)),
    "timestamp-micros": (frozenset({"long"}), _timestamp(1_000_000)),
    "local-timestamp-millis": (frozenset({"long"}), _timestamp(1_000)),
    "local-timestamp-micros": (frozenset({"long"}), _timestamp(1_000_000)),
    "date": (frozenset({"int"}), _date),
    "decimal": (frozenset({"bytes"}), _decimal),
    "uuid": (frozenset({"string"}), _uuid),
}
