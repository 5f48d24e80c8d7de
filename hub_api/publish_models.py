"""Request and response models of the publish gateway."""

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class RecordIn(BaseModel):
    """One record: a natural-JSON value, and optionally a key, headers and a timestamp."""

    model_config = ConfigDict(extra="forbid")

    value: Any = Field(description="The record; null is a tombstone (changelog feeds only).")
    key: Any = Field(default=None, description="Keyed feeds: derived from the value if left out.")
    headers: dict[str, str] | None = Field(default=None, description="Kafka headers (text).")
    timestamp: int | str | None = Field(
        default=None, description="Event time: ISO-8601 or epoch milliseconds."
    )


class RecordsIn(BaseModel):
    """Body of `POST /v1/feeds/{topic}/records`."""

    model_config = ConfigDict(extra="forbid")

    records: list[RecordIn] = Field(min_length=1)
    schema_version: int | None = Field(
        default=None, description="Validate against this version instead of the latest."
    )


class ChangePublic(BaseModel):
    """A change cleaning made: which field, by which rule, from what to what."""

    path: str
    rule: str
    before: Any
    after: Any


class RecordResultPublic(BaseModel):
    """Per record: partition and offset, or an error code, message and field path."""

    partition: int | None = None
    offset: int | None = None
    error_code: int | None = None
    message: str | None = None
    path: str | None = None
    dead_lettered: bool | None = None
    cleaned: list[ChangePublic] | None = None


class PublishPublic(BaseModel):
    topic: str
    schema_id: int
    schema_version: int
    accepted: int
    rejected: int
    results: list[RecordResultPublic]
