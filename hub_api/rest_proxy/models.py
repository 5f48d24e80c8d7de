"""Request and response models and media types of the REST Proxy v2 endpoint.

Its error codes are the REST Proxy's own, in `publish.errors` (`ProxyErrorCode`).
"""

from typing import Any

from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, model_validator

AVRO_V2_MEDIA_TYPE = "application/vnd.kafka.avro.v2+json"
KAFKA_V2_MEDIA_TYPE = "application/vnd.kafka.v2+json"


class KafkaJSONResponse(JSONResponse):
    """JSON answered with the REST Proxy's media type, as the REST Proxy does."""

    media_type = KAFKA_V2_MEDIA_TYPE


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


# -- REST Proxy v3: one produce request per record, streamed -------------------------------


class ProduceDataV3In(BaseModel):
    """A record's key or value, as REST Proxy v3 sends it: the data, in natural JSON."""

    model_config = ConfigDict(extra="forbid")

    type: str | None = Field(
        default=None,
        description="`JSON` (the default): `data` is natural JSON, checked and cleaned against "
        "the feed's latest schema and written as Avro. Other formats are refused (41501).",
    )
    data: Any = Field(default=None, description="The key or value; a null value is a tombstone.")
    # Confluent's ways of naming a schema: the hub always uses the feed's latest schema, and
    # refuses them with that reason (40001) rather than as unknown fields.
    subject: str | None = Field(default=None, description="Not supported (40001).")
    subject_name_strategy: str | None = Field(default=None, description="Not supported.")
    schema_id: int | None = Field(default=None, description="Not supported (40001).")
    schema_version: int | None = Field(default=None, description="Not supported (40001).")
    schema_: str | None = Field(default=None, alias="schema", description="Not supported.")


class ProduceHeaderV3In(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    value: str | None = Field(default=None, description="Base64 of the header's UTF-8 text.")


class ProduceRecordV3In(BaseModel):
    """One record of `POST /v3/clusters/{cluster_id}/topics/{topic}/records`; a streaming
    request sends many, concatenated."""

    model_config = ConfigDict(extra="forbid")

    partition_id: int | None = Field(
        default=None, description="Not supported: the hub partitions by key (42200 if given)."
    )
    headers: list[ProduceHeaderV3In] | None = None
    key: ProduceDataV3In | None = None
    value: ProduceDataV3In | None = None
    timestamp: str | int | None = Field(
        default=None, description="Event time: ISO-8601 or epoch milliseconds."
    )
