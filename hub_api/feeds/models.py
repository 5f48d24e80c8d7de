"""Request and response models of the feeds API."""

import json
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from catalog.types import Feed, FeedKind
from publish.feeds import FeedDetail


class FeedCreate(BaseModel):
    """A new feed: its topic, owner, kind, layout and value schema."""

    model_config = ConfigDict(extra="forbid")

    topic: str = Field(
        description="`<domain>.<name>`, lowercase, e.g. `sales.orders`, at most 245 characters "
        "(its `.dlq` topic fits Kafka's 249). A team key creates topics of its own domain only."
    )
    owner: str = Field(description="The owning team; only its keys (or admins) may publish.")
    kind: FeedKind = Field(description="`event` (retention-based) or `changelog` (compacted).")
    value_schema: str | dict[str, Any] = Field(
        description="The Avro record schema of the values, as JSON text or as an object."
    )
    partitions: int = Field(default=1, description="Kafka partitions of the topic.")
    key_fields: list[str] = Field(
        default_factory=list, description="Value fields forming the key (required for changelog)."
    )
    retention_ms: int | None = Field(
        default=None,
        description="Event feeds: how long records are kept, 1 to 2^63-1 (-1: forever).",
    )
    description: str = Field(
        default="",
        description="What the feed holds, for its readers: text without control characters "
        "other than tabs and line breaks, at most HUB_API_MAX_FEED_DESCRIPTION_BYTES (4,096 by "
        "default) bytes of UTF-8.",
    )
    read_public: bool = Field(
        default=True,
        description="Whether every team may read its records and tables; false: only its owner, "
        "the teams in `readers` and admins.",
    )
    readers: list[str] = Field(
        default_factory=list,
        max_length=1000,
        description="Teams that may read it when it is not public (each must exist).",
    )

    @field_validator("value_schema")
    @classmethod
    def _as_text(cls, value: str | dict[str, Any]) -> str:
        return value if isinstance(value, str) else json.dumps(value)


class FeedPatch(BaseModel):
    """What to change of a feed; a field left out keeps its value."""

    model_config = ConfigDict(extra="forbid")

    description: str | None = Field(
        default=None, description="A new description, within the limits of `FeedCreate`'s."
    )
    retention_ms: int | None = Field(
        default=None, description="Event feeds: a new retention, 1 to 2^63-1 (-1: forever)."
    )
    read_public: bool | None = Field(
        default=None,
        description="true: every team reads it; false: only its owner, its readers and admins.",
    )


class FeedPublic(BaseModel):
    topic: str
    owner: str
    kind: FeedKind
    partitions: int
    key_fields: list[str]
    retention_ms: int | None
    description: str
    created_at: datetime
    read_public: bool = Field(description="Whether every team may read its records and tables.")
    readers: list[str] = Field(
        description="Teams granted reads (they matter while the feed is not public)."
    )

    @classmethod
    def of(cls, feed: Feed) -> "FeedPublic":
        return cls(
            topic=feed.topic,
            owner=feed.owner,
            kind=feed.kind,
            partitions=feed.partitions,
            key_fields=list(feed.key_fields),
            retention_ms=feed.retention_ms,
            description=feed.description,
            created_at=feed.created_at,
            read_public=feed.read_public,
            readers=list(feed.readers),
        )


class FeedReadersPublic(BaseModel):
    """Who reads a feed: its read policy alone."""

    topic: str
    owner: str
    read_public: bool = Field(description="Whether every team may read its records and tables.")
    readers: list[str] = Field(description="Teams granted reads besides the owner and admins.")

    @classmethod
    def of(cls, feed: Feed) -> "FeedReadersPublic":
        return cls(
            topic=feed.topic,
            owner=feed.owner,
            read_public=feed.read_public,
            readers=list(feed.readers),
        )


class SchemaVersionPublic(BaseModel):
    version: int
    id: int


class FeedDetailPublic(FeedPublic):
    schema_versions: list[SchemaVersionPublic]
    end_offsets: dict[int, int] = Field(description="Next offset of each partition.")

    @classmethod
    def of_detail(cls, detail: FeedDetail) -> "FeedDetailPublic":
        base = FeedPublic.of(detail.feed).model_dump()
        return cls(
            **base,
            schema_versions=[
                SchemaVersionPublic(version=v.version, id=v.schema_id) for v in detail.versions
            ],
            end_offsets=dict(detail.topic.end_offsets) if detail.topic else {},
        )


class ErrorPublic(BaseModel):
    """The hub's error body: a stable code (its first three digits are the HTTP status) and a
    message naming what is at fault and the fix."""

    error_code: int = Field(description="Stable error code, e.g. 50350.")
    message: str = Field(description="What went wrong and how to fix it.")
