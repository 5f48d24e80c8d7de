"""What a log line holds: the fields a record takes from it, and the pattern that finds them.

A connector names one of the shipped web-server formats (`PRESETS`) or a regex of its own, and
may list the record's fields. `line_layout` resolves that into one pattern and the fields, and
refuses a field that names no group of the pattern: the connector file is checked with it, and
the parser reads lines with what it returns.
"""

import re
from typing import Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

FieldType = Literal["string", "int", "long", "double", "boolean", "timestamp"]


class LogField(BaseModel):
    """One field of the feed's records: where it comes from in a line and its type."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: FieldType = Field(default="string", description="Avro type of the field.")
    source: str | None = Field(
        default=None,
        description="Regex group or JSON key the value comes from (default: the field's name).",
    )
    format: str | None = Field(
        default=None,
        description=(
            "For timestamps: a `strptime` format such as `%d/%b/%Y:%H:%M:%S %z`; "
            "default: ISO-8601 text or epoch milliseconds."
        ),
    )
    required: bool = Field(
        default=False,
        description="A line without this value goes to the DLQ; otherwise the field is null.",
    )


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


class LineLayout(NamedTuple):
    """The pattern a line must match (`None`: a JSON object per line) and the record's fields."""

    regex: re.Pattern[str] | None
    fields: dict[str, LogField]


def line_layout(line_format: str, pattern: str | None, fields: dict[str, LogField]) -> LineLayout:
    """The layout a connector's `format`, `pattern` and `fields` describe; raises `ValueError`
    naming each field without a matching group of the pattern."""
    fields = dict(fields)
    if line_format in PRESETS:
        pattern, defaults = PRESETS[line_format]
        fields = fields or defaults
    regex = re.compile(pattern) if pattern is not None else None
    if regex is not None and not fields:
        fields = {name: LogField() for name in regex.groupindex}
    if regex is not None:
        unknown = [
            f"{name} (group '{spec.source or name}')"
            for name, spec in fields.items()
            if (spec.source or name) not in regex.groupindex
        ]
        if unknown:
            raise ValueError(
                f"fields without a matching named group: {', '.join(unknown)}; the "
                f"pattern's groups are: {', '.join(regex.groupindex)}"
            )
    return LineLayout(regex, fields)
