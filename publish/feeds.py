"""Feeds end to end: a catalog entry, its Kafka topics with matching settings, and its schemas."""

import json
import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from catalog.errors import InvalidFeed
from catalog.feeds import FeedStore
from catalog.types import Feed, FeedKind, TeamName
from hub_core.naming import TopicName, dlq_topic, key_subject, topic_name, value_subject
from hub_core.ttl import TtlCache
from hub_kafka.admin import TopicAdmin, TopicState
from registry.errors import SubjectNotFound
from registry.service import RegistryService
from registry.types import RegisteredSchema, Subject

log = logging.getLogger(__name__)

DEFAULT_RETENTION_MS = 7 * 24 * 3600 * 1000
DLQ_RETENTION_MS = 14 * 24 * 3600 * 1000
_MAX_PARTITIONS = 1_000


@dataclass(frozen=True, slots=True)
class FeedSpec:
    """What a team asks for when it creates a feed."""

    topic: str
    owner: TeamName
    kind: FeedKind
    value_schema: str
    partitions: int = 1
    key_fields: tuple[str, ...] = ()
    retention_ms: int | None = None
    description: str = ""
    # An explicit key schema, for values whose key fields are not top-level (CDC envelopes).
    key_schema: str | None = None


@dataclass(frozen=True, slots=True)
class FeedDetail:
    """A feed with its schema versions and its topic's partitions and end offsets."""

    feed: Feed
    versions: list[RegisteredSchema]
    topic: TopicState | None


def topic_config(kind: FeedKind, retention_ms: int | None) -> dict[str, str]:
    """Kafka settings of a feed's topic: events expire, changelogs are compacted per key."""
    if kind is FeedKind.CHANGELOG:
        return {"cleanup.policy": "compact"}
    return {
        "cleanup.policy": "delete",
        "retention.ms": str(retention_ms if retention_ms is not None else DEFAULT_RETENTION_MS),
    }


def key_schema(value_schema: Any, key_fields: tuple[str, ...]) -> dict[str, Any]:
    """The key schema of a keyed feed: a record of the key fields, typed as in the value."""
    by_name = {f["name"]: f for f in value_schema.get("fields", [])}
    fields = [
        {k: v for k, v in by_name[name].items() if k in ("name", "type", "doc")}
        for name in key_fields
    ]
    key: dict[str, Any] = {"type": "record", "name": f"{value_schema['name']}Key", "fields": fields}
    if "namespace" in value_schema:
        key["namespace"] = value_schema["namespace"]
    return key


class FeedService:
    """Create, describe, change and delete feeds, keeping catalog, Kafka and registry in step."""

    def __init__(
        self,
        feeds: FeedStore,
        registry: RegistryService,
        admin: TopicAdmin,
        *,
        cache_seconds: float = 5.0,
    ) -> None:
        self._feeds = feeds
        self._registry = registry
        self._admin = admin
        # Publishing looks its feed up on every request; a feed changed or deleted by another
        # process is seen within `cache_seconds`.
        self._cached: TtlCache[str, Feed] = TtlCache(cache_seconds)

    def create(self, spec: FeedSpec) -> Feed:
        """Validate, register the schemas, create the topics, then record the feed.

        Every step is idempotent, so a request that failed half-way can simply be retried.
        """
        topic = topic_name(spec.topic)
        value = self._validate(spec, topic)
        self._registry.register(
            subject=Subject(value_subject(topic)), schema_text=spec.value_schema
        )
        if spec.key_fields:
            self._registry.register(
                subject=Subject(key_subject(topic)),
                schema_text=spec.key_schema or json.dumps(key_schema(value, spec.key_fields)),
            )
        self._admin.create(
            topic, partitions=spec.partitions, config=topic_config(spec.kind, spec.retention_ms)
        )
        self._admin.create(
            dlq_topic(topic),
            partitions=1,
            config={"cleanup.policy": "delete", "retention.ms": str(DLQ_RETENTION_MS)},
        )
        feed = self._feeds.register(
            feed=Feed(
                topic=topic,
                owner=spec.owner,
                kind=spec.kind,
                partitions=spec.partitions,
                key_fields=spec.key_fields,
                retention_ms=spec.retention_ms,
                description=spec.description,
                created_at=datetime.now(UTC),
            )
        )
        log.info("created feed %s (%s, owner %s)", topic, spec.kind, spec.owner)
        return feed

    def _validate(self, spec: FeedSpec, topic: TopicName) -> dict[str, Any]:
        if not 1 <= spec.partitions <= _MAX_PARTITIONS:
            raise InvalidFeed(
                f"partitions must be between 1 and {_MAX_PARTITIONS}, got {spec.partitions}."
            )
        if spec.retention_ms is not None and spec.retention_ms < 1 and spec.retention_ms != -1:
            raise InvalidFeed("retention_ms must be positive, or -1 to keep records forever.")
        if spec.kind is FeedKind.CHANGELOG and not spec.key_fields:
            raise InvalidFeed(
                "A changelog feed needs key_fields: the fields that identify an entity "
                "(its primary key), so compaction keeps the latest record per key."
            )
        if spec.kind is FeedKind.CHANGELOG and spec.retention_ms is not None:
            raise InvalidFeed("A changelog feed is compacted, not expired: leave retention_ms out.")
        # The registry's rules for a new schema (names every stage can carry, limits), before
        # anything is created.
        value = self._registry.accept(spec.value_schema, subject=Subject(value_subject(topic))).json
        if spec.key_schema is not None:
            self._registry.accept(spec.key_schema, subject=Subject(key_subject(topic)))
        if not isinstance(value, dict) or value.get("type") != "record":
            raise InvalidFeed("A feed's value schema must be an Avro record.")
        names = [f["name"] for f in value["fields"]]
        missing = [k for k in spec.key_fields if k not in names and spec.key_schema is None]
        if missing:
            raise InvalidFeed(
                f"key_fields {', '.join(missing)} are not fields of the value schema; "
                f"its fields are: {', '.join(names)}."
            )
        return value

    def get(self, topic: str) -> Feed:
        return self._feeds.get(topic=topic)

    def current(self, topic: str) -> Feed:
        """The feed of `topic` as of at most `cache_seconds` ago (for publishing)."""
        feed = self._cached.get(topic)
        if feed is None:
            feed = self._feeds.get(topic=topic)
            self._cached.put(topic, feed)
        return feed

    def find(self, topic: str) -> Feed | None:
        """The feed of `topic`, or None."""
        return self._feeds.find(topic=topic)

    def list(self, *, owner: TeamName | None = None) -> list[Feed]:
        return self._feeds.list(owner=owner)

    def describe(self, topic: str) -> FeedDetail:
        """The feed, its value schema versions, and its topic's partitions and end offsets."""
        feed = self._feeds.get(topic=topic)
        try:
            subject = Subject(value_subject(topic_name(topic)))
            versions = [
                self._registry.version(subject=subject, version=v)
                for v in self._registry.versions(subject=subject)
            ]
        except SubjectNotFound:
            versions = []
        return FeedDetail(feed=feed, versions=versions, topic=self._admin.state(topic))

    def update(self, topic: str, *, description: str | None, retention_ms: int | None) -> Feed:
        """Change the description and/or the retention (event feeds), in Kafka too."""
        feed = self._feeds.get(topic=topic)
        if retention_ms is not None:
            if feed.kind is FeedKind.CHANGELOG:
                raise InvalidFeed(f"Feed '{topic}' is a compacted changelog; it has no retention.")
            if retention_ms < 1 and retention_ms != -1:
                raise InvalidFeed("retention_ms must be positive, or -1 to keep records forever.")
            self._admin.alter(topic, config={"retention.ms": str(retention_ms)})
        self._cached.pop(topic)
        return self._feeds.update(topic=topic, description=description, retention_ms=retention_ms)

    def delete(self, topic: str) -> Feed:
        """Delete the feed's topics and its catalog entry. Its schemas stay registered, so
        records already copied elsewhere can still be read."""
        feed = self._feeds.get(topic=topic)
        self._admin.delete(topic)
        self._admin.delete(dlq_topic(topic_name(topic)))
        self._feeds.delete(topic=topic)
        self._cached.pop(topic)
        log.info("deleted feed %s", topic)
        return feed
