"""Turning one log line into a record: JSON lines, named-group regexes and web-server formats."""

import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from connectors.errors import UnparseableRecord
from connectors.logfile.config import LogField, LogfileSource

_CLF_TIME = "%d/%b/%Y:%H:%M:%S %z"
_COMMON = (
    r"^(?P<remote_host>\S+) (?P<ident>\S+) (?P<remote_user>\S+) \[(?P<time>[^\]]+)\] "
    r'"(?P<method>[A-Z]+) (?P<path>\S+) (?P<protocol>[^"]+)" (?P<status>\d{3}) (?P<bytes>\d+|-)'
)
_REFERER_AGENT = r' "(?P<referer>[^"]*)" "(?P<user_agent>[^"]*)"'
# The fields of Apache's common format, which its combined format extends.
_COMMON_FIELDS = {
    "remote_host": LogField(required=True),
    "ident": LogField(),
    "remote_user": LogField(),
    "time": LogField(type="timestamp", format=_CLF_TIME, required=True),
    "method": LogField(),
    "path": LogField(),
    "protocol": LogField(),
    "status": LogField(type="int", required=True),
    "bytes": LogField(type="long"),
}

# The shipped formats: a pattern and the fields (with types) it yields by default.
PRESETS: dict[str, tuple[str, dict[str, LogField]]] = {
    "apache_common": (
        _COMMON + r"$",
        _COMMON_FIELDS,
    ),
    "apache_combined": (
        _COMMON + _REFERER_AGENT + r"$",
        {
            **_COMMON_FIELDS,
            "referer": LogField(),
            "user_agent": LogField(),
        },
    ),
    "nginx_combined": (
        r"^(?P<remote_addr>\S+) - (?P<remote_user>\S+) \[(?P<time_local>[^\]]+)\] "
        r'"(?P<method>[A-Z]+) (?P<path>\S+) (?P<protocol>[^"]+)" (?P<status>\d{3}) '
        r'(?P<body_bytes_sent>\d+) "(?P<http_referer>[^"]*)" "(?P<http_user_agent>[^"]*)"$',
        {
            "remote_addr": LogField(required=True),
            "remote_user": LogField(),
            "time_local": LogField(type="timestamp", format=_CLF_TIME, required=True),
            "method": LogField(),
            "path": LogField(),
            "protocol": LogField(),
            "status": LogField(type="int", required=True),
            "body_bytes_sent": LogField(type="long"),
            "http_referer": LogField(),
            "http_user_agent": LogField(),
        },
    ),
}

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
        pattern = source.pattern
        fields = dict(source.fields)
        if source.format in PRESETS:
            pattern, defaults = PRESETS[source.format]
            fields = fields or defaults
        self._regex = re.compile(pattern) if pattern is not None else None
        if self._regex is not None and not fields:
            fields = {name: LogField() for name in self._regex.groupindex}
        if self._regex is not None:
            unknown = [
                f"{name} (group '{spec.source or name}')"
                for name, spec in fields.items()
                if (spec.source or name) not in self._regex.groupindex
            ]
            if unknown:
                raise ValueError(
                    f"fields without a matching named group: {', '.join(unknown)}; the "
                    f"pattern's groups are: {', '.join(self._regex.groupindex)}"
                )
        self.fields = fields

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
