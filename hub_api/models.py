"""Request and response models of the HTTP API."""

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class SchemaCreate(BaseModel):
    """Body of `POST /subjects/{subject}/versions` (Confluent shape)."""

    model_config = ConfigDict(populate_by_name=True, extra="ignore")

    schema_: str = Field(alias="schema", description="The Avro schema as JSON text.")
    schema_type: str = Field(default="AVRO", alias="schemaType")


class SchemaIdPublic(BaseModel):
    id: int


class SchemaPublic(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    schema_: str = Field(serialization_alias="schema")


class SubjectVersionPublic(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    subject: str
    id: int
    version: int
    schema_: str = Field(serialization_alias="schema")


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
