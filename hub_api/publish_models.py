"""Request and response models of the publish gateway."""

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class RecordIn(BaseModel):
    """One record to publish: a natural-JSON value and an optional key."""

    model_config = ConfigDict(extra="forbid")

    key: Any = None
    value: Any


class RecordsIn(BaseModel):
    """Body of `POST /v1/feeds/{topic}/records`."""

    model_config = ConfigDict(extra="forbid")

    records: list[RecordIn] = Field(min_length=1)


class RecordResultPublic(BaseModel):
    """Per record: partition and offset, or an error code, message and field path."""

    partition: int | None = None
    offset: int | None = None
    error_code: int | None = None
    message: str | None = None
    path: str | None = None


class PublishPublic(BaseModel):
    topic: str
    schema_id: int
    accepted: int
    rejected: int
    results: list[RecordResultPublic]
