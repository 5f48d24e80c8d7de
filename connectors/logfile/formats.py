"""Turning one log line into a record: JSON lines, named-group regexes and web-server formats."""

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from connectors.errors import UnparseableRecord
from connectors.logfile.config import LogfileSource
from connectors.logfile.layout import LogField, line_layout

_AVRO: dict[str, Any] = {
    "string": "string",
    "int": "int",
    "long": "long",
    "double": "double",
    "boolean": "boolean",
    "timestamp": {"type": "long", "logicalType": "timestamp-millis"},
}
_TRUE = {"true", "1", "yes", "y", "on"}
_FALSE = {"false", "0", "no", "n", "off"}


class LineParser:
    """Parses lines of one connector into records of its fields; raises `UnparseableRecord`."""

    def __init__(self, source: LogfileSource) -> None:
        self._json = source.format == "json"
        self._regex, self.fields = line_layout(source.format, source.pattern, source.fields)

    def avro_fields(self) -> list[dict[str, Any]]:
        return [
            {"name": name, "type": _AVRO[spec.type]}
            if spec.required
            else {"name": name, "type": ["null", _AVRO[spec.type]], "default": None}
            for name, spec in self.fields.items()
        ]

    def parse(self, line: str) -> dict[str, Any]:
        found = self._extract(line)
        return {name: _convert(name, spec, found.get(spec.source or name)) for name, spec
                in self.fields.items()}  # fmt: skip

    def _extract(self, line: str) -> Mapping[str, Any]:
        if self._regex is not None:
            match = self._regex.match(line)
            if match is None:
                raise UnparseableRecord("the line does not match the connector's pattern")
            return match.groupdict()
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UnparseableRecord(f"the line is not valid JSON: {exc}") from exc
        if not isinstance(value, dict):
            raise UnparseableRecord(f"the line is JSON {type(value).__name__}, not an object")
        return value


def _convert(name: str, spec: LogField, value: Any) -> Any:
    if isinstance(value, str) and spec.type != "string" and value in ("", "-"):
        value = None
    if value is None:
        if spec.required:
            raise UnparseableRecord(f"field '{name}' is required but the line has no value")
        return None
    try:
        return _typed(spec, value)
    except (ValueError, TypeError) as exc:
        raise UnparseableRecord(
            f"field '{name}': {value!r} is not a valid {spec.type} ({exc})"
        ) from exc


def _typed(spec: LogField, value: Any) -> Any:
    kind = spec.type
    if kind == "string":
        return value if isinstance(value, str) else json.dumps(value)
    if kind in ("int", "long"):
        if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
            raise ValueError("not a whole number")
        return int(value)
    if kind == "double":
        if isinstance(value, bool):
            raise ValueError("not a number")
        return float(value)
    if kind == "boolean":
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in _TRUE | _FALSE:
            return text in _TRUE
        raise ValueError("expected true/false")
    return _timestamp(spec, value)


def _timestamp(spec: LogField, value: Any) -> str | int:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return int(value)  # epoch milliseconds
    text = str(value)
    moment = (
        datetime.strptime(text, spec.format)
        if spec.format
        else datetime.fromisoformat(text.replace("Z", "+00:00"))
    )
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.isoformat()
