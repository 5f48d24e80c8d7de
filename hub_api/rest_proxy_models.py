"""Request and response models, media types and error codes of the REST Proxy v2 endpoint.

The codes here are Confluent REST Proxy's own, so that its clients understand them. They cannot
join the hub's catalogue (`registry.errors.ErrorCode`): the same numbers mean other things there
(42201 is the registry's "invalid schema", the REST Proxy's "key schema missing"). Only this
endpoint answers with them; like the hub's, a code's first three digits are its HTTP status.
"""

from enum import IntEnum, unique
from typing import Any

from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, model_validator

AVRO_V2_MEDIA_TYPE = "application/vnd.kafka.avro.v2+json"
KAFKA_V2_MEDIA_TYPE = "application/vnd.kafka.v2+json"


class KafkaJSONResponse(JSONResponse):
    """JSON answered with the REST Proxy's media type, as the REST Proxy does."""

    media_type = KAFKA_V2_MEDIA_TYPE


@unique
class ProxyErrorCode(IntEnum):
    """Whole-request errors, with the REST Proxy's numbers (42200 is the hub's addition)."""

    TOPIC_NOT_FOUND = 40401
    PARTITION_NOT_SUPPORTED = 42200  # the hub partitions by key; a record cannot choose
    VALUE_SCHEMA_MISSING = 42202
    JSON_CONVERSION_FAILED = 42203  # no record of the request could be converted and published
    INVALID_SCHEMA = 42205
    SCHEMA_NOT_USABLE = 42207  # registering or looking up the schema failed (REST Proxy 6+)

    @property
    def http_status(self) -> int:
        return int(str(self.value)[:3])


@unique
class RecordErrorCode(IntEnum):
    """Per-record `error_code`s of Kafka failures, as the REST Proxy documents them.

    Records the hub refuses as invalid carry the hub's own code instead (42220, ...).
    """

    KAFKA_ERROR = 1  # non-retriable
    KAFKA_RETRIABLE_ERROR = 2  # the same record may be accepted if sent again


class ProxyRecordIn(BaseModel):
    """One record: an Avro-JSON value and, optionally, a key."""

    model_config = ConfigDict(extra="forbid")

    value: Any = Field(
        default=None, description="The value in the Avro JSON encoding; null is a tombstone."
    )
    key: Any = Field(
        default=None,
        description="Keyed feeds: the key record in the Avro JSON encoding (derived from the "
        "value if left out). Other feeds: a string, sent as the plain key.",
    )
    partition: int | None = Field(
        default=None, description="Not supported: the hub partitions by key (42200 if given)."
    )


class ProduceRequestIn(BaseModel):
    """Body of `POST /topics/{topic}` (`application/vnd.kafka.avro.v2+json`)."""

    model_config = ConfigDict(extra="forbid")

    key_schema: str | None = Field(
        default=None, description="The feed's key schema as a string (keyed feeds only)."
    )
    key_schema_id: int | None = Field(
        default=None, description="Id of the feed's key schema (keyed feeds only)."
    )
    value_schema: str | None = Field(
        default=None,
        description="Avro schema as a string; registered under `<topic>-value` if new "
        "(its compatibility rules apply).",
    )
    value_schema_id: int | None = Field(
        default=None, description="Id of a registered version of `<topic>-value`."
    )
    records: list[ProxyRecordIn] = Field(min_length=1)

    @model_validator(mode="after")
    def _one_way_to_name_each_schema(self) -> "ProduceRequestIn":
        for side in ("key", "value"):
            if getattr(self, f"{side}_schema") is not None and (
                getattr(self, f"{side}_schema_id") is not None
            ):
                raise ValueError(f"give {side}_schema or {side}_schema_id, not both")
        return self


class PartitionOffsetPublic(BaseModel):
    """Per record: where Kafka stored it, or an error code and message."""

    partition: int | None
    offset: int | None
    error_code: int | None
    error: str | None


class ProduceResponsePublic(BaseModel):
    """The REST Proxy's produce response: schema ids used, then one entry per record, in order."""

    key_schema_id: int | None
    value_schema_id: int | None
    offsets: list[PartitionOffsetPublic]
