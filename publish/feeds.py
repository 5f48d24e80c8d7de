"""Feeds end to end: a catalog entry, its Kafka topics with matching settings, and its schemas."""

import json
import logging
import re
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from cachetools import TTLCache

from catalog.errors import (
    FeedExists,
    InvalidFeed,
    TableNameTaken,
    TeamNotFound,
    TopicExistsOutsideHub,
)
from catalog.feeds import FeedStore
from catalog.types import Feed, FeedKind, TeamName
from hub_core.naming import (
    TopicName,
    bronze_table,
    dlq_topic,
    feed_topic_name,
    key_subject,
    table_suffix,
    topic_name,
    value_subject,
)
from hub_kafka.admin import TopicAdmin, TopicState
from publish.errors import FeedQuotaExceeded, PartitionQuotaExceeded
from registry.errors import SubjectNotFound
from registry.service import RegistryService
from registry.types import RegisteredSchema, Subject, Version

log = logging.getLogger(__name__)

DEFAULT_RETENTION_MS = 7 * 24 * 3600 * 1000
DLQ_RETENTION_MS = 14 * 24 * 3600 * 1000
_MAX_PARTITIONS = 1_000
# Feeds remembered for publishing: past this many, the least recently used go first.
_CACHED_FEEDS = 10_000
# Kafka holds `retention.ms` in a Java long; a larger number fails the topic's creation there.
MAX_RETENTION_MS = 2**63 - 1
# Tab, line feed and carriage return are text; the other C0 controls are not (PostgreSQL cannot
# even store NUL).
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")


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
    # Readable by every team, or only by its owner and `readers` (docs/security.md).
    read_public: bool = True
    readers: tuple[TeamName, ...] = ()


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


@dataclass(frozen=True, slots=True)
class FeedQuotas:
    """How many feeds a team may own, how many partitions one feed may have and how long its
    description may be; None: no quota (connectors and tools), the API sets them from its
    settings."""

    feeds_per_team: int | None = None
    partitions_per_feed: int | None = None
    description_bytes: int | None = None


NO_QUOTAS = FeedQuotas()


class FeedService:
    """Create, describe, change and delete feeds, keeping catalog, Kafka and registry in step."""

    def __init__(
        self,
        feeds: FeedStore,
        registry: RegistryService,
        admin: TopicAdmin,
        *,
        cache_seconds: float = 5.0,
        quotas: FeedQuotas = NO_QUOTAS,
    ) -> None:
        self._feeds = feeds
        self._quotas = quotas
        self._registry = registry
        self._admin = admin
        # Publishing looks its feed up on every request; a feed changed or deleted by another
        # process is seen within `cache_seconds`. The cache is shared by the threads that
        # publish (the API's thread pool, a connector worker's tasks), and cachetools caches are
        # not safe for threads, so every use holds `_cache_lock` (never while reading the
        # database).
        self._cached: TTLCache[str, Feed] = TTLCache(maxsize=_CACHED_FEEDS, ttl=cache_seconds)
        self._cache_lock = threading.Lock()

    def create(self, spec: FeedSpec) -> Feed:
        """Check, create the topics, register the schemas, then record the feed: all or nothing.

        Nothing is written until the topic is known to be free: not reserved, not a feed (409
        naming its owner), not landing in another feed's tables (409 naming that feed) and not
        a Kafka topic outside the hub (409; the hub never adopts a topic), and until its owner
        team, quotas, settings and schemas are checked (404, 422). Creating the topic in
        Kafka is the step only one request can win, so whatever comes after is this request's
        own. If a later step fails, what this request wrote is undone: the topics it created are
        deleted and the schema versions it added are purged; versions that existed before are
        left alone. A retry is then a fresh create.
        """
        topic = feed_topic_name(spec.topic)
        existing = self._feeds.find(topic=topic)
        if existing is not None:
            raise FeedExists(topic, owner=existing.owner)
        self._check_tables_free(topic)
        if not self._feeds.team_exists(team=spec.owner):
            raise TeamNotFound(spec.owner)
        for reader in spec.readers:
            if not self._feeds.team_exists(team=reader):
                raise TeamNotFound(reader)
        self._check_quotas(spec)
        value = self._validate(spec, topic)
        dlq = dlq_topic(topic)
        for name in (topic, dlq):
            if self._admin.exists(name):
                raise TopicExistsOutsideHub(name)
        undo = _Undo(self._registry, self._admin)
        try:
            self._create_topic(
                undo, topic, partitions=spec.partitions,
                config=topic_config(spec.kind, spec.retention_ms),
            )  # fmt: skip
            self._create_topic(
                undo, dlq, partitions=1,
                config={"cleanup.policy": "delete", "retention.ms": str(DLQ_RETENTION_MS)},
            )  # fmt: skip
            undo.register(Subject(value_subject(topic)), spec.value_schema)
            if spec.key_fields:
                undo.register(
                    Subject(key_subject(topic)),
                    spec.key_schema or json.dumps(key_schema(value, spec.key_fields)),
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
                    read_public=spec.read_public,
                    readers=spec.readers,
                )
            )
        except BaseException:
            undo.run(topic)
            raise
        log.info("created feed %s (%s, owner %s)", topic, spec.kind, spec.owner)
        return feed

    def _check_tables_free(self, topic: TopicName) -> None:
        """40924 when another feed's topic has the same table names (`a_b.c` and `a.b_c` both
        land in `bronze.a_b_c`, and in the same silver and quarantine tables), so one team's
        records can never land in another's tables.

        Checked before anything is written. Two such creates racing past the check cannot both
        win either: Kafka refuses a topic whose name differs from an existing one only in '.'
        and '_' (their metric names would collide), which `TopicAdmin.create` reports as 40924.
        """
        same = self._feeds.find_by_table(table_suffix=table_suffix(topic))
        if same is not None:
            raise TableNameTaken(
                topic, table=bronze_table(topic), existing=same.topic, owner=same.owner
            )

    def _check_quotas(self, spec: FeedSpec) -> None:
        """42230 for too many partitions, 42229 when the team owns its quota of feeds.

        Counted before anything is written, like the other checks: two creates of one team
        racing past the count can overshoot the quota by one each, never without bound.
        """
        most_partitions = self._quotas.partitions_per_feed
        if most_partitions is not None and spec.partitions > most_partitions:
            raise PartitionQuotaExceeded(spec.partitions, most_partitions)
        most_feeds = self._quotas.feeds_per_team
        if most_feeds is not None and self._feeds.count(owner=spec.owner) >= most_feeds:
            raise FeedQuotaExceeded(spec.owner, most_feeds)

    def _create_topic(
        self, undo: "_Undo", topic: TopicName, *, partitions: int, config: dict[str, str]
    ) -> None:
        if not self._admin.create(topic, partitions=partitions, config=config):
            # Created by someone else since the check above: theirs, not ours to touch.
            raise TopicExistsOutsideHub(topic)
        undo.topics.append(topic)

    def _validate(self, spec: FeedSpec, topic: TopicName) -> dict[str, Any]:
        if not 1 <= spec.partitions <= _MAX_PARTITIONS:
            shown = _shown(spec.partitions)
            raise InvalidFeed(f"partitions must be between 1 and {_MAX_PARTITIONS}, got {shown}.")
        if spec.retention_ms is not None:
            _check_retention(spec.retention_ms)
        self._check_description(spec.description)
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
                f"key_fields {_listed(missing)} are not fields of the value schema; "
                f"its fields are: {_listed(names)}."
            )
        return value

    def _check_description(self, description: str) -> None:
        """42222 for a description over its size limit, or with control characters (other
        than tab and line breaks) or text that is not Unicode: it is stored and shown to every
        reader, so it is text of a bounded size."""
        limit = self._quotas.description_bytes
        if limit is not None and len(description) > limit:  # a character is at least a byte
            size = len(description)
        else:
            try:
                size = len(description.encode("utf-8"))
            except UnicodeEncodeError as exc:  # a lone surrogate, which JSON can carry
                raise InvalidFeed(
                    f"description holds no valid Unicode text at character {exc.start}; send "
                    "it as UTF-8 text."
                ) from exc
        if limit is not None and size > limit:
            raise InvalidFeed(
                f"description is {size:,} bytes (UTF-8); a feed's description may have at "
                f"most {limit:,} (HUB_API_MAX_FEED_DESCRIPTION_BYTES). Keep it to a summary "
                "for readers, and link to longer documentation."
            )
        control = _CONTROL.search(description)
        if control is not None:
            raise InvalidFeed(
                f"description has a control character (U+{ord(control.group()):04X}) at "
                f"character {control.start()}; only tabs and line breaks are allowed."
            )

    def get(self, topic: str) -> Feed:
        return self._feeds.get(topic=topic)

    def current(self, topic: str) -> Feed:
        """The feed of `topic` as of at most `cache_seconds` ago (for publishing)."""
        feed = self.current_if_cached(topic)
        if feed is None:
            feed = self._feeds.get(topic=topic)
            with self._cache_lock:
                self._cached[topic] = feed
        return feed

    def current_if_cached(self, topic: str) -> Feed | None:
        """`current(topic)` when it is answered from memory, else None (no database read)."""
        with self._cache_lock:
            return self._cached.get(topic)

    def _forget(self, topic: str) -> None:
        """Drop the feed of `topic` from memory: this process sees its change at once."""
        with self._cache_lock:
            self._cached.pop(topic, None)

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

    def update(
        self,
        topic: str,
        *,
        description: str | None,
        retention_ms: int | None,
        read_public: bool | None = None,
    ) -> Feed:
        """Change the description, the retention (event feeds, in Kafka too) or who reads it."""
        feed = self._feeds.get(topic=topic)
        if description is not None:
            self._check_description(description)
        if retention_ms is not None:
            if feed.kind is FeedKind.CHANGELOG:
                raise InvalidFeed(f"Feed '{topic}' is a compacted changelog; it has no retention.")
            _check_retention(retention_ms)
            self._admin.alter(topic, config={"retention.ms": str(retention_ms)})
        self._forget(topic)
        return self._feeds.update(
            topic=topic,
            description=description,
            retention_ms=retention_ms,
            read_public=read_public,
        )

    def grant(self, topic: str, team: TeamName) -> Feed:
        """Let `team` read the feed's records, tables and lineage."""
        feed = self._feeds.grant(topic=topic, team=team)
        self._forget(topic)
        log.info("feed %s: team %s may read it", topic, team)
        return feed

    def revoke(self, topic: str, team: TeamName) -> Feed:
        """Take back `team`'s reads of the feed (its owner and admins always read it)."""
        feed = self._feeds.revoke(topic=topic, team=team)
        self._forget(topic)
        log.info("feed %s: team %s may no longer read it", topic, team)
        return feed

    def delete(self, topic: str) -> Feed:
        """Delete the feed's topics and its catalog entry. Its schemas stay registered, so
        records already copied elsewhere can still be read. Reserved topics (a `.dlq`) are
        refused before anything is looked up."""
        feed_topic_name(topic)
        feed = self._feeds.get(topic=topic)
        self._admin.delete(topic)
        self._admin.delete(dlq_topic(topic_name(topic)))
        self._feeds.delete(topic=topic)
        self._forget(topic)
        log.info("deleted feed %s", topic)
        return feed


def _check_retention(retention_ms: int) -> None:
    """42222 unless Kafka takes `retention_ms` as a topic's `retention.ms`: -1, or a positive
    long (0 is refused too: it would delete records as soon as they are written)."""
    if retention_ms != -1 and not 1 <= retention_ms <= MAX_RETENTION_MS:
        raise InvalidFeed(
            f"retention_ms must be between 1 and {MAX_RETENTION_MS} (Kafka's retention.ms is a "
            f"64-bit integer), or -1 to keep records forever; got {_shown(retention_ms)}."
        )


def _listed(names: list[str], most: int = 20) -> str:
    """Names as an error message lists them: the first `most`, then how many more."""
    shown = ", ".join(name[:100] for name in names[:most])
    return shown if len(names) <= most else f"{shown} and {len(names) - most:,} more"


def _shown(number: int) -> str:
    """A number as an error message shows it: in full unless it is too long to read."""
    if -(10**24) < number < 10**24:
        return str(number)
    return f"a number of {number.bit_length():,} bits"


class _Undo:
    """What one feed creation wrote, so that a failure part-way can take it back."""

    def __init__(self, registry: RegistryService, admin: TopicAdmin) -> None:
        self._registry = registry
        self._admin = admin
        self.topics: list[TopicName] = []
        self.versions: list[tuple[Subject, Version]] = []

    def register(self, subject: Subject, schema_text: str) -> None:
        """Register, remembering the version only when this call added it."""
        try:
            before = set(self._registry.versions(subject=subject, include_deleted=True))
        except SubjectNotFound:
            before = set()
        registered = self._registry.register(subject=subject, schema_text=schema_text)
        if registered.version not in before:
            self.versions.append((subject, registered.version))

    def run(self, topic: TopicName) -> None:
        """Undo in reverse order; each step is tried even when another fails."""
        for subject, version in reversed(self.versions):
            try:
                self._registry.delete_version(subject=subject, version=version)
                self._registry.delete_version(subject=subject, version=version, permanent=True)
            except Exception:
                log.exception("could not undo version %s of %s", version, subject)
        for name in reversed(self.topics):
            try:
                self._admin.delete(name)
            except Exception:
                log.exception("could not undo topic %s", name)
        log.warning("creating feed %s failed; undid what it wrote", topic)
