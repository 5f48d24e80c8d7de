"""What the console's pages show, gathered from the services the API already has.

Every figure is read from where the hub keeps it: feeds and schemas from the catalog and the
registry, record counts and the latest records from Kafka (`hub_kafka.reader`), connector
states, positions and source figures from the connectors' state topics, and the tables' rows,
commits and freshness, each feed's lag and quarantine from the loader's `/status`
(hub_api/loader_client.py). Nothing is estimated: what the hub does not know is not shown, and
a loader that does not answer is said to be unreachable.
"""

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from catalog.types import Feed, Principal, TeamName
from connectors.control import ControlPlane, without_traces
from hub_api.auth import require_owner
from hub_api.loader_client import LoaderClient, LoaderStatusRead, replay_result
from hub_core.errors import HubError
from hub_core.naming import TopicName, dlq_topic, table_suffix, topic_name
from hub_kafka.reader import RawRecord, TopicActivity, TopicReader
from publish.feeds import FeedService
from registry.avro import AvroSchema
from registry.diff import SchemaDiff, diff
from registry.serde import decode
from registry.service import RegistryService
from registry.types import RegisteredSchema, SchemaId
from registry.wire import unframe

# The chart of a feed: records per five minutes over the last hour.
INTERVALS = 12
INTERVAL_S = 300
LATEST_RECORDS = 20
_SHOWN_TEXT = 2_000  # characters of a record or dead letter shown; the rest is cut


@dataclass(frozen=True, slots=True)
class FeedRow:
    feed: Feed
    activity: TopicActivity | None
    lag_records: int | None = None  # the loader's, behind Kafka; None: unknown
    freshness_s: float | None = None  # since bronze.<topic>'s last commit; None: unknown

    @property
    def freshness(self) -> str | None:
        return age(self.freshness_s) if self.freshness_s is not None else None

    @property
    def last_hour(self) -> int:
        return sum(self.activity.counts) if self.activity else 0

    @property
    def per_second(self) -> float:
        """Records a second over the latest interval."""
        return self.activity.counts[-1] / INTERVAL_S if self.activity else 0.0

    @property
    def records(self) -> int | None:
        return sum(self.activity.end_offsets.values()) if self.activity else None

    @property
    def last_record(self) -> str | None:
        stamp = self.activity.last_timestamp_ms if self.activity else None
        return _when(stamp) if stamp is not None else None

    def sparkline(self) -> str:
        return sparkline(self.activity.counts if self.activity else (0,) * INTERVALS)


@dataclass(frozen=True, slots=True)
class RecordView:
    partition: int
    offset: int
    time: str
    key: str
    schema_id: int | None
    version: int | None
    value: str


@dataclass(frozen=True, slots=True)
class DeadLetterView:
    partition: int
    offset: int
    time: str
    code: str
    reason: str
    path: str
    body: str


@dataclass(frozen=True, slots=True)
class FeedPage:
    feed: Feed
    may_write: bool
    may_read: bool  # its records and dead letters: the feed's read policy (Feed.readable_by)
    versions: list[RegisteredSchema]
    older: RegisteredSchema | None
    newer: RegisteredSchema | None
    changes: SchemaDiff | None
    records: list[RecordView]
    dead_letters: list[DeadLetterView]
    row: FeedRow
    loader: dict[str, Any] | None  # the feed in the loader's /status, when it knows it
    loader_problem: str | None


@dataclass(frozen=True, slots=True)
class TableView:
    layer: str
    name: str
    rows: int | None
    version: int | None
    committed: str | None
    freshness: str | None
    topic: str | None  # the feed a bronze table lands


@dataclass(frozen=True, slots=True)
class TablesPage:
    layers: list[tuple[str, list[TableView]]]  # bronze, silver, gold, in that order
    topics: list[str]  # feeds, for the plan form
    problem: str | None  # why there are no figures


@dataclass(frozen=True, slots=True)
class ConnectorView:
    name: str
    type: str
    owner: str
    worker_id: str
    target_state: str
    state: str
    message: str | None
    tasks: list[dict[str, Any]]
    positions: list[tuple[str, str]]
    may_control: bool


class ConsoleViews:
    """Builds the pages' contents; one per app, made in its lifespan."""

    def __init__(
        self,
        *,
        feeds: FeedService,
        registry: RegistryService,
        reader: TopicReader,
        connectors: ControlPlane,
        loader: LoaderClient,
    ) -> None:
        self._loader = loader
        self._feeds = feeds
        self._registry = registry
        self._reader = reader
        self._connectors = connectors

    def feed_rows(self) -> list[FeedRow]:
        feeds = self._feeds.list()
        activity = self._reader.activity(
            {f.topic: f.partitions for f in feeds}, intervals=INTERVALS, interval_s=INTERVAL_S
        )
        status = self._loader.status()
        return [_row(f, activity.get(f.topic), status) for f in feeds]

    def loader_problem(self) -> str | None:
        """Why the loader's figures are missing (cached: no second request)."""
        return self._loader.status().problem

    def tables(self) -> TablesPage:
        status = self._loader.status()
        topics = sorted(f.topic for f in self._feeds.list())
        by_suffix = {table_suffix(TopicName(t)): t for t in topics}
        tables = (status.body or {}).get("tables", [])
        layers = []
        for layer in ("bronze", "silver", "gold"):
            views = [
                TableView(
                    layer=layer,
                    name=f"{layer}.{t['table']}",
                    rows=t.get("rows"),
                    version=t.get("version"),
                    committed=_when(int(t["committed_at"] * 1000))
                    if t.get("committed_at")
                    else None,
                    freshness=age(t["freshness_s"]) if t.get("freshness_s") is not None else None,
                    topic=by_suffix.get(t["table"]) if layer == "bronze" else None,
                )
                for t in tables
                if t.get("layer") == layer
            ]
            layers.append((layer, views))
        problem = status.problem or (status.body or {}).get("tables_unknown")
        return TablesPage(layers, topics, problem)

    def plan(self, topic: str, candidate: str | None) -> dict[str, Any]:
        """The loader's plan of `candidate` for the feed's bronze table."""
        self._feeds.get(topic)  # 404 for a topic that is no feed
        return self._loader.plan(topic, candidate)

    def replay(self, topic: str, caller: Principal) -> dict[str, Any]:
        """Replay the feed's quarantine, as its owner or an admin (403 naming the owner)."""
        require_owner(caller, self._feeds.get(topic).owner, what=f"Feed '{topic}'")
        return replay_result(self._loader, topic)

    def feed_page(
        self, topic: str, caller: Principal, *, older: int | None, newer: int | None
    ) -> FeedPage:
        detail = self._feeds.describe(topic)
        feed, versions = detail.feed, detail.versions
        by_number: dict[int, RegisteredSchema] = {v.version: v for v in versions}
        # By default the latest change: the version before the latest, against the latest.
        new = by_number.get(newer) if newer is not None else (versions[-1] if versions else None)
        old = by_number.get(older) if older is not None else None
        if old is None and older is None and len(versions) > 1:
            old = versions[-2]
        changes = diff(json.loads(old.schema), json.loads(new.schema)) if old and new else None
        activity = self._reader.activity(
            {feed.topic: feed.partitions}, intervals=INTERVALS, interval_s=INTERVAL_S
        )
        status = self._loader.status()
        # A restricted feed's records are not even read for a caller who may not see them.
        may_read = feed.readable_by(caller)
        return FeedPage(
            feed=feed,
            may_write=caller.may_write(feed.owner),
            may_read=may_read,
            versions=versions,
            older=old,
            newer=new,
            changes=changes,
            records=self._records(feed, versions) if may_read else [],
            dead_letters=self._dead_letters(feed) if may_read else [],
            row=_row(feed, activity.get(feed.topic), status),
            loader=status.feed(feed.topic),
            loader_problem=status.problem,
        )

    def _records(self, feed: Feed, versions: list[RegisteredSchema]) -> list[RecordView]:
        version_of: dict[int, int] = {v.schema_id: v.version for v in versions}
        raw = self._reader.latest(feed.topic, limit=LATEST_RECORDS)
        return [self._record(feed, r, version_of) for r in raw]

    def _record(self, feed: Feed, raw: RawRecord, version_of: dict[int, int]) -> RecordView:
        schema_id: SchemaId | None = None
        if raw.value is None:
            value = "(tombstone: the key's entity is deleted)"
        else:
            try:
                schema_id, _payload = unframe(raw.value)
                value = _shown(decode(raw.value, writer_schema=self._writer_schema))
            except HubError as exc:
                value = f"(not readable as hub Avro: {exc.message})"
            except (ValueError, EOFError) as exc:  # fastavro's, for a payload cut short
                value = f"(not readable as hub Avro: {exc})"
        return RecordView(
            partition=raw.partition,
            offset=raw.offset,
            time=_when(raw.timestamp_ms),
            key=self._key(feed, raw.key),
            schema_id=schema_id,
            version=version_of.get(schema_id) if schema_id is not None else None,
            value=value,
        )

    def _key(self, feed: Feed, key: bytes | None) -> str:
        if key is None:
            return ""
        if feed.key_fields:
            try:
                return _shown(decode(key, writer_schema=self._writer_schema))
            except (HubError, ValueError, EOFError):
                pass  # not framed Avro after all: shown as text
        return key.decode("utf-8", errors="replace")

    def _writer_schema(self, schema_id: SchemaId) -> AvroSchema:
        return self._registry.schema(schema_id=schema_id)

    def _dead_letters(self, feed: Feed) -> list[DeadLetterView]:
        dlq = dlq_topic(topic_name(feed.topic))
        raw = self._reader.latest(dlq, limit=LATEST_RECORDS)
        letters = []
        for r in raw:
            headers = {name: value.decode("utf-8", errors="replace") for name, value in r.headers}
            body = (r.value or b"").decode("utf-8", errors="replace")
            letters.append(
                DeadLetterView(
                    partition=r.partition,
                    offset=r.offset,
                    time=_when(r.timestamp_ms),
                    code=headers.get("hub.error.code", ""),
                    reason=headers.get("hub.error.message", ""),
                    path=headers.get("hub.error.path", ""),
                    body=body[:_SHOWN_TEXT],
                )
            )
        return letters

    def connectors(self, caller: Principal) -> list[ConnectorView]:
        views = []
        for name in self._connectors.names():
            info = self._connectors.describe(name)
            may_control = caller.may_write(TeamName(info.owner))
            status = self._connectors.status(name)
            if not may_control:  # as GET /v1/connectors/{name}/status answers other teams
                status = without_traces(status, owner=info.owner)
            connector = status["connector"]
            views.append(
                ConnectorView(
                    name=name,
                    type=info.type,
                    owner=info.owner,
                    worker_id=info.worker_id,
                    target_state=self._connectors.target_state(name),
                    state=connector["state"],
                    message=connector.get("trace") or connector.get("message"),
                    tasks=status["tasks"],
                    positions=[
                        (_compact(o.partition), _compact(o.offset))
                        for o in self._connectors.stored_offsets(name)
                    ],
                    may_control=may_control,
                )
            )
        return views


def sparkline(counts: tuple[int, ...], *, width: int = 120, height: int = 24) -> str:
    """An inline SVG polyline of `counts`, scaled to its largest; labelled for screen readers."""
    top = max(counts) or 1
    step = width / max(len(counts) - 1, 1)
    points = " ".join(
        f"{i * step:.1f},{height - 1 - (c / top) * (height - 2):.1f}" for i, c in enumerate(counts)
    )
    label = (
        f"Records per {INTERVAL_S // 60} minutes over the last hour, oldest first: "
        + ", ".join(str(c) for c in counts)
    )
    return (
        f'<svg class="spark" role="img" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" aria-label="{label}"><title>{label}</title>'
        f'<polyline fill="none" stroke="currentColor" stroke-width="1.5" points="{points}"/>'
        "</svg>"
    )


def _row(feed: Feed, activity: TopicActivity | None, status: LoaderStatusRead) -> FeedRow:
    landed = status.feed(feed.topic) or {}
    table = status.table("bronze", table_suffix(TopicName(feed.topic))) or {}
    return FeedRow(feed, activity, landed.get("lag_records"), table.get("freshness_s"))


def age(seconds: float) -> str:
    """A duration as people read it: `42 s`, `5 min`, `3 h`, `2 d`."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172_800:
        return f"{seconds / 3600:.0f} h"
    return f"{seconds / 86_400:.0f} d"


def _when(timestamp_ms: int) -> str:
    return datetime.fromtimestamp(timestamp_ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _shown(value: Any) -> str:
    text = json.dumps(value, default=str, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= _SHOWN_TEXT else text[:_SHOWN_TEXT] + " …"


def _compact(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(", ", ": "))
