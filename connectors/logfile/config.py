"""The `logfile` connector file: the connector model and its `source:` section."""

import re
from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from connectors.base import ConnectorBase, check_topic
from connectors.logfile.layout import LogField, line_layout

LineFormat = Literal["json", "regex", "apache_common", "apache_combined", "nginx_combined"]


class LogfileSource(BaseModel):
    """Tails files matched by glob patterns and turns each complete line into a record."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    paths: list[str] = Field(
        min_length=1,
        description="Files or glob patterns (`/var/log/app/*.log`); new matches are picked up.",
    )
    format: LineFormat = Field(
        description=(
            "json: one JSON object per line; regex: `pattern` with named groups; apache_common, "
            "apache_combined, nginx_combined: the web servers' access-log formats."
        )
    )
    pattern: str | None = Field(
        default=None, description="Regular expression with named groups (format `regex`)."
    )
    fields: dict[str, LogField] = Field(
        default_factory=dict,
        description=(
            "The record's fields by name; default for regex formats: every named group as "
            "a string. Required for `json`."
        ),
    )
    start_at: Literal["beginning", "end"] = Field(
        default="beginning",
        description="Where to start in a file seen for the first time (no stored position).",
    )
    poll_seconds: float = Field(default=1.0, gt=0, description="Pause between looks at files.")
    rotate_wait_seconds: float = Field(
        default=5.0,
        ge=0,
        description=(
            "How long a file renamed or deleted out of `paths` is still read after it was read "
            "to its end, for the lines its writer adds after the rotation."
        ),
    )
    batch_size: int = Field(default=500, gt=0, description="Lines published per batch at most.")
    max_line_bytes: int = Field(
        default=1_048_576,
        gt=0,
        description="A longer line goes to the DLQ (truncated) instead of being parsed.",
    )

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, pattern: str | None) -> str | None:
        if pattern is None:
            return None
        try:
            compiled = re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"not a valid regular expression: {exc}") from exc
        if not compiled.groupindex:
            raise ValueError("the pattern has no named groups, e.g. (?P<status>\\d+)")
        return pattern

    @model_validator(mode="after")
    def _format_needs(self) -> Self:
        if self.format == "regex" and self.pattern is None:
            raise ValueError("format 'regex' needs `pattern`")
        if self.format != "regex" and self.pattern is not None:
            raise ValueError(f"`pattern` is only used with format 'regex', not '{self.format}'")
        if self.format == "json" and not self.fields:
            raise ValueError("format 'json' needs `fields` (the record's fields and types)")
        return self


class LogfileConnector(ConnectorBase):
    """Tails log files into one event feed."""

    type: Literal["logfile"] = Field(description="`logfile`.")
    topic: str = Field(description="The feed the lines go to, e.g. `web.access_log`.")
    source: LogfileSource = Field(description="Which files and how to read their lines.")

    @model_validator(mode="after")
    def _topic_and_fields(self) -> Self:
        check_topic(self.topic)
        try:
            line_layout(self.source.format, self.source.pattern, self.source.fields)
        except ValueError as exc:
            raise ValueError(f"source.fields: {exc}") from exc
        return self
